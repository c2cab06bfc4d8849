"""A fitted baseline read as a predictor: the model a `genobird baseline cnn|deepsea-cnn|
kmer-lr` run saved (baselines.saved) scores windows of its length as a fine-tuned
model's Predictor does, so that the motif route (`genobird attribute`, `genobird
motifs`) reads a baseline through the same commands and the motifs of a model can be
set beside those of its baselines.

A run's folder (RUN, holding RUN/fitted), its fitted folder or one STEM.json in it is
read. A saved model records the data set it was fitted on by digest; windows read from
a data set are refused where the digest differs, since a baseline scores another data
set's features only by accident.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genobird.baselines.saved import SAVED_FOLDER
from genobird.errors import ConfigError
from genobird.fileio import file_digest
from genobird.scoring.source import WindowPolicy


def saved_baseline_file(path) -> Path | None:
    """The STEM.json of the one baseline saved at `path` (a baseline run's folder, its
    fitted folder or the file itself); None where `path` holds no saved baseline (a
    fine-tuned model directory, say). Several saved baselines are refused: the file
    is then to be named."""
    path = Path(path)
    if path.is_file():
        return path if path.suffix == ".json" and _is_saved(path) else None
    folder = path / SAVED_FOLDER if (path / SAVED_FOLDER).is_dir() else path
    found = sorted(p for p in folder.glob("*.json") if _is_saved(p))
    if len(found) > 1:
        names = ", ".join(str(p) for p in found)
        raise ConfigError(f"{path} holds {len(found)} fitted baselines ({names}); give one")
    return found[0] if found else None


def _is_saved(path: Path) -> bool:
    if not path.with_suffix(".safetensors").is_file():
        return False
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and "identity" in record


@dataclass
class BaselinePredictor:
    """A saved baseline's probabilities of windows of `input_length_bp` (longer ones
    read as their central bases, as the baseline read its data set)."""

    model_dir: Path
    kind: str  # cnn, deepsea-cnn or kmer-lr
    feature_names: list[str]
    input_length_bp: int
    logits: object  # list[str] -> float [N, F]
    batch_size: int = 256

    def predict(self, sequences: list[str]) -> np.ndarray:
        """Probabilities [N, F] of `sequences`, `batch_size` at a time."""
        if not sequences:
            return np.zeros((0, len(self.feature_names)), dtype=np.float32)
        parts = [
            self.logits(sequences[i : i + self.batch_size])
            for i in range(0, len(sequences), self.batch_size)
        ]
        return (1 / (1 + np.exp(-np.concatenate(parts).astype(np.float64)))).astype(np.float32)

    def policy(self, tiles: bool = False) -> WindowPolicy:
        """Windows of the baseline's length, as `genobird score` reads them."""
        return WindowPolicy(self.input_length_bp, tiles)


def load_baseline(path, data=None, batch_size: int = 256) -> BaselinePredictor:
    """The baseline saved at `path` (`saved_baseline_file`). `data`: the data set windows
    are read from, which must be the one the baseline was fitted on; its feature names
    serve a baseline saved before runs recorded their own."""
    file = saved_baseline_file(path)
    if file is None:
        raise ConfigError(
            f"{path}: no fitted baseline (STEM.json beside STEM.safetensors); give a "
            "`genobird baseline` run's folder"
        )
    record = json.loads(file.read_text())
    identity, names = record["identity"], record.get("feature_names")
    if data is not None:
        if identity.get("data") != file_digest(data):
            raise ConfigError(
                f"{file} was fitted on another data set than {data}; read the windows of "
                "the data set it was fitted on"
            )
        if names is None:
            from genobird.datasets.windows import read_metadata

            names = read_metadata(data)["feature_names"]
    if names is None:
        raise ConfigError(
            f"{file} does not record its features; give --data, the data set it was "
            "fitted on, or fit it again with genobird baseline"
        )
    tensors = file.with_suffix(".safetensors")
    if "architecture" in identity:
        kind, logits = identity["architecture"], _cnn_logits(identity, tensors, len(names))
    elif "k" in identity:
        kind, logits = "kmer-lr", _kmer_logits(identity, tensors)
    else:
        raise ConfigError(f"{file}: not a classifier baseline (cnn, deepsea-cnn or kmer-lr)")
    return BaselinePredictor(
        file, kind, list(names), int(identity["window_bp"]), logits, batch_size
    )


def _cnn_logits(identity: dict, tensors: Path, outputs: int):
    import safetensors.torch
    import torch

    from genobird.baselines.cnn import ARCHITECTURES, encode
    from genobird.inputs import central

    model = ARCHITECTURES[identity["architecture"]](
        outputs, identity["channels"], identity["dropout"]
    )
    if identity["architecture"] == "deepsea-cnn":
        model.tower.materialize()
    safetensors.torch.load_model(model, str(tensors))
    model.eval()
    window, rc_average = identity["window_bp"], identity["rc_average"]

    @torch.no_grad()
    def logits(sequences: list[str]) -> np.ndarray:
        codes = encode([central(s, window) for s in sequences])
        return model(codes, rc_average).numpy()

    return logits


def _kmer_logits(identity: dict, tensors: Path):
    """The k-mer LR's logits, weights @ (counts x scale) + biases (KmerLR.linear)."""
    import safetensors.numpy

    from genobird.baselines.kmer import kmer_matrix
    from genobird.inputs import central

    saved = safetensors.numpy.load_file(str(tensors))
    weights, biases, scale = saved["weights"], saved["biases"], saved["scale"]
    ks, window = tuple(identity["k"]), identity["window_bp"]
    both = identity["strands"] == "both"

    def logits(sequences: list[str]) -> np.ndarray:
        counts = kmer_matrix([central(s, window) for s in sequences], ks, both)
        return np.asarray(counts.multiply(scale[None, :]) @ weights.T) + biases

    return logits
