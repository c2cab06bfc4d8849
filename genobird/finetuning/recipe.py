"""The fine-tuning recipe, declared once: every setting a user picks, with its type, its
default (per task kind where they differ), its bounds, its group and its help. From this
one declaration come `genobird finetune`'s options (`add_options`), the checks and
defaults of a run (`resolve`), the fields of `FinetuneSpec`, the pipeline schema's
recipe section (`schema`; tests/test_recipe.py holds the schema file to it), the
options a pipeline section becomes (`finetune_options`) and the finetune.json saved
beside every fine-tuned model, which `--config` reads back (`tree`, `read_config`).
No torch here: Snakemake reads this module when it parses the workflow.

A new setting is one `Setting` in SETTINGS, plus its use (docs/finetune.md shows how).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genobird.errors import ConfigError

TASKS = ("classify", "promoter", "chromatin")
GROUPS = ("data", "model", "recipe", "evaluation", "output")
# the settings a classify run left without them chooses on validation (finetuning.probes),
# besides the strands (which the rc options settle)
QUESTIONS = ("learning_rate", "pooling")
# how a window becomes one vector for the head (BigBirdForSequenceClassification.POOLINGS,
# named here too so that building the command line imports no torch; a test holds them equal)
POOLINGS = ("cls", "mean", "hf", "centre", "profile")
# fine-tuning steps of each probe that answers a classify run's open questions: none by
# default. With the margin a change needs, the learning-rate and pooling probes changed
# nothing on nine ENCODE peak tasks (docs/experiments/2026-11-27-recipe-probes.md) and
# cost up to three fine-tuning runs; the strands are chosen with the start instead
PROBE_STEPS = 0
# the CNN baselines a base CNN can be (baselines.cnn.ARCHITECTURES; a test holds them equal)
CNN_ARCHITECTURES = ("cnn", "deepsea-cnn")
# the CNN baseline's epoch budget (baselines.cnn.CNNSpec.max_epochs and `genobird baseline
# cnn --max-epochs`; a test holds them equal): a base CNN trained as that baseline is
CNN_MAX_EPOCHS = 30
# how a start from a base CNN and base k-mers blends them (finetuning.base_start)
BASE_BLENDS = ("one", "by-category")
# the base readers: a head transformers has no counterpart of
BASE_READERS = ("base_cnn_channels", "base_kmers")
# how the base readers read strands (BigBirdForSequenceClassification.BASE_STRANDS; a test
# holds them equal)
BASE_STRANDS = ("one", "both")


def by_task(classify, other) -> dict:
    """A default for classify runs, and another for promoter and chromatin ones."""
    return {"classify": classify, "promoter": other, "chromatin": other}


@dataclass(frozen=True)
class Setting:
    """One recipe setting. `default` is what a run that does not give it gets (None: the
    task kind decides at run time, or the model's own), `defaults` overrides it per task
    kind. Bounds are inclusive unless `open_low` / `open_high`. `training`: a Trainer
    setting (FinetuneSpec.training), else a FinetuneSpec field. `pipeline`: a pipeline's
    fine-tuning section takes it (`required`: every section gives it)."""

    name: str
    type: type
    group: str
    help: str
    default: Any = None
    defaults: Mapping = field(default_factory=dict)
    choices: tuple = ()
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    needs: str | None = None  # a setting that must be given (non-zero) with this one
    training: bool = False
    pipeline: bool = True
    required: bool = False
    toggle: bool = False  # --name / --no-name
    metavar: str | None = None

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    def default_for(self, task: str):
        return self.defaults.get(task, self.default)

    def check(self, value) -> None:
        """A one-line error naming the setting where `value` is of the wrong type or out
        of bounds (None, not given, passes)."""
        if value is None:
            return
        kind = {bool: "true or false", int: "a whole number", float: "a number",
                str: "text"}[self.type]  # fmt: skip
        numeric = self.type in (int, float) and not isinstance(value, bool)
        if not (isinstance(value, self.type) or (self.type is float and numeric
                                                 and isinstance(value, int))):  # fmt: skip
            raise ConfigError(f"{self.name} must be {kind}, got {value!r}")
        if self.choices and value not in self.choices:
            raise ConfigError(
                f"{self.name} must be one of {', '.join(self.choices)}, got {value!r}"
            )
        if self.type in (int, float):
            if not math.isfinite(value):
                raise ConfigError(f"{self.name} must be finite, got {value!r}")
            below = self.low is not None and (
                value <= self.low if self.open_low else value < self.low
            )
            above = self.high is not None and (value >= self.high if self.open_high
                                               else value > self.high)  # fmt: skip
            if below or above:
                raise ConfigError(f"{self.name} must be in {self.bounds()}, got {value!r}")

    def bounds(self) -> str:
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        return f"{'(' if self.open_low or self.low is None else '['}{low}, {high}" + (
            ")" if self.open_high or self.high is None else "]")  # fmt: skip

    def default_text(self) -> str:
        """How --help says the default: one value, per task kind, or the run's choice."""
        if self.defaults:
            values = {task: self.default_for(task) for task in TASKS}
            if len({json.dumps(v) for v in values.values()}) == 1:
                return f"default {values['classify']}"
            return "default: " + ", ".join(f"{task} {value}" for task, value in values.items())
        return f"default {self.default}" if self.default is not None else ""


SETTINGS: tuple[Setting, ...] = (
    # In the order a pipeline section's options are written (finetune_options): the rules'
    # commands, which Snakemake compares to decide what to rerun, stay as they were; --help
    # and finetune.json group the settings by `group` whatever their order here.
    Setting("window_bp", int, "data", low=1, pipeline=False, metavar="BP",
            help="read each window as its central BP bases (default: whole): one data "
            "set fine-tuned at several contexts around the same bins"),
    Setting("max_tokens", int, "data", low=8, pipeline=False,
            help="longest input (default: what the data set's windows need); each batch is "
            "padded only to its own longest window"),
    Setting("rc_augment", bool, "data", toggle=True,
            help="train on a random strand per window (default: chromatin yes, promoter no, "
            "classify chosen on validation: --probe-steps)"),
    Setting("eval_every", int, "evaluation", default=0, defaults=by_task(500, 0), low=0,
            help="steps between validation AUROC checks, at most one pass over the training "
            "windows; the best weights are kept (0: none)"),
    Setting("patience", int, "evaluation", default=0, defaults=by_task(3, 0), low=0,
            help="stop after this many checks without improvement (0: never)"),
    Setting("pooling", str, "model", default="cls", defaults=by_task("mean", "cls"),
            choices=POOLINGS,
            help="[CLS] pooler (the paper's), the mean of the token states, HuggingFace "
            "BigBird's head on [CLS] (exportable with `convert to-hf`), the mean of the "
            "states over the window's central --centre-bp (a chromatin bin), or one such "
            "mean for each bin of a data set built with --profile-bins (the central ones "
            "that fit in the window), every bin learnt from one pass (the window's own is "
            "scored); classify: mean or cls, chosen on "
            "validation"),
    Setting("centre_bp", int, "model", default=200, low=1,
            help="with --pooling centre: the bases pooled, centred"),
    Setting("base_cnn_channels", int, "model", default=0, defaults=by_task(128, 0), low=0,
            metavar="C",
            help="a CNN of C filters on the window's bases beside the encoder (genobird's CNN "
            "baseline's tower), trained alone first, then pooled and read by the head with "
            "the encoder's vector (0: none)"),
    Setting("base_cnn_architecture", str, "model", default="cnn", choices=CNN_ARCHITECTURES,
            help="the base CNN's architecture, a CNN baseline's: cnn (global pooling of "
            "three convolutions) or deepsea-cnn (DeepSEA's, whose fully connected layer "
            "reads where in the window each motif lies)"),
    Setting("base_cnn_epochs", int, "model", default=CNN_MAX_EPOCHS, low=1,
            help="the base CNN's budget in epochs when trained alone first, as the CNN "
            "baseline's --max-epochs (it stops sooner after 3 epochs without a better "
            "validation AUROC): a baseline run of the same budget (--base-start-from) is "
            "read instead of trained again"),
    Setting("base_cnn_minutes", float, "model", low=0, open_low=True,
            help="a wall-clock cap on the base CNN's training, as the CNN baseline's "
            "--max-minutes (default: none; with one, the start depends on the machine's "
            "speed)"),
    Setting("base_kmers", int, "model", default=0, defaults=by_task(6, 0), low=0, high=8,
            metavar="K",
            help="the counts of the window's 3- to K-mers beside the encoder (the k-mer LR "
            "baseline's features), its LR fitted first; the head starts from it, blended "
            "with the base CNN on validation (0: none; else 3 to 8)"),
    Setting("base_strands", str, "model", choices=BASE_STRANDS,
            help="how the base readers read a window: both (its reverse complement too, "
            "averaged: the CNN trained on both strands, the k-mer LR fitted on both strands' "
            "counts) or one (the strand the encoder reads, the k-mer LR fitted on the strand "
            "given) (default: both where the run reads both strands, else one)"),
    Setting("base_blend", str, "recipe", default="one", choices=BASE_BLENDS,
            help="with a base CNN and base k-mers, how validation chooses their blend in "
            "the start: one CNN weight for every output, or one per feature category (the "
            "data set's: a features table's category column, DeepSEA's DNase / TF / "
            "histone), each category's weight chosen on its own features"),
    Setting("base_kmer_pull", float, "recipe", default=0.0, low=0, needs="base_kmers",
            help="hold the head's weights on the base k-mers near the k-mer LR they start "
            "from: an L2 penalty on their distance from that start, this many times the LR's "
            "own penalty (1/C per output over its training windows), e.g. 1 (0: none, they "
            "refit freely at the head's rate)"),
    Setting("dropout", float, "model", defaults=by_task(0.3, None), low=0, high=1,
            open_high=True,
            help="dropout on hidden states while fine-tuning (default: 0.3 for classify, "
            "else the model's own)"),
    Setting("layer_decay", float, "recipe", default=1.0, low=0, high=1, open_low=True,
            help="layer-wise learning-rate decay: each encoder layer learns this times as "
            "fast as the one above it, the embeddings slowest (1: one rate)"),
    Setting("head_lr_scale", float, "recipe", low=0, open_low=True,
            help="the fresh head's learning rate as a multiple of --learning-rate (default: "
            "10 for chromatin, whose 100+ sparse outputs otherwise learn for hundreds of "
            "steps before the encoder's features count; 1 otherwise)"),
    Setting("bpe_dropout", float, "data", default=0.0, low=0, high=1, open_high=True,
            help="cut each training window into pieces with BPE-dropout, each merge skipped "
            "with this probability, e.g. 0.1 (0: the tokenizer's own pieces); validation "
            "checks read the tokenizer's own"),
    Setting("segmentations", int, "evaluation", default=0, low=0, needs="bpe_dropout",
            help="average the test and validation predictions (and the saved model's scores) "
            "over this many BPE-dropout cuts of each window per strand, e.g. 16; needs "
            "--bpe-dropout (0: the tokenizer's own cut)"),
    Setting("pos_weight", float, "recipe", low=0, open_low=True,
            help="weight of a positive in the loss (default: 8 for chromatin, the paper's; "
            "1 otherwise)"),
    Setting("probe_steps", int, "data", default=PROBE_STEPS, low=0, metavar="N",
            help="classify: choose what is not given of --learning-rate and --pooling (and "
            "the strands, in a run without base readers) on validation, each candidate "
            "fine-tuned at most N steps, e.g. 500 (0: none, the defaults kept; a run with "
            "base readers chooses its strands with its start)"),
    Setting("max_steps", int, "recipe", defaults=by_task(3000, 300), low=1, training=True,
            required=True,
            help="optimiser steps of the run, at most, and of each recipe probe (classify: "
            "stopped by validation); the base CNN trains first on its own budget "
            "(--base-cnn-epochs); the plan, with an estimate of the run's minutes, is logged "
            "at the start"),
    Setting("batch_size", int, "recipe", defaults=by_task(32, 8), low=1, training=True,
            required=True, help="windows per step (a default batch is at most the training "
            "windows there are)"),
    Setting("effective_batch_size", int, "recipe", low=1, training=True, pipeline=False,
            help="windows per optimiser step, by accumulation (default: --batch-size)"),
    Setting("learning_rate", float, "recipe", defaults=by_task(3e-4, 3e-4), low=0, high=1,
            open_low=True, training=True, required=True,
            help="the encoder's peak learning rate (classify: 3e-4 or 1e-4, chosen on "
            "validation)"),
    Setting("warmup_steps", int, "recipe", default=20, low=0, training=True, pipeline=False,
            help="steps of linear warm-up"),
    Setting("ema_decay", float, "recipe", default=0.0, low=0, high=1, open_high=True,
            training=True, pipeline=False,
            help="evaluate, select and keep an exponential moving average of the weights "
            "with this decay per step, e.g. 0.999 (0: the weights as trained)"),
    Setting("seed", int, "recipe", default=0, low=0, pipeline=False,
            help="the seed of the head's initialisation, the data order and dropout"),
    Setting("rc_average", bool, "evaluation", toggle=True, pipeline=False,
            help="evaluate on both strands, and score so with the saved model (default: "
            "chromatin yes, promoter no, classify as chosen on validation with "
            "--rc-augment)"),
    Setting("checkpoint_every", int, "output", default=1000, low=1, training=True,
            pipeline=False, help="steps between checkpoints"),
)  # fmt: skip
BY_NAME = {setting.name: setting for setting in SETTINGS}
REQUIRED_RECIPE = tuple(s.name for s in SETTINGS if s.required)
# the optional settings a pipeline section gives as options (rc_augment aside: it sets
# both strands, in training and in scoring)
RECIPE_OPTIONS = tuple(s.name for s in SETTINGS
                       if s.pipeline and not s.required and not s.toggle)  # fmt: skip
TASK_DEFAULTS = {task: {s.name: s.default_for(task) for s in SETTINGS if s.defaults}
                 for task in TASKS}  # fmt: skip


# --------------------------------------------------------------------------- a run's values
def resolve(given: dict, task: str, train_windows: int | None = None,
            settings: tuple[Setting, ...] = SETTINGS) -> dict:  # fmt: skip
    """Every setting's value for a run of `task`: the given ones (checked), the rest at
    their task kind's default. The base readers have no transformers counterpart, so a
    head for export (pooling hf) gets none unless one is given (which is then refused
    with the reason). A default batch is never more than the training windows."""
    known = {s.name: s for s in settings}
    if unknown := sorted(set(given) - set(known)):
        raise ConfigError(f"no recipe setting {unknown[0]!r}; the settings are: "
                          f"{', '.join(known)}")  # fmt: skip
    values = {}
    for name, setting in known.items():
        if given.get(name) is not None:
            setting.check(given[name])
            values[name] = given[name]
        else:
            values[name] = setting.default_for(task)
    if values.get("pooling") == "hf":
        for name in BASE_READERS:
            if given.get(name) is None and name in values:
                values[name] = 0
    if given.get("batch_size") is None and train_windows is not None and values["batch_size"]:
        values["batch_size"] = max(1, min(values["batch_size"], train_windows))
    check_needs(values, settings)
    return values


def check_needs(values: dict, settings: tuple[Setting, ...] = SETTINGS) -> None:
    """A setting given (non-zero) without the one it needs is a one-line error."""
    known = {s.name: s for s in settings}
    for name, setting in known.items():
        if setting.needs and values.get(name) and not values.get(setting.needs):
            raise ConfigError(f"{name} needs {setting.needs}: give "
                              f"{known[setting.needs].option} too")  # fmt: skip


def tree(values: dict, settings: tuple[Setting, ...] = SETTINGS) -> dict:
    """A run's values grouped as the options are (data, model, recipe, evaluation,
    output): finetune.json's shape, which --config reads back."""
    grouped = {group: {} for group in GROUPS}
    for setting in settings:
        if setting.name in values:
            grouped[setting.group][setting.name] = values[setting.name]
    return {group: items for group, items in grouped.items() if items}


def read_config(path: str | Path, settings: tuple[Setting, ...] = SETTINGS) -> dict:
    """The settings of a recipe file (YAML or JSON; finetune.json is one): grouped as
    `tree` writes them, or flat. Each is checked; an unknown name is a one-line error."""
    import yaml

    path = Path(path)
    try:
        content = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ConfigError(f"{path}: recipe file not found") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not YAML or JSON ({str(error).splitlines()[0]})") from None
    if not isinstance(content, dict):
        raise ConfigError(f"{path}: a recipe file maps setting names to values")
    flat = {}
    for key, value in content.items():
        if key in GROUPS and isinstance(value, dict):
            flat.update(value)
        else:
            flat[key] = value
    known = {s.name: s for s in settings}
    for name, value in flat.items():
        if name not in known:
            raise ConfigError(f"{path}: no recipe setting {name!r}; the settings are: "
                              f"{', '.join(known)}")  # fmt: skip
        if known[name].type is float and isinstance(value, int) and not isinstance(value, bool):
            flat[name] = float(value)
        known[name].check(flat[name])
    return flat


# --------------------------------------------------------------------------- command line
def add_options(groups: dict, settings: tuple[Setting, ...] = SETTINGS) -> None:
    """Each setting as an option of its group's argparse group. Every option's default is
    None (not given), so that a run tells the options given from its defaults."""
    import argparse

    for setting in settings:
        text, default = setting.help, setting.default_text()
        if default and not setting.toggle:
            text = f"{text} ({default})"
        kwargs = {"help": text.replace("%", "%%"), "default": None}
        if setting.toggle:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = setting.type
            if setting.choices:
                kwargs["choices"] = setting.choices
            if setting.metavar:
                kwargs["metavar"] = setting.metavar
        groups[setting.group].add_argument(setting.option, **kwargs)


def finetune_options(section: dict) -> str:
    """The optional fine-tuning settings of a pipeline config section, as `genobird
    finetune` options. rc_augment sets both strands in training and in scoring."""
    options = [f"--{key.replace('_', '-')} {section[key]}" for key in RECIPE_OPTIONS
               if key in section]  # fmt: skip
    if "rc_augment" in section:  # scored on the strands it was trained on
        strands = "" if section["rc_augment"] else "no-"
        options += [f"--{strands}rc-augment --{strands}rc-average"]
    return " ".join(options)


# --------------------------------------------------------------------------- pipeline schema
def schema(settings: tuple[Setting, ...] = SETTINGS) -> dict:
    """The pipeline schema's recipe section ($defs/recipe of workflows/schemas/
    config.schema.yaml) for the settings a pipeline section takes."""
    types = {bool: "boolean", int: "integer", float: "number", str: "string"}
    properties, needs = {}, {}
    for setting in settings:
        if not setting.pipeline:
            continue
        entry = {"enum": list(setting.choices)} if setting.choices else {
            "type": types[setting.type]}  # fmt: skip
        for bound, value, is_open in (("Minimum", setting.low, setting.open_low),
                                      ("Maximum", setting.high, setting.open_high)):  # fmt: skip
            if value is not None:
                key = ("exclusive" + bound) if is_open else bound.lower()
                entry[key] = value
        default = setting.default_text()
        entry["description"] = setting.help + (f" ({default})" if default else "")
        properties[setting.name] = entry
        if setting.needs:
            needs[setting.name] = [setting.needs]
    section = {"description": "the fine-tuning settings every fine-tuning section takes "
               "(genobird.finetuning.recipe; as genobird finetune options)",
               "type": "object"}  # fmt: skip
    if needs:
        section["dependentRequired"] = needs
    section["properties"] = properties
    return section


def schema_yaml(settings: tuple[Setting, ...] = SETTINGS) -> str:
    """`schema` as the lines of config.schema.yaml's `$defs: recipe:` block (one flow
    mapping per setting, as the file writes them)."""
    section = schema(settings)
    lines = ["  recipe:", f"    description: {section['description']}", "    type: object"]
    if "dependentRequired" in section:
        lines.append("    dependentRequired:")
        lines += [f"      {name}: {json.dumps(needs)}"
                  for name, needs in section["dependentRequired"].items()]  # fmt: skip
    lines.append("    properties:")
    lines += [f"      {name}: {json.dumps(entry)}" for name, entry in section["properties"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m genobird.finetuning.recipe: the schema's block
    print(schema_yaml(), end="")
