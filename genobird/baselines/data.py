"""The splits of a genobird sequence data set as the baselines read them, checked once.

The baselines see exactly the splits `genobird finetune` sees (train, valid, test of the
same HDF5 file) and write the same report, so their figures stand beside genobird's.
A data set without a validation split lends a seeded tenth of its training rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genobird.datasets.metrics import is_multilabel, mean_auroc
from genobird.datasets.windows import read_metadata, read_split
from genobird.errors import InputError

log = logging.getLogger(__name__)


@dataclass
class Split:
    sequences: list[str]
    labels: np.ndarray  # uint8 [N, F]; MISSING_LABEL where unknown

    def __len__(self) -> int:
        return len(self.sequences)

    def take(self, rows: np.ndarray) -> Split:
        return Split([self.sequences[i] for i in rows], self.labels[rows])


@dataclass
class BaselineData:
    path: Path
    meta: dict
    train: Split
    valid: Split
    test: Split

    @property
    def multilabel(self) -> bool:
        return is_multilabel(self.meta)

    @property
    def num_outputs(self) -> int:
        return len(self.meta["feature_names"])


def load_baseline_data(path: str | Path, seed: int = 0) -> BaselineData:
    """Train, validation and test splits of a data set, with the checks every baseline
    needs: rows in train and test, and both classes in training for some feature."""
    path = Path(path)
    meta = read_metadata(path)
    train, valid, test = (Split(*read_split(path, split)) for split in ("train", "valid", "test"))
    if not len(train) or not len(test):
        raise InputError(f"{path}: needs train and test rows, has {meta['counts']}")
    if not len(valid):
        train, valid = _lend_validation(train, seed)
        log.info("%s has no validation split: %d training rows validate", path, len(valid))
    positives = (train.labels == 1).sum(axis=0)
    negatives = (train.labels == 0).sum(axis=0)
    if not ((positives > 0) & (negatives > 0)).any():
        raise InputError(
            f"{path}: every training label is {'1' if positives.all() else '0'}; a classifier "
            "needs both classes in the training split"
        )
    return BaselineData(path, meta, train, valid, test)


def _lend_validation(train: Split, seed: int) -> tuple[Split, Split]:
    if len(train) < 10:
        raise InputError(f"{len(train)} training rows and no validation split: give more rows")
    order = np.random.default_rng(seed).permutation(len(train))
    cut = len(train) // 10
    return train.take(np.sort(order[cut:])), train.take(np.sort(order[:cut]))


def validation_auroc(data: BaselineData, probabilities: np.ndarray) -> float:
    """What the baselines maximise: mean validation AUROC. A validation split where no
    feature has both classes cannot choose anything, so it is an error, not a silent
    pick."""
    score = mean_auroc(data.valid.labels, probabilities)
    if not np.isfinite(score):
        raise InputError(
            f"{data.path}: no feature has both classes in the validation split "
            f"({len(data.valid)} rows); give a validation split with positives and negatives"
        )
    return score
