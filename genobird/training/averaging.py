"""Exponential moving average of a model's weights (Polyak averaging).

The averaged weights follow the trained ones with `decay` per optimiser step. They are
what evaluation scores, what model selection keeps and what training ends with: an
average over the last ~1 / (1 - decay) steps smooths out the noise of the final
updates, which on small fine-tuning sets moves test metrics as much as a change of seed.

Early on the decay is warmed up as (1 + n) / (10 + n) after n updates (TensorFlow's
ExponentialMovingAverage with num_updates), so a short run is not dominated by its
random starting head.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn

from genobird.errors import ConfigError


def check_decay(decay: float) -> None:
    if not 0 <= decay < 1:
        raise ConfigError(f"ema_decay must be in [0, 1) (0: no averaging), got {decay}")


class WeightAverage:
    """The running average of every floating-point tensor in a module's state dict,
    kept in float32 on the module's device.

    The module's tensors are looked up once: state-dict tensors share storage with the
    parameters and buffers, which the optimiser and `load_state_dict` change in place, so
    an update (every step) is one lerp per tensor and builds no state dict."""

    def __init__(self, module: nn.Module, decay: float):
        check_decay(decay)
        self.decay = decay
        self.updates = 0
        self.live = {
            name: tensor
            for name, tensor in module.state_dict().items()
            if tensor.is_floating_point()
        }
        self.averages = {
            name: tensor.detach().float().clone() for name, tensor in self.live.items()
        }

    def current_decay(self) -> float:
        return min(self.decay, (1 + self.updates) / (10 + self.updates))

    @torch.no_grad()
    def update(self) -> None:
        """Fold the module's present weights into the average (after an optimiser step)."""
        self.updates += 1
        weight = 1 - self.current_decay()
        for name, average in self.averages.items():
            average.lerp_(self.live[name].float(), weight)

    @torch.no_grad()
    def copy_to_module(self) -> None:
        """Replace the module's weights by the averaged ones."""
        for name, average in self.averages.items():
            self.live[name].copy_(average)

    @contextmanager
    def applied(self):
        """The module with the averaged weights inside the block, its own after it."""
        own = {name: tensor.detach().clone() for name, tensor in self.live.items()}
        self.copy_to_module()
        try:
            yield
        finally:
            with torch.no_grad():
                for name, tensor in own.items():
                    self.live[name].copy_(tensor)

    def state_dict(self) -> dict:
        return {"decay": self.decay, "updates": self.updates, "averages": self.averages}

    def load_state_dict(self, saved: dict) -> None:
        missing = set(self.averages) - set(saved["averages"])
        if missing:
            raise ConfigError(f"the saved weight average lacks {sorted(missing)[:3]}")
        self.updates = int(saved["updates"])
        for name, average in self.averages.items():
            average.copy_(saved["averages"][name])
