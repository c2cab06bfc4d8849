"""The fine-tuning recipe, declared once as a typed tree: `Recipe(data, head(base
readers), optim, evaluation, output)`, frozen dataclasses whose leaves are settings
(genobird.settings: type, default, per-task defaults, bounds, help). Each function of a
run reads the branch it needs. From walking the tree come `genobird finetune`'s options
(`add_options`), the checks and defaults of a run (`resolve`), the pipeline schema's
recipe section (`schema`; tests/test_recipe.py holds the schema file to it), the options
a pipeline section becomes (`finetune_options`) and the finetune.json saved beside every
fine-tuned model, which `--config` reads back (`tree`, `read_config`).
No torch here: Snakemake reads this module when it parses the workflow.

A new setting is one `setting(...)` field in its branch, plus its use (docs/finetune.md
shows how).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from genobird import settings as tree_of
from genobird.errors import ConfigError
from genobird.settings import Setting, branch, setting

TASKS = ("classify", "promoter", "chromatin")
# the groups of an older finetune.json, which --config still reads
OLD_GROUPS = ("model", "recipe")
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


# the strands a task kind's labels hold on, where a run leaves them open (augmentation in
# training, averaging in evaluation): chromatin features and classify labels (TF binding,
# ...) hold on both; promoter windows are oriented by their TSS strand, their reverse
# complement is not a promoter. A model trained on both strands is evaluated on both: on
# GUE TF 0 that lifted test MCC from 0.621 to 0.634 and AUROC from 0.885 to 0.902
# (docs/experiments)
BOTH_STRANDS_BY_TASK = {"classify": True, "promoter": False, "chromatin": True}


def fresh_model_shape() -> dict:
    """Without pretrained weights: the BigBirdConfig fields of the fresh model (the demo's
    tiny shape; max_position grows to max_tokens when needed)."""
    return dict(
        hidden_size=128, num_layers=2, num_heads=4, intermediate_size=512, max_position=1024
    )


@dataclass(frozen=True)
class DataRecipe:
    """How the data set's windows are read."""

    window_bp: int | None = setting(
        int,
        low=1,
        pipeline=False,
        metavar="BP",
        help="read each window as its central BP bases (default: whole): one data set "
        "fine-tuned at several contexts around the same bins",
    )
    max_tokens: int | None = setting(
        int,
        low=8,
        pipeline=False,
        help="longest input (default: what the data set's windows need); each batch is "
        "padded only to its own longest window",
    )
    rc_augment: bool | None = setting(
        bool,
        toggle=True,
        run_default=BOTH_STRANDS_BY_TASK,
        help="train on a random strand per window (default: chromatin yes, promoter no, "
        "classify chosen on validation: --probe-steps)",
    )
    bpe_dropout: float = setting(
        float,
        default=0.0,
        low=0,
        high=1,
        open_high=True,
        help="cut each training window into pieces with BPE-dropout, each merge skipped with "
        "this probability, e.g. 0.1 (0: the tokenizer's own pieces); validation checks read "
        "the tokenizer's own",
    )


@dataclass(frozen=True)
class BaseReaderRecipe:
    """The base readers beside the encoder (the baselines' own models), which the head
    starts from: a head transformers has no counterpart of. Named with `base_`."""

    cnn_channels: int = setting(
        int,
        default=0,
        defaults=by_task(128, 0),
        low=0,
        metavar="C",
        help="a CNN of C filters on the window's bases beside the encoder (genobird's CNN "
        "baseline's tower), trained alone first, then pooled and read by the head with the "
        "encoder's vector (0: none)",
    )
    cnn_architecture: str = setting(
        str,
        default="cnn",
        choices=CNN_ARCHITECTURES,
        help="the base CNN's architecture, a CNN baseline's: cnn (global pooling of three "
        "convolutions) or deepsea-cnn (DeepSEA's, whose fully connected layer reads where "
        "in the window each motif lies)",
    )
    cnn_epochs: int = setting(
        int,
        default=CNN_MAX_EPOCHS,
        low=1,
        help="the base CNN's budget in epochs when trained alone first, as the CNN "
        "baseline's --max-epochs (it stops sooner after 3 epochs without a better "
        "validation AUROC): a baseline run of the same budget (--base-start-from) is read "
        "instead of trained again",
    )
    cnn_minutes: float | None = setting(
        float,
        low=0,
        open_low=True,
        help="a wall-clock cap on the base CNN's training, as the CNN baseline's "
        "--max-minutes (default: none; with one, the start depends on the machine's "
        "speed)",
    )
    kmers: int = setting(
        int,
        default=0,
        defaults=by_task(6, 0),
        low=0,
        high=8,
        metavar="K",
        help="the counts of the window's 3- to K-mers beside the encoder (the k-mer LR "
        "baseline's features), its LR fitted first; the head starts from it, blended with "
        "the base CNN on validation (0: none; else 3 to 8)",
    )
    strands: str | None = setting(
        str,
        choices=BASE_STRANDS,
        help="how the base readers read a window: both (its reverse complement too, "
        "averaged: the CNN trained on both strands, the k-mer LR fitted on both strands' "
        "counts) or one (the strand the encoder reads, the k-mer LR fitted on the strand "
        "given) (default: both where the run reads both strands, else one)",
    )
    blend: str = setting(
        str,
        default="one",
        choices=BASE_BLENDS,
        help="with a base CNN and base k-mers, how validation chooses their blend in the "
        "start: one CNN weight for every output, or one per feature category (the data "
        "set's: a features table's category column, DeepSEA's DNase / TF / histone), each "
        "category's weight chosen on its own features",
    )
    kmer_pull: float = setting(
        float,
        default=0.0,
        low=0,
        needs="base_kmers",
        help="hold the head's weights on the base k-mers near the k-mer LR they start from: "
        "an L2 penalty on their distance from that start, this many times the LR's own "
        "penalty (1/C per output over its training windows), e.g. 1 (0: none, they refit "
        "freely at the head's rate)",
    )

    @property
    def any(self) -> bool:
        """Whether the run has a base reader (and so starts from the baselines)."""
        return bool(self.cnn_channels or self.kmers)


@dataclass(frozen=True)
class HeadRecipe:
    """What reads the encoder's states: the pooling, its dropout and the base readers."""

    pooling: str = setting(
        str,
        default="cls",
        defaults=by_task("mean", "cls"),
        choices=POOLINGS,
        help="[CLS] pooler (the paper's), the mean of the token states, HuggingFace "
        "BigBird's head on [CLS] (exportable with `convert to-hf`), the mean of the states "
        "over the window's central --centre-bp (a chromatin bin), or one such mean for each "
        "bin of a data set built with --profile-bins (the central ones that fit in the "
        "window), every bin learnt from one pass (the window's own is scored); classify: "
        "mean or cls, chosen on validation",
    )
    centre_bp: int = setting(
        int, default=200, low=1, help="with --pooling centre: the bases pooled, centred"
    )
    dropout: float | None = setting(
        float,
        defaults=by_task(0.3, None),
        low=0,
        high=1,
        open_high=True,
        help="dropout on hidden states while fine-tuning (default: 0.3 for classify, else "
        "the model's own)",
    )
    base: BaseReaderRecipe = branch(BaseReaderRecipe, "base_")


@dataclass(frozen=True)
class OptimRecipe:
    """How the weights are trained: steps, batches, rates, the loss's weight and the seed."""

    max_steps: int = setting(
        int,
        default=300,
        defaults=by_task(3000, 300),
        low=1,
        trainer=True,
        required=True,
        help="optimiser steps of the run, at most, and of each recipe probe (classify: "
        "stopped by validation); the base CNN trains first on its own budget "
        "(--base-cnn-epochs); the plan, with an estimate of the run's minutes, is logged at "
        "the start",
    )
    batch_size: int = setting(
        int,
        default=8,
        defaults=by_task(32, 8),
        low=1,
        trainer=True,
        required=True,
        help="windows per step (a default batch is at most the training windows there are)",
    )
    effective_batch_size: int | None = setting(
        int,
        low=1,
        trainer=True,
        pipeline=False,
        help="windows per optimiser step, by accumulation (default: --batch-size)",
    )
    learning_rate: float = setting(
        float,
        default=3e-4,
        defaults=by_task(3e-4, 3e-4),
        low=0,
        high=1,
        open_low=True,
        trainer=True,
        required=True,
        help="the encoder's peak learning rate (classify: 3e-4 or 1e-4, chosen on validation)",
    )
    warmup_steps: int = setting(
        int, default=20, low=0, trainer=True, pipeline=False, help="steps of linear warm-up"
    )
    ema_decay: float = setting(
        float,
        default=0.0,
        low=0,
        high=1,
        open_high=True,
        trainer=True,
        pipeline=False,
        help="evaluate, select and keep an exponential moving average of the weights with "
        "this decay per step, e.g. 0.999 (0: the weights as trained)",
    )
    layer_decay: float = setting(
        float,
        default=1.0,
        low=0,
        high=1,
        open_low=True,
        help="layer-wise learning-rate decay: each encoder layer learns this times as fast "
        "as the one above it, the embeddings slowest (1: one rate)",
    )
    head_lr_scale: float | None = setting(
        float,
        run_default={"classify": 1.0, "promoter": 1.0, "chromatin": 10.0},
        low=0,
        open_low=True,
        help="the fresh head's learning rate as a multiple of --learning-rate (default: 10 "
        "for chromatin, whose 100+ sparse outputs otherwise learn for hundreds of steps "
        "before the encoder's features count; 1 otherwise)",
    )
    pos_weight: float | None = setting(
        float,
        run_default={"classify": 1.0, "promoter": 1.0, "chromatin": 8.0},
        low=0,
        open_low=True,
        help="weight of a positive in the loss (default: 8 for chromatin, the paper's; 1 "
        "otherwise)",
    )
    seed: int = setting(
        int,
        default=0,
        low=0,
        pipeline=False,
        help="the seed of the head's initialisation, the data order and dropout",
    )


@dataclass(frozen=True)
class EvaluationRecipe:
    """How validation selects and stops, what it chooses, and how the model is scored."""

    eval_every: int = setting(
        int,
        default=0,
        defaults=by_task(500, 0),
        low=0,
        help="steps between validation AUROC checks, at most one pass over the training "
        "windows; the best weights are kept (0: none)",
    )
    patience: int = setting(
        int,
        default=0,
        defaults=by_task(3, 0),
        low=0,
        help="stop after this many checks without improvement (0: never)",
    )
    probe_steps: int = setting(
        int,
        default=PROBE_STEPS,
        low=0,
        metavar="N",
        help="classify: choose what is not given of --learning-rate and --pooling (and the "
        "strands, in a run without base readers) on validation, each candidate fine-tuned "
        "at most N steps, e.g. 500 (0: none, the defaults kept; a run with base readers "
        "chooses its strands with its start)",
    )
    rc_average: bool | None = setting(
        bool,
        toggle=True,
        run_default=BOTH_STRANDS_BY_TASK,
        pipeline=False,
        help="evaluate on both strands, and score so with the saved model (default: "
        "chromatin yes, promoter no, classify as chosen on validation with "
        "--rc-augment)",
    )
    segmentations: int = setting(
        int,
        default=0,
        low=0,
        needs="bpe_dropout",
        help="average the test and validation predictions (and the saved model's scores) "
        "over this many BPE-dropout cuts of each window per strand, e.g. 16; needs "
        "--bpe-dropout (0: the tokenizer's own cut)",
    )


@dataclass(frozen=True)
class OutputRecipe:
    """What the run writes as it goes."""

    checkpoint_every: int = setting(
        int, default=1000, low=1, trainer=True, pipeline=False, help="steps between checkpoints"
    )


@dataclass(frozen=True)
class Recipe(tree_of.Tree):
    """A fine-tuning run's recipe: a branch per concern, each setting a typed leaf
    (checked when the recipe is made). Beside the settings: the questions a classify run
    answers on validation (finetuning.probes), a fresh model's shape and whether the run
    draws a progress bar (not -q)."""

    data: DataRecipe = branch(DataRecipe)
    head: HeadRecipe = branch(HeadRecipe)
    optim: OptimRecipe = branch(OptimRecipe)
    evaluation: EvaluationRecipe = branch(EvaluationRecipe)
    output: OutputRecipe = branch(OutputRecipe)
    choose_on_validation: tuple = ()
    fresh_shape: dict = field(default_factory=fresh_model_shape)
    progress: bool = True

    def __post_init__(self):
        super().__post_init__()
        if unknown := set(self.choose_on_validation) - set(QUESTIONS):
            raise ConfigError(
                f"choose_on_validation: no question {sorted(unknown)}; "
                f"asked can be {', '.join(QUESTIONS)}"
            )
        if self.head.base.kmers:
            from genobird.model.base_readers import base_kmer_lengths

            base_kmer_lengths(self.head.base.kmers)  # refuses a length outside 3-8


SETTINGS: tuple[Setting, ...] = tree_of.settings_of(Recipe)
GROUPS = tuple(dict.fromkeys(s.group for s in SETTINGS))


BY_NAME = {setting.name: setting for setting in SETTINGS}
REQUIRED_RECIPE = tuple(s.name for s in SETTINGS if s.required)
# the optional settings a pipeline section gives as options (rc_augment aside: it sets
# both strands, in training and in scoring), in the order the pipelines' rules have always
# written them: Snakemake reruns a rule whose options change, order included
RECIPE_OPTIONS = (
    "eval_every",
    "patience",
    "pooling",
    "centre_bp",
    "base_cnn_channels",
    "base_cnn_architecture",
    "base_cnn_epochs",
    "base_cnn_minutes",
    "base_kmers",
    "base_strands",
    "base_blend",
    "base_kmer_pull",
    "dropout",
    "layer_decay",
    "head_lr_scale",
    "bpe_dropout",
    "segmentations",
    "pos_weight",
    "probe_steps",
)
TASK_DEFAULTS = {
    task: {s.name: s.default_for(task) for s in SETTINGS if s.defaults} for task in TASKS
}


# --------------------------------------------------------------------------- a run's values
def resolve(
    given: dict,
    task: str,
    train_windows: int | None = None,
    settings: tuple[Setting, ...] = SETTINGS,
) -> dict:
    """Every setting's value for a run of `task`: the given ones (checked), the rest at
    their task kind's default. The base readers have no transformers counterpart, so a
    head for export (pooling hf) gets none unless one is given (which is then refused
    with the reason). A default batch is never more than the training windows."""
    values = tree_of.resolve(given, settings, task)
    if values.get("pooling") == "hf":
        for name in BASE_READERS:
            if given.get(name) is None and name in values:
                values[name] = 0
    if given.get("batch_size") is None and train_windows is not None and values["batch_size"]:
        values["batch_size"] = max(1, min(values["batch_size"], train_windows))
    return values


def tree(values: dict, settings: tuple[Setting, ...] = SETTINGS) -> dict:
    """A run's values as the recipe tree holds them ({"data": {...}, "head": {...,
    "base": {...}}, ...}): finetune.json's shape, which --config reads back."""
    return tree_of.nested(values, settings)


def read_config(path: str | Path, settings: tuple[Setting, ...] = SETTINGS) -> dict:
    """The settings of a recipe file (YAML or JSON; finetune.json is one), by name: nested
    as `tree` writes them, flat, or grouped as an older finetune.json grouped them."""
    return tree_of.read_config(path, settings, containers=(*GROUPS, *OLD_GROUPS))


# --------------------------------------------------------------------------- command line
def add_options(groups: dict, settings: tuple[Setting, ...] = SETTINGS) -> None:
    """Each setting as an option of its branch's argparse group (`GROUPS`)."""
    tree_of.add_options(groups, settings, TASKS)
