"""Fine-tuning a pretrained encoder on a sequence data set, through the shared Trainer.

The model is BigBirdForSequenceClassification with one output per feature and BCE
(promoter: 1 output; chromatin: F outputs, positive weight 8 as the paper). Encoder
weights come from a pretraining model directory (`--pretrained`); the head starts
fresh. Evaluation averages the forward and reverse-complement predictions when asked.
The model directory records the task, feature names and categories, window and input
length, so predictors can be rebuilt from it alone.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, field, make_dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from genobird.corpus.tokenizer import load_tokenizer
from genobird.datasets.metrics import is_multilabel, mean_auroc, write_evaluation
from genobird.datasets.windows import WindowDataset, default_max_tokens, read_metadata
from genobird.errors import ConfigError
from genobird.fileio import atomic_write, file_digest
from genobird.finetuning import cost
from genobird.finetuning.base_start import (
    BASE_CNN_LEARNING_RATE,
    BASE_START_FILE,
    StartPull,
    choose_strands,
    start_from_baselines,
)
from genobird.finetuning.cost import describe
from genobird.finetuning.probes import choose_recipe, open_questions, probe_budget
from genobird.finetuning.recipe import QUESTIONS, SETTINGS, check_needs, tree
from genobird.inputs import token_limit, window_collate
from genobird.model import BigBirdForSequenceClassification, save_pretrained
from genobird.model.base_readers import base_kmer_lengths
from genobird.model.io import WEIGHTS_FILE, read_model_description
from genobird.model.task_model import build_task_model, layer_decay_scales, task_config
from genobird.training import Trainer, TrainingConfig
from genobird.training.averaging import check_decay
from genobird.training.checkpoint import latest_checkpoint
from genobird.training.trainer import discard_other_run

log = logging.getLogger(__name__)
# the recipe a fine-tuned model was trained with, beside its weights
RECIPE_FILE = "finetune.json"


def fresh_model_shape() -> dict:
    """Without pretrained weights: the BigBirdConfig fields of the fresh model (the demo's
    tiny shape; max_position grows to max_tokens when needed)."""
    return dict(hidden_size=128, num_layers=2, num_heads=4, intermediate_size=512,
                max_position=1024)  # fmt: skip


def _check_spec(spec) -> None:
    """Each setting within its bounds (recipe.SETTINGS), and the checks between them,
    before any data or model is loaded."""
    for setting in SETTINGS:
        value = spec.training.get(setting.name) if setting.training else getattr(spec, setting.name)
        setting.check(value)
    if spec.layer_decay != 1 and spec.training.get("learning_rate_scales"):
        # one would silently replace the other
        raise ConfigError("give layer_decay or training.learning_rate_scales, not both")
    check_decay(spec.training.get("ema_decay", 0.0))
    if unknown := set(spec.choose_on_validation) - set(QUESTIONS):
        raise ConfigError(f"choose_on_validation: no question {sorted(unknown)}; "
                          f"asked can be {', '.join(QUESTIONS)}")  # fmt: skip
    if spec.base_kmers:
        base_kmer_lengths(spec.base_kmers)  # refuses a length outside 3-8
    check_needs(recipe_values(spec))


# One field per recipe setting that is not the Trainer's (those go in `training`, a dict
# of TrainingConfig fields), each with the setting's type and default: the settings are
# declared once, in finetuning.recipe. Beside them: the questions a classify run answers
# on validation (finetuning.probes), the training settings and a fresh model's shape.
FinetuneSpec = make_dataclass(
    "FinetuneSpec",
    [*((s.name, s.type | None, field(default=s.default)) for s in SETTINGS if not s.training),
     ("choose_on_validation", tuple, field(default=())),
     ("training", dict, field(default_factory=dict)),
     ("model", dict, field(default_factory=fresh_model_shape))],
    namespace={"__post_init__": _check_spec,
               "__doc__": "A fine-tuning run's recipe (finetuning.recipe declares each "
                          "setting) and its training settings."},
)  # fmt: skip
FinetuneSpec.__module__ = __name__  # pickled by name, as a class defined here is


def recipe_values(spec) -> dict:
    """Every recipe setting's value in a spec (finetune.json, flat)."""
    return {s.name: spec.training.get(s.name) if s.training else getattr(spec, s.name)
            for s in SETTINGS}  # fmt: skip


def strand_symmetric(meta: dict) -> bool:
    """Whether a data set's labels hold on both strands, the default for reverse-complement
    augmentation and averaging: chromatin features and classify labels (TF binding, ...)
    do; promoter windows are oriented by their TSS strand, their reverse complement is not
    a promoter. A model trained on both strands is evaluated on both: on GUE TF 0 that
    lifted test MCC from 0.621 to 0.634 and AUROC from 0.885 to 0.902 (docs/experiments)."""
    return meta["task"] != "promoter"


def classification_step(model, batch, pull: StartPull | None = None):
    """The task's loss on a batch, plus the pull of the base k-mers' weights towards
    their start where the recipe asks for one (logged as kmer_pull)."""
    out = model(batch["input_ids"], batch["segment_ids"], batch["attention_mask"], batch["labels"])
    if pull is None:
        return out.loss, {}
    penalty = pull()
    return out.loss + penalty, {"kmer_pull": penalty.detach()}


@torch.no_grad()
def loader_probabilities(model, loader, device) -> tuple[np.ndarray, np.ndarray]:
    """(labels [N, F], probabilities [N, F]) over a loader of collated windows."""
    model.eval()
    probabilities, labels = [], []
    for batch in loader:
        logits = model(
            batch["input_ids"].to(device), None, batch["attention_mask"].to(device)
        ).logits
        probabilities.append(torch.sigmoid(logits.float()).cpu().numpy())
        labels.append(batch["labels"].numpy())
    return np.concatenate(labels), np.concatenate(probabilities)


def predict_probabilities(
    model, dataset, device, batch_size: int = 16
) -> tuple[np.ndarray, np.ndarray]:
    collate = window_collate(model, dataset.tokenizer.pad_id)
    loader = DataLoader(dataset, batch_size=batch_size, collate_fn=collate)
    return loader_probabilities(model, loader, device)


def validation_auroc(model, loader, device, reverse=None) -> dict:
    """The fine-tuning eval_fn: mean AUROC over features on the validation split, with
    `reverse` (the split read on the other strand) averaged over both strands, as the
    test split is evaluated: model selection scores what the report will."""
    labels, probabilities = loader_probabilities(model, loader, device)
    if reverse is not None:
        other = predict_probabilities(model, reverse, device, loader.batch_size)[1]
        probabilities = (probabilities + other) / 2
    return {"auroc": mean_auroc(labels, probabilities)}


def task_pos_weight(spec: FinetuneSpec, task_meta: dict) -> float:
    if spec.pos_weight is not None:
        return spec.pos_weight
    return 8.0 if task_meta["task"] == "chromatin" else 1.0


def task_head_lr_scale(spec: FinetuneSpec, task_meta: dict) -> float:
    if spec.head_lr_scale is not None:
        return spec.head_lr_scale
    return 10.0 if task_meta["task"] == "chromatin" else 1.0


def base_rate_logits(data_path, pos_weight: float) -> np.ndarray:
    """Each output's starting logit: the constant that minimises the weighted BCE on the
    training split's known labels, log(w p / (1 - p)). A chromatin feature with 3%
    positives starts at its rate instead of at 0.5, which the head would otherwise spend
    hundreds of steps unlearning (a balanced task, or negatives matched by the weight,
    starts at 0 as before)."""
    import h5py

    from genobird.datasets.windows import label_values

    with h5py.File(data_path, "r") as handle:
        train = handle["split"][:].astype(str) == "train"
        labels = label_values(handle["labels"][:][train])
    with np.errstate(invalid="ignore"):
        rate = np.nan_to_num(np.nanmean(labels, axis=0), nan=0.5) if len(labels) else 0.5
    rate = np.clip(rate, 1e-4, 1 - 1e-4)
    return np.log(pos_weight * rate / (1 - rate))


def build_model(task_meta: dict, pretrained: Path | None, spec: FinetuneSpec, tokenizer):
    pos_weight = task_pos_weight(spec, task_meta)
    pieces = tokenizer.pieces
    config = task_config(pretrained, spec.model, spec.max_tokens, len(pieces), tokenizer.pad_id)
    if spec.dropout is not None:
        config = replace(config, hidden_dropout=spec.dropout)
    head = {}
    window = spec.window_bp or task_meta["window_bp"]
    if spec.pooling == "centre":
        head["centre_fraction"] = min(1.0, spec.centre_bp / window)
    if spec.pooling == "profile":  # the data set's bins read, each its own share of the window
        head["profile_bins"] = profile_bins_read(task_meta, window)
        head["centre_fraction"] = task_meta["profile_bin_bp"] / window
    if spec.base_cnn_channels:
        head["base_cnn_channels"] = spec.base_cnn_channels
        head["base_cnn_architecture"] = spec.base_cnn_architecture
    if spec.base_kmers:
        head["base_kmers"] = spec.base_kmers
    if spec.base_cnn_channels or spec.base_kmers:
        head["base_strands"] = base_strands(spec, task_meta)
    return build_task_model(
        BigBirdForSequenceClassification, config, pretrained, spec.seed, pieces,
        num_labels=len(task_meta["feature_names"]), problem="multi_label", pos_weight=pos_weight,
        pooling=spec.pooling, **head,
    )  # fmt: skip


def fitted_spec(spec: FinetuneSpec, data_path, tokenizer, pretrained) -> FinetuneSpec:
    """`spec` with max_tokens set, where it was left open, to what the data set's windows
    need (at most the pretrained model's max_position)."""
    if spec.max_tokens is not None:
        return spec
    if pretrained is not None:
        config = read_model_description(pretrained)["config"]
        block = config["block_size"]
        # rotary positions have no table to outgrow (task_config)
        limit = None if config.get("position_encoding") == "rotary" else config["max_position"]
    else:
        block, limit = spec.model.get("block_size", 64), None
    max_tokens = default_max_tokens(data_path, tokenizer, block, limit, window_bp=spec.window_bp)
    log.info("max_tokens %d (the data set's longest window)", max_tokens)
    return replace(spec, max_tokens=max_tokens)


def finetune(data_path, output, spec: FinetuneSpec, pretrained=None, tokenizer_path=None,
             restart_changed: bool = False, baseline_runs=()) -> dict:  # fmt: skip
    """Fine-tune, evaluate on the test split, write the model directory and the report.
    A run resumes from its own checkpoints in `output`; checkpoints there of a run with
    other settings are refused, or with `restart_changed` deleted (`discard_other_run`).
    Base readers fitted exactly as `spec` asks by a baseline run in `baseline_runs` are
    read from it (base_start.saved_baseline)."""
    data_path, output = Path(data_path), Path(output)
    pretrained = Path(pretrained) if pretrained else None
    if pretrained is None and tokenizer_path is None:
        raise ConfigError("give --pretrained DIR, or --from-scratch with --tokenizer")
    tokenizer = load_tokenizer(pretrained if pretrained else tokenizer_path)
    if spec.bpe_dropout:  # a tokenizer that cannot sample is refused before any training
        tokenizer.encode_sampled("ACGT", spec.bpe_dropout, seed=0)
    meta = read_metadata(data_path)
    check_window(spec, meta, data_path)
    if (spec.base_cnn_channels or spec.base_kmers) and tokenizer.unk_id in tokenizer.encode("N"):
        log.warning("the vocabulary has no piece for N: a run of N is one [UNK] token, "
                    "whose bases the base readers cannot read, so windows with N do not "
                    "start as the baselines (`genobird vocab train` gives N a piece)")  # fmt: skip
    spec = fitted_spec(spec, data_path, tokenizer, pretrained)
    if not meta["counts"]["train"] or not meta["counts"]["test"]:
        raise ConfigError(f"{data_path}: needs train and test windows, has {meta['counts']}")
    run = partial(train_run, data_path=data_path, meta=meta, pretrained=pretrained,
                  tokenizer=tokenizer, cnn_cache=output / "base-cnn",
                  baseline_runs=tuple(baseline_runs), restart_changed=restart_changed)  # fmt: skip
    cost = planned_cost(spec, meta, data_path, pretrained, tokenizer)
    log.info("plan: %s; %s", plan(spec, meta, baseline_runs), describe(cost))
    start_choice = {}
    if strands_chosen_with_start(spec, meta):
        start_choice = choose_strands(spec, data_path, output / "base-cnn", baseline_runs)
        spec = replace(spec, **start_choice["settings"])
    spec, choice = choose_recipe(spec, meta, output, run)
    spec, strands = settle_strands(spec, meta, choice, start_choice)
    trainer = run(spec, output)
    summary = {**training_summary(trainer.state), "pretrained": str(pretrained) if pretrained
               else None, "estimated_cost": cost,
               "attention_kernel_check": trainer.kernel_check}  # fmt: skip
    if (base_start := output / BASE_START_FILE).is_file():
        summary.update(json.loads(base_start.read_text()))
        summary["start_check"] = start_check(trainer.state.history, summary)
    report = evaluate(trainer.module, data_path, tokenizer, spec, meta, trainer.device, output,
                      summary, strands, choice)  # fmt: skip
    if trainer.is_main:
        save_model(trainer.module, tokenizer, meta, spec, output / "model", report)
    return report


def plan(spec: FinetuneSpec, meta: dict, baseline_runs=()) -> str:
    """What a fine-tuning run will do, said before it starts: the base readers it trains
    first (or reads from `baseline_runs`, `--base-start-from`, where one fitted them so),
    the probes it runs, the run's own step budget and checks. `--max-steps` bounds the run
    and each probe; the base CNN is bounded by its own clock."""
    parts = []
    per_reading = " for each strand reading" if strands_chosen_with_start(spec, meta) else ""
    if spec.base_cnn_channels:
        kind = "DeepSEA " if spec.base_cnn_architecture == "deepsea-cnn" else ""
        cap = f", capped at {spec.base_cnn_minutes:g} min" if spec.base_cnn_minutes else ""
        parts.append(f"train a {spec.base_cnn_channels}-filter {kind}base CNN alone first"
                     f"{per_reading} (the CNN baseline: at most {spec.base_cnn_epochs} "
                     f"epochs, stopped by validation{cap})")  # fmt: skip
    if spec.base_kmers:
        parts.append(f"fit the k-mer LR on 3- to {spec.base_kmers}-mers{per_reading}")
    if baseline_runs and (spec.base_cnn_channels or spec.base_kmers):
        parts.append(f"or read each from {', '.join(map(str, baseline_runs))} where it was "
                     "fitted as this run asks")  # fmt: skip
    if spec.base_cnn_channels and spec.base_kmers:
        per = " per feature category" if spec.base_blend == "by-category" else ""
        parts.append(f"start from their blend, chosen on validation{per}")
    if per_reading:
        parts.append("read both strands or one, as the better start on validation")
    if spec.base_kmers and spec.base_kmer_pull:
        parts.append(f"hold the k-mer weights near their start ({spec.base_kmer_pull:g} x "
                     "the LR's own penalty)")  # fmt: skip
    if questions := probed_questions(spec, meta):
        probes, steps = probe_budget(spec, questions)
        parts.append(f"choose {', '.join(questions)} on validation with at most {probes} "
                     f"probes of at most {steps:,} steps")  # fmt: skip
    steps, batch = spec.training.get("max_steps", 0), spec.training.get("batch_size")
    run = f"fine-tune at most {steps:,} steps of {batch} windows"
    if spec.eval_every:
        run += f", validation every {spec.eval_every} steps or pass over the training windows"
        if spec.patience:
            run += f", stopped after {spec.patience} checks without improvement"
    parts.append(run)
    return "; ".join(parts)


def planned_cost(spec: FinetuneSpec, meta: dict, data_path: Path, pretrained, tokenizer) -> dict:
    """The run's minutes on this machine (finetuning.cost): each kind of work timed on its
    first steps, times how much of it the plan holds (base CNNs and k-mer LR fits, for
    each strand reading where the strands are chosen with the start; the probes; the
    run), checks of validation included."""
    from genobird.baselines.cnn import CNNSpec

    readings = 2 if strands_chosen_with_start(spec, meta) else 1
    rc_average = evaluation_strands(spec, meta)
    train = WindowDataset(data_path, "train", tokenizer, spec.max_tokens, window_bp=spec.window_bp)
    counts, windows = meta["counts"], len(train)
    sequences = [train.sequence(i) for i in range(min(len(train), cost.TIMED_WINDOWS))]
    units = {}
    if spec.base_cnn_channels:
        cnn = CNNSpec(architecture=spec.base_cnn_architecture, channels=spec.base_cnn_channels,
                      rc_average=rc_average, window_bp=spec.window_bp)  # fmt: skip
        sample = sequences * math.ceil(windows / len(sequences))
        units["cnn_epoch"] = cost.untouched(lambda: cost.time_cnn_epoch(
            sample[:windows], counts["valid"], cnn, len(meta["feature_names"])))  # fmt: skip
    if spec.base_kmers:
        units["kmer_fit"] = cost.time_kmer_fit(sequences, windows + counts["valid"],
                                               base_kmer_lengths(spec.base_kmers),
                                               spec.window_bp, rc_average)  # fmt: skip
    model = cost.untouched(lambda: build_model(meta, pretrained, spec, tokenizer))
    training = TrainingConfig(**{"seed": spec.seed, **spec.training})
    units["step"], units["check"] = cost.untouched(lambda: cost.time_classifier(
        model, train, counts["valid"], 2 if rc_average else 1,
        window_collate(model, tokenizer.pad_id), training.batch_size,
        training.learning_rate))  # fmt: skip
    interval = (evaluation_interval(spec.eval_every, windows, training)
                if spec.eval_every and counts["valid"] else training.max_steps)  # fmt: skip
    patience = spec.patience if spec.eval_every and counts["valid"] else 0
    runs = [(training.max_steps, interval, patience)]
    if questions := probed_questions(spec, meta):
        probes, steps = probe_budget(spec, questions)
        runs = [(steps, min(interval, steps), patience)] * probes + runs
    return cost.estimate(cost.UnitTimes(**units), readings * bool(spec.base_cnn_channels),
                         readings * bool(spec.base_kmers), runs, spec.base_cnn_epochs)  # fmt: skip


def train_run(spec: FinetuneSpec, output: Path, data_path: Path, meta: dict, pretrained,
              tokenizer, cnn_cache: Path, baseline_runs=(),
              restart_changed: bool = False) -> Trainer:  # fmt: skip
    """One fine-tuning run of `spec` from the starting weights into `output` (resumed
    from its checkpoint there, if any); returns the trainer, its best weights loaded."""
    model = build_model(meta, pretrained, spec, tokenizer)
    model.set_output_bias(base_rate_logits(data_path, task_pos_weight(spec, meta)))
    rc_augment = strand_symmetric(meta) if spec.rc_augment is None else spec.rc_augment
    windows = partial(WindowDataset, data_path, tokenizer=tokenizer, window_bp=spec.window_bp)
    train = windows("train", max_tokens=training_max_tokens(spec, model),
                    rc_augment_seed=spec.seed if rc_augment else None,
                    bpe_dropout=spec.bpe_dropout, bpe_seed=spec.seed,
                    profile_bins=profile_bins_read(meta, spec.window_bp or meta["window_bp"])
                    if spec.pooling == "profile" else 0)  # fmt: skip
    valid = windows("valid", max_tokens=spec.max_tokens)
    warm_start = bool(spec.base_cnn_channels or spec.base_kmers)
    training = TrainingConfig(**{"seed": spec.seed, **spec.training})
    selection, reverse = {}, None
    if spec.eval_every and len(valid):
        selection = {"eval_every": evaluation_interval(spec.eval_every, len(train), training),
                     "best_metric": "auroc", "patience": spec.patience,
                     "eval_at_start": warm_start}  # fmt: skip
        if evaluation_strands(spec, meta):
            reverse = windows("valid", max_tokens=spec.max_tokens, reverse_complement=True)
    training = replace(training, **selection)
    final_norm = model.encoder.final_norm is not None
    scales = layer_decay_scales(model.config.num_layers, spec.layer_decay, final_norm)
    if (head_scale := task_head_lr_scale(spec, meta)) != 1:
        scales["head."] = head_scale
    if spec.base_cnn_channels:  # trained from scratch, at the rate its baseline uses
        scales["base_cnn."] = BASE_CNN_LEARNING_RATE / training.learning_rate
    if scales:
        scales = {**training.learning_rate_scales, **scales}
        training = replace(training, learning_rate_scales=scales)
    identity = run_identity(spec, pretrained, meta)
    if restart_changed:
        discard_other_run(output / "checkpoints", training, identity)
    pull = None
    # a resumed run is started again too when it pulls towards its start (the baselines
    # are read from their cache), so that the pull knows the start; resume() then loads
    # the checkpoint's weights over it
    if warm_start and (spec.base_kmer_pull or latest_checkpoint(output / "checkpoints") is None):
        record = start_from_baselines(model, spec, data_path, output, cnn_cache,
                                      evaluation_strands(spec, meta), baseline_runs)  # fmt: skip
        if "base_kmer_pull_strength" in record:
            pull = StartPull(model, record["base_kmer_pull_strength"])
    trainer = Trainer(
        model, train, training, output, partial(classification_step, pull=pull),
        eval_dataset=valid if selection else None,
        eval_fn=partial(validation_auroc, reverse=reverse) if selection else None,
        collate_fn=window_collate(model, tokenizer.pad_id),
        run_identity=identity,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(training.seed)
        trainer.resume()
        trainer.train()
    return trainer


# How far the classifier's check before its first step may lie from its baselines' own
# validation AUROC: float rounding, and bf16 on a GPU; more means the start is not them.
START_TOLERANCE = 1e-3


def start_check(history: list[dict], base_start: dict) -> dict | None:
    """The run's validation check before its first step beside the validation AUROC of the
    baselines it started from (base-start.json): equal, up to rounding, when the
    classifier started as them. A start that is not them is logged as a warning."""
    expected = base_start.get("start_validation_auroc")
    at_start = next((row["eval_auroc"] for row in history
                     if row.get("step") == 0 and "eval_auroc" in row), None)  # fmt: skip
    if expected is None or at_start is None:
        return None
    agree = abs(at_start - expected) <= START_TOLERANCE
    if not agree:
        log.warning("the classifier's start scores validation AUROC %.4f, its baselines %.4f: "
                    "it did not start as its baselines", at_start, expected)  # fmt: skip
    return {"baselines": expected, "step_0": round(at_start, 5), "agree": agree}


def evaluation_interval(eval_every: int, train_windows: int, training: TrainingConfig) -> int:
    """Steps between validation checks: `eval_every`, or one pass over the training
    windows when that is shorter (at least one step)."""
    per_pass = -(-train_windows // training.effective_batch_size)
    return max(1, min(eval_every, per_pass))


def probed_questions(spec: FinetuneSpec, meta: dict) -> list[str]:
    """The questions the run's probes will ask (finetuning.probes): the strands are not
    among them where they are chosen with the start."""
    if strands_chosen_with_start(spec, meta):
        spec = replace(spec, rc_augment=True, rc_average=True)
    return open_questions(spec, meta)


def strands_chosen_with_start(spec: FinetuneSpec, meta: dict) -> bool:
    """Whether a run's strands are chosen on validation with its start from base readers
    (base_start.choose_strands): a classify run with base readers and a validation split,
    whose options settle neither the strands nor how the base readers read them."""
    return (meta["task"] == "classify" and bool(meta["counts"].get("valid"))
            and bool(spec.base_cnn_channels or spec.base_kmers)
            and spec.rc_augment is None and spec.rc_average is None
            and spec.base_strands is None)  # fmt: skip


def settle_strands(spec: FinetuneSpec, meta: dict, choice: dict,
                   start_choice: dict | None = None) -> tuple[FinetuneSpec, dict]:  # fmt: skip
    """`spec` with rc_augment and rc_average settled, and how: with the start from base
    readers (`start_choice`, from base_start.choose_strands), by probes on validation
    (`choice`, from finetuning.probes), by the user's options (the one not given follows
    the task kind), or by the task kind (`strand_symmetric`: both for classify when
    nothing was asked)."""
    if start_choice:
        settings = start_choice["settings"]
        strands = {"chosen_by": "the start's validation AUROC",
                   "chosen": start_choice["chosen"],
                   "start_validation_auroc": start_choice["validation_auroc"],
                   **settings}  # fmt: skip
        return replace(spec, **settings), strands
    if "strands" in choice:
        chosen_by = "validation"
        augment = average = choice["strands"]["settings"]["rc_augment"]
    elif spec.rc_augment is not None or spec.rc_average is not None:
        chosen_by = "options"
        augment = strand_symmetric(meta) if spec.rc_augment is None else spec.rc_augment
        average = evaluation_strands(spec, meta)
    else:
        chosen_by = "task" if meta["task"] != "classify" else "default (no probe)"
        augment = average = strand_symmetric(meta)
    resolved = replace(spec, rc_augment=augment, rc_average=average)
    strands = {"chosen_by": chosen_by, "rc_augment": augment, "rc_average": average}
    if spec.base_cnn_channels or spec.base_kmers:
        resolved = replace(resolved, base_strands=base_strands(resolved, meta))
        strands["base_strands"] = resolved.base_strands
    return resolved, strands


def check_window(spec: FinetuneSpec, meta: dict, data_path) -> None:
    """A context wider than the data set's windows cannot be cut from them, and a profile
    head needs a data set of profile labels whose bins are no wider than the context read
    (it learns the central ones that fit: `profile_bins_read`)."""
    if spec.window_bp is not None and spec.window_bp > meta["window_bp"]:
        raise ConfigError(
            f"--window-bp {spec.window_bp} is wider than the windows of {data_path} "
            f"({meta['window_bp']} bp); rebuild the data set with that context or give at most "
            f"{meta['window_bp']}"
        )
    if spec.pooling != "profile":
        return
    if not meta["profile_bins"]:
        raise ConfigError(f"--pooling profile needs profile labels, which {data_path} has "
                          "not; rebuild it with `genobird dataset chromatin --profile-bins "
                          "K`")  # fmt: skip
    read = spec.window_bp or meta["window_bp"]
    if meta["profile_bin_bp"] > read:
        raise ConfigError(f"--pooling profile: the data set's profile bins are "
                          f"{meta['profile_bin_bp']} bp, wider than the {read} bp read; give "
                          f"--window-bp {meta['profile_bin_bp']} or more")  # fmt: skip


def profile_bins_read(meta: dict, window_bp: int) -> int:
    """How many of the data set's profile bins a head reading `window_bp` bases learns: the
    central ones that fit in the window (an odd number, so that the window's own bin stays
    the middle one). One data set of the widest context thus serves every context of an
    ablation: at 1 kb the central 5 bins of 200 bp, at 8 kb all 15 of a 15-bin set."""
    fitting = min(meta["profile_bins"], window_bp // meta["profile_bin_bp"])
    return fitting if fitting % 2 else fitting - 1


def run_identity(spec: FinetuneSpec, pretrained: Path | None, meta: dict) -> dict:
    """What a fine-tuning checkpoint must share with its resumption besides the training
    settings: the recipe, the starting weights (by digest: a pretrained model rebuilt in
    place is another start) and the data set's split sizes."""
    # segmentations only changes how the trained model is evaluated
    recipe = {k: v for k, v in asdict(spec).items() if k not in ("training", "segmentations")}
    weights = file_digest(pretrained / WEIGHTS_FILE) if pretrained else None
    return {"task": recipe, "pretrained_weights": weights, "examples": meta["counts"]}


def training_max_tokens(spec: FinetuneSpec, model) -> int:
    """The token limit of windows cut with BPE-dropout (`token_limit`); batches are
    padded to their own longest anyway."""
    return token_limit(spec.max_tokens, model.config.max_position, bool(spec.bpe_dropout))


def evaluation_views(data_path, split, tokenizer, spec, model, rc_average: bool) -> list:
    """The datasets whose probabilities evaluation averages: the split on each strand
    asked for, in the tokenizer's segmentation or in each of `spec.segmentations` sampled
    cuts (`window_views`, the same inputs a saved predictor scores)."""
    strands = (False, True) if rc_average else (False,)
    windows = partial(WindowDataset, data_path, split, tokenizer, window_bp=spec.window_bp)
    if not spec.segmentations:
        return [windows(spec.max_tokens, reverse_complement=r) for r in strands]
    return [windows(training_max_tokens(spec, model), reverse_complement=r,
                    bpe_dropout=spec.bpe_dropout, cut=cut)
            for r in strands for cut in range(spec.segmentations)]  # fmt: skip


def split_probabilities(model, data_path, split, tokenizer, spec, device, rc_average: bool):
    """(labels, probabilities) of one split, averaged over its views (`evaluation_views`)."""
    views = evaluation_views(data_path, split, tokenizer, spec, model, rc_average)
    predictions = [predict_probabilities(model, view, device) for view in views]
    return predictions[0][0], np.mean([p for _, p in predictions], axis=0)


def training_summary(state) -> dict:
    """Steps taken, the step whose weights were kept, and the training speed in real
    (non-pad) tokens per second, the median over the logged intervals."""
    speeds = [row["tokens_per_second"] for row in state.history if "tokens_per_second" in row]
    return {
        "steps": state.step,
        "best_step": state.best_step if state.best_score is not None else state.step,
        # the kept weights' validation figure (mean AUROC over features): what a choice
        # between runs (e.g. contexts) may read without looking at the test split
        "best_validation_auroc": state.best_score,
        "stopped_early": state.stopped_early,
        "stopped_at_time": state.stopped_at_time,
        # what ended the run: its budget, validation's early stop, or a user's time cap
        "stopped_by": (
            "max_minutes"
            if state.stopped_at_time
            else "patience"
            if state.stopped_early
            else "max_steps"
        ),
        "real_tokens_per_second": float(np.median(speeds)) if speeds else None,
    }


def base_strands(spec: FinetuneSpec, meta: dict) -> str:
    """How the base readers read strands: as given, else as they are read (`both` where
    the run reads both strands: each base reader then reads both in each input, fitted so)."""
    if spec.base_strands is not None:
        return spec.base_strands
    return "both" if evaluation_strands(spec, meta) else "one"


def evaluation_strands(spec: FinetuneSpec, meta: dict) -> bool:
    """True when evaluation (and scoring with the saved model) averages both strands."""
    return strand_symmetric(meta) if spec.rc_average is None else spec.rc_average


def evaluate(model, data_path, tokenizer, spec, meta, device, output: Path,
             training: dict | None = None, strands: dict | None = None,
             choice: dict | None = None) -> dict:  # fmt: skip
    rc_average = evaluation_strands(spec, meta)
    test = split_probabilities(model, data_path, "test", tokenizer, spec, device, rc_average)
    valid = None
    if meta["counts"]["valid"] and not is_multilabel(meta):
        valid = split_probabilities(model, data_path, "valid", tokenizer, spec, device, rc_average)
    extra = {
        "window_bp": spec.window_bp or meta["window_bp"],
        "max_tokens": spec.max_tokens,
        "rc_average": rc_average,
        "rc_augment": strand_symmetric(meta) if spec.rc_augment is None else spec.rc_augment,
        "strands": strands or {},
        "recipe_choice": choice or {},
        "learning_rate": spec.training.get("learning_rate"),
        "pooling": spec.pooling,
        "base_cnn_channels": spec.base_cnn_channels,
        "base_cnn_architecture": spec.base_cnn_architecture,
        "base_kmers": spec.base_kmers,
        "head_lr_scale": task_head_lr_scale(spec, meta),
        "layer_decay": spec.layer_decay,
        "ema_decay": spec.training.get("ema_decay", 0.0),
        "bpe_dropout": spec.bpe_dropout,
        "segmentations": spec.segmentations,
        "training": training or {},
    }
    return write_evaluation(output / "report", meta, test, valid, extra, data_path)


def save_model(model, tokenizer, meta, spec: FinetuneSpec, directory: Path, report: dict) -> None:
    task = {
        "task": meta["task"],
        "feature_names": meta["feature_names"],
        "categories": meta["categories"],
        "window_bp": spec.window_bp or meta["window_bp"],
        "max_tokens": spec.max_tokens,
        "rc_average": evaluation_strands(spec, meta),
        "segmentations": spec.segmentations,
        "bpe_dropout": spec.bpe_dropout,
    }
    save_pretrained(model, directory, extra={"task_info": task})
    tokenizer.save(directory)
    with atomic_write(directory / "evaluation.json") as handle:
        json.dump(report, handle, indent=2)
    # the recipe as run (what validation chose included), which `finetune --config` reads
    with atomic_write(directory / RECIPE_FILE) as handle:
        json.dump(tree(recipe_values(spec)), handle, indent=2)
