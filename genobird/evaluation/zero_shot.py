"""Zero-shot classification of a data set by likelihood (`genobird zero-shot`): does a
language model find the positives more natural than the negatives, with no fine-tuning?

A DeePromoter negative keeps 8 of its promoter's 20 segments and replaces the other 12
with uniform random bases, so a model that has learned what genomic DNA looks like finds
negatives less likely. Each window of the data set is scored in bits per bp

- by a pretraining model directory (`genobird likelihood`: every piece masked once, both
  strands averaged), or
- by the baseline, order-k Markov models of a given DNA (the documents the model was
  pretrained on; both strands counted and scored, add-one smoothing), the order chosen
  on the validation split's AUROC;

and -bits per bp becomes a probability through a one-feature logistic regression fitted
on the training split, its only use of labels. The report is `finetune`'s (metrics.json,
test_predictions.npz), so `genobird baseline compare` and the pipeline's report pair the
two like any runs on the same split.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np

from genobird.datasets.metrics import binary_metrics, is_multilabel, write_evaluation
from genobird.datasets.windows import read_metadata, read_split
from genobird.errors import ConfigError

log = logging.getLogger(__name__)

SPLITS = ("train", "valid", "test")
ACGT = re.compile("[ACGT]")
MARKOV_ALPHA = 1.0


def read_splits(data_path) -> tuple[dict, dict, dict]:
    """(metadata, sequences by split, labels [N] by split) of a single-feature data set
    with a training and a test split."""
    meta = read_metadata(data_path)
    if is_multilabel(meta):
        raise ConfigError(f"{data_path}: zero-shot scoring is for single-feature data sets")
    if not meta["counts"]["train"] or not meta["counts"]["test"]:
        raise ConfigError(f"{data_path}: needs train and test windows, has {meta['counts']}")
    sequences, labels = {}, {}
    for split in SPLITS:
        sequences[split], split_labels = read_split(data_path, split)
        labels[split] = split_labels[:, 0].astype(int)
        empty = [i for i, s in enumerate(sequences[split]) if not ACGT.search(s)]
        if empty:  # no bits to score: a window like that cannot be classified by them
            raise ConfigError(
                f"{data_path}: {len(empty)} {split} windows have no A/C/G/T base (the first "
                f"is row {empty[0]} of the split); build the data set without them"
            )
    if len(set(labels["train"])) < 2:
        raise ConfigError(f"{data_path}: the training split has one class only")
    return meta, sequences, labels


def calibrated(bits_per_bp: dict, labels: dict) -> dict:
    """Each split's probability of the positive class from -bits per bp, by a logistic
    regression fitted on the training split."""
    from sklearn.linear_model import LogisticRegression

    fit = LogisticRegression().fit(-bits_per_bp["train"][:, None], labels["train"])
    return {split: fit.predict_proba(-bits[:, None])[:, 1] for split, bits in bits_per_bp.items()}


def language_model_bits(model_dir, sequences: dict, device="auto", stride=None) -> dict:
    from genobird.scoring.likelihood import LikelihoodScorer

    scorer = LikelihoodScorer(model_dir, device=device, stride=stride)
    return {
        split: scorer.score(texts)["bits_per_bp"].to_numpy() for split, texts in sequences.items()
    }


def markov_bits(train_dna: list[np.ndarray], sequences: dict, orders) -> dict[int, dict]:
    """Bits per bp of every window under each order (both strands averaged)."""
    from genobird.baselines.markov import (
        dna_codes,
        fit_counts,
        reverse_complement_codes,
        sequence_bits,
    )

    counts = fit_counts(train_dna, max(orders), both_strands=True)
    bits = {order: {} for order in orders}
    for split, seqs in sequences.items():
        forward = [dna_codes(s) for s in seqs]
        reverse = [reverse_complement_codes(c) for c in forward]
        bases = np.array([int((c < 4).sum()) for c in forward])  # read_splits: never 0
        for order in orders:
            total = [
                sequence_bits(counts, f, order, MARKOV_ALPHA)
                + sequence_bits(counts, r, order, MARKOV_ALPHA)
                for f, r in zip(forward, reverse, strict=True)
            ]
            bits[order][split] = np.array(total) / 2 / bases
    return bits


def choose_order(bits_by_order: dict[int, dict], labels: dict) -> tuple[int, dict]:
    """The order whose calibrated scores have the best validation AUROC (the training
    split's where there is no validation split), and every order's AUROC."""
    split = "valid" if len(set(labels["valid"])) == 2 else "train"
    aurocs = {}
    for order, bits in bits_by_order.items():
        probabilities = calibrated(bits, labels)[split]
        aurocs[order] = binary_metrics(labels[split], probabilities)["auroc"]
    return max(aurocs, key=aurocs.get), {"split": split, "auroc_by_order": aurocs}


def zero_shot(
    data_path,
    output,
    model_dir=None,
    markov_dna=None,
    orders=range(0, 11),
    device="auto",
    stride=None,
) -> dict:
    """Score the data set with a pretraining model (`model_dir`; pieces `stride` apart
    masked together, genobird.scoring.likelihood) or with Markov models of `markov_dna` (FASTA or
    genobird documents), and write OUT/report as `finetune` does."""
    if (model_dir is None) == (markov_dna is None):
        raise ConfigError("give a pretraining model directory or Markov training DNA, not both")
    meta, sequences, labels = read_splits(data_path)
    if model_dir is not None:
        from genobird.scoring.likelihood import DEFAULT_STRIDE

        stride = DEFAULT_STRIDE if stride is None else stride
        bits = language_model_bits(model_dir, sequences, device, stride)
        extra = {"model": "genobird zero-shot", "pretrained": str(model_dir), "stride": stride}
    else:
        from genobird.baselines.markov import read_dna

        by_order = markov_bits(read_dna(markov_dna), sequences, list(orders))
        order, selection = choose_order(by_order, labels)
        bits = by_order[order]
        extra = {
            "model": "markov zero-shot",
            "order": order,
            "order_selection": selection,
            "train_dna": str(markov_dna),
        }
        log.info("Markov order %d chosen on the %s split", order, selection["split"])
    probabilities = calibrated(bits, labels)
    column = {split: (labels[split][:, None], probabilities[split][:, None]) for split in SPLITS}
    extra["bits_per_bp_mean"] = {
        name: float(np.mean(bits["test"][labels["test"] == value]))
        for name, value in (("positives", 1), ("negatives", 0))
    }
    valid = column["valid"] if len(labels["valid"]) else None
    return write_evaluation(Path(output) / "report", meta, column["test"], valid, extra, data_path)
