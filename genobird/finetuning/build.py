"""The classifier a resolved fine-tuning recipe starts from: its shape (a pretrained
encoder's, or a fresh one), its head, its base readers and its outputs' starting
logits."""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np

from genobird.finetuning.recipe import Recipe
from genobird.finetuning.spec import profile_bins_read
from genobird.model import BigBirdForSequenceClassification
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


def classifier_shape(recipe: Recipe, job) -> dict:
    """Everything the classifier of a resolved `recipe` is built from for `job`
    (finetuning.job.FinetuneJob): the encoder's config and the head's arguments. Two
    recipes of one shape build the same classifier."""
    head, meta, tokenizer = recipe.head, job.meta, job.tokenizer
    window = recipe.data.window_bp
    shape = {
        "num_labels": len(meta["feature_names"]),
        "problem": "multi_label",
        "pos_weight": recipe.optim.pos_weight,
        "pooling": head.pooling,
    }
    if head.pooling == "centre":
        shape["centre_fraction"] = min(1.0, head.centre_bp / window)
    if head.pooling == "profile":  # the data set's bins read, each its own share of the window
        shape["profile_bins"] = profile_bins_read(meta, window)
        shape["centre_fraction"] = meta["profile_bin_bp"] / window
    if head.base.cnn_channels:
        shape["base_cnn_channels"] = head.base.cnn_channels
        shape["base_cnn_architecture"] = head.base.cnn_architecture
    if head.base.kmers:
        shape["base_kmers"] = head.base.kmers
    if head.base.any:
        shape["base_strands"] = head.base.strands
    config = task_config(
        job.pretrained,
        recipe.fresh_shape,
        recipe.data.max_tokens,
        len(tokenizer.pieces),
        tokenizer.pad_id,
        job.description,
    )
    shape["config"] = replace(config, hidden_dropout=head.dropout)
    return shape


def build_model(recipe: Recipe, job):
    """The classifier of a resolved `recipe`'s head (its pooling, dropout and base
    readers) on the job's pretrained encoder, or a fresh one of `recipe.fresh_shape`."""
    shape = classifier_shape(recipe, job)
    return build_task_model(
        BigBirdForSequenceClassification,
        shape.pop("config"),
        job.pretrained,
        recipe.optim.seed,
        job.tokenizer.pieces,
        **shape,
    )
