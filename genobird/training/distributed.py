"""Thin helpers over torch.distributed: torchrun sets RANK, WORLD_SIZE and LOCAL_RANK,
`init_from_environment` joins the group, and everything else asks rank/world here.
No home-made distribution: gradients are averaged by DistributedDataParallel."""

from __future__ import annotations

import contextlib
import os

import torch
import torch.distributed as dist

from genobird.errors import ConfigError


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def local_rank() -> int:
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
        raise ConfigError(f"{named} {str(device)!r} is not a device: use auto, cpu, cuda or "
                          "cuda:N") from None  # fmt: skip
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{named} is {str(device)!r} but this machine has no CUDA GPU: "
                          "use cpu (or auto)")  # fmt: skip
    if parsed.type == "cuda" and (parsed.index or 0) >= (count := torch.cuda.device_count()):
        raise ConfigError(f"{named} is {str(device)!r} but this machine has {count} CUDA "
                          f"GPU(s): use cuda:0 to cuda:{count - 1}")  # fmt: skip
    return parsed


def init_from_environment() -> bool:
    """Join the process group when launched by torchrun (WORLD_SIZE > 1)."""
    if is_distributed() or int(os.environ.get("WORLD_SIZE", 1)) <= 1:
        return is_distributed()
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank())
    dist.init_process_group(backend=backend)
    return True


def wrap(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    from torch.nn.parallel import DistributedDataParallel

    device_ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids)


def maybe_no_sync(model, sync: bool):
    """Skip the gradient all-reduce on accumulation micro-steps but the last."""
    if not sync and hasattr(model, "no_sync"):
        return model.no_sync()
    return contextlib.nullcontext()


def barrier() -> None:
    if is_distributed():
        dist.barrier()
