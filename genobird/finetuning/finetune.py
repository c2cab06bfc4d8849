"""Fine-tuning a pretrained encoder on a sequence data set, through the shared Trainer.

The model is BigBirdForSequenceClassification with one output per feature and BCE
(promoter: 1 output; chromatin: F outputs, positive weight 8 as the paper). Encoder
weights come from a pretraining model directory (`--pretrained`); the head starts
fresh. Evaluation averages the forward and reverse-complement predictions when asked.
The model directory records the task, feature names and categories, window and input
length, so predictors can be rebuilt from it alone."""

from __future__ import annotations

import shutil
from pathlib import Path

from genobird.finetuning.build import build_model
from genobird.finetuning.decisions import decide, decisions
from genobird.finetuning.evaluation import evaluate, training_record
from genobird.finetuning.job import FinetuneJob
from genobird.finetuning.plan import plan_run
from genobird.finetuning.recipe import Recipe
from genobird.finetuning.resolve import Resolved, resolve
from genobird.finetuning.save import save_model
from genobird.finetuning.train import train
from genobird.training import Trainer


def finetune(recipe: Recipe, job: FinetuneJob) -> dict:
    """Fine-tune, evaluate on the test split, write the model directory and the report:
    resolve the recipe for the job, plan, decide, train, evaluate, save. A run resumes
    from its own checkpoints in the job's folder; checkpoints there of a run with other
    settings are refused, or with `job.restart_changed` deleted (`discard_other_run`).
    Base readers fitted exactly as the recipe asks by one of `job.baseline_runs` are read
    from it (reader_baselines.saved_baseline)."""
    resolved = resolve(recipe, job)
    steps = decisions(resolved, job.meta)
    model = build_model(resolved.recipe, job)
    planned = plan_run(resolved.recipe, job, steps, model)
    if not resolved.recipe.head.base.any:  # none of an earlier run's readers
        shutil.rmtree(job.folder.readers, ignore_errors=True)

    def probe(candidate: Resolved, folder: Path) -> Trainer:  # a decision's fine-tuning run
        return train(candidate, folder, job)[0]

    resolved, record = decide(resolved, job, steps, probe)
    trainer, start = train(resolved, job.folder.root, job, model)
    record["training"] = training_record(trainer, job, planned, start)
    report = evaluate(trainer.module, resolved, job, trainer.device, record)
    if trainer.is_main:
        save_model(trainer.module, resolved, job, report)
    return report
