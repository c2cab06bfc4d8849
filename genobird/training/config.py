"""What a training run is: its settings (`TrainingConfig`), the state a checkpoint
resumes (`TrainState`), the settings a checkpoint must share with the run that resumes
it (`run_settings`), and a run's checkpoints discarded when its settings changed."""

from __future__ import annotations

import logging
import math
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from genobird.errors import ConfigError, GenobirdError
from genobird.training import distributed
from genobird.training.averaging import check_decay
from genobird.training.checkpoint import latest_checkpoint, read_training_state

log = logging.getLogger(__name__)


class TrainingError(GenobirdError, RuntimeError):
    """Training cannot go on (for example, the loss became NaN)."""


@dataclass
class TrainingConfig:
    # Paper Table 21 (DNA pretraining): Adam lr 1e-4, warm-up 10k steps, batch 256.
    learning_rate: float = 1e-4
    weight_decay: float = 0.01
    warmup_steps: int = 10_000
    max_steps: int = 1_000_000
    # Stop after the first step past this many minutes of training (0: no limit), saving
    # as at max_steps; the learning-rate schedule still runs over max_steps. Runs that
    # are compared at equal time (a longer input against a shorter one) use it.
    max_minutes: float = 0.0
    # Micro-batch per process; gradients accumulate up to effective_batch_size over
    # all processes (accumulation = effective / (batch_size * world size)).
    batch_size: int = 8
    effective_batch_size: int = 256
    max_grad_norm: float = 1.0
    # Learning-rate multipliers by parameter-name prefix (the longest matching prefix
    # wins), e.g. {"encoder.layers.": 0.1}: a slower encoder under a fresh decoder.
    learning_rate_scales: dict = field(default_factory=dict)
    # "auto": bf16 autocast on CUDA, fp32 on CPU; "bf16" or "no" to force.
    mixed_precision: str = "auto"
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3
    log_every: int = 50
    eval_every: int = 1000
    num_workers: int = 0
    seed: int = 0
    progress: bool = True
    # Model selection on the evaluation set: with `best_metric` (a key of eval_fn's result,
    # higher is better) the weights of the best evaluation are kept and restored at the
    # end; training stops after `patience` evaluations without improvement (0: never).
    best_metric: str | None = None
    patience: int = 0
    # Evaluate the starting weights too (before the first step of a fresh run), so that
    # a warm start that training never beats is what is kept.
    eval_at_start: bool = False
    # Exponential moving average of the weights (0: none): evaluation, model selection
    # and the end of training use the averaged weights (genobird.training.averaging).
    ema_decay: float = 0.0

    def __post_init__(self):
        check_decay(self.ema_decay)
        if not (self.max_minutes >= 0 and math.isfinite(self.max_minutes)):
            raise ConfigError(f"max_minutes must be 0 (no limit) or more, got {self.max_minutes}")

    def accumulation_steps(self, world_size: int) -> int:
        per_step = self.batch_size * world_size
        if self.effective_batch_size % per_step:
            raise ConfigError(
                f"effective_batch_size {self.effective_batch_size} is not a multiple of "
                f"batch_size x processes = {per_step}"
            )
        return self.effective_batch_size // per_step


# TrainingConfig fields a resumed run may change: how often it logs and checkpoints, how
# it loads data, how the batch is split over processes, the device's precision, the bar.
# Every other field, and what the caller adds, decides the run's result.
OPERATIONAL_SETTINGS = frozenset(
    {
        "checkpoint_every",
        "keep_checkpoints",
        "log_every",
        "num_workers",
        "progress",
        "batch_size",
        "mixed_precision",
    }
)


def run_settings(config: TrainingConfig, identity: dict | None = None) -> dict:
    """What a checkpoint must share with the run that resumes it."""
    training = {k: v for k, v in asdict(config).items() if k not in OPERATIONAL_SETTINGS}
    return {"training": training, **(identity or {})}


def saved_run(saved: dict) -> dict:
    """The run settings a checkpoint's training state records (checkpoints from before
    run settings were recorded hold the training config only)."""
    return saved.get("run") or {"training": saved.get("config", {})}


def discard_other_run(
    root: Path, config: TrainingConfig, identity: dict | None = None
) -> list[str]:
    """Delete the checkpoints under `root` when the latest was written by a run with other
    settings than (`config`, `identity`), so that this run starts afresh; returns the
    settings that changed (none: the checkpoints are this run's, kept to resume). What a
    pipeline needs when its config changed: the job reruns, and its folder still holds the
    former run's checkpoints, which a plain run refuses (`Trainer.resume`)."""
    folder = latest_checkpoint(root)
    if folder is None:
        return []
    changes = changed_settings(
        saved_run(read_training_state(folder)), run_settings(config, identity)
    )
    if changes and distributed.rank() == 0:
        log.warning(
            "%s was written by a run with other settings (%s): deleted; this run starts afresh",
            root,
            ", ".join(changes),
        )
        shutil.rmtree(root)
    distributed.barrier()
    return changes


def changed_settings(before: dict, now: dict, prefix: str = "") -> list[str]:
    """`name: old -> new` for each setting present in both that differs (a setting one
    side lacks is one added or dropped between versions, not a change of recipe)."""
    changes = []
    for key in before.keys() & now.keys():
        old, new = before[key], now[key]
        if isinstance(old, dict) and isinstance(new, dict):
            changes += changed_settings(old, new, f"{prefix}{key}.")
        elif old != new:
            changes.append(f"{prefix}{key}: {old!r} -> {new!r}")
    return sorted(changes)


@dataclass
class TrainState:
    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0  # micro-batches of this epoch already consumed
    history: list = field(default_factory=list)
    best_score: float | None = None  # of config.best_metric, at best_step
    best_step: int = 0
    stale_evaluations: int = 0  # evaluations since the best one
    stopped_early: bool = False  # a resumed run that had stopped early stays stopped
    stopped_at_time: bool = False  # max_minutes reached (a resumed run gets its minutes anew)
