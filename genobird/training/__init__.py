"""One trainer for pretraining and fine-tuning, checkpoints, and distributed helpers."""

from genobird.training.config import TrainingConfig, TrainingError, TrainState
from genobird.training.schedule import EpochSampler, linear_schedule
from genobird.training.trainer import Trainer

__all__ = [
    "EpochSampler",
    "TrainState",
    "Trainer",
    "TrainingConfig",
    "TrainingError",
    "linear_schedule",
]
