"""Training checkpoints: written atomically, verified on load, the last k kept.

A checkpoint is a folder `step-00001000/` holding the model weights (safetensors), the
training state (optimiser, scheduler, RNG states, data position) saved with torch.save
and read back with `weights_only=True` (no code runs on load), and `checkpoint.json`
with the sha256 of each file. The folder is assembled under a temporary name and
renamed into place, and checkpoint.json is written last: a folder without it, or whose
files do not match their digests, is incomplete or corrupted and is refused loudly.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import safetensors.torch
import torch

from genobird.errors import CheckpointError
from genobird.fileio import atomic_write, file_digest

WEIGHTS = "model.safetensors"
STATE = "training_state.pt"
MANIFEST = "checkpoint.json"
PREFIX = "step-"


def checkpoint_dir(root: Path, step: int) -> Path:
    return Path(root) / f"{PREFIX}{step:08d}"


def save_checkpoint(root: str | Path, step: int, model, state: dict, keep: int = 3) -> Path:
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = checkpoint_dir(root, step)
    staging = root / f".{final.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    safetensors.torch.save_model(model, str(staging / WEIGHTS))
    torch.save(state, staging / STATE)
    digests = {name: file_digest(staging / name) for name in (WEIGHTS, STATE)}
    with atomic_write(staging / MANIFEST) as handle:
        json.dump({"step": step, "files": digests, "time": time.time()}, handle, indent=2)
    if final.exists():
        shutil.rmtree(final)
    staging.rename(final)
    _prune(root, keep)
    return final


def _prune(root: Path, keep: int) -> None:
    for old in complete_checkpoints(root)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)


def complete_checkpoints(root: str | Path) -> list[Path]:
    """Checkpoint folders that have a manifest, oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [p for p in root.glob(f"{PREFIX}*") if (p / MANIFEST).is_file()]
    return sorted(found, key=lambda p: p.name)


def latest_checkpoint(root: str | Path) -> Path | None:
    found = complete_checkpoints(root)
    return found[-1] if found else None


def verify_checkpoint(folder: Path) -> dict:
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        raise CheckpointError(f"{folder}: incomplete checkpoint ({MANIFEST} missing)")
    manifest = json.loads(manifest_path.read_text())
    for name, digest in manifest["files"].items():
        path = folder / name
        if not path.is_file():
            raise CheckpointError(f"{folder}: {name} is missing; the checkpoint is incomplete")
        if file_digest(path) != digest:
            raise CheckpointError(
                f"{folder}: {name} does not match its recorded sha256 (truncated or corrupted); "
                "delete this checkpoint folder to resume from the previous one"
            )
    return manifest


def read_training_state(folder: str | Path, map_location="cpu") -> dict:
    """Verify a checkpoint and return its training state, its weights left unread (a run
    checks that the checkpoint is its own before taking its weights)."""
    folder = Path(folder)
    verify_checkpoint(folder)
    return torch.load(folder / STATE, map_location=map_location, weights_only=True)


def load_weights(folder: str | Path, model, map_location="cpu") -> None:
    """Load a verified checkpoint's weights into `model` (strictly)."""
    from genobird.model.io import check_state_matches

    folder = Path(folder)
    weights = safetensors.torch.load_file(str(folder / WEIGHTS), device=str(map_location))
    check_state_matches(model, weights, str(folder / WEIGHTS))
    model.load_state_dict(weights, strict=False)


def load_checkpoint(folder: str | Path, model, map_location="cpu") -> dict:
    """Verify, load the weights into `model` (strictly), and return the training state."""
    state = read_training_state(folder, map_location)
    load_weights(folder, model, map_location)
    return state
