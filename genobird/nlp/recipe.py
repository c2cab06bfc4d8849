"""The NLP heads' fine-tuning recipe, declared as a typed tree as the genomics recipe is
(genobird.settings): `NLPRecipe(data, optim, output)`. `genobird nlp finetune`'s recipe
options come from walking it, and each function reads the branch it needs."""

from __future__ import annotations

from dataclasses import dataclass, field

from genobird.settings import Tree, branch, setting, settings_of

# parameter-name prefix of every task model's encoder layers (what --encoder-lr-scale scales)
ENCODER_LAYERS = "encoder.layers."


def fresh_text_shape() -> dict:
    """With --from-scratch: a fresh 2 x 128 model (max_position grows to max_tokens)."""
    return dict(hidden_size=128, num_layers=2, num_heads=4, intermediate_size=512, block_size=16)


@dataclass(frozen=True)
class NLPData:
    """How the texts are read."""

    max_tokens: int = setting(int, default=512, low=8, metavar="N", help="paper: 4096")


@dataclass(frozen=True)
class NLPOptim:
    """How the weights are trained."""

    learning_rate: float = setting(
        float, default=3e-5, low=0, high=1, open_low=True, metavar="LR", help="peak learning rate"
    )
    encoder_lr_scale: float = setting(
        float,
        default=1.0,
        low=0,
        open_low=True,
        help="learning-rate multiplier for the encoder layers (e.g. 0.1: they move slower "
        "than a fresh head or decoder)",
    )
    warmup_steps: int = setting(
        int, default=100, low=0, metavar="N", help="steps of linear warm-up"
    )
    max_steps: int = setting(int, default=1000, low=1, metavar="N", help="optimiser steps")
    batch_size: int = setting(int, default=8, low=1, metavar="N", help="examples per step")
    effective_batch_size: int | None = setting(
        int,
        low=1,
        metavar="N",
        help="examples per optimiser step, by accumulation (default: --batch-size)",
    )
    seed: int = setting(
        int,
        default=0,
        low=0,
        metavar="N",
        help="the seed of the head's initialisation and the data order",
    )


@dataclass(frozen=True)
class NLPOutput:
    """What the run writes as it goes."""

    checkpoint_every: int = setting(
        int, default=1000, low=1, metavar="N", help="steps between checkpoints"
    )


@dataclass(frozen=True)
class NLPRecipe(Tree):
    """An NLP head's fine-tuning recipe, and a fresh model's shape beside it."""

    data: NLPData = branch(NLPData)
    optim: NLPOptim = branch(NLPOptim)
    output: NLPOutput = branch(NLPOutput)
    fresh_shape: dict = field(default_factory=fresh_text_shape)
    progress: bool = True


SETTINGS = settings_of(NLPRecipe)
