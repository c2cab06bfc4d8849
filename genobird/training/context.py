"""A language model read at several context lengths: instances cut short for the
context-length ablation (paper Fig. 8), windows centred on the scored tokens, a saved
model scored on held-out instances at each length, and the paired gain of each length
over the last."""

from __future__ import annotations

import logging
import math

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from genobird.corpus import PretrainingDataset, shard_paths
from genobird.corpus.tokenizer import load_tokenizer
from genobird.device import default_device
from genobird.errors import ConfigError
from genobird.training.mlm import (
    evaluate_pretraining,
    masked_token_metrics,
    masked_token_scores,
    require_same_vocabulary,
)

log = logging.getLogger(__name__)


class TruncatedDataset(Dataset):
    """Instances cut to their first `length` tokens, for the context-length ablation.
    Masks beyond the cut are dropped, and NSP is left out (B may be cut off), so the
    ablation compares masked-token prediction alone, as the paper's Fig. 8 does."""

    def __init__(self, base: Dataset, length: int):
        self.base, self.length = base, length

    def __len__(self) -> int:
        return len(self.base)

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.base, "set_epoch"):
            self.base.set_epoch(epoch)

    def __getitem__(self, index: int) -> dict:
        item = dict(self.base[index])
        for key in ("input_ids", "segment_ids", "attention_mask"):
            item[key] = item[key][: self.length]
        outside = item["masked_positions"] >= self.length
        item["masked_labels"] = item["masked_labels"].masked_fill(outside, -100)
        item["masked_positions"] = item["masked_positions"].masked_fill(outside, 0)
        item["nsp_labels"] = torch.tensor(-100)
        return item


class CentredContextDataset(Dataset):
    """Held-out instances seen through a window of `length` tokens ([CLS] + length - 1
    instance tokens) centred on a scored stretch of `scored` tokens; only the masks in
    that stretch are scored. Every length scores the same masked tokens, so accuracy
    across lengths measures what more context on both sides adds, nothing else.

    By default each instance gives one window, centred on the instance. With `longest`
    (the longest length compared), the scored stretches tile each instance wherever a
    window of `longest` fits around them: short contexts are then measured on every
    masked token an instance offers, not only on its centre. `max_windows` keeps that
    many windows, evenly spaced over the whole list (the same ones for every length)."""

    def __init__(
        self,
        base: Dataset,
        length: int,
        scored: int,
        longest: int | None = None,
        max_windows: int | None = None,
    ):
        if scored > length - 1:
            raise ConfigError(f"the scored centre ({scored}) must fit in the window ({length})")
        if longest is not None and longest < length:
            raise ConfigError(f"longest ({longest}) must be at least the length ({length})")
        self.base, self.length, self.scored = base, length, scored
        self.special = base.special  # the vocabulary's [CLS] and [PAD]
        self._last: tuple[int, dict] | None = None
        self.windows = self._windows(longest or 0, max_windows)

    def _instance(self, index: int) -> dict:
        """The base's instance `index`. Consecutive windows mostly share an instance, and
        reading one from its shard costs more than the model's forward pass on a short
        window, so the last one read is kept (callers never modify it)."""
        if self._last is None or self._last[0] != index:
            self._last = (index, self.base[index])
        return self._last[1]

    def _windows(self, longest: int, max_windows: int | None) -> list[tuple[int, int]]:
        """(instance, centre) pairs: centres `scored` apart where a window of `longest`
        fits in the instance, or the instance's centre when none does (or no longest)."""
        windows = []
        for index in range(len(self.base)):
            real = int(self._instance(index)["attention_mask"].sum())
            if not longest:
                windows.append((index, real // 2))
                continue
            span = min(longest - 1, real)
            last = real - span + span // 2
            windows += [(index, centre) for centre in range(span // 2, last + 1, self.scored)]
        if max_windows is not None and len(windows) > max_windows:
            picks = np.linspace(0, len(windows) - 1, max_windows).round().astype(int)
            windows = [windows[i] for i in picks]
        return windows

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, index: int) -> dict:
        instance, centre = self.windows[index]
        item = self._instance(instance)
        real = int(item["attention_mask"].sum())
        span = min(self.length - 1, real)
        start = min(max(0, centre - span // 2), real - span)
        first_scored = centre - self.scored // 2
        out = {
            "input_ids": torch.full((self.length,), self.special.cls, dtype=torch.long),
            "segment_ids": torch.zeros(self.length, dtype=torch.long),
            "attention_mask": torch.zeros(self.length, dtype=torch.bool),
        }
        for key in out:
            out[key][1 : span + 1] = item[key][start : start + span]
        out["input_ids"][span + 1 :] = self.special.pad
        out["attention_mask"][0] = True
        positions, labels = item["masked_positions"], item["masked_labels"]
        keep = (labels != -100) & (positions >= first_scored)
        keep &= (positions < first_scored + self.scored) & (positions >= start)
        keep &= positions < start + span
        out["masked_positions"] = torch.where(keep, positions - start + 1, 0)
        out["masked_labels"] = labels.masked_fill(~keep, -100)
        out["nsp_labels"] = torch.tensor(-100)
        return out


SHORT_WINDOW_TOKENS = 512  # tokens per batch of the context ablation's short windows


def saved_model_and_instances(model_dir, instances_dir):
    """(model in eval mode on the default device, a GPU where there is one; its tokenizer;
    the instances), the instances checked against the model's vocabulary. A model with
    rotary positions (no position table) reads instances longer than it was pretrained
    on: its max_position grows to theirs, so how it extrapolates can be measured."""
    from genobird.model.io import from_pretrained, read_model_description

    tokenizer = load_tokenizer(model_dir)
    dataset = PretrainingDataset(shard_paths(instances_dir))
    require_same_vocabulary(dataset, tokenizer, str(instances_dir), model_dir)
    config = read_model_description(model_dir)["config"]
    changes = {}
    instance_length = len(dataset[0]["input_ids"]) if len(dataset) else 0
    if config.get("position_encoding") == "rotary" and instance_length > config["max_position"]:
        changes["max_position"] = instance_length
    model = from_pretrained(model_dir, default_device(), changes).eval()
    return model, tokenizer, dataset


def evaluate_saved_model(model_dir, instances_dir, batch_size: int = 8) -> dict:
    """Held-out masked-token metrics of a saved pretrained model, scored the way this
    version scores (a training_summary.json written by an older one may differ)."""
    model, tokenizer, dataset = saved_model_and_instances(model_dir, instances_dir)
    loader = DataLoader(dataset, batch_size=batch_size)
    device = next(model.parameters()).device
    return evaluate_pretraining(model, loader, device, tokenizer.piece_lengths, tokenizer.mask_id)


def mlm_accuracy_by_context(
    model_dir, instances_dir, lengths, batch_size: int = 8, max_windows: int = 4000
) -> list[dict]:
    """Masked-token accuracy of a pretrained model on held-out instances seen through
    centred windows of each length (no retraining: how much the trained model gains from
    more context on both sides). Every length scores the same masked tokens: those in
    stretches of half the shortest length, tiled over each instance wherever the longest
    window fits around them (CentredContextDataset; at most `max_windows` windows).
    Lengths beyond the instances or the model's max_position are left out.

    Since the tokens are the same, each length after the first also gets its gain over
    the previous one, paired token by token, with a 95% interval (mean +- 1.96 standard
    errors of the per-token differences): `accuracy_gain` (in accuracy) and `bits_gain`
    (bits per bp saved; positive = the longer context predicts better)."""
    model, tokenizer, dataset = saved_model_and_instances(model_dir, instances_dir)
    piece_lengths = tokenizer.piece_lengths
    longest = min(model.config.max_position, len(dataset[0]["input_ids"]))
    lengths = sorted(length for length in set(lengths) if 8 <= length <= longest)
    if not lengths:
        return []
    scored = lengths[0] // 2
    device = next(model.parameters()).device
    rows, previous = [], None
    for length in lengths:
        windows = CentredContextDataset(dataset, length, scored, lengths[-1], max_windows)
        # short windows in bigger batches: per-batch overhead, not tokens, costs there
        loader = DataLoader(windows, batch_size=max(batch_size, SHORT_WINDOW_TOKENS // length))
        scores = masked_token_scores(model, loader, device, tokenizer.mask_id)
        row = {"context_length": length, **masked_token_metrics(scores, piece_lengths)}
        row["windows"] = len(windows)
        if previous is not None:
            row.update(paired_context_gain(previous, scores, piece_lengths))
        rows.append(row)
        previous = scores
    return rows


def paired_context_gain(shorter: dict, longer: dict, piece_lengths: np.ndarray) -> dict:
    """What the longer context adds on the same masked tokens: the mean per-token
    difference and its 95% interval, for accuracy and for bits per bp."""
    if not np.array_equal(shorter["labels"], longer["labels"]):
        raise ConfigError("context lengths must score the same masked tokens to be compared")
    bp_per_token = float(piece_lengths[shorter["labels"]].mean())
    accuracy = longer["correct"].astype(np.float64) - shorter["correct"]
    # bits per bp saved, per token, scaled so that their mean is the BPC difference
    bits = (shorter["loss_nats"].astype(np.float64) - longer["loss_nats"]) / math.log(2)
    bits /= bp_per_token
    out = {}
    for name, values in (("accuracy_gain", accuracy), ("bits_gain", bits)):
        half = 1.96 * float(values.std(ddof=1)) / math.sqrt(len(values)) if len(values) > 1 else 0.0
        out[name] = float(values.mean())
        out[name + "_ci95"] = [float(values.mean()) - half, float(values.mean()) + half]
    return out
