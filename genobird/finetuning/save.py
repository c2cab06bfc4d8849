"""A fine-tuned model's directory: its weights and tokenizer, the task it scores, its
evaluation, the recipe as asked (with what was fitted and decided), which `genobird
finetune --config` reads back, and its model card (finetuning.card)."""

from __future__ import annotations

import json

from genobird.datasets.windows import split_sources
from genobird.fileio import atomic_write
from genobird.finetuning.card import CARD_FILE, baseline_reports, model_card, reader_reports
from genobird.finetuning.job import FinetuneJob
from genobird.finetuning.recipe import tree
from genobird.finetuning.resolve import Resolved
from genobird.model import save_pretrained

# the recipe a fine-tuned model was trained with, beside its weights
RECIPE_FILE = "finetune.json"


def save_model(model, resolved: Resolved, job: FinetuneJob, report: dict) -> None:
    """The model directory: weights, tokenizer, the task, the evaluation, the recipe as
    asked (with what was fitted and decided) and the model card (finetuning.card)."""
    recipe, meta, directory = resolved.recipe, job.meta, job.folder.model
    task = {
        "task": meta["task"],
        "feature_names": meta["feature_names"],
        "categories": meta["categories"],
        "window_bp": recipe.data.window_bp,
        "max_tokens": recipe.data.max_tokens,
        "rc_average": recipe.evaluation.rc_average,
        "segmentations": recipe.evaluation.segmentations,
        "bpe_dropout": recipe.data.bpe_dropout,
    }
    save_pretrained(model, directory, extra={"task_info": task})
    job.tokenizer.save(directory)
    with atomic_write(directory / "evaluation.json") as handle:
        json.dump(report, handle, indent=2)
    # the recipe as asked, with what was fitted and chosen: what `finetune --config`
    # reads; what followed the task kind, the data set or the start is left open, so
    # that the recipe read for another one follows that one's
    asked = resolved.asked.values()
    with atomic_write(directory / RECIPE_FILE) as handle:
        json.dump(tree(asked), handle, indent=2)
    baselines = {**reader_reports(job.folder.readers), **baseline_reports(job.baseline_runs)}
    card = model_card(
        meta, asked, report, split_sources(job.data), baselines, recipe.optim.pos_weight
    )
    with atomic_write(directory / CARD_FILE) as handle:
        handle.write(card)
