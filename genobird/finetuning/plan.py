"""What a fine-tuning run will do, said before it starts: the plan (base readers, the
start, probes, the run's budget and checks) and its minutes on this machine
(finetuning.cost)."""

from __future__ import annotations

import math
from pathlib import Path

from genobird.datasets.windows import WindowDataset
from genobird.finetuning import cost
from genobird.finetuning.build import build_model
from genobird.finetuning.probes import probe_budget
from genobird.finetuning.spec import (
    Recipe,
    evaluation_interval,
    evaluation_strands,
    probed_questions,
    strands_chosen_with_start,
    training_config,
)
from genobird.inputs import window_collate
from genobird.model.base_readers import base_kmer_lengths


def plan(spec: Recipe, meta: dict, baseline_runs=()) -> str:
    """What a fine-tuning run will do, said before it starts: the base readers it trains
    first (or reads from `baseline_runs`, `--base-start-from`, where one fitted them so),
    the probes it runs, the run's own step budget and checks. `--max-steps` bounds the run
    and each probe; the base CNN by its own epoch budget."""
    parts, base, checks = [], spec.head.base, spec.evaluation
    per_reading = " for each strand reading" if strands_chosen_with_start(spec, meta) else ""
    if base.cnn_channels:
        kind = "DeepSEA " if base.cnn_architecture == "deepsea-cnn" else ""
        cap = f", capped at {base.cnn_minutes:g} min" if base.cnn_minutes else ""
        parts.append(
            f"train a {base.cnn_channels}-filter {kind}base CNN alone first"
            f"{per_reading} (the CNN baseline: at most {base.cnn_epochs} "
            f"epochs, stopped by validation{cap})"
        )
    if base.kmers:
        parts.append(f"fit the k-mer LR on 3- to {base.kmers}-mers{per_reading}")
    if baseline_runs and (base.cnn_channels or base.kmers):
        parts.append(
            f"or read each from {', '.join(map(str, baseline_runs))} where it was "
            "fitted as this run asks"
        )
    if base.cnn_channels and base.kmers:
        per = " per feature category" if base.blend == "by-category" else ""
        parts.append(f"start from their blend, chosen on validation{per}")
    if per_reading:
        parts.append("read both strands or one, as the better start on validation")
    if base.kmers and base.kmer_pull:
        parts.append(
            f"hold the k-mer weights near their start ({base.kmer_pull:g} x the LR's own penalty)"
        )
    if questions := probed_questions(spec, meta):
        probes, steps = probe_budget(spec, questions)
        parts.append(
            f"choose {', '.join(questions)} on validation with at most {probes} "
            f"probes of at most {steps:,} steps"
        )
    steps, batch = spec.optim.max_steps, spec.optim.batch_size
    run = f"fine-tune at most {steps:,} steps of {batch} windows"
    if checks.eval_every:
        run += f", validation every {checks.eval_every} steps or pass over the training windows"
        if checks.patience:
            run += f", stopped after {checks.patience} checks without improvement"
    parts.append(run)
    return "; ".join(parts)


def planned_cost(spec: Recipe, meta: dict, data_path: Path, pretrained, tokenizer) -> dict:
    """The run's minutes on this machine (finetuning.cost): each kind of work timed on its
    first steps, times how much of it the plan holds (base CNNs and k-mer LR fits, for
    each strand reading where the strands are chosen with the start; the probes; the
    run), checks of validation included."""
    from genobird.baselines.cnn import CNNSpec

    base, data, checks = spec.head.base, spec.data, spec.evaluation
    readings = 2 if strands_chosen_with_start(spec, meta) else 1
    rc_average = evaluation_strands(checks, meta["task"])
    train = WindowDataset(data_path, "train", tokenizer, data.max_tokens, window_bp=data.window_bp)
    counts, windows = meta["counts"], len(train)
    sequences = [train.sequence(i) for i in range(min(len(train), cost.TIMED_WINDOWS))]
    units = {}
    if base.cnn_channels:
        cnn = CNNSpec(
            architecture=base.cnn_architecture,
            channels=base.cnn_channels,
            rc_average=rc_average,
            window_bp=data.window_bp,
        )
        sample = sequences * math.ceil(windows / len(sequences))
        units["cnn_epoch"] = cost.untouched(
            lambda: cost.time_cnn_epoch(
                sample[:windows], counts["valid"], cnn, len(meta["feature_names"])
            )
        )
    if base.kmers:
        units["kmer_fit"] = cost.time_kmer_fit(
            sequences,
            windows + counts["valid"],
            base_kmer_lengths(base.kmers),
            data.window_bp,
            rc_average,
        )
    model = cost.untouched(lambda: build_model(meta, pretrained, spec, tokenizer))
    training = training_config(spec)
    units["step"], units["check"] = cost.untouched(
        lambda: cost.time_classifier(
            model,
            train,
            counts["valid"],
            2 if rc_average else 1,
            window_collate(model, tokenizer.pad_id),
            training.batch_size,
            training.learning_rate,
        )
    )
    interval = (
        evaluation_interval(checks.eval_every, windows, training)
        if checks.eval_every and counts["valid"]
        else training.max_steps
    )
    patience = checks.patience if checks.eval_every and counts["valid"] else 0
    runs = [(training.max_steps, interval, patience)]
    if questions := probed_questions(spec, meta):
        probes, steps = probe_budget(spec, questions)
        runs = [(steps, min(interval, steps), patience)] * probes + runs
    return cost.estimate(
        cost.UnitTimes(**units),
        readings * bool(base.cnn_channels),
        readings * bool(base.kmers),
        runs,
        base.cnn_epochs,
    )
