"""The order a run reads its data in and how its learning rate moves: one seeded
permutation per epoch (`EpochSampler`, resumable mid-epoch and split over ranks), linear
warm-up then decay (`linear_schedule`), and AdamW's parameter groups (decay, scales)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.utils.data import Sampler

from genobird.errors import ConfigError


class EpochSampler(Sampler):
    """A per-epoch permutation from (seed, epoch), split across ranks, that can start
    part-way through an epoch (resume)."""

    def __init__(self, length: int, seed: int, rank: int = 0, world: int = 1):
        self.length, self.seed, self.rank, self.world = length, seed, rank, world
        self.epoch, self.skip = 0, 0

    def set_position(self, epoch: int, skip_samples: int) -> None:
        self.epoch, self.skip = epoch, skip_samples

    def _indices(self) -> list[int]:
        generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        order = torch.randperm(self.length, generator=generator).tolist()
        per_rank = math.ceil(self.length / self.world)
        order += order[: per_rank * self.world - self.length]  # equal share per rank
        return order[self.rank :: self.world]

    def __iter__(self):
        return iter(self._indices()[self.skip :])

    def __len__(self) -> int:
        return math.ceil(self.length / self.world) - self.skip


def linear_schedule(warmup: int, total: int) -> Callable[[int], float]:
    """Multiplier of the learning rate: 0 -> 1 over `warmup` steps, then 1 -> 0 at `total`."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


def parameter_groups(
    model: nn.Module, weight_decay: float, learning_rate: float, scales: dict | None = None
) -> list[dict]:
    """BERT's rule: no weight decay on biases and LayerNorm weights; each parameter's
    learning rate is `learning_rate` times the scale of its longest matching name prefix
    in `scales` (1 where none matches). Tied parameters appear once, under their first name."""
    scales = scales or {}
    unused = [
        prefix
        for prefix in scales
        if not any(name.startswith(prefix) for name, _ in model.named_parameters())
    ]
    if unused:
        raise ConfigError(f"learning_rate_scales: no parameter name starts with {unused[0]!r}")
    for prefix, scale in scales.items():
        if not isinstance(scale, (int, float)) or scale <= 0:
            raise ConfigError(f"learning_rate_scales[{prefix!r}] = {scale!r}: use a number > 0")
    groups: dict[tuple[bool, float], list] = {}
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        decays = parameter.dim() >= 2 and "norm" not in name
        matches = [prefix for prefix in scales if name.startswith(prefix)]
        scale = float(scales[max(matches, key=len)]) if matches else 1.0
        groups.setdefault((decays, scale), []).append(parameter)
    return [
        {
            "params": params,
            "weight_decay": weight_decay if decays else 0.0,
            "lr": learning_rate * scale,
        }
        for (decays, scale), params in groups.items()
    ]
