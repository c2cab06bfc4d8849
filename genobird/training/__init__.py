"""One trainer for pretraining and fine-tuning, checkpoints, and distributed helpers."""

from genobird.training.trainer import (
    EpochSampler,
    Trainer,
    TrainingConfig,
    TrainingError,
    TrainState,
    linear_schedule,
)

__all__ = [
    "EpochSampler",
    "TrainState",
    "Trainer",
    "TrainingConfig",
    "TrainingError",
    "linear_schedule",
]
