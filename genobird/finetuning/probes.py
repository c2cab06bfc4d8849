"""The recipe settings a classify run chooses on its own validation split.

A user's labelled sequences may hold on both strands or one, may want a gentler or a
bolder learning rate, and may be read best from the mean of the token states or from
[CLS]. Rather than one guess for every task, `choose_recipe` asks each open question in
turn with short fine-tuning runs, probes: every candidate of a question is trained
`probe_steps` steps (stopped by validation as the run itself is) from the answers so
far, and scored by its best validation AUROC. The default (the first candidate) is kept
unless another is ahead of it by more than one standard error of the default's
validation AUROC (Hanley & McNeil): on a validation split of a few hundred windows the
probes differ by noise, and a setting chosen on noise cost the test (an ENCODE CEBPB
task of 172 validation windows read one strand for 0.012 AUROC on validation, where the
standard error is 0.040, and lost 0.22 test MCC). The questions, in order:

  strands         both strands (augmented, averaged) or one: asked when neither
                  --rc-augment nor --rc-average is given
  learning_rate   the given default or LEARNING_RATE_FACTOR times lower: asked when
                  --learning-rate is not given
  pooling         mean of the token states or [CLS]: asked when --pooling is not given

The budget: at most 4 probes of `probe_steps` steps (the default candidate of each
question after the first is the best probe so far, not run again). Where the best probe
so far was best at its start (a run started from the base readers, which the encoder
did not improve on validation within the probe), the later questions are not probed:
their probes would score that same start (on GUE TF 0 and on three ENCODE peak tasks,
every learning-rate and pooling probe did, exactly), so their defaults are kept, saying
why. A setting the user gives is kept and not asked; only single-label classify data
sets with a validation split are asked (promoter and chromatin data sets come with their
pipelines' recipes).
Probe folders are removed; the answers go to OUTPUT/recipe-choice.json, so a resumed
run does not probe again, and to metrics.json and the report.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

from genobird.datasets.metrics import is_multilabel
from genobird.fileio import atomic_write
from genobird.finetuning.recipe import QUESTIONS
from genobird.finetuning.run_folder import RunFolder

log = logging.getLogger(__name__)

# why a question was not probed, as metrics.json and the report give it
START_KEPT = (
    "not probed: the best probe so far was best at its start (the encoder added "
    "nothing on validation within {steps} steps)"
)
# The other learning rate the probe tries: this many times lower than the default (3e-4)
LEARNING_RATE_FACTOR = 3.0


@dataclass(frozen=True)
class Candidate:
    name: str  # as metrics.json and the report name it
    settings: dict  # recipe settings by name


def strand_candidates(recipe) -> list[Candidate]:
    return [
        Candidate("both strands", {"rc_augment": True, "rc_average": True}),
        Candidate("one strand", {"rc_augment": False, "rc_average": False}),
    ]


def learning_rate_candidates(recipe) -> list[Candidate]:
    rate = recipe.optim.learning_rate
    lower = float(f"{rate / LEARNING_RATE_FACTOR:.3g}")  # 1e-4, not 9.999999999999999e-05
    return [
        Candidate(f"{rate:g}", {"learning_rate": rate}),
        Candidate(f"{lower:g}", {"learning_rate": lower}),
    ]


def pooling_candidates(recipe) -> list[Candidate]:
    other = "cls" if recipe.head.pooling == "mean" else "mean"
    return [
        Candidate(recipe.head.pooling, {"pooling": recipe.head.pooling}),
        Candidate(other, {"pooling": other}),
    ]


CANDIDATES = {
    "strands": strand_candidates,
    "learning_rate": learning_rate_candidates,
    "pooling": pooling_candidates,
}


# the source of a value chosen by the probes, as finetuning.resolve records it
CHOSEN = "chosen on validation"


def apply(resolved, settings: dict):
    """A resolved recipe (finetuning.resolve.Resolved) with a candidate's settings."""
    return resolved.with_values(CHOSEN, **settings)


def open_questions(asked, meta: dict) -> list[str]:
    """The questions a run of the recipe `asked` (as asked: a setting not given is None)
    asks on validation, in order."""
    if (
        meta["task"] != "classify"
        or not asked.evaluation.probe_steps
        or is_multilabel(meta)
        or not meta["counts"].get("valid")
    ):
        return []
    strands_given = asked.data.rc_augment is not None or asked.evaluation.rc_average is not None
    questions = [] if strands_given else ["strands"]
    return questions + [q for q in QUESTIONS if q in asked.choose_on_validation]


def probe_budget(recipe, questions: list[str]) -> tuple[int, int]:
    """(at most how many probes, of at most how many steps) answer `questions`: two
    candidates each, the default of every question after the first being the best probe
    so far; a probe is never longer than the run itself (--max-steps)."""
    steps = min(recipe.evaluation.probe_steps, recipe.optim.max_steps)
    return len(questions) + 1, steps


def choose_recipe(resolved, meta: dict, output: Path, run) -> tuple:
    """A resolved recipe (finetuning.resolve.Resolved) with the open questions answered
    on validation, and the record of each:
    {"probe_steps": N, "asked": [question, ...], question: {"validation_auroc": {candidate:
    AUROC}, "best_step": {candidate: the step of that AUROC}, "margin": the lead a change
    needs, "chosen": name, "settings": its settings}} (empty when nothing is asked); a
    question not probed holds only "chosen", "settings" and "not_probed" (why).
    `run(resolved, folder)` fine-tunes and returns the trainer."""
    questions = open_questions(resolved.asked, meta)
    if not questions:
        return resolved, {}
    steps = probe_budget(resolved.recipe, questions)[1]
    saved = RunFolder(output).recipe_choice
    if saved.is_file():  # a resumed run's answers, to the same questions and probe length
        record = json.loads(saved.read_text())
        if record.get("probe_steps") == steps and list(record.get("asked", [])) == questions:
            return answered(resolved, record), record
    record, best, trainer = {"probe_steps": steps, "asked": questions}, None, None
    for question in questions:
        candidates = CANDIDATES[question](resolved.recipe)
        if best is not None and best[1] == 0:  # the best probe so far was best at its start
            record[question] = {
                "chosen": candidates[0].name,
                "settings": candidates[0].settings,
                "not_probed": START_KEPT.format(steps=steps),
            }
            continue
        scores, best_steps = {}, {}
        for index, candidate in enumerate(candidates):
            if index == 0 and best is not None:  # the default: the best probe so far
                scores[candidate.name], best_steps[candidate.name] = best
                continue
            probe = probe_spec(apply(resolved, candidate.settings), steps)
            folder = RunFolder(output).probe(question, candidate.name)
            trainer = run(probe, folder)
            scores[candidate.name] = trainer.state.best_score
            best_steps[candidate.name] = trainer.state.best_step
            log.info(
                "probe %s = %s: validation AUROC %.4f (best at step %d of %d at most)",
                question,
                candidate.name,
                scores[candidate.name],
                best_steps[candidate.name],
                steps,
            )
        default = next(iter(scores))
        margin = auroc_standard_error(scores[default], *validation_classes(meta))
        leader = max(scores, key=scores.get)
        chosen = leader if scores[leader] - scores[default] > margin else default
        best = scores[chosen], best_steps[chosen]
        settings = next(c.settings for c in candidates if c.name == chosen)
        record[question] = {
            "validation_auroc": scores,
            "best_step": best_steps,
            "margin": round(margin, 4),
            "chosen": chosen,
            "settings": settings,
        }
        resolved = apply(resolved, settings)
    if trainer is None or trainer.is_main:
        shutil.rmtree(RunFolder(output).probes, ignore_errors=True)
        output.mkdir(parents=True, exist_ok=True)
        with atomic_write(saved) as handle:
            json.dump(record, handle, indent=2)
    return resolved, record


def validation_classes(meta: dict) -> tuple[int, int]:
    """(positives, negatives) of a single-label data set's validation split."""
    positives = meta["positives_by_split"]["valid"][0]
    return positives, meta["counts"]["valid"] - positives


def auroc_standard_error(auroc: float, positives: int, negatives: int) -> float:
    """The standard error of an AUROC measured on `positives` and `negatives` windows
    (Hanley & McNeil 1982, Radiology 143:29); infinite without both classes."""
    if positives < 1 or negatives < 1:
        return math.inf
    q1, q2 = auroc / (2 - auroc), 2 * auroc**2 / (1 + auroc)
    variance = (
        auroc * (1 - auroc) + (positives - 1) * (q1 - auroc**2) + (negatives - 1) * (q2 - auroc**2)
    ) / (positives * negatives)
    return math.sqrt(max(variance, 0.0))


def probe_spec(resolved, steps: int):
    """A probe: at most `steps` steps of a resolved recipe, checked on validation as often
    as the run is (at least at its end) and stopped as the run would be."""
    every = min(resolved.recipe.evaluation.eval_every or steps, steps)
    return resolved.with_values(eval_every=every, max_steps=steps)


def answered(resolved, record: dict):
    """A resolved recipe with the settings of a saved record's answers."""
    for question in record["asked"]:
        resolved = apply(resolved, record[question]["settings"])
    return resolved
