"""The BigBird model: config, encoder, heads, task models and model directories."""

from genobird.model.bigbird import (
    BigBirdEncoder,
    BigBirdForPretraining,
    EncoderOutput,
    PretrainingOutput,
    count_parameters,
    model_flops_per_token,
)
from genobird.model.classifier import BigBirdForSequenceClassification, ClassificationOutput
from genobird.model.config import BigBirdConfig
from genobird.model.io import from_pretrained, load_weights, save_pretrained

__all__ = [
    "BigBirdConfig",
    "BigBirdEncoder",
    "BigBirdForPretraining",
    "BigBirdForSequenceClassification",
    "ClassificationOutput",
    "EncoderOutput",
    "PretrainingOutput",
    "count_parameters",
    "from_pretrained",
    "load_weights",
    "model_flops_per_token",
    "save_pretrained",
]
