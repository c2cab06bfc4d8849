"""Where a classifier with base readers starts fine-tuning: from genobird's own baselines.

A base CNN (`base_cnn_channels`) is trained alone as the CNN baseline is, and base k-mers
(`base_kmers`) are fitted as the k-mer LR baseline is; the classifier then starts as
those baselines (`BigBirdForSequenceClassification.start_from_baselines`), the head's
weights on the encoder zero: its logits on each window, strand by strand, are the
baselines' own on that window's bases (tests/test_base_start.py holds it on real
windows). With both, the start is a blend of the two logits whose weight is chosen on
the validation split, scored as the classifier is evaluated (the probabilities of each
strand averaged): one weight for every output, or one per feature category
(`base_blend`). Validation, checked before the first step, keeps that start when the
encoder adds nothing, so a fine-tuned classifier is no worse on validation than the
better of the baselines, or their blend. The start's validation AUROC is recorded
(`start_validation_auroc`) for the run to check against its step-0 check.

Each baseline trained for the same data and settings is kept in a cache folder and read
from there (the recipe probes train one per strand setting; the run itself then trains
none), or read from a `genobird baseline` run that fitted it exactly so
(baselines.saved; `--base-start-from`). What was trained or read and chosen goes to
OUTPUT/base-start.json and the report.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from genobird.baselines.saved import (
    SAVED_FOLDER,
)
from genobird.datasets.metrics import (
    best_mcc_threshold,
    is_multilabel,
    mean_auroc,
    write_test_predictions,
)
from genobird.datasets.windows import split_fingerprint
from genobird.fileio import atomic_write
from genobird.finetuning.reader_baselines import base_cnn, base_kmer_lr, cnn_logits, kmer_logits
from genobird.finetuning.recipe import BaseReaderRecipe, Recipe
from genobird.finetuning.run_folder import RunFolder

log = logging.getLogger(__name__)

# The base CNN's learning rate: the CNN baseline's (baselines.cnn.CNNSpec), at which that
# tower is known to train; the encoder's fine-tuning rate (3e-4) is a pretrained model's.
BASE_CNN_LEARNING_RATE = 1e-3
# The CNN's weights in the blended start that validation chooses among; a tie goes to the
# first listed, an even blend before either baseline alone
CNN_WEIGHTS = (0.5, 0.25, 0.75, 0.0, 1.0)


@dataclass
class BaseReaders:
    """The base readers a run starts from, fitted (or read) as the run reads them: the
    CNN (or None) trained on the strands the run evaluates (`rc_average`), the k-mer LR
    (weights, biases, scale; or None) fitted on the strand counts they read
    (`both_strands`: the mean of each window's and its reverse complement's), and what
    base-start.json records of each."""

    base: BaseReaderRecipe
    window_bp: int | None
    rc_average: bool
    both_strands: bool
    cnn: object = None
    kmer_lr: tuple | None = None
    record: dict = field(default_factory=dict)

    def logits(self, sequences: list[str]) -> tuple:
        """Each reader's baseline logits [S, N, F] on the windows, one row per input the
        classifier reads and averages (S = 2: both strands read as two inputs; S = 1: one
        strand, or both read inside each input); 0 where there is no such reader."""
        cnn_part, kmer_part = 0.0, 0.0
        if self.cnn is not None:
            cnn_part = cnn_logits(
                self.cnn, sequences, self.window_bp, self.rc_average or self.both_strands
            )
            if self.both_strands:  # the features of both strands averaged: so the logits
                cnn_part = cnn_part.mean(axis=0, keepdims=True)
        if self.kmer_lr is not None:
            kmer_part = kmer_logits(
                self.kmer_lr,
                sequences,
                self.base.kmers,
                self.window_bp,
                self.rc_average and not self.both_strands,
                self.both_strands,
            )
        return cnn_part, kmer_part


def fit_base_readers(
    data,
    base: BaseReaderRecipe,
    window_bp: int | None,
    seed: int,
    cache: Path,
    rc_average: bool,
    both_strands: bool,
    sources=(),
) -> BaseReaders:
    """Train or fit the base readers `base` asks for on the windows' central `window_bp`
    bases (or read them: from `cache`, or from the baseline runs in `sources` that fitted
    them so), as a run reading `rc_average` strands with base readers on `both_strands`
    reads them."""
    readers = BaseReaders(base, window_bp, rc_average, both_strands)
    if base.cnn_channels:
        readers.cnn, readers.record["base_cnn"] = base_cnn(
            data, base, window_bp, seed, cache, rc_average, sources
        )
    if base.kmers:
        fitted = base_kmer_lr(data, base.kmers, window_bp, seed, cache, sources, both_strands)
        readers.kmer_lr, readers.record["base_kmer_lr"] = fitted
    return readers


def readers_start(
    readers: BaseReaders, labels: np.ndarray, logits: tuple, shift: float = 0.0, categories=None
) -> tuple:
    """(the CNN's weight in the start, one or one per output; what base-start.json records
    of the blend, or {} with one reader; the start's validation AUROC) of base readers
    whose validation `logits` are given: their blend chosen on validation when both."""
    if readers.cnn is not None and readers.kmer_lr is not None:
        weight, blend = choose_blend(*logits, labels, shift, categories)
        return weight, blend, blend["validation_auroc"]
    weight = 1.0 if readers.kmer_lr is None else 0.0
    return weight, {}, round(mean_auroc(labels, blend_probabilities(*logits, weight, shift)), 5)


def start_from_baselines(
    model, spec: Recipe, data_path: Path, output: Path, cache: Path, rc_average: bool, sources=()
) -> dict:
    """Train or fit the base readers `spec` asks for (or read them: from `cache`, or
    from the baseline runs in `sources` that fitted them as `spec` asks), start `model`
    from them (blended on validation when both), write OUTPUT/base-start.json; returns
    what it wrote."""
    from genobird.baselines import load_baseline_data

    base, window_bp, seed = spec.head.base, spec.data.window_bp, spec.optim.seed
    data = load_baseline_data(data_path, seed)
    readers = fit_base_readers(
        data, base, window_bp, seed, cache, rc_average, model.base_strands == "both", sources
    )
    record, cnn, kmer_lr = readers.record, readers.cnn, readers.kmer_lr
    if base.blend != "one" and (cnn is None or kmer_lr is None):
        log.warning(
            "base_blend %s: there is no blend to choose, the start has one base reader", base.blend
        )
    validation = readers.logits(data.valid.sequences)
    shift = model.start_logit_shift()
    categories = data.meta.get("categories") if base.blend == "by-category" else None
    cnn_weight, blend, _ = readers_start(readers, data.valid.labels, validation, shift, categories)
    if blend:
        record["base_blend"] = blend
        log.info(
            "start: the base CNN and the k-mer LR blended, CNN weight %s (validation AUROC %.4f)",
            blend.get("cnn_weight_by_category", blend["cnn_weight"]),
            blend["validation_auroc"],
        )
    # the start's own figures: the run checks its step-0 validation check against the
    # first, and its report sets the fine-tuned test figure beside the second
    for split, logits, name in (
        (data.valid, validation, "start_validation_auroc"),
        (data.test, None, "start_test_auroc"),
    ):
        if len(split.labels):
            logits = logits or readers.logits(split.sequences)
            start = blend_probabilities(*logits, cnn_weight, shift)
            record[name] = round(mean_auroc(split.labels, start), 5)
            if split is data.test:
                write_reader_predictions(
                    RunFolder(output).readers, data, readers, validation, logits, cnn_weight, shift
                )
    record["base_strands"] = model.base_strands
    model.start_from_baselines(cnn, kmer_lr, cnn_weight if cnn is not None else 1.0)
    read = [
        part.get("read_from", "")
        for part in (record.get("base_cnn", {}), record.get("base_kmer_lr", {}))
    ]
    for run in sources:
        if not any(path.startswith(str(Path(run) / SAVED_FOLDER)) for path in read):
            log.warning(
                "--base-start-from %s: no base reader of this run was read from it "
                "(it fitted none this run has, or fitted it otherwise)",
                run,
            )
    if base.kmer_pull and kmer_lr is not None:
        kmer_share = 1 - np.asarray(cnn_weight) if cnn is not None else np.asarray(1.0)
        strength = pull_strength(
            base.kmer_pull,
            record["base_kmer_lr"]["C"],
            len(data.train.labels),
            data.num_outputs,
            kmer_share,
        )
        record["base_kmer_pull_strength"] = strength.tolist()
    output.mkdir(parents=True, exist_ok=True)
    with atomic_write(RunFolder(output).base_start) as handle:
        json.dump(record, handle, indent=2)
    return record


def write_reader_predictions(
    folder: Path,
    data,
    readers: BaseReaders,
    validation: tuple,
    test: tuple,
    cnn_weight,
    shift: float,
) -> None:
    """Each base reader's test probabilities as its baseline run gives them (its logits
    alone, no shift), and the start's (the blend the classifier starts as), each with the
    threshold its validation probabilities choose, in a baseline run's predictions file."""
    readings = []
    if readers.cnn is not None:
        readings.append(("cnn", 1.0, 0.0))
    if readers.kmer_lr is not None:
        readings.append(("kmer-lr", 0.0, 0.0))
    if readers.cnn is not None and readers.kmer_lr is not None:
        readings.append(("start", cnn_weight, shift))
    fingerprint = split_fingerprint(data.path, "test")
    for name, weight, reading_shift in readings:
        threshold = None
        if not is_multilabel(data.meta):
            valid = blend_probabilities(*validation, weight, reading_shift)
            threshold = best_mcc_threshold(data.valid.labels[:, 0], valid[:, 0])
        probabilities = blend_probabilities(*test, weight, reading_shift)
        write_test_predictions(
            folder / name / "report",
            data.meta,
            (data.test.labels, probabilities),
            fingerprint,
            threshold,
        )


# The strand readings a classify run whose strands are open chooses among with its start:
# (name, the run reads both strands, its base readers read both strands inside each input)
STRAND_READINGS = (("both strands", True, True), ("one strand", False, False))


def choose_strands(spec: Recipe, data_path: Path, cache: Path, sources=()) -> dict:
    """A classify run's strands, chosen on validation with its start: for each reading
    (`STRAND_READINGS`), the base readers fitted as they are read (a CNN trained on the
    strands read, the k-mer LR on the strand counts read) and blended on validation; the
    reading whose start scores the best validation AUROC is chosen (a tie goes to both
    strands). The one-strand start's k-mer LR with CNN weight 0 is `genobird baseline
    kmer-lr` exactly, and the two-strand start's CNN with weight 1 is `genobird baseline
    cnn` exactly, so the start chosen is never below either baseline on validation.
    Returns {"chosen": name, "settings": {rc_augment, rc_average, base_strands},
    "validation_auroc": {name: the start's}}; the readers stay in `cache` for the run."""
    from genobird.baselines import load_baseline_data

    base, window_bp, seed = spec.head.base, spec.data.window_bp, spec.optim.seed
    data = load_baseline_data(data_path, seed)
    scores, settings = {}, {}
    for name, both_read, both_inside in STRAND_READINGS:
        readers = fit_base_readers(
            data, base, window_bp, seed, cache, both_read, both_inside, sources
        )
        validation = readers.logits(data.valid.sequences)
        scores[name] = readers_start(readers, data.valid.labels, validation)[2]
        settings[name] = {
            "rc_augment": both_read,
            "rc_average": both_read,
            "base_strands": "both" if both_inside else "one",
        }
        log.info("start read on %s: validation AUROC %.4f", name, scores[name])
    scored = {name: score for name, score in scores.items() if np.isfinite(score)}
    chosen = max(scored, key=scored.get) if scored else STRAND_READINGS[0][0]
    return {"chosen": chosen, "settings": settings[chosen], "validation_auroc": scores}


def pull_strength(
    multiple: float, c: float, train_windows: int, outputs: int, share=1.0
) -> np.ndarray:
    """The strength s of fine-tuning's pull s/2 x ||W - W0||^2 on the base k-mers' head
    weights W (W0: the fitted k-mer LR's weights w times their `share` of a blended
    start; one share, or one per output, which gives one strength per output). The LR
    minimises ||w||^2 / 2 + C x (its log losses summed over n training windows) for each
    output; fine-tuning's loss is a mean over windows and F outputs, where the same
    penalty on W = share x w is ||W||^2 / (2 C n F share^2). At multiple 1 the k-mer
    weights stay as regularised as the LR chose on validation, around the start instead
    of around zero. An output whose start gives the k-mer LR no share is held at zero,
    as the LR's own penalty holds its weights (share 1): left free, its thousands of
    k-mer weights would refit to the training windows' composition."""
    share = np.asarray(share, dtype=np.float64)
    share = np.where(share > 0, share, 1.0)
    return multiple / (c * train_windows * outputs * share**2)


class StartPull:
    """The pull of the head's weights on the base k-mers towards their start: s/2 x
    ||W - W0||^2, W0 the weights as the model holds them when made (right after
    `start_from_baselines`), added to each training step's loss. Without it, the head's
    rate refits thousands of k-mer weights per output to the training split's composition
    (docs/experiments/2026-11-28-profile-head.md)."""

    def __init__(self, model, strength):
        first, last = model.base_reader_columns()[model.base_kmer_counts]
        self.weight, self.columns = model.head.linear.weight, slice(first, last)
        self.start = self.weight[:, self.columns].detach().clone()
        # one strength for every output's row, or one per row
        self.strength = torch.as_tensor(strength, dtype=torch.float32).reshape(-1, 1)

    def __call__(self) -> torch.Tensor:
        if self.start.device != self.weight.device:  # the trainer moved the model
            self.start = self.start.to(self.weight.device)
            self.strength = self.strength.to(self.weight.device)
        gap = self.weight[:, self.columns].float() - self.start.float()
        return 0.5 * (self.strength * gap.pow(2)).sum()


def blend_probabilities(cnn, kmer_lr, cnn_weight, shift: float = 0.0) -> np.ndarray:
    """The start's probabilities [N, F] from the baselines' logits on each strand [S, N,
    F] (either may be 0: that reader absent): sigmoid(w x cnn + (1 - w) x kmer_lr +
    shift) per strand (w: one weight, or one per output; shift: the model's
    start_logit_shift), averaged over strands as fine-tuning's evaluation averages them."""
    weight = np.asarray(cnn_weight)
    logits = weight * np.asarray(cnn) + (1 - weight) * np.asarray(kmer_lr) + shift
    return (1 / (1 + np.exp(-logits))).mean(axis=0)


def choose_cnn_weight(cnn: np.ndarray, kmer_lr: np.ndarray, labels: np.ndarray, shift: float = 0.0):
    """The CNN's weight w in w x cnn + (1 - w) x kmer_lr (validation logits [S, N, F] of
    each strand) with the best mean validation AUROC, and every weight's AUROC (None
    where no output has both classes)."""
    scores = {}
    for w in CNN_WEIGHTS:
        score = mean_auroc(labels, blend_probabilities(cnn, kmer_lr, w, shift))
        scores[str(w)] = round(score, 5) if np.isfinite(score) else None
    scored = [w for w in CNN_WEIGHTS if scores[str(w)] is not None]
    best = max(scored, key=lambda w: scores[str(w)]) if scored else CNN_WEIGHTS[0]
    return best, scores  # the first listed among ties


def choose_blend(
    cnn: np.ndarray, kmer_lr: np.ndarray, labels: np.ndarray, shift: float = 0.0, categories=None
):
    """The blend's CNN weight chosen on validation (`choose_cnn_weight`): one for every
    output, or, given each output's category, one per category, chosen on its outputs
    alone (a category none of whose outputs has both classes in validation takes the
    weight chosen over all). Returns the weight (a number, or one per output) and what
    base-start.json records of the choice."""
    weight, scores = choose_cnn_weight(cnn, kmer_lr, labels, shift)
    record = {"cnn_weight": weight, "validation_auroc_by_cnn_weight": scores}
    if categories:
        categories = np.asarray(categories)
        weights = np.full(len(categories), weight, dtype=np.float64)
        record["cnn_weight_by_category"], record["validation_auroc_by_category"] = {}, {}
        for category in dict.fromkeys(categories):
            columns = categories == category
            chosen, by_weight = choose_cnn_weight(
                cnn[..., columns], kmer_lr[..., columns], labels[:, columns], shift
            )
            if any(score is not None for score in by_weight.values()):
                weights[columns] = chosen
            record["cnn_weight_by_category"][str(category)] = float(weights[columns][0])
            record["validation_auroc_by_category"][str(category)] = by_weight
        weight = weights
    record["validation_auroc"] = round(
        mean_auroc(labels, blend_probabilities(cnn, kmer_lr, weight, shift)), 5
    )
    return weight, record
