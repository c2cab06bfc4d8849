"""What a recipe (finetuning.recipe.Recipe) means for a data set of each task kind: its
strands, positive weight, head rate, window and profile bins, evaluation interval, the
Trainer's settings, and the questions its probes ask."""

from __future__ import annotations

from genobird.errors import ConfigError
from genobird.finetuning.probes import open_questions
from genobird.finetuning.recipe import (
    BaseReaderRecipe,
    DataRecipe,
    EvaluationRecipe,
    OptimRecipe,
    Recipe,
)
from genobird.inputs import token_limit
from genobird.training import TrainingConfig


def training_config(recipe: Recipe) -> TrainingConfig:
    """The Trainer's settings of a recipe: its optimiser branch, its checkpoints, a log
    row every 20 steps; validation checks are the run's to add (`evaluation_interval`)."""
    optim = recipe.optim
    return TrainingConfig(
        seed=optim.seed,
        max_steps=optim.max_steps,
        batch_size=optim.batch_size,
        effective_batch_size=optim.effective_batch_size or optim.batch_size,
        learning_rate=optim.learning_rate,
        warmup_steps=optim.warmup_steps,
        ema_decay=optim.ema_decay,
        checkpoint_every=recipe.output.checkpoint_every,
        log_every=20,
        eval_every=0,
        progress=recipe.progress,
    )


def strand_symmetric(task: str) -> bool:
    """Whether a data set's labels hold on both strands, the default for reverse-complement
    augmentation and averaging: chromatin features and classify labels (TF binding, ...)
    do; promoter windows are oriented by their TSS strand, their reverse complement is not
    a promoter. A model trained on both strands is evaluated on both: on GUE TF 0 that
    lifted test MCC from 0.621 to 0.634 and AUROC from 0.885 to 0.902 (docs/experiments)."""
    return task != "promoter"


def task_pos_weight(optim: OptimRecipe, task: str) -> float:
    """The weight of a positive in the loss: as given, else 8 for chromatin (the paper's)."""
    if optim.pos_weight is not None:
        return optim.pos_weight
    return 8.0 if task == "chromatin" else 1.0


def task_head_lr_scale(optim: OptimRecipe, task: str) -> float:
    """The fresh head's learning rate over the encoder's: as given, else 10 for chromatin."""
    if optim.head_lr_scale is not None:
        return optim.head_lr_scale
    return 10.0 if task == "chromatin" else 1.0


def evaluation_strands(evaluation: EvaluationRecipe, task: str) -> bool:
    """True when evaluation (and scoring with the saved model) averages both strands."""
    given = evaluation.rc_average
    return strand_symmetric(task) if given is None else given


def training_strands(data: DataRecipe, task: str) -> bool:
    """True when training reads a random strand of each window (reverse-complement
    augmentation)."""
    given = data.rc_augment
    return strand_symmetric(task) if given is None else given


def base_strands(base: BaseReaderRecipe, rc_average: bool) -> str:
    """How the base readers read strands: as given, else as the run reads them (`both`
    where it averages both strands, `rc_average`: each base reader then reads both in each
    input, fitted so)."""
    if base.strands is not None:
        return base.strands
    return "both" if rc_average else "one"


def strands_chosen_with_start(spec: Recipe, meta: dict) -> bool:
    """Whether a run's strands are chosen on validation with its start from base readers
    (base_start.choose_strands): a classify run with base readers and a validation split,
    whose options settle neither the strands nor how the base readers read them."""
    return (
        meta["task"] == "classify"
        and bool(meta["counts"].get("valid"))
        and spec.head.base.any
        and spec.data.rc_augment is None
        and spec.evaluation.rc_average is None
        and spec.head.base.strands is None
    )


def probed_questions(spec: Recipe, meta: dict) -> list[str]:
    """The questions the run's probes will ask (finetuning.probes): the strands are not
    among them where they are chosen with the start."""
    if strands_chosen_with_start(spec, meta):
        spec = spec.with_values(rc_augment=True, rc_average=True)
    return open_questions(spec, meta)


def settle_strands(
    spec: Recipe, meta: dict, choice: dict, start_choice: dict | None = None
) -> tuple[Recipe, dict]:
    """`spec` with rc_augment and rc_average settled, and how: with the start from base
    readers (`start_choice`, from base_start.choose_strands), by probes on validation
    (`choice`, from finetuning.probes), by the user's options (the one not given follows
    the task kind), or by the task kind (`strand_symmetric`: both for classify when
    nothing was asked)."""
    if start_choice:
        settings = start_choice["settings"]
        strands = {
            "chosen_by": "the start's validation AUROC",
            "chosen": start_choice["chosen"],
            "start_validation_auroc": start_choice["validation_auroc"],
            **settings,
        }
        return spec.with_values(**settings), strands
    if "strands" in choice:
        chosen_by = "validation"
        augment = average = choice["strands"]["settings"]["rc_augment"]
    elif spec.data.rc_augment is not None or spec.evaluation.rc_average is not None:
        chosen_by = "options"
        augment = training_strands(spec.data, meta["task"])
        average = evaluation_strands(spec.evaluation, meta["task"])
    else:
        chosen_by = "task" if meta["task"] != "classify" else "default (no probe)"
        augment = average = strand_symmetric(meta["task"])
    resolved = spec.with_values(rc_augment=augment, rc_average=average)
    strands = {"chosen_by": chosen_by, "rc_augment": augment, "rc_average": average}
    if spec.head.base.any:
        resolved = resolved.with_values(base_strands=base_strands(resolved.head.base, average))
        strands["base_strands"] = resolved.head.base.strands
    return resolved, strands


def check_window(spec: Recipe, meta: dict, data_path) -> None:
    """A context wider than the data set's windows cannot be cut from them, and a profile
    head needs a data set of profile labels whose bins are no wider than the context read
    (it learns the central ones that fit: `profile_bins_read`)."""
    if spec.data.window_bp is not None and spec.data.window_bp > meta["window_bp"]:
        raise ConfigError(
            f"--window-bp {spec.data.window_bp} is wider than the windows of {data_path} "
            f"({meta['window_bp']} bp); rebuild the data set with that context or give at most "
            f"{meta['window_bp']}"
        )
    if spec.head.pooling != "profile":
        return
    if not meta["profile_bins"]:
        raise ConfigError(
            f"--pooling profile needs profile labels, which {data_path} has "
            "not; rebuild it with `genobird dataset chromatin --profile-bins "
            "K`"
        )
    read = spec.data.window_bp or meta["window_bp"]
    if meta["profile_bin_bp"] > read:
        raise ConfigError(
            f"--pooling profile: the data set's profile bins are "
            f"{meta['profile_bin_bp']} bp, wider than the {read} bp read; give "
            f"--window-bp {meta['profile_bin_bp']} or more"
        )


def profile_bins_read(meta: dict, window_bp: int) -> int:
    """How many of the data set's profile bins a head reading `window_bp` bases learns: the
    central ones that fit in the window (an odd number, so that the window's own bin stays
    the middle one). One data set of the widest context thus serves every context of an
    ablation: at 1 kb the central 5 bins of 200 bp, at 8 kb all 15 of a 15-bin set."""
    fitting = min(meta["profile_bins"], window_bp // meta["profile_bin_bp"])
    return fitting if fitting % 2 else fitting - 1


def training_max_tokens(data: DataRecipe, model) -> int:
    """The token limit of windows cut with BPE-dropout (`token_limit`); batches are
    padded to their own longest anyway."""
    return token_limit(data.max_tokens, model.config.max_position, bool(data.bpe_dropout))


def evaluation_interval(eval_every: int, train_windows: int, training: TrainingConfig) -> int:
    """Steps between validation checks: `eval_every`, or one pass over the training
    windows when that is shorter (at least one step)."""
    per_pass = -(-train_windows // training.effective_batch_size)
    return max(1, min(eval_every, per_pass))
