"""What a fine-tuning run will do, said before it starts: the plan (base readers, the
start, the decisions it takes, the run's budget and checks) and its minutes on this
machine (finetuning.cost). Both walk the run's decisions (finetuning.decisions)."""

from __future__ import annotations

import logging
import math

from genobird.datasets.windows import WindowDataset
from genobird.finetuning import cost
from genobird.finetuning.train import evaluation_interval, training_config
from genobird.inputs import window_collate
from genobird.model.base_readers import base_kmer_lengths

log = logging.getLogger(__name__)


def plan_run(recipe, job, decisions: list, model) -> dict:
    """What a run of a resolved `recipe` for `job` will do and what it will cost, logged
    before it starts: {"plan": its words (`plan`), "estimated_cost": its minutes on
    this machine (`planned_cost`)}."""
    words = plan(recipe, decisions, job.baseline_runs)
    estimate = planned_cost(recipe, job, decisions, model)
    log.info("plan: %s; %s", words, cost.describe(estimate))
    return {"plan": words, "estimated_cost": estimate}


def plan(recipe, decisions: list, baseline_runs=()) -> str:
    """What a run of a resolved `recipe` will do, said before it starts: the base readers
    it trains first (or reads from `baseline_runs`, `--base-start-from`, where one fitted
    them so), the decisions it takes (`decisions`), the run's own step budget and checks.
    `--max-steps` bounds the run and each probe; the base CNN by its own epoch budget."""
    parts, base, checks = [], recipe.head.base, recipe.evaluation
    readings = max((decision.readings for decision in decisions), default=1)
    per_reading = " for each strand reading" if readings > 1 else ""
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
    if base.kmers and base.kmer_pull:
        parts.append(
            f"hold the k-mer weights near their start ({base.kmer_pull:g} x the LR's own penalty)"
        )
    parts.extend(filter(None, (decision.describe() for decision in decisions)))
    steps, batch = recipe.optim.max_steps, recipe.optim.batch_size
    run = f"fine-tune at most {steps:,} steps of {batch} windows"
    if checks.eval_every:
        run += f", validation every {checks.eval_every} steps or pass over the training windows"
        if checks.patience:
            run += f", stopped after {checks.patience} checks without improvement"
    parts.append(run)
    return "; ".join(parts)


def planned_cost(recipe, job, decisions: list, model) -> dict:
    """The minutes on this machine of a run of a resolved `recipe` for `job`
    (finetuning.cost): each kind of work timed on its first steps, `model` the classifier
    it trains (left as it was), times how much of it the plan holds (base CNNs and k-mer
    LR fits, for each strand reading a decision fits them for; the probes; the run),
    checks of validation included."""
    from genobird.baselines.cnn import CNNSpec

    base, data, checks, meta = recipe.head.base, recipe.data, recipe.evaluation, job.meta
    counts, training = meta["counts"], training_config(recipe)
    interval = (
        evaluation_interval(checks.eval_every, counts["train"], training)
        if checks.eval_every and counts["valid"]
        else training.max_steps
    )
    patience = checks.patience if checks.eval_every and counts["valid"] else 0
    runs = [run for decision in decisions for run in decision.runs(interval, patience)]
    readings = max((decision.readings for decision in decisions), default=1)
    rc_average = recipe.evaluation.rc_average
    train = WindowDataset(
        job.data, "train", job.tokenizer, data.max_tokens, window_bp=data.window_bp
    )
    windows = len(train)
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
    units["step"], units["check"] = cost.untouched(
        lambda: cost.time_classifier(
            model,
            train,
            counts["valid"],
            2 if rc_average else 1,
            window_collate(model, job.tokenizer.pad_id),
            training.batch_size,
            training.learning_rate,
        )
    )
    return cost.estimate(
        cost.UnitTimes(**units),
        readings * bool(base.cnn_channels),
        readings * bool(base.kmers),
        [*runs, (training.max_steps, interval, patience)],
        base.cnn_epochs,
    )
