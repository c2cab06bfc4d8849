"""Pretraining instance shards read back as model inputs (the layout genobird.corpus.instances
writes), with dynamic masking drawn per access where the shards carry no masks."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import torch

from genobird.corpus.instances import FORMAT, InstanceSpec, mask_tokens
from genobird.corpus.tokenizer import SpecialIds
from genobird.errors import InputError


class PretrainingDataset(torch.utils.data.Dataset):
    """Instances of one or more shards as model inputs. Files open lazily in each worker.

    With dynamic masking (shards written without masks, or `dynamic_masking=True`),
    masks are drawn per access from a generator seeded by (seed, epoch, index): a new
    mask each epoch, reproducible, and the same on every rank. Call set_epoch(e).
    """

    def __init__(
        self,
        shard_paths,
        dynamic_masking: bool | None = None,
        seed: int = 0,
        masked_lm_prob: float = 0.15,
    ):
        self.paths = [Path(p) for p in shard_paths]
        if not self.paths:
            raise InputError("no instance shards given")
        self.counts, attrs = [], None
        for path in self.paths:
            with h5py.File(path, "r") as handle:
                if handle.attrs.get("format") != FORMAT:
                    raise InputError(f"{path}: not a genobird instance shard")
                self.counts.append(int(handle.attrs["instances"]))
                attrs = dict(handle.attrs)
        self.offsets = np.cumsum([0, *self.counts])
        self.stored_masks = not attrs["dynamic_masking"]
        self.dynamic = (not self.stored_masks) if dynamic_masking is None else dynamic_masking
        if not (self.dynamic or self.stored_masks):
            raise InputError(
                f"{self.paths[0].parent}: instances written without masks can only be masked "
                "as they load; drop dynamic_masking: false"
            )
        self.spec = InstanceSpec(
            max_seq_length=int(attrs["max_seq_length"]),
            max_predictions=int(attrs["max_predictions"]),
            masked_lm_prob=masked_lm_prob,
            seed=seed,
        )
        self.vocab_size = int(attrs["vocab_size"])
        # shards written before special ids were recorded hold genobird's
        self.special = SpecialIds.from_dict(json.loads(attrs.get("special_ids", "{}")))
        self.vocabulary = str(attrs.get("vocabulary", ""))  # "": written before it was kept
        self.epoch = 0
        self._handles: dict[int, h5py.File] = {}

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_handles"] = {}
        return state

    def _row(self, index: int):
        if not 0 <= index < len(self):
            raise IndexError(index)
        shard = int(np.searchsorted(self.offsets, index, side="right") - 1)
        if shard not in self._handles:
            self._handles[shard] = h5py.File(self.paths[shard], "r")
        return self._handles[shard], index - int(self.offsets[shard])

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        handle, row = self._row(index)
        length = int(handle["lengths"][row])
        tokens = handle["input_ids"][row].astype(np.int64)
        predictions = self.spec.predictions
        positions = np.zeros(predictions, dtype=np.int64)
        labels = np.full(predictions, -100, dtype=np.int64)
        if self.dynamic:
            if self.stored_masks:  # undo the stored masks to get the original tokens
                count = int(handle["num_masked"][row])
                stored = handle["masked_positions"][row][:count].astype(np.int64)
                tokens[stored] = handle["masked_labels"][row][:count]
            rng = np.random.default_rng([self.spec.seed, self.epoch, index])
            masked, chosen, original = mask_tokens(
                tokens[:length], rng, self.vocab_size, self.spec, self.special
            )
            tokens[:length] = masked
            positions[: len(chosen)], labels[: len(chosen)] = chosen, original
        else:
            count = int(handle["num_masked"][row])
            positions[:count] = handle["masked_positions"][row][:count]
            labels[:count] = handle["masked_labels"][row][:count]
        attention = np.zeros(len(tokens), dtype=bool)
        attention[:length] = True
        return {
            "input_ids": torch.from_numpy(tokens),
            "segment_ids": torch.from_numpy(handle["segment_ids"][row].astype(np.int64)),
            "attention_mask": torch.from_numpy(attention),
            "masked_positions": torch.from_numpy(positions),
            "masked_labels": torch.from_numpy(labels),
            "nsp_labels": torch.tensor(int(handle["is_next"][row]), dtype=torch.long),
        }


def shard_paths(instances_dir: str | Path) -> list[Path]:
    """The shards listed in an instances folder's manifest, in order."""
    manifest_path = Path(instances_dir) / "manifest.json"
    if not manifest_path.is_file():
        raise InputError(
            f"{instances_dir}: no manifest.json; build with `genobird corpus instances`"
        )
    manifest = json.loads(manifest_path.read_text())
    return [Path(instances_dir) / shard["file"] for shard in manifest["shards"]]
