"""A task model from a pretrained encoder: its config (the pretrained model's, or a fresh
shape), the encoder's weights copied in under a seeded fresh head, and layer-wise
learning-rate scales. Shared by DNA fine-tuning (genobird.finetuning) and the NLP heads
(genobird.nlp)."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import safetensors.torch
import torch

from genobird.errors import CheckpointError, ConfigError
from genobird.model.config import BigBirdConfig
from genobird.model.io import read_model_description

log = logging.getLogger(__name__)

# Encoder tensors a pretrained model may lack: ETC's learned global tokens, when a task
# adds ETC attention to an ITC-pretrained encoder (they start fresh).
OPTIONAL_ENCODER_TENSORS = ("global_tokens.weight",)


def load_encoder(model, pretrained_dir: Path) -> None:
    """Copy every encoder tensor of a pretraining model directory into `model`."""
    state = safetensors.torch.load_file(str(pretrained_dir / "model.safetensors"))
    encoder = {k.removeprefix("encoder."): v for k, v in state.items() if k.startswith("encoder.")}
    expected = model.encoder.state_dict()
    for name in OPTIONAL_ENCODER_TENSORS:
        if name in expected and name not in encoder:
            encoder[name] = expected[name]
    missing = sorted(set(expected) - set(encoder))
    wrong = [k for k in expected if k in encoder and encoder[k].shape != expected[k].shape]
    if missing or wrong:
        raise CheckpointError(
            f"{pretrained_dir}: encoder does not fit (missing {missing[:3]}, shapes differ "
            f"for {wrong[:3]}); fine-tune with the config.json of that directory"
        )
    model.encoder.load_state_dict(encoder)


def task_config(
    pretrained: Path | None,
    fresh_shape: dict,
    max_tokens: int,
    vocab_size: int,
    pad_id: int = 0,
    description: dict | None = None,
) -> BigBirdConfig:
    """The encoder config of a fine-tuning run: the pretrained model's, or a fresh one of
    `fresh_shape` (max_position grown to max_tokens); checked against the tokenizer and
    the input length. A pretrained model with rotary positions has no position table, so
    its max_position grows to max_tokens too (it then reads inputs longer than it was
    pretrained on); one with a learned table cannot. `description`: the pretrained
    model's (model.io.read_model_description), where the caller has read it already."""
    if pretrained is not None:
        description = description or read_model_description(pretrained)
        config = BigBirdConfig.from_dict(description["config"])
        if config.position_encoding == "rotary" and max_tokens > config.max_position:
            log.info(
                "max_position %d -> %d: rotary positions read longer inputs than pretraining's",
                config.max_position,
                max_tokens,
            )
            config = replace(config, max_position=max_tokens)
    else:
        shape = {**fresh_shape}
        shape["max_position"] = max(shape.get("max_position", 0), max_tokens)
        config = BigBirdConfig(**{**shape, "vocab_size": vocab_size, "pad_token_id": pad_id})
    if config.vocab_size != vocab_size:
        raise ConfigError(f"tokenizer has {vocab_size} pieces, the model {config.vocab_size}")
    if max_tokens > config.max_position:
        raise ConfigError(
            f"max_tokens {max_tokens} exceeds the model's max_position {config.max_position} "
            "(its learned position table); give shorter windows (--window-bp) or --max-tokens "
            f"{config.max_position}, which keeps each window's central tokens"
        )
    return config


def build_task_model(
    model_class,
    config: BigBirdConfig,
    pretrained: Path | None,
    seed: int,
    pieces: list[str] | None = None,
    **head,
):
    """A task model with a seeded fresh head, its encoder from `pretrained` if given (else
    fresh, with the vocabulary's `pieces` for composed token embeddings)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_class(config, **head)
    if pretrained is not None:
        load_encoder(model, Path(pretrained))
    elif pieces is not None:
        model.encoder.embeddings.set_vocabulary(pieces)
    if getattr(model, "base_speller", None) is not None and pieces is not None:
        model.base_speller.set_pieces(pieces)  # base readers of an encoder that spells none
    return model


def layer_decay_scales(num_layers: int, decay: float, final_norm: bool = False) -> dict:
    """`TrainingConfig.learning_rate_scales` for layer-wise decay: layer i of L at
    decay**(L-1-i), the rest of the encoder (its input: embeddings, and ETC's global
    tokens) at decay**L, the pooler (and a pre-LayerNorm encoder's `final_norm`, above
    the top layer) at 1."""
    if not 0 < decay <= 1:
        raise ConfigError(f"layer_decay must be in (0, 1], got {decay}")
    if decay == 1:
        return {}
    scales = {"encoder.": decay**num_layers, "encoder.pooler.": 1.0}
    if final_norm:
        scales["encoder.final_norm."] = 1.0
    for index in range(num_layers):
        scales[f"encoder.layers.{index}."] = decay ** (num_layers - 1 - index)
    return scales
