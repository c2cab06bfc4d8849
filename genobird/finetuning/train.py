"""One fine-tuning run of a resolved recipe (finetuning.resolve), the run's own or a
decision's probe: its windows, the Trainer's settings and checks, its start from the
base readers, resumed from its checkpoints where it has them."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from pathlib import Path

import torch

from genobird.datasets.windows import WindowDataset
from genobird.fileio import file_digest
from genobird.finetuning.base_start import BASE_CNN_LEARNING_RATE, StartPull, start_from_baselines
from genobird.finetuning.build import build_model, profile_bins_read, training_max_tokens
from genobird.finetuning.evaluation import validation_auroc
from genobird.finetuning.job import FinetuneJob
from genobird.finetuning.recipe import SETTINGS, Recipe
from genobird.finetuning.resolve import Resolved
from genobird.finetuning.run_folder import RunFolder
from genobird.inputs import window_collate
from genobird.model.io import WEIGHTS_FILE
from genobird.model.task_model import layer_decay_scales
from genobird.training import Trainer, TrainingConfig
from genobird.training.checkpoint import latest_checkpoint
from genobird.training.config import discard_other_run


def training_config(recipe: Recipe) -> TrainingConfig:
    """The Trainer's settings of a resolved recipe: its optimiser branch, its checkpoints, a log
    row every 20 steps; validation checks are the run's to add (`evaluation_interval`)."""
    optim = recipe.optim
    return TrainingConfig(
        seed=optim.seed,
        max_steps=optim.max_steps,
        batch_size=optim.batch_size,
        effective_batch_size=optim.effective_batch_size,
        learning_rate=optim.learning_rate,
        warmup_steps=optim.warmup_steps,
        ema_decay=optim.ema_decay,
        checkpoint_every=recipe.output.checkpoint_every,
        log_every=20,
        eval_every=0,
        progress=recipe.progress,
    )


def evaluation_interval(eval_every: int, train_windows: int, training: TrainingConfig) -> int:
    """Steps between validation checks: `eval_every`, or one pass over the training
    windows when that is shorter (at least one step)."""
    per_pass = -(-train_windows // training.effective_batch_size)
    return max(1, min(eval_every, per_pass))


def classification_step(model, batch, pull: StartPull | None = None):
    """The task's loss on a batch, plus the pull of the base k-mers' weights towards
    their start where the recipe asks for one (logged as kmer_pull)."""
    out = model(batch["input_ids"], batch["segment_ids"], batch["attention_mask"], batch["labels"])
    if pull is None:
        return out.loss, {}
    penalty = pull()
    return out.loss + penalty, {"kmer_pull": penalty.detach()}


def train(resolved: Resolved, output: Path, job: FinetuneJob, model=None) -> tuple:
    """One fine-tuning run of a resolved recipe from the starting weights into `output`
    (resumed from its checkpoint there, if any), on `model` where the caller built it
    for this recipe's shape (build.build_model);
    returns the trainer, its best weights loaded, and what its start from the base
    readers recorded (base-start.json; {} without base readers)."""
    recipe = resolved.recipe
    training, identity = training_config(recipe), run_identity(resolved.asked, job)
    model = build_model(recipe, job, built=model)
    data, checks, optim, head = recipe.data, recipe.evaluation, recipe.optim, recipe.head
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
