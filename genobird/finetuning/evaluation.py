"""How a fine-tuned classifier is scored: its probabilities over a split's views
(strands, sampled cuts), the validation check that selects its steps, the check of its
start against its baselines, what its training recorded, and the report it writes."""

from __future__ import annotations

import logging
from functools import partial

import numpy as np
import torch
from torch.utils.data import DataLoader

from genobird.datasets.metrics import is_multilabel, mean_auroc, write_evaluation
from genobird.datasets.windows import WindowDataset
from genobird.finetuning.build import training_max_tokens
from genobird.inputs import window_collate

log = logging.getLogger(__name__)


@torch.no_grad()
def loader_probabilities(model, loader, device) -> tuple[np.ndarray, np.ndarray]:
    """(labels [N, F], probabilities [N, F]) over a loader of collated windows."""
    model.eval()
    probabilities, labels = [], []
    for batch in loader:
        logits = model(
            batch["input_ids"].to(device), None, batch["attention_mask"].to(device)
        ).logits
        probabilities.append(torch.sigmoid(logits.float()).cpu().numpy())
        labels.append(batch["labels"].numpy())
    return np.concatenate(labels), np.concatenate(probabilities)


def predict_probabilities(
    model, dataset, device, batch_size: int = 16
) -> tuple[np.ndarray, np.ndarray]:
    collate = window_collate(model, dataset.tokenizer.pad_id)
    loader = DataLoader(dataset, batch_size=batch_size, collate_fn=collate)
    return loader_probabilities(model, loader, device)


def validation_auroc(model, loader, device, reverse=None) -> dict:
    """The fine-tuning eval_fn: mean AUROC over features on the validation split, with
    `reverse` (the split read on the other strand) averaged over both strands, as the
    test split is evaluated: model selection scores what the report will."""
    labels, probabilities = loader_probabilities(model, loader, device)
    if reverse is not None:
        other = predict_probabilities(model, reverse, device, loader.batch_size)[1]
        probabilities = (probabilities + other) / 2
    return {"auroc": mean_auroc(labels, probabilities)}


def evaluation_views(data_path, split, tokenizer, recipe, model) -> list:
    """The datasets whose probabilities evaluation averages: the split on each strand a
    resolved `recipe` reads, in the tokenizer's segmentation or in each of its
    `segmentations` sampled cuts (`window_views`, the same inputs a saved predictor
    scores)."""
    data, segmentations = recipe.data, recipe.evaluation.segmentations
    strands = (False, True) if recipe.evaluation.rc_average else (False,)
    windows = partial(WindowDataset, data_path, split, tokenizer, window_bp=data.window_bp)
    if not segmentations:
        return [windows(data.max_tokens, reverse_complement=r) for r in strands]
    return [
        windows(
            training_max_tokens(data, model),
            reverse_complement=r,
            bpe_dropout=data.bpe_dropout,
            cut=cut,
        )
        for r in strands
        for cut in range(segmentations)
    ]


def split_probabilities(model, data_path, split, tokenizer, recipe, device):
    """(labels, probabilities) of one split, averaged over its views (`evaluation_views`)."""
    views = evaluation_views(data_path, split, tokenizer, recipe, model)
    predictions = [predict_probabilities(model, view, device) for view in views]
    return predictions[0][0], np.mean([p for _, p in predictions], axis=0)


# How far the classifier's check before its first step may lie from its baselines' own
# validation AUROC: float rounding, and bf16 on a GPU; more means the start is not them.
START_TOLERANCE = 1e-3


def start_check(history: list[dict], base_start: dict) -> dict | None:
    """The run's validation check before its first step beside the validation AUROC of the
    baselines it started from (base-start.json): equal, up to rounding, when the
    classifier started as them. A start that is not them is logged as a warning."""
    expected = base_start.get("start_validation_auroc")
    at_start = next(
        (row["eval_auroc"] for row in history if row.get("step") == 0 and "eval_auroc" in row), None
    )
    if expected is None or at_start is None:
        return None
    agree = abs(at_start - expected) <= START_TOLERANCE
    if not agree:
        log.warning(
            "the classifier's start scores validation AUROC %.4f, its baselines %.4f: "
            "it did not start as its baselines",
            at_start,
            expected,
        )
    return {"baselines": expected, "step_0": round(at_start, 5), "agree": agree}


def training_record(trainer, job, planned: dict, start: dict) -> dict:
    """What the run records of its training: its steps, selection and speed
    (`training_summary`), its start (the pretrained model), its plan and estimate, the
    attention kernel's check, and its start from the base readers with the check of its
    first validation against them (`start_check`)."""
    record = {
        **training_summary(trainer.state),
        "pretrained": str(job.pretrained) if job.pretrained else None,
        **planned,
        "attention_kernel_check": trainer.kernel_check,
        **start,
    }
    if start:
        record["start_check"] = start_check(trainer.state.history, start)
    return record


def training_summary(state) -> dict:
    """Steps taken, the step whose weights were kept, and the training speed in real
    (non-pad) tokens per second, the median over the logged intervals."""
    speeds = [row["tokens_per_second"] for row in state.history if "tokens_per_second" in row]
    return {
        "steps": state.step,
        "best_step": state.best_step if state.best_score is not None else state.step,
        # the kept weights' validation figure (mean AUROC over features): what a choice
        # between runs (e.g. contexts) may read without looking at the test split
        "best_validation_auroc": state.best_score,
        "stopped_early": state.stopped_early,
        "stopped_at_time": state.stopped_at_time,
        # what ended the run: its budget, validation's early stop, or a user's time cap
        "stopped_by": (
            "max_minutes"
            if state.stopped_at_time
            else "patience"
            if state.stopped_early
            else "max_steps"
        ),
        "real_tokens_per_second": float(np.median(speeds)) if speeds else None,
    }


def evaluate(model, resolved, job, device, record: dict) -> dict:
    """The fine-tuned `model` scored on the job's test split (and validation, where it has
    one and a single label), with what the run records beside it (`record`: its training,
    strands and probes' answers): the report, written to the run's report folder."""
    recipe, meta, data_path = resolved.recipe, job.meta, job.data
    test = split_probabilities(model, data_path, "test", job.tokenizer, recipe, device)
    valid = None
    if meta["counts"]["valid"] and not is_multilabel(meta):
        valid = split_probabilities(model, data_path, "valid", job.tokenizer, recipe, device)
    data, head, optim = recipe.data, recipe.head, recipe.optim
    extra = {
        "window_bp": data.window_bp,
        "max_tokens": data.max_tokens,
        "rc_average": recipe.evaluation.rc_average,
        "rc_augment": data.rc_augment,
        "strands": record.get("strands", {}),
        "recipe_choice": record.get("recipe_choice", {}),
        "learning_rate": optim.learning_rate,
        "pooling": head.pooling,
        "base_cnn_channels": head.base.cnn_channels,
        "base_cnn_architecture": head.base.cnn_architecture,
        "base_kmers": head.base.kmers,
        "head_lr_scale": optim.head_lr_scale,
        "layer_decay": optim.layer_decay,
        "ema_decay": optim.ema_decay,
        "bpe_dropout": data.bpe_dropout,
        "segmentations": recipe.evaluation.segmentations,
        "training": record.get("training", {}),
    }
    return write_evaluation(job.folder.report, meta, test, valid, extra, data_path)
