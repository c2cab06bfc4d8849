"""What a fine-tuning run will cost on this machine, said before it starts.

The plan `genobird finetune` logs first gives the run's minutes: each kind of work the
run does is timed here on its first steps (a few batches of the base CNN, the k-mer
counts of a few hundred windows, a few optimiser steps and a validation batch of the
classifier itself), then multiplied by how many of each the run's budgets allow: its
base CNNs' epochs, its k-mer LR fits, its probes' and its own steps, and their
validation checks. Validation stops the CNN and every fine-tuning run early, so beside
the budget's at-most the plan gives a likely figure, counted as a run that stops at
`LIKELY_CNN_EPOCHS` epochs and `LIKELY_CHECKS` validation checks (benchmarks/
finetune_cost.py holds it within 2x of the run's time). Nothing here changes the run:
its random streams are left as they were.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

# epochs a CNN baseline likely trains before 3 without a better validation AUROC stop it
# (5-18 on planted-site and GUE tasks of 800 to 4,000 training windows)
LIKELY_CNN_EPOCHS = 10
# validation checks a fine-tuning run likely makes before its patience stops it: its best
# at the first or second, then `patience` more
LIKELY_BEST_CHECK = 1
# a k-mer LR fit (4 values of C) takes about this many times the counting of its windows
KMER_FIT_PER_COUNT = 4.0
# windows and batches timed
TIMED_WINDOWS = 300
TIMED_STEPS = 3


@dataclass(frozen=True)
class UnitTimes:
    """Seconds of each kind of work on this machine."""

    cnn_epoch: float = 0.0  # one base CNN epoch, with its validation
    kmer_fit: float = 0.0  # one k-mer LR fit (counts and every C)
    step: float = 0.0  # one fine-tuning optimiser step
    check: float = 0.0  # one validation check of the classifier (every strand read)


def likely_steps(max_steps: int, interval: int, patience: int) -> int:
    """Steps a fine-tuning run likely takes: to its budget, or, stopped by validation, to
    `LIKELY_BEST_CHECK` + `patience` checks."""
    if not patience:
        return max_steps
    return min(max_steps, (LIKELY_BEST_CHECK + patience) * interval)


def estimate(
    units: UnitTimes, cnns: int, kmer_fits: int, runs: list[tuple[int, int, int]], cnn_epochs: int
) -> dict:
    """{"likely_minutes", "at_most_minutes", "parts": {...}} of a run that trains `cnns`
    base CNNs of at most `cnn_epochs` epochs, fits `kmer_fits` k-mer LRs and fine-tunes
    `runs` (each (at most steps, steps between checks, patience): the probes, then the
    run), from the unit times."""
    likely_epochs = min(cnn_epochs, LIKELY_CNN_EPOCHS)
    parts_likely = {
        "base CNN": cnns * likely_epochs * units.cnn_epoch,
        "k-mer LR": kmer_fits * units.kmer_fit,
        "fine-tuning": 0.0,
    }
    parts_most = {**parts_likely, "base CNN": cnns * cnn_epochs * units.cnn_epoch}
    for max_steps, interval, patience in runs:
        for parts, steps in (
            (parts_likely, likely_steps(max_steps, interval, patience)),
            (parts_most, max_steps),
        ):
            checks = math.ceil(steps / interval) + 1  # and one before the first step
            parts["fine-tuning"] += steps * units.step + checks * units.check
    return {
        "likely_minutes": round(sum(parts_likely.values()) / 60, 2),
        "at_most_minutes": round(sum(parts_most.values()) / 60, 2),
        "likely_seconds_by_part": {k: round(v, 1) for k, v in parts_likely.items()},
        "unit_seconds": {k: round(v, 4) for k, v in units.__dict__.items()},
    }


def describe(cost: dict) -> str:
    """The plan's words for an estimate."""
    return (
        f"about {cost['likely_minutes']:.1f} min on this machine (at most "
        f"{cost['at_most_minutes']:.1f} if validation stops nothing early)"
    )


def _seconds(work, repeats: int) -> float:
    """Seconds per call of `work()`: one call to warm up, then the mean of `repeats`."""
    work()
    started = time.perf_counter()
    for _ in range(repeats):
        work()
    return (time.perf_counter() - started) / repeats


def time_cnn_epoch(sequences: list[str], valid: int, spec, outputs: int) -> float:
    """Seconds of one epoch of the CNN baseline of `spec` (baselines.cnn.CNNSpec) over
    `sequences` (the training windows), with its validation over `valid` windows."""
    from genobird.baselines.cnn import ARCHITECTURES, encode
    from genobird.inputs import central
    from genobird.model.classifier import masked_bce

    model = ARCHITECTURES[spec.architecture](outputs, spec.channels, spec.dropout)
    codes = encode([central(s, spec.window_bp) for s in sequences[: spec.batch_size]])
    labels = torch.zeros(len(codes), outputs)
    with torch.no_grad():
        model(codes[:1], rc_average=False)  # sizes a lazy layer
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.learning_rate)

    def train_batch():
        loss = masked_bce(model(codes, spec.rc_average), labels, torch.tensor(1.0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def read_batch():
        with torch.no_grad():
            model(codes, spec.rc_average)

    model.train()
    per_batch = _seconds(train_batch, TIMED_STEPS)
    model.eval()
    per_read = _seconds(read_batch, TIMED_STEPS)
    batches = math.ceil(len(sequences) / spec.batch_size)
    return batches * per_batch + math.ceil(valid / spec.batch_size) * per_read


def time_kmer_fit(sequences: list[str], windows: int, ks, window_bp, both_strands: bool) -> float:
    """Seconds of one k-mer LR fit on `windows` windows (training and validation), from
    the counting of a few hundred of `sequences`."""
    from genobird.baselines.kmer import kmer_matrix
    from genobird.inputs import central

    sample = [central(s, window_bp) for s in sequences[:TIMED_WINDOWS]]
    started = time.perf_counter()
    kmer_matrix(sample, ks, both_strands)
    per_window = (time.perf_counter() - started) / max(1, len(sample))
    return per_window * windows * KMER_FIT_PER_COUNT


def time_classifier(
    model, train, valid_windows: int, strands: int, collate, batch_size: int, learning_rate: float
) -> tuple[float, float]:
    """(seconds per optimiser step on `batch_size` training windows of `train`, seconds
    per validation check of `valid_windows` windows read on `strands` strands) of a
    classifier, on a copy of its weights' optimiser (its weights, gradients and mode are
    left as they were: the run trains it next)."""
    rows = [train[i] for i in range(min(batch_size, len(train)))]
    batch = collate(rows)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)

    def step():
        out = model(
            batch["input_ids"], batch["segment_ids"], batch["attention_mask"], batch["labels"]
        )
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()

    def read():
        with torch.no_grad():
            model(batch["input_ids"], None, batch["attention_mask"])

    training = model.training
    model.train()
    per_step = _seconds(step, TIMED_STEPS)
    model.eval()
    per_read = _seconds(read, TIMED_STEPS) / len(rows)
    model.load_state_dict(state)
    model.zero_grad(set_to_none=True)
    model.train(training)
    return per_step, per_read * valid_windows * strands


def untouched(work):
    """`work()`, its random draws taken from a stream of its own: the run's streams are
    left as they were, so that timing it does not change what it trains."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return work()
