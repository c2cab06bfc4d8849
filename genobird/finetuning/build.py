"""The classifier a fine-tuning spec starts from: its shape (a pretrained encoder's,
or a fresh one), its head, its base readers, its outputs' starting logits, and the input
length the data set's windows need."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import numpy as np

from genobird.datasets.windows import default_max_tokens
from genobird.finetuning.spec import (
    Recipe,
    base_strands,
    evaluation_strands,
    profile_bins_read,
    task_pos_weight,
)
from genobird.model import BigBirdForSequenceClassification
from genobird.model.io import read_model_description
from genobird.model.task_model import build_task_model, task_config

log = logging.getLogger(__name__)


def base_rate_logits(data_path, pos_weight: float) -> np.ndarray:
    """Each output's starting logit: the constant that minimises the weighted BCE on the
    training split's known labels, log(w p / (1 - p)). A chromatin feature with 3%
    positives starts at its rate instead of at 0.5, which the head would otherwise spend
    hundreds of steps unlearning (a balanced task, or negatives matched by the weight,
    starts at 0 as before)."""
    import h5py

    from genobird.datasets.windows import label_values

    with h5py.File(data_path, "r") as handle:
        train = handle["split"][:].astype(str) == "train"
        labels = label_values(handle["labels"][:][train])
    with np.errstate(invalid="ignore"):
        rate = np.nan_to_num(np.nanmean(labels, axis=0), nan=0.5) if len(labels) else 0.5
    rate = np.clip(rate, 1e-4, 1 - 1e-4)
    return np.log(pos_weight * rate / (1 - rate))


def build_model(task_meta: dict, pretrained: Path | None, spec: Recipe, tokenizer):
    """The classifier of `spec`'s head (its pooling, dropout and base readers) on a
    pretrained encoder, or a fresh one of `spec.fresh_shape`."""
    head, pieces = spec.head, tokenizer.pieces
    shape = {}  # what the recipe asks of the classifier, decided before it is built
    window = spec.data.window_bp or task_meta["window_bp"]
    if head.pooling == "centre":
        shape["centre_fraction"] = min(1.0, head.centre_bp / window)
    if head.pooling == "profile":  # the data set's bins read, each its own share of the window
        shape["profile_bins"] = profile_bins_read(task_meta, window)
        shape["centre_fraction"] = task_meta["profile_bin_bp"] / window
    if head.base.cnn_channels:
        shape["base_cnn_channels"] = head.base.cnn_channels
        shape["base_cnn_architecture"] = head.base.cnn_architecture
    if head.base.kmers:
        shape["base_kmers"] = head.base.kmers
    task = task_meta["task"]
    if head.base.any:
        shape["base_strands"] = base_strands(head.base, evaluation_strands(spec.evaluation, task))
    pos_weight = task_pos_weight(spec.optim, task)
    config = task_config(
        pretrained, spec.fresh_shape, spec.data.max_tokens, len(pieces), tokenizer.pad_id
    )
    if head.dropout is not None:
        config = replace(config, hidden_dropout=head.dropout)
    return build_task_model(
        BigBirdForSequenceClassification,
        config,
        pretrained,
        spec.optim.seed,
        pieces,
        num_labels=len(task_meta["feature_names"]),
        problem="multi_label",
        pos_weight=pos_weight,
        pooling=head.pooling,
        **shape,
    )


def fitted_spec(spec: Recipe, data_path, tokenizer, pretrained) -> Recipe:
    """`spec` with max_tokens set, where it was left open, to what the data set's windows
    need (at most the pretrained model's max_position)."""
    if spec.data.max_tokens is not None:
        return spec
    if pretrained is not None:
        config = read_model_description(pretrained)["config"]
        block = config["block_size"]
        # rotary positions have no table to outgrow (task_config)
        limit = None if config.get("position_encoding") == "rotary" else config["max_position"]
    else:
        block, limit = spec.fresh_shape.get("block_size", 64), None
    max_tokens = default_max_tokens(
        data_path, tokenizer, block, limit, window_bp=spec.data.window_bp
    )
    log.info("max_tokens %d (the data set's longest window)", max_tokens)
    return spec.with_values(max_tokens=max_tokens)
