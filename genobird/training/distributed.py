"""Thin helpers over torch.distributed: torchrun sets RANK, WORLD_SIZE and LOCAL_RANK,
`init_from_environment` joins the group, and everything else asks rank/world here.
No home-made distribution: gradients are averaged by DistributedDataParallel."""

from __future__ import annotations

import contextlib
import os

import torch
import torch.distributed as dist

from genobird.device import local_rank


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


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
