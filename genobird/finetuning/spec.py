"""What a resolved recipe (finetuning.resolve) means for the run's parts: the Trainer's
settings, the profile bins a head learns, the token limit of cut windows and the
interval of validation checks."""

from __future__ import annotations

from genobird.finetuning.recipe import DataRecipe, Recipe
from genobird.inputs import token_limit
from genobird.training import TrainingConfig


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
