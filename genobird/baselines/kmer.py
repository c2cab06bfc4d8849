"""k-mer logistic regression: the alignment-free classification baseline.

Each sequence becomes the counts of its k-mers for every k in `ks` (3-6 by default:
5,440 features; k-mers spanning an N are not counted), scaled to [0, 1] per feature on
the training split. One L2-regularised logistic regression per output; the inverse
regularisation C is chosen on the validation split (mean AUROC over outputs).

Read on one strand (the default), a window's counts are those of the strand given. Read
on both strands (`both_strands`), they are the mean of the window's counts and its
reverse complement's, so the model is fitted as it reads and scores a window and its
reverse complement alike: a model fitted on one strand and then read on both, its logits
averaged, reads every reverse-complemented k-mer with weights it never fitted (on a task
of a non-palindromic site, 0.04 validation AUROC below the same model on one strand).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from genobird.baselines.data import BaselineData, validation_auroc
from genobird.baselines.markov import acgt_runs, dna_codes, kmer_indices
from genobird.datasets.windows import known_labels
from genobird.errors import InputError
from genobird.inputs import central

log = logging.getLogger(__name__)

C_GRID = (0.01, 0.1, 1.0, 10.0)
DEFAULT_KS = (3, 4, 5, 6)


def reverse_complement_columns(ks=DEFAULT_KS) -> np.ndarray:
    """For each k-mer column of `kmer_matrix`, the column of its reverse complement: the
    counts of a sequence's reverse complement are its own counts in this order."""
    columns = []
    for k in ks:
        index = np.arange(4**k)
        digits = (index[:, None] // 4 ** np.arange(k)) % 4  # least significant first
        # the reverse complement's first base is the complement of the last: digit 0 of
        # the index becomes the most significant
        columns.append(((3 - digits) * 4 ** np.arange(k - 1, -1, -1)).sum(1))
    offsets = np.cumsum([0, *(4**k for k in ks)])
    return np.concatenate([c + o for c, o in zip(columns, offsets, strict=False)])


def kmer_matrix(
    sequences: list[str], ks=DEFAULT_KS, both_strands: bool = False
) -> sparse.csr_matrix:
    """Counts [N, sum 4^k] of every k-mer of each sequence (columns: k = ks[0] first);
    with `both_strands`, the mean of each sequence's counts and its reverse complement's."""
    counts = _counts(sequences, ks)
    if both_strands:
        counts = (counts + counts[:, reverse_complement_columns(ks)]) / 2
    return counts.tocsr()


def _counts(sequences: list[str], ks) -> sparse.csr_matrix:
    offsets = np.cumsum([0, *(4**k for k in ks)])
    rows, columns = [], []
    for row, sequence in enumerate(sequences):
        for run in acgt_runs(dna_codes(sequence)):
            for offset, k in zip(offsets, ks, strict=False):
                index = kmer_indices(run, k)
                columns.append(index + offset)
                rows.append(np.full(len(index), row, dtype=np.int64))
    rows = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    columns = np.concatenate(columns) if columns else np.zeros(0, dtype=np.int64)
    counts = sparse.coo_matrix(
        (np.ones(len(rows), dtype=np.float32), (rows, columns)),
        shape=(len(sequences), int(offsets[-1])),
    )
    return counts.tocsr()  # duplicates summed


def _fit(features, labels: np.ndarray, c: float, seed: int) -> list:
    from sklearn.linear_model import LogisticRegression

    models = []
    for output in range(labels.shape[1]):
        known = known_labels(labels[:, output])  # a feature is fitted where it was measured
        column = labels[known, output]
        if not len(column) or column.min() == column.max():  # one class: predict its rate
            models.append(float(column.mean()) if len(column) else 0.0)
            continue
        model = LogisticRegression(C=c, max_iter=2000, random_state=seed)
        models.append(model.fit(features[known], column))
    return models


def _predict(models: list, features) -> np.ndarray:
    columns = [
        np.full(features.shape[0], model)
        if isinstance(model, float)
        else model.predict_proba(features)[:, 1]
        for model in models
    ]
    return np.stack(columns, axis=1)


@dataclass
class KmerLR:
    """A fitted k-mer LR: the scaler of the training counts, one model per output, and
    its probabilities on the validation split (computed while choosing C)."""

    ks: tuple[int, ...]
    window_bp: int | None
    scaler: object  # sklearn MaxAbsScaler
    models: list
    details: dict
    validation: np.ndarray
    both_strands: bool = False

    def features(self, sequences: list[str]):
        windows = [central(s, self.window_bp) for s in sequences]
        return self.scaler.transform(kmer_matrix(windows, self.ks, self.both_strands))

    def probabilities(self, sequences: list[str]) -> np.ndarray:
        return _predict(self.models, self.features(sequences))

    def linear(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(weights [F, K], biases [F], scale [K]): logit = weights @ (counts x scale) +
        biases, the same logits as the fitted models' (an output with one class in
        training: no weights, its rate's log-odds)."""
        width = len(self.scaler.scale_)
        weights = np.zeros((len(self.models), width), dtype=np.float32)
        biases = np.zeros(len(self.models), dtype=np.float32)
        for output, model in enumerate(self.models):
            if isinstance(model, float):
                rate = min(max(model, 1e-4), 1 - 1e-4)
                biases[output] = np.log(rate / (1 - rate))
            else:
                weights[output], biases[output] = model.coef_[0], model.intercept_[0]
        return weights, biases, (1.0 / self.scaler.scale_).astype(np.float32)


def fit_kmer_lr(
    data: BaselineData,
    ks=DEFAULT_KS,
    c_grid=C_GRID,
    seed: int = 0,
    window_bp: int | None = None,
    train_counts=None,
    both_strands: bool = False,
) -> KmerLR:
    """The k-mer LR fitted on the training split (its `train_counts`, when already
    counted), C chosen on the validation split; each window read as its central
    `window_bp` bases where given, on both strands with `both_strands`."""
    from sklearn.preprocessing import MaxAbsScaler

    def counts(split):
        return kmer_matrix([central(s, window_bp) for s in split.sequences], ks, both_strands)

    started = time.perf_counter()
    train_counts = counts(data.train) if train_counts is None else train_counts
    scaler = MaxAbsScaler().fit(train_counts)
    train, valid = scaler.transform(train_counts), scaler.transform(counts(data.valid))
    scores, fitted, validation = {}, {}, {}
    for c in c_grid:  # each C's models are kept: the chosen ones are not fitted again
        fitted[c] = _fit(train, data.train.labels, c, seed)
        validation[c] = _predict(fitted[c], valid)
        scores[c] = validation_auroc(data, validation[c])
        log.info("k-mer LR C=%g: validation AUROC %.4f", c, scores[c])
    best = max(scores, key=lambda c: (scores[c], -c))
    details = {
        "model": "kmer_lr",
        "k": list(ks),
        "features": int(train.shape[1]),
        "C": best,
        "validation_auroc_by_C": {str(c): v for c, v in scores.items()},
        "strands": "both" if both_strands else "one",
    }
    details["seconds"] = round(time.perf_counter() - started, 1)
    return KmerLR(
        tuple(ks), window_bp, scaler, fitted[best], details, validation[best], both_strands
    )


def kmer_baseline(
    data: BaselineData,
    ks=DEFAULT_KS,
    c_grid=C_GRID,
    seed: int = 0,
    window_bp: int | None = None,
    both_strands: bool = False,
):
    """(test probabilities [N, F], validation probabilities, details, the fitted KmerLR)
    of the k-mer LR, each window read as its central `window_bp` bases where given, on
    both strands with `both_strands`."""

    def counts(split):
        return kmer_matrix([central(s, window_bp) for s in split.sequences], ks, both_strands)

    train_counts, test_counts = counts(data.train), counts(data.test)
    seen = np.asarray(train_counts.sum(axis=0)).ravel() > 0
    if not test_counts[:, seen].nnz:  # refused before anything is fitted
        raise InputError(
            f"{data.path}: the test sequences share no {ks[0]}-{ks[-1]}-mer with the training "
            "sequences; nothing can be predicted"
        )
    fitted = fit_kmer_lr(data, ks, c_grid, seed, window_bp, train_counts, both_strands)
    test = _predict(fitted.models, fitted.scaler.transform(test_counts))
    return test, fitted.validation, fitted.details, fitted
