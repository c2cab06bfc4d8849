"""Fitted baselines kept for reuse. A classifier with base readers starts from genobird's
own baselines (finetuning/base_start.py); each one fitted is saved as STEM.safetensors
beside STEM.json, which holds what it was fitted with (`identity`: its settings and the
data set's digest) and how (`details`). A fine-tuning run keeps its own in
OUTPUT/base-cnn; `genobird baseline cnn|deepsea-cnn|kmer-lr` saves its fitted model the
same way in OUT/fitted, so that a fine-tuning run given that folder
(`--base-start-from`) reads the baseline instead of fitting the same one again: the
chromatin-task ablation's genobird arm at each context starts from the CNN and k-mer LR
arms at that context, and their minutes are spent once.

A saved baseline is read only where its identity equals the one asked for, so a run
never starts from a baseline fitted otherwise than its settings say.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import safetensors.torch

from genobird.fileio import atomic_path, atomic_write, file_digest

# a baseline run's folder of its fitted model (beside its report)
SAVED_FOLDER = "fitted"
KMER_STEM = "kmer-lr"


def cnn_stem(rc_average: bool) -> str:
    """A CNN's file stem: one per strand setting (the recipe's probes train both)."""
    return "both-strands" if rc_average else "one-strand"


def cnn_identity(spec, data) -> dict:
    """What a CNN (baselines.cnn.CNNSpec) fitted on `data` is: its settings, the window
    it reads (the data set's whole window when `window_bp` is not given) and the data."""
    spec = replace(spec, window_bp=spec.window_bp or data.meta["window_bp"])
    return {**asdict(spec), "data": file_digest(data.path)}


def kmer_stem(both_strands: bool) -> str:
    """A k-mer LR's file stem: one per strand reading (a classify run whose strands are
    open fits both)."""
    return KMER_STEM + ("-both-strands" if both_strands else "")


def kmer_identity(ks, window_bp: int | None, seed: int, data, both_strands: bool = False) -> dict:
    """What a k-mer LR of k-mer lengths `ks` fitted on `data` (the counts of both
    strands, or of the strand given) is."""
    strands = "both" if both_strands else "one"
    return {
        "k": list(ks),
        "window_bp": window_bp or data.meta["window_bp"],
        "seed": seed,
        "strands": strands,
        "data": file_digest(data.path),
    }


def read_saved(folders, stem: str, identity: dict) -> tuple[dict, Path] | None:
    """(record, .safetensors path) of the first baseline saved as STEM in `folders` with
    exactly `identity`, else None."""
    for folder in folders:
        path = Path(folder) / stem
        about, tensors = path.with_suffix(".json"), path.with_suffix(".safetensors")
        if about.is_file() and tensors.is_file():
            saved = json.loads(about.read_text())
            if saved.get("identity") == identity:
                return saved, tensors
    return None


def mismatches(folders, stem: str, identity: dict) -> list[str]:
    """For each baseline saved as STEM in `folders` that was fitted otherwise than
    `identity` asks: 'PATH (setting theirs, here ours; ...)'."""
    found = []
    for folder in folders:
        about = (Path(folder) / stem).with_suffix(".json")
        if not about.is_file():
            continue
        theirs = json.loads(about.read_text()).get("identity", {})
        differ = [
            f"{key} {theirs.get(key)!r}, here {value!r}"
            for key, value in identity.items()
            if theirs.get(key) != value
        ]
        if differ:
            found.append(f"{about} ({'; '.join(differ)})")
    return found


def write_saved(
    folder: Path,
    stem: str,
    identity: dict,
    details: dict,
    tensors: dict,
    feature_names: list[str] | None = None,
) -> Path:
    """Save a fitted baseline as FOLDER/STEM.{safetensors,json}; returns the tensors' path.
    `feature_names`: its outputs', so that it scores windows on its own
    (interpret.baselines)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.safetensors"
    with atomic_path(path) as tmp:
        safetensors.torch.save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp))
    with atomic_write(folder / f"{stem}.json") as handle:
        about = {"identity": identity, "details": details}
        if feature_names is not None:
            about["feature_names"] = list(feature_names)
        json.dump(about, handle, indent=2)
    return path
