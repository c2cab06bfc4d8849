"""Model directories: config.json + model.safetensors (no pickles; loading runs no code).

config.json holds the model class, its BigBirdConfig and its head settings; other files
(tokenizer, feature names, training summary) sit beside them, written by their owners.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import safetensors
import safetensors.torch
import torch
from torch import nn

from genobird.errors import CheckpointError
from genobird.fileio import atomic_path, atomic_write
from genobird.model.bigbird import BigBirdForPretraining
from genobird.model.classifier import BigBirdForSequenceClassification
from genobird.model.config import BigBirdConfig
from genobird.version import __version__

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
MODEL_CLASSES = {
    cls.__name__: cls for cls in (BigBirdForPretraining, BigBirdForSequenceClassification)
}


def register_model_class(cls: type) -> type:
    """Make a task model (e.g. an NLP head) loadable by `from_pretrained`."""
    MODEL_CLASSES[cls.__name__] = cls
    return cls


def save_pretrained(model: nn.Module, directory: str | Path, extra: dict | None = None) -> Path:
    """Write weights, then config.json last: a directory with a config is complete."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with atomic_path(directory / WEIGHTS_FILE) as tmp:
        # save_model stores tied parameters (MLM decoder = token embedding) once.
        safetensors.torch.save_model(model, str(tmp), metadata={"format": "pt"})
    description = {
        "genobird_version": __version__,
        "model_class": type(model).__name__,
        "model_module": type(model).__module__,
        "config": model.config.to_dict(),
        "head": model.head_config(),
        **(extra or {}),
    }
    with atomic_write(directory / CONFIG_FILE) as handle:
        json.dump(description, handle, indent=2)
        handle.write("\n")
    return directory


def read_model_description(directory: str | Path) -> dict:
    directory = Path(directory)
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise CheckpointError(
            f"{directory} is not a genobird model directory ({CONFIG_FILE} is missing)"
        )
    try:
        description = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc}); the file is damaged") from exc
    for key in ("model_class", "config"):
        if key not in description:
            raise CheckpointError(f"{path}: no {key!r} entry; not written by genobird")
    return description


def build_model(description: dict, source: str = "config") -> nn.Module:
    name = description["model_class"]
    if name not in MODEL_CLASSES:
        _import_defining_module(description, source)
    if name not in MODEL_CLASSES:
        raise CheckpointError(
            f"{source}: unknown model_class {name!r}; known: {list(MODEL_CLASSES)} (a task "
            "model registers itself when its module is imported: import it first)"
        )
    config = BigBirdConfig.from_dict(description["config"], source=source)
    model_class = MODEL_CLASSES[name]
    head = description.get("head", {})
    if hasattr(model_class, "saved_head"):  # settings older directories left implicit
        head = model_class.saved_head(head)
    return model_class(config, **head)


def _import_defining_module(description: dict, source: str) -> None:
    """Import the module that defines (and registers) a task model, as recorded when it
    was saved: the model layer then needs no import of the layers built on it. Only
    genobird's own modules are imported, so a config file cannot name code to run."""
    module = description.get("model_module")  # absent from directories saved before
    if module is None or not module.startswith("genobird."):
        return
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise CheckpointError(f"{source}: cannot import {module} for the model ({exc})") from exc


def load_weights(model: nn.Module, path: str | Path, device: str | torch.device = "cpu") -> None:
    """Load safetensors weights into `model`, strictly: every tensor must be there with
    its shape. Truncated or corrupted files and mismatches are CheckpointErrors."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: weights file missing")
    try:
        state = safetensors.torch.load_file(str(path), device=str(device))
    except (safetensors.SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(
            f"{path}: cannot read weights ({exc}); the file is truncated or corrupted"
        ) from exc
    check_state_matches(model, state, str(path))
    model.load_state_dict(state, strict=False)  # tied aliases are absent by design


def check_state_matches(model: nn.Module, state: dict[str, torch.Tensor], source: str) -> None:
    # a tied tensor counts as present under any of its names (save_model keeps one)
    missing = sorted(
        names[0] for names in _tensor_names(model).values() if not set(names) & set(state)
    )
    unexpected = sorted(set(state) - set(model.state_dict()))
    wrong_shape = [
        f"{name} {list(state[name].shape)} vs model {list(tensor.shape)}"
        for name, tensor in model.state_dict().items()
        if name in state and state[name].shape != tensor.shape
    ]
    problems = []
    if wrong_shape:
        problems.append("shape mismatch: " + "; ".join(wrong_shape[:3]))
    if missing:
        problems.append(f"missing {len(missing)} tensors (e.g. {', '.join(missing[:3])})")
    if unexpected:
        problems.append(f"unexpected {len(unexpected)} tensors (e.g. {', '.join(unexpected[:3])})")
    if problems:
        raise CheckpointError(
            f"{source} does not fit this model's configuration: {'; '.join(problems)}; "
            "load it with the config.json it was saved with"
        )


def _tensor_names(model: nn.Module) -> dict[tuple, list[str]]:
    """Every tensor of the state dict with all of its names (tied tensors have several)."""
    names: dict[tuple, list[str]] = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        names.setdefault((tensor.data_ptr(), tuple(tensor.shape)), []).append(name)
    return names


def from_pretrained(
    directory: str | Path, device: str | torch.device = "cpu", config_changes: dict | None = None
) -> nn.Module:
    """Rebuild the model saved in `directory` (class, config, head) and load its weights;
    `config_changes` replace config fields that leave the weights' shapes alone
    (dropout, attention_impl, ...)."""
    directory = Path(directory)
    description = read_model_description(directory)
    description["config"] = {**description["config"], **(config_changes or {})}
    model = build_model(description, source=str(directory / CONFIG_FILE))
    load_weights(model, directory / WEIGHTS_FILE, device)
    return model.to(device)
