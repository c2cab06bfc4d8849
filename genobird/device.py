"""Which device genobird computes on: one home for the choice, below training, scoring
and evaluation, which all ask here."""

from __future__ import annotations

import os

import torch

from genobird.errors import ConfigError


def local_rank() -> int:
    """This process's GPU under torchrun (LOCAL_RANK), 0 otherwise."""
    return int(os.environ.get("LOCAL_RANK", 0))


# The one default for training, scoring and evaluation ("auto"); `GENOBIRD_DEVICE=cpu`
# keeps a GPU machine's runs on the CPU (the test suite sets it: its oracles and bitwise
# checks are CPU ones, and its CUDA tests name their device).
DEVICE_VARIABLE = "GENOBIRD_DEVICE"


def default_device() -> torch.device:
    """$GENOBIRD_DEVICE where set (and not "auto"), else this process's GPU, else the CPU."""
    chosen = os.environ.get(DEVICE_VARIABLE, "auto").strip() or "auto"
    if chosen != "auto":
        return checked_device(chosen, f"${DEVICE_VARIABLE}")
    if torch.cuda.is_available():
        return torch.device("cuda", local_rank())
    return torch.device("cpu")


def resolve_device(device: str | torch.device) -> torch.device:
    """A device argument ("auto", "cpu", "cuda", "cuda:1" ...) as a torch.device."""
    if str(device) == "auto":
        return default_device()
    return checked_device(device, "the device")


def checked_device(device: str | torch.device, named: str) -> torch.device:
    """`device` parsed, refused in one line when torch cannot read it or it names a GPU
    this machine does not have (rather than failing later, deep in a forward pass)."""
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(
            f"{named} {str(device)!r} is not a device: use auto, cpu, cuda or cuda:N"
        ) from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"{named} is {str(device)!r} but this machine has no CUDA GPU: use cpu (or auto)"
        )
    if parsed.type == "cuda" and (parsed.index or 0) >= (count := torch.cuda.device_count()):
        raise ConfigError(
            f"{named} is {str(device)!r} but this machine has {count} CUDA "
            f"GPU(s): use cuda:0 to cuda:{count - 1}"
        )
    return parsed
