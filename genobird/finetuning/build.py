"""The classifier a resolved fine-tuning recipe starts from: its shape (a pretrained
encoder's, or a fresh one), its head and the profile bins it learns, its base readers,
its outputs' starting logits, and the input length of windows cut with BPE-dropout."""

from __future__ import annotations

import logging
import weakref
from dataclasses import replace

import numpy as np

from genobird.finetuning.recipe import DataRecipe, Recipe
from genobird.inputs import token_limit
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


def profile_bins_read(meta: dict, window_bp: int) -> int:
    """How many of the data set's profile bins a head reading `window_bp` bases learns: the
    central ones that fit in the window (an odd number, so that the window's own bin stays
    the middle one). One data set of the widest context thus serves every context of an
    ablation: at 1 kb the central 5 bins of 200 bp, at 8 kb all 15 of a 15-bin set."""
    fitting = min(meta["profile_bins"], window_bp // meta["profile_bin_bp"])
    return fitting if fitting % 2 else fitting - 1


def training_max_tokens(data: DataRecipe, model) -> int:
    """The token limit of windows cut with BPE-dropout (`token_limit`); batches are
    padded to their own longest anyway."""
    return token_limit(data.max_tokens, model.config.max_position, bool(data.bpe_dropout))


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


def build_model(recipe: Recipe, job, built=None):
    """The classifier of a resolved `recipe`'s head (its pooling, dropout and base
    readers) on the job's pretrained encoder, or a fresh one of `recipe.fresh_shape`,
    its outputs starting at their base rates (`base_rate_logits`). `built`, a classifier
    this module built before and left untrained, is returned as it is where `recipe`
    asks the same shape: the classifier the plan timed is the one the run trains."""
    bias = base_rate_logits(job.data, recipe.optim.pos_weight)
    shape = classifier_shape(recipe, job)
    if built is not None and _SHAPES.get(built) == shape:
        return built
    model = build_task_model(
        BigBirdForSequenceClassification,
        shape["config"],
        job.pretrained,
        recipe.optim.seed,
        job.tokenizer.pieces,
        **{key: value for key, value in shape.items() if key != "config"},
    )
    model.set_output_bias(bias)
    _SHAPES[model] = shape
    return model


# the shape each classifier built here was built from
_SHAPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
