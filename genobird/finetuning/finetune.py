"""Fine-tuning a pretrained encoder on a sequence data set, through the shared Trainer.

The model is BigBirdForSequenceClassification with one output per feature and BCE
(promoter: 1 output; chromatin: F outputs, positive weight 8 as the paper). Encoder
weights come from a pretraining model directory (`--pretrained`); the head starts
fresh. Evaluation averages the forward and reverse-complement predictions when asked.
The model directory records the task, feature names and categories, window and input
length, so predictors can be rebuilt from it alone."""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import replace
from functools import partial
from pathlib import Path

import torch

from genobird.datasets.windows import WindowDataset, split_sources
from genobird.fileio import atomic_write, file_digest
from genobird.finetuning.base_start import BASE_CNN_LEARNING_RATE, StartPull, start_from_baselines
from genobird.finetuning.build import base_rate_logits, build_model, classifier_shape
from genobird.finetuning.card import CARD_FILE, baseline_reports, model_card, reader_reports
from genobird.finetuning.cost import describe
from genobird.finetuning.decisions import decisions
from genobird.finetuning.evaluation import evaluate, start_check, training_summary, validation_auroc
from genobird.finetuning.job import FinetuneJob
from genobird.finetuning.plan import plan, planned_cost
from genobird.finetuning.recipe import SETTINGS, Recipe, tree
from genobird.finetuning.resolve import Resolved, resolve
from genobird.finetuning.run_folder import RunFolder
from genobird.finetuning.spec import (
    evaluation_interval,
    profile_bins_read,
    training_config,
    training_max_tokens,
)
from genobird.inputs import window_collate
from genobird.model import save_pretrained
from genobird.model.io import WEIGHTS_FILE
from genobird.model.task_model import layer_decay_scales
from genobird.training import Trainer
from genobird.training.checkpoint import latest_checkpoint
from genobird.training.config import discard_other_run

log = logging.getLogger(__name__)


# the recipe a fine-tuned model was trained with, beside its weights
RECIPE_FILE = "finetune.json"


def classification_step(model, batch, pull: StartPull | None = None):
    """The task's loss on a batch, plus the pull of the base k-mers' weights towards
    their start where the recipe asks for one (logged as kmer_pull)."""
    out = model(batch["input_ids"], batch["segment_ids"], batch["attention_mask"], batch["labels"])
    if pull is None:
        return out.loss, {}
    penalty = pull()
    return out.loss + penalty, {"kmer_pull": penalty.detach()}


def finetune(recipe: Recipe, job: FinetuneJob) -> dict:
    """Fine-tune, evaluate on the test split, write the model directory and the report:
    resolve the recipe for the job, plan, decide, train, evaluate, save. A run resumes
    from its own checkpoints in the job's folder; checkpoints there of a run with other
    settings are refused, or with `job.restart_changed` deleted (`discard_other_run`).
    Base readers fitted exactly as the recipe asks by one of `job.baseline_runs` are read
    from it (reader_baselines.saved_baseline)."""
    resolved = resolve(recipe, job)
    steps = decisions(resolved, job.meta)
    shape = classifier_shape(resolved.recipe, job)
    model = build_model(resolved.recipe, job)
    cost = planned_cost(resolved.recipe, job, steps, model)
    planned = plan(resolved.recipe, steps, job.baseline_runs)
    log.info("plan: %s; %s", planned, describe(cost))
    if not resolved.recipe.head.base.any:  # none of an earlier run's readers
        shutil.rmtree(job.folder.readers, ignore_errors=True)

    def probe(candidate: Resolved, folder: Path) -> Trainer:  # a decision's fine-tuning run
        return train_run(candidate, folder, job)[0]

    record = {}
    for step in steps:
        resolved, decided = step.decide(resolved, job, probe)
        record.update(decided)
    # the classifier timed is the one trained, unless a decision changed its shape
    same = classifier_shape(resolved.recipe, job) == shape
    trainer, start = train_run(resolved, job.folder.root, job, model if same else None)
    training = {
        **training_summary(trainer.state),
        "pretrained": str(job.pretrained) if job.pretrained else None,
        "plan": planned,
        "estimated_cost": cost,
        "attention_kernel_check": trainer.kernel_check,
        **start,
    }
    if start:
        training["start_check"] = start_check(trainer.state.history, start)
    record["training"] = training
    report = evaluate(trainer.module, resolved, job, trainer.device, record)
    if trainer.is_main:
        save_model(trainer.module, resolved, job, report)
    return report


def train_run(resolved: Resolved, output: Path, job: FinetuneJob, model=None) -> tuple:
    """One fine-tuning run of a resolved recipe from the starting weights into `output`
    (resumed from its checkpoint there, if any), on `model` where the caller built it;
    returns the trainer, its best weights loaded, and what its start from the base
    readers recorded (base-start.json; {} without base readers)."""
    recipe = resolved.recipe
    model = model or build_model(recipe, job)
    data, checks, optim, head = recipe.data, recipe.evaluation, recipe.optim, recipe.head
    model.set_output_bias(base_rate_logits(job.data, optim.pos_weight))
    windows = partial(WindowDataset, job.data, tokenizer=job.tokenizer, window_bp=data.window_bp)
    train = windows(
        "train",
        max_tokens=training_max_tokens(data, model),
        rc_augment_seed=optim.seed if data.rc_augment else None,
        bpe_dropout=data.bpe_dropout,
        bpe_seed=optim.seed,
        profile_bins=profile_bins_read(job.meta, data.window_bp)
        if head.pooling == "profile"
        else 0,
    )
    valid = windows("valid", max_tokens=data.max_tokens)
    warm_start = head.base.any
    training = training_config(recipe)
    selection, reverse = {}, None
    if checks.eval_every and len(valid):
        selection = {
            "eval_every": evaluation_interval(checks.eval_every, len(train), training),
            "best_metric": "auroc",
            "patience": checks.patience,
            "eval_at_start": warm_start,
        }
        if checks.rc_average:
            reverse = windows("valid", max_tokens=data.max_tokens, reverse_complement=True)
    training = replace(training, **selection)
    final_norm = model.encoder.final_norm is not None
    scales = layer_decay_scales(model.config.num_layers, optim.layer_decay, final_norm)
    if optim.head_lr_scale != 1:
        scales["head."] = optim.head_lr_scale
    if head.base.cnn_channels:  # trained from scratch, at the rate its baseline uses
        scales["base_cnn."] = BASE_CNN_LEARNING_RATE / training.learning_rate
    if scales:
        scales = {**training.learning_rate_scales, **scales}
        training = replace(training, learning_rate_scales=scales)
    identity = run_identity(resolved.asked, job)
    folder = RunFolder(output)
    if job.restart_changed:
        discard_other_run(folder.checkpoints, training, identity)
    start, pull = {}, None
    # a resumed run is started again too when it pulls towards its start (the baselines
    # are read from their cache), so that the pull knows the start; resume() then loads
    # the checkpoint's weights over it
    if warm_start and (head.base.kmer_pull or latest_checkpoint(folder.checkpoints) is None):
        start = start_from_baselines(
            model,
            recipe,
            job.data,
            output,
            job.folder.base_cnn_cache,
            checks.rc_average,
            job.baseline_runs,
        )
        if "base_kmer_pull_strength" in start:
            pull = StartPull(model, start["base_kmer_pull_strength"])
    elif warm_start and folder.base_start.is_file():  # as the resumed run's start recorded it
        start = json.loads(folder.base_start.read_text())
    trainer = Trainer(
        model,
        train,
        training,
        output,
        partial(classification_step, pull=pull),
        eval_dataset=valid if selection else None,
        eval_fn=partial(validation_auroc, reverse=reverse) if selection else None,
        collate_fn=window_collate(model, job.tokenizer.pad_id),
        run_identity=identity,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(training.seed)
        trainer.resume()
        trainer.train()
    return trainer, start


def run_identity(asked: Recipe, job: FinetuneJob) -> dict:
    """What a fine-tuning checkpoint must share with its resumption besides the training
    settings: the recipe as asked, the starting weights (by digest: a pretrained model
    rebuilt in place is another start) and the data set's split sizes."""
    # the Trainer's settings are compared on their own; segmentations only changes how
    # the trained model is evaluated
    values = asked.values()
    recipe = {
        s.name: values[s.name] for s in SETTINGS if not s.trainer and s.name != "segmentations"
    }
    recipe.update(choose_on_validation=asked.choose_on_validation, model=asked.fresh_shape)
    pretrained = job.pretrained
    weights = file_digest(pretrained / WEIGHTS_FILE) if pretrained else None
    return {"task": recipe, "pretrained_weights": weights, "examples": job.meta["counts"]}


def save_model(model, resolved: Resolved, job: FinetuneJob, report: dict) -> None:
    """The model directory: weights, tokenizer, the task, the evaluation, the recipe as
    asked (with what was fitted and decided) and the model card (finetuning.card)."""
    recipe, meta, directory = resolved.recipe, job.meta, job.folder.model
    task = {
        "task": meta["task"],
        "feature_names": meta["feature_names"],
        "categories": meta["categories"],
        "window_bp": recipe.data.window_bp,
        "max_tokens": recipe.data.max_tokens,
        "rc_average": recipe.evaluation.rc_average,
        "segmentations": recipe.evaluation.segmentations,
        "bpe_dropout": recipe.data.bpe_dropout,
    }
    save_pretrained(model, directory, extra={"task_info": task})
    job.tokenizer.save(directory)
    with atomic_write(directory / "evaluation.json") as handle:
        json.dump(report, handle, indent=2)
    # the recipe as asked, with what was fitted and chosen: what `finetune --config`
    # reads; what followed the task kind, the data set or the start is left open, so
    # that the recipe read for another one follows that one's
    asked = resolved.asked.values()
    with atomic_write(directory / RECIPE_FILE) as handle:
        json.dump(tree(asked), handle, indent=2)
    baselines = {**reader_reports(job.folder.readers), **baseline_reports(job.baseline_runs)}
    card = model_card(
        meta, asked, report, split_sources(job.data), baselines, recipe.optim.pos_weight
    )
    with atomic_write(directory / CARD_FILE) as handle:
        handle.write(card)
