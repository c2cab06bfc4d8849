"""Mixed precision, one rule for training and inference: bf16 autocast on CUDA, fp32 on
CPU (bf16 matmuls on CPUs without AMX are slower than fp32, and bf16 has no loss-scaling
needs, unlike fp16)."""

from __future__ import annotations

import torch

from genobird.errors import ConfigError

PRECISIONS = ("auto", "bf16", "no")


def autocast_dtype(choice: str, device: torch.device) -> torch.dtype | None:
    """ "auto": bf16 on CUDA, none on CPU; "bf16": always; "no": never."""
    if choice not in PRECISIONS:
        raise ConfigError(f"mixed precision must be one of {PRECISIONS}, got {choice!r}")
    if choice == "bf16" or (choice == "auto" and device.type == "cuda"):
        return torch.bfloat16
    return None


def autocast(device: torch.device, dtype: torch.dtype | None):
    """The autocast context for `dtype` (None: autocast off, full precision)."""
    if dtype is None:
        return torch.autocast(device.type, enabled=False)
    return torch.autocast(device.type, dtype=dtype)
