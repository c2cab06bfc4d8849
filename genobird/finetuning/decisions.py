"""What a fine-tuning run decides once it has started, each decision an object with one
interface, so that the plan, the cost estimate and the run walk one list:

  describe()  the plan's words for it (None: nothing to say before it runs)
  readings    how many strand readings the base readers are fitted for (their cost)
  runs(...)   the fine-tuning runs it adds to the estimate (the probes)
  decide(...) the resolved recipe with its answer, and what the run records of it

Every run settles its strands by exactly one of them: with the start from its base
readers (`StrandsWithStart`), by probes on validation (`Probes`, which may answer other
questions too), or as asked (`StrandsAsAsked`: the options given, else the task kind).
"""

from __future__ import annotations

from dataclasses import dataclass

from genobird.finetuning.base_start import choose_strands
from genobird.finetuning.probes import choose_recipe, open_questions, probe_budget


class Decision:
    """A decision taken when the run starts (see the module's docstring)."""

    readings = 1

    def describe(self) -> str | None:
        return None

    def runs(self, interval: int, patience: int) -> list[tuple[int, int, int]]:
        return []

    def decide(self, resolved, job, run) -> tuple:
        raise NotImplementedError


def settled_strands(resolved, chosen_by: str, extra: dict | None = None) -> tuple:
    """`resolved` with its strands (and its base readers' reading) recorded as settled
    `chosen_by`, and the record {"chosen_by", ..., "rc_augment", "rc_average"[,
    "base_strands"]}."""
    recipe = resolved.recipe
    values = {"rc_augment": recipe.data.rc_augment, "rc_average": recipe.evaluation.rc_average}
    if recipe.head.base.any:
        values["base_strands"] = recipe.head.base.strands
    record = {"chosen_by": chosen_by, **(extra or {}), **values}
    given = {name: value for name, value in values.items() if resolved.sources[name] == "given"}
    open_ones = {name: value for name, value in values.items() if name not in given}
    resolved = resolved.with_values(f"strands: {chosen_by}", **open_ones)
    return resolved.with_values(None, **given), {"strands": record}


@dataclass(frozen=True)
class StrandsWithStart(Decision):
    """A classify run with base readers and a validation split, whose options settle
    neither the strands nor how the base readers read them: both strands or one, as the
    start from its base readers scores better on validation (base_start.choose_strands).
    Its base readers are fitted for each reading."""

    readings = 2

    def describe(self) -> str:
        return "read both strands or one, as the better start on validation"

    def decide(self, resolved, job, run) -> tuple:
        choice = choose_strands(
            resolved.recipe, job.data, job.folder.base_cnn_cache, job.baseline_runs
        )
        chosen_by = "the start's validation AUROC"
        resolved = resolved.with_values(f"strands: {chosen_by}", **choice["settings"])
        extra = {"chosen": choice["chosen"], "start_validation_auroc": choice["validation_auroc"]}
        return settled_strands(resolved, chosen_by, extra)

    @staticmethod
    def applies(asked, meta: dict) -> bool:
        return (
            meta["task"] == "classify"
            and bool(meta["counts"].get("valid"))
            and asked.head.base.any
            and asked.data.rc_augment is None
            and asked.evaluation.rc_average is None
            and asked.head.base.strands is None
        )


@dataclass(frozen=True)
class Probes(Decision):
    """The open questions of a classify run answered by short fine-tuning runs on
    validation (finetuning.probes): at most `probes` runs of at most `steps` steps."""

    questions: tuple
    probes: int
    steps: int

    def describe(self) -> str:
        return (
            f"choose {', '.join(self.questions)} on validation with at most {self.probes} "
            f"probes of at most {self.steps:,} steps"
        )

    def runs(self, interval: int, patience: int) -> list[tuple[int, int, int]]:
        return [(self.steps, min(interval, self.steps), patience)] * self.probes

    def decide(self, resolved, job, run) -> tuple:
        resolved, choice = choose_recipe(resolved, job.meta, job.folder.root, run)
        record = {"recipe_choice": choice}
        if "strands" in choice:
            resolved, strands = settled_strands(resolved, "validation")
            record.update(strands)
        return resolved, record


@dataclass(frozen=True)
class StrandsAsAsked(Decision):
    """The strands as the options ask (the one not given follows the task kind), or as
    the task kind reads them; `reason` says which."""

    reason: str

    def decide(self, resolved, job, run) -> tuple:
        return settled_strands(resolved, self.reason)


def decisions(resolved, meta: dict) -> list[Decision]:
    """The decisions a run of `resolved` on a data set described by `meta` takes, in the
    order it takes them."""
    asked, steps = resolved.asked, []
    with_start = StrandsWithStart.applies(asked, meta)
    if with_start:
        steps.append(StrandsWithStart())
        asked = asked.with_values(rc_augment=True, rc_average=True)  # not asked of probes
    questions = open_questions(asked, meta)
    if questions:
        steps.append(Probes(tuple(questions), *probe_budget(resolved.recipe, questions)))
    if not with_start and "strands" not in questions:
        given = asked.data.rc_augment is not None or asked.evaluation.rc_average is not None
        kind = "task" if meta["task"] != "classify" else "default (no probe)"
        steps.append(StrandsAsAsked("options" if given else kind))
    return steps


def decide(resolved, job, steps: list[Decision], run) -> tuple:
    """`resolved` with every decision of `steps` taken in turn (`run(candidate, folder)`
    fine-tunes a probe and returns its trainer), and what the run records of them."""
    record = {}
    for step in steps:
        resolved, decided = step.decide(resolved, job, run)
        record.update(decided)
    return resolved, record
