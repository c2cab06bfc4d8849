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

from genobird.corpus.tokenizer import load_tokenizer
from genobird.datasets.windows import WindowDataset, read_metadata, split_sources
from genobird.errors import ConfigError
from genobird.fileio import atomic_write, file_digest
from genobird.finetuning.base_start import (
    BASE_CNN_LEARNING_RATE,
    StartPull,
    choose_strands,
    start_from_baselines,
)
from genobird.finetuning.build import base_rate_logits, build_model, fitted_spec
from genobird.finetuning.card import CARD_FILE, baseline_reports, model_card, reader_reports
from genobird.finetuning.cost import describe
from genobird.finetuning.evaluation import evaluate, start_check, training_summary, validation_auroc
from genobird.finetuning.plan import plan, planned_cost
from genobird.finetuning.probes import choose_recipe
from genobird.finetuning.recipe import SETTINGS, tree
from genobird.finetuning.run_folder import RunFolder
from genobird.finetuning.spec import (
    Recipe,
    check_window,
    evaluation_interval,
    evaluation_strands,
    profile_bins_read,
    settle_strands,
    strands_chosen_with_start,
    task_head_lr_scale,
    task_pos_weight,
    training_config,
    training_max_tokens,
    training_strands,
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


def finetune(
    data_path,
    output,
    spec: Recipe,
    pretrained=None,
    tokenizer_path=None,
    restart_changed: bool = False,
    baseline_runs=(),
) -> dict:
    """Fine-tune, evaluate on the test split, write the model directory and the report.
    A run resumes from its own checkpoints in `output`; checkpoints there of a run with
    other settings are refused, or with `restart_changed` deleted (`discard_other_run`).
    Base readers fitted exactly as `spec` asks by a baseline run in `baseline_runs` are
    read from it (reader_baselines.saved_baseline)."""
    data_path, output = Path(data_path), Path(output)
    folder = RunFolder(output)
    pretrained = Path(pretrained) if pretrained else None
    if pretrained is None and tokenizer_path is None:
        raise ConfigError("give --pretrained DIR, or --from-scratch with --tokenizer")
    meta = read_metadata(data_path)
    if not meta["counts"]["train"] or not meta["counts"]["test"]:
        raise ConfigError(f"{data_path}: needs train and test windows, has {meta['counts']}")
    check_window(spec, meta, data_path)
    tokenizer = load_tokenizer(pretrained if pretrained else tokenizer_path)
    if spec.head.base.any and tokenizer.unk_id in tokenizer.encode("N"):
        log.warning(
            "the vocabulary has no piece for N: a run of N is one [UNK] token, "
            "whose bases the base readers cannot read, so windows with N do not "
            "start as the baselines (`genobird vocab train` gives N a piece)"
        )
    spec = fitted_spec(spec, data_path, tokenizer, pretrained)
    if spec.data.bpe_dropout:  # a tokenizer that cannot sample is refused before any training
        tokenizer.encode_sampled("ACGT", spec.data.bpe_dropout, seed=0)
    run = partial(
        train_run,
        data_path=data_path,
        meta=meta,
        pretrained=pretrained,
        tokenizer=tokenizer,
        cnn_cache=folder.base_cnn_cache,
        baseline_runs=tuple(baseline_runs),
        restart_changed=restart_changed,
    )
    cost = planned_cost(spec, meta, data_path, pretrained, tokenizer)
    planned = plan(spec, meta, baseline_runs)
    log.info("plan: %s; %s", planned, describe(cost))
    start_choice = {}
    if strands_chosen_with_start(spec, meta):
        start_choice = choose_strands(spec, data_path, folder.base_cnn_cache, baseline_runs)
        spec = spec.with_values(**start_choice["settings"])
    if not spec.head.base.any:  # none of an earlier run's readers
        shutil.rmtree(folder.readers, ignore_errors=True)
    spec, choice = choose_recipe(spec, meta, output, run)
    spec, strands = settle_strands(spec, meta, choice, start_choice)
    trainer = run(spec, output)
    summary = {
        **training_summary(trainer.state),
        "pretrained": str(pretrained) if pretrained else None,
        "plan": planned,
        "estimated_cost": cost,
        "attention_kernel_check": trainer.kernel_check,
    }
    if folder.base_start.is_file():
        summary.update(json.loads(folder.base_start.read_text()))
        summary["start_check"] = start_check(trainer.state.history, summary)
    report = evaluate(
        trainer.module,
        data_path,
        tokenizer,
        spec,
        meta,
        trainer.device,
        output,
        summary,
        strands,
        choice,
    )
    if trainer.is_main:
        save_model(
            trainer.module,
            tokenizer,
            meta,
            spec,
            folder.model,
            report,
            data_path,
            baseline_runs,
        )
    return report


def train_run(
    spec: Recipe,
    output: Path,
    data_path: Path,
    meta: dict,
    pretrained,
    tokenizer,
    cnn_cache: Path,
    baseline_runs=(),
    restart_changed: bool = False,
) -> Trainer:
    """One fine-tuning run of `spec` from the starting weights into `output` (resumed
    from its checkpoint there, if any); returns the trainer, its best weights loaded."""
    model = build_model(meta, pretrained, spec, tokenizer)
    data, checks, optim, task = spec.data, spec.evaluation, spec.optim, meta["task"]
    model.set_output_bias(base_rate_logits(data_path, task_pos_weight(optim, task)))
    rc_augment, seed = training_strands(data, task), optim.seed
    windows = partial(WindowDataset, data_path, tokenizer=tokenizer, window_bp=data.window_bp)
    train = windows(
        "train",
        max_tokens=training_max_tokens(data, model),
        rc_augment_seed=seed if rc_augment else None,
        bpe_dropout=data.bpe_dropout,
        bpe_seed=seed,
        profile_bins=profile_bins_read(meta, data.window_bp or meta["window_bp"])
        if spec.head.pooling == "profile"
        else 0,
    )
    valid = windows("valid", max_tokens=data.max_tokens)
    warm_start = spec.head.base.any
    training = training_config(spec)
    selection, reverse = {}, None
    if checks.eval_every and len(valid):
        selection = {
            "eval_every": evaluation_interval(checks.eval_every, len(train), training),
            "best_metric": "auroc",
            "patience": checks.patience,
            "eval_at_start": warm_start,
        }
        if evaluation_strands(checks, task):
            reverse = windows("valid", max_tokens=data.max_tokens, reverse_complement=True)
    training = replace(training, **selection)
    final_norm = model.encoder.final_norm is not None
    scales = layer_decay_scales(model.config.num_layers, optim.layer_decay, final_norm)
    if (head_scale := task_head_lr_scale(optim, task)) != 1:
        scales["head."] = head_scale
    if spec.head.base.cnn_channels:  # trained from scratch, at the rate its baseline uses
        scales["base_cnn."] = BASE_CNN_LEARNING_RATE / training.learning_rate
    if scales:
        scales = {**training.learning_rate_scales, **scales}
        training = replace(training, learning_rate_scales=scales)
    identity = run_identity(spec, pretrained, meta)
    if restart_changed:
        discard_other_run(RunFolder(output).checkpoints, training, identity)
    pull = None
    # a resumed run is started again too when it pulls towards its start (the baselines
    # are read from their cache), so that the pull knows the start; resume() then loads
    # the checkpoint's weights over it
    if warm_start and (
        spec.head.base.kmer_pull or latest_checkpoint(RunFolder(output).checkpoints) is None
    ):
        record = start_from_baselines(
            model,
            spec,
            data_path,
            output,
            cnn_cache,
            evaluation_strands(checks, task),
            baseline_runs,
        )
        if "base_kmer_pull_strength" in record:
            pull = StartPull(model, record["base_kmer_pull_strength"])
    trainer = Trainer(
        model,
        train,
        training,
        output,
        partial(classification_step, pull=pull),
        eval_dataset=valid if selection else None,
        eval_fn=partial(validation_auroc, reverse=reverse) if selection else None,
        collate_fn=window_collate(model, tokenizer.pad_id),
        run_identity=identity,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(training.seed)
        trainer.resume()
        trainer.train()
    return trainer


def run_identity(spec: Recipe, pretrained: Path | None, meta: dict) -> dict:
    """What a fine-tuning checkpoint must share with its resumption besides the training
    settings: the recipe, the starting weights (by digest: a pretrained model rebuilt in
    place is another start) and the data set's split sizes."""
    # the Trainer's settings are compared on their own; segmentations only changes how
    # the trained model is evaluated
    values = spec.values()
    recipe = {
        s.name: values[s.name] for s in SETTINGS if not s.trainer and s.name != "segmentations"
    }
    recipe.update(choose_on_validation=spec.choose_on_validation, model=spec.fresh_shape)
    weights = file_digest(pretrained / WEIGHTS_FILE) if pretrained else None
    return {"task": recipe, "pretrained_weights": weights, "examples": meta["counts"]}


def save_model(
    model,
    tokenizer,
    meta,
    spec: Recipe,
    directory: Path,
    report: dict,
    data_path: Path,
    baseline_runs=(),
) -> None:
    """The model directory: weights, tokenizer, the task, the evaluation, the recipe as
    run and the model card (finetuning.card)."""
    task = {
        "task": meta["task"],
        "feature_names": meta["feature_names"],
        "categories": meta["categories"],
        "window_bp": spec.data.window_bp or meta["window_bp"],
        "max_tokens": spec.data.max_tokens,
        "rc_average": evaluation_strands(spec.evaluation, meta["task"]),
        "segmentations": spec.evaluation.segmentations,
        "bpe_dropout": spec.data.bpe_dropout,
    }
    save_pretrained(model, directory, extra={"task_info": task})
    tokenizer.save(directory)
    with atomic_write(directory / "evaluation.json") as handle:
        json.dump(report, handle, indent=2)
    # the recipe as run (what validation chose included), which `finetune --config` reads
    with atomic_write(directory / RECIPE_FILE) as handle:
        json.dump(tree(spec.values()), handle, indent=2)
    baselines = {
        **reader_reports(RunFolder(directory.parent).readers),
        **baseline_reports(baseline_runs),
    }
    card = model_card(
        meta,
        spec.values(),
        report,
        split_sources(data_path),
        baselines,
        task_pos_weight(spec.optim, meta["task"]),
    )
    with atomic_write(directory / CARD_FILE) as handle:
        handle.write(card)
