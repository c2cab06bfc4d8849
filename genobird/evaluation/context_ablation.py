"""A chromatin task fine-tuned at several contexts, beside its baselines at the same
contexts: the paper's Table 7 as an ablation, on one task folder of the pipeline
(RESULTS/chromatin_tasks/NAME: context-BP/ for genobird at each context,
baselines/KIND-BP/ for each baseline, every run's report/test_predictions.npz on the same
test bins).

Each arm (genobird, and each baseline kind) is read at every context it ran. A figure is
a median over a group's features, counting the features with at least `min_positives`
test positives (a feature with five positives has an AUROC of little meaning); groups are
the features' categories, or (`by="scale"`) the scale the feature tables give them (local,
broad). Differences are paired over the test bins (`paired_median_auroc`): each arm's
gain at each context over its narrowest, genobird minus each baseline at the same
context, and each arm at its best context against the others at theirs. An arm's best
context is chosen on the validation split (the kept model's mean validation AUROC), never
on the test split. Each run's wall time comes from the pipeline's benchmark file beside
its report, where the pipeline wrote one.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from genobird.artifacts import describe_difference
from genobird.baselines.saved import SAVED_FOLDER
from genobird.datasets.metrics import PREDICTIONS, multilabel_metrics
from genobird.errors import InputError
from genobird.evaluation.compare import (
    FeaturePredictions,
    feature_groups,
    paired_median_auroc,
    read_feature_predictions,
)

GENOBIRD = "genobird"
ARM_NAMES = {
    GENOBIRD: "genobird",
    "deepsea-cnn": "DeepSEA CNN",
    "kmer-lr": "k-mer LR",
    "cnn": "3-layer CNN",
}
GROUPINGS = ("category", "scale")
# the scale group of features whose table has no scale column
UNSCALED = "unscaled"
# the pipeline's per-run benchmark file (Snakemake `benchmark:`), beside report/
BENCHMARK_FILE = "benchmark.tsv"
_RUN = re.compile(r"^(?P<kind>.+)-(?P<bp>\d+)$")


def context_runs(task: Path) -> dict[int, Path]:
    """{context bp: report folder} of genobird's runs with test predictions."""
    runs = {}
    for folder in task.glob("context-*/report"):
        bp = folder.parent.name.removeprefix("context-")
        if bp.isdigit() and (folder / PREDICTIONS).is_file():
            runs[int(bp)] = folder
    return dict(sorted(runs.items()))


def baseline_runs(task: Path) -> list[tuple[str, int, Path]]:
    """(kind, context bp, report folder) of every baseline with test predictions."""
    runs = []
    for folder in sorted(task.glob("baselines/*/report")):
        match = _RUN.match(folder.parent.name)
        if match and (folder / PREDICTIONS).is_file():
            runs.append((match["kind"], int(match["bp"]), folder))
    return runs


def arm_runs(task: Path) -> dict[str, dict[int, Path]]:
    """{arm: {context bp: report folder}}: genobird first, then each baseline kind."""
    arms = {GENOBIRD: context_runs(task)}
    for kind, bp, folder in baseline_runs(task):
        arms.setdefault(kind, {})[bp] = folder
    return {arm: dict(sorted(runs.items())) for arm, runs in arms.items()}


def validation_auroc(run: Path) -> float | None:
    """The kept model's mean validation AUROC: genobird's best check, a baseline's chosen
    setting (None where the run recorded none)."""
    metrics = json.loads((run / "metrics.json").read_text())
    value = (metrics.get("training") or {}).get("best_validation_auroc")
    if value is None:
        value = (metrics.get("baseline") or {}).get("validation_auroc")
    return None if value is None else float(value)


def chosen_context(runs: dict[int, Path]) -> int:
    """The context whose kept weights scored the highest validation AUROC (the widest
    where runs tie or recorded none)."""

    def score(bp: int) -> float:
        value = validation_auroc(runs[bp])
        return float("-inf") if value is None else value

    return max(runs, key=lambda bp: (score(bp), bp))


def how_it_stopped(run: Path) -> dict | None:
    """What ended a run, from its metrics: {"cut": whether a budget cut it short rather
    than its validation or its schedule, "detail": in words}. A CNN (constant learning
    rate) whose kept epoch is its last, ended by its minutes or epochs, was cut with
    validation still rising. A fine-tuning run whose kept check is its last ran its whole
    schedule, the learning rate decayed to zero there: not cut (a longer schedule is
    another recipe, whose validation may be lower) unless its minutes ended it first.
    None for a run without checks on validation along the way (the k-mer LR chooses C on
    validation once; no budget cuts it)."""

    def stop(cut: bool, detail: str) -> dict:
        return {"cut": cut, "detail": detail}

    metrics = json.loads((run / "metrics.json").read_text())
    training = metrics.get("training") or {}
    if training.get("best_validation_auroc") is not None and training.get("steps"):
        steps, best = training["steps"], training.get("best_step", training["steps"])
        if training.get("stopped_early"):
            return stop(False, f"stopped by validation at step {steps:,} (best {best:,})")
        if best < steps:
            return stop(False, f"validation best at step {best:,} of {steps:,}")
        if training.get("stopped_at_time"):
            return stop(True, f"cut by its minutes at step {steps:,}: still improving")
        return stop(False, f"best at its schedule's end (step {steps:,}, learning rate zero)")
    baseline = metrics.get("baseline") or {}
    if baseline.get("best_epoch") and baseline.get("epochs"):
        epochs, best = baseline["epochs"], baseline["best_epoch"]
        if best < epochs:
            return stop(False, f"validation best at epoch {best} of {epochs}")
        budget = (
            f"its {baseline['max_minutes']:g}-minute budget"
            if baseline.get("max_epochs")
            and epochs < baseline["max_epochs"]
            and baseline.get("max_minutes")
            else f"its {epochs} epochs"
        )
        return stop(True, f"cut by {budget}: still improving at epoch {epochs}")
    return None


def started_from(run: Path) -> list[str]:
    """The baseline runs (KIND-BP folder names) whose fitted models a genobird run read as
    its base readers (base-start.json's `read_from`): their minutes are theirs, counted
    once, where they ran as arms of their own."""
    from genobird.finetuning.run_folder import RunFolder

    path = RunFolder.of_report(run).base_start
    if not path.is_file():
        return []
    record = json.loads(path.read_text())
    sources = (record.get(reader, {}).get("read_from") for reader in ("base_cnn", "base_kmer_lr"))
    # RUN/fitted/STEM.safetensors (a fine-tuning run's own cache is not a run)
    runs = [
        Path(source).parents[1]
        for source in sources
        if source and Path(source).parent.name == SAVED_FOLDER
    ]
    return [run.name for run in runs if _RUN.match(run.name)]


def run_seconds(run: Path) -> float | None:
    """The wall time of the pipeline job that wrote a run (its benchmark file), if any."""
    path = run.parent / BENCHMARK_FILE
    if not path.is_file():
        return None
    with path.open() as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return float(rows[-1]["s"]) if rows else None


def feature_scales(task: Path) -> dict[str, str]:
    """{feature name: scale} from the task's data set (empty where the tables gave none)."""
    from genobird.datasets.windows import read_metadata

    meta = read_metadata(task / "data.h5")
    return dict(zip(meta["feature_names"], meta["scales"], strict=False))


def grouped(run: FeaturePredictions, by: str, scales: dict[str, str]) -> FeaturePredictions:
    """The run with its features grouped by category, or by scale (features whose table
    gives none grouped as "unscaled")."""
    if by == "category":
        return run
    return replace(run, categories=[scales.get(name) or UNSCALED for name in run.feature_names])


def medians(run: FeaturePredictions, min_positives: int) -> dict:
    """{group: (median AUROC, median AUPRC, features)} over the features with enough
    test positives."""
    out = {}
    for group, columns in feature_groups(run, min_positives).items():
        metrics = multilabel_metrics(
            run.labels[:, columns],
            run.probabilities[:, columns],
            [run.feature_names[c] for c in columns],
            [group] * len(columns),
        )["per_feature"]
        if metrics:
            out[group] = (
                float(np.median([m["auroc"] for m in metrics.values()])),
                float(np.median([m["auprc"] for m in metrics.values()])),
                len(metrics),
            )
    return out


def summarise(
    task: str | Path,
    min_positives: int = 20,
    resamples: int = 1000,
    seed: int = 0,
    by: str = "category",
) -> dict:
    """The context ablation of one chromatin task folder, as a dict (the report's tables
    and `benchmarks/chromatin_context.py`'s targets read it):
    arms            {arm: {name, best_context, contexts: {bp: {medians, validation_auroc,
                    seconds, stop (how_it_stopped), started_from}}}}
    gain_over_narrowest  {arm: {bp: {group: paired difference}}}
    same_context    genobird minus each baseline at each context both ran
    best_against_best    genobird at its best context minus each baseline at its best
    chosen_context  genobird's best context; genobird: its medians by context"""
    task = Path(task)
    if by not in GROUPINGS:
        raise InputError(f"group the features by one of {GROUPINGS}, not {by!r}")
    arms = arm_runs(task)
    if not arms[GENOBIRD]:
        raise InputError(f"{task}: no context-BP/report/{PREDICTIONS}; fine-tune the task first")
    scales = feature_scales(task) if by == "scale" else {}
    if by == "scale" and not any(scales.values()):
        raise InputError(f"{task}: its feature tables give no scale column to group by")
    predictions = {
        arm: {
            bp: grouped(read_feature_predictions(folder), by, scales) for bp, folder in runs.items()
        }
        for arm, runs in arms.items()
    }

    def paired(a, b) -> dict:
        return paired_median_auroc(a, b, resamples, seed, min_positives)["categories"]

    summary = {
        "task": task.name,
        "by": by,
        "min_positives": min_positives,
        "resamples": resamples,
        "arms": {},
        "gain_over_narrowest": {},
        "same_context": [],
        "best_against_best": [],
    }
    for arm, runs in arms.items():
        summary["arms"][arm] = {
            "name": ARM_NAMES.get(arm, arm),
            "best_context": chosen_context(runs),
            "contexts": {
                bp: {
                    "medians": medians(predictions[arm][bp], min_positives),
                    "validation_auroc": validation_auroc(folder),
                    "seconds": run_seconds(folder),
                    "stop": how_it_stopped(folder),
                    "started_from": started_from(folder),
                }
                for bp, folder in runs.items()
            },
        }
        narrowest = min(runs)
        summary["gain_over_narrowest"][arm] = {
            bp: paired(predictions[arm][bp], predictions[arm][narrowest])
            for bp in runs
            if bp != narrowest
        }
    ours = predictions[GENOBIRD]
    best = summary["arms"][GENOBIRD]["best_context"]
    for arm, runs in arms.items():
        if arm == GENOBIRD:
            continue
        name = ARM_NAMES.get(arm, arm)
        for bp in runs:
            if bp in ours:
                difference = paired(ours[bp], predictions[arm][bp])
                summary["same_context"].append(
                    {"name": name, "kind": arm, "context": bp, "categories": difference}
                )
        theirs = summary["arms"][arm]["best_context"]
        summary["best_against_best"].append(
            {
                "name": name,
                "kind": arm,
                "context": theirs,
                "genobird_context": best,
                "categories": paired(ours[best], predictions[arm][theirs]),
            }
        )
    summary["chosen_context"] = best
    contexts = summary["arms"][GENOBIRD]["contexts"]
    summary["genobird"] = {bp: row["medians"] for bp, row in contexts.items()}
    return summary


def best_baseline(summary: dict) -> dict | None:
    """The best_against_best row of the baseline arm with the highest validation AUROC at
    its best context (chosen on validation, as each arm's context is)."""
    rows = summary["best_against_best"]
    if not rows:
        return None

    def score(row: dict) -> float:
        value = summary["arms"][row["kind"]]["contexts"][row["context"]]["validation_auroc"]
        return float("-inf") if value is None else value

    return max(rows, key=score)


# ------------------------------------------------------------------------- targets
# the whole ablation (every arm at every context) on 2 cores
ABLATION_BUDGET_MINUTES = 90
# chromatin states: the groups where genobird must lead the best baseline, and how far
# below it any other group may be (the paired interval's lower end)
MUST_LEAD = ("polycomb", "enhancer")
LEAD_MARGIN = -0.02


@dataclass(frozen=True)
class Target:
    """One claim the ablation is held to, whether its figures meet it, and those figures."""

    claim: str
    met: bool
    detail: str


def targets(task: str | Path, summary: dict) -> list[Target]:
    """The targets of a task's ablation (`summarise` by category): its cost, then on a
    task whose features have scales (chromatin states) the state targets, else the peak
    targets (TF, DNase and histone categories)."""
    from genobird.datasets.windows import read_metadata

    meta = read_metadata(Path(task) / "data.h5")
    cost = cost_target(summary)
    found = [cost] if cost else []
    if any(meta["scales"]):
        return found + state_targets(summary, broad_groups(meta))
    return found + peak_targets(summary)


def cost_target(summary: dict) -> Target | None:
    seconds = [
        row["seconds"] for arm in summary["arms"].values() for row in arm["contexts"].values()
    ]
    known = [s for s in seconds if s is not None]
    if not known:
        return None
    timed = [
        (arm["name"], bp, row["seconds"])
        for arm in summary["arms"].values()
        for bp, row in arm["contexts"].items()
        if row["seconds"] is not None
    ]
    cells = ", ".join(f"{name} {bp:,} bp {seconds / 60:.1f}" for name, bp, seconds in timed)
    missing = len(seconds) - len(known)
    detail = f"{sum(known) / 60:.1f} minutes of runs: {cells}"
    if missing:
        detail += f"; {missing} runs without a benchmark file"
    met = not missing and sum(known) / 60 <= ABLATION_BUDGET_MINUTES
    return Target(f"the whole ablation within {ABLATION_BUDGET_MINUTES} minutes", met, detail)


def cut_short(summary: dict) -> list[str]:
    """The runs their budget ended while validation was still rising ("genobird 4,000
    bp"), arm by arm: where the ablation's figures are a budget's, not an arm's best."""
    return [
        f"{arm['name']} {bp:,} bp"
        for arm in summary["arms"].values()
        for bp, row in arm["contexts"].items()
        if row["stop"] and row["stop"]["cut"]
    ]


def broad_groups(meta: dict) -> list[str]:
    """The categories whose features are all of broad scale (a data set's metadata)."""
    scales: dict[str, set] = {}
    for category, scale in zip(meta["categories"], meta["scales"], strict=False):
        scales.setdefault(category, set()).add(scale)
    return sorted(c for c, found in scales.items() if found == {"broad"})


def state_targets(summary: dict, broad: list[str]) -> list[Target]:
    """Long context pays on every broad group (genobird's best context of 4 kb or more
    above its 1 kb, interval above zero), and genobird at its best context is at least the
    best baseline at its best in every group (interval's lower end above LEAD_MARGIN),
    above it on MUST_LEAD."""
    found = []
    contexts = summary["arms"][GENOBIRD]["contexts"]
    long = {bp: row for bp, row in contexts.items() if bp >= 4000}
    if long and 1000 in contexts:
        best_long = max(long, key=lambda bp: (long[bp]["validation_auroc"] or float("-inf"), bp))
        gains = summary["gain_over_narrowest"][GENOBIRD].get(best_long, {})
        rows = {group: gains[group] for group in broad if group in gains}
        found.append(
            Target(
                f"genobird {best_long:,} bp (its best of 4 kb or more) above 1,000 bp on every "
                "broad group",
                bool(rows) and all(r["low"] > 0 for r in rows.values()),
                ", ".join(f"{g} {describe_difference(r)}" for g, r in rows.items())
                or "no broad group counted",
            )
        )
    row = best_baseline(summary)
    if row is not None:
        groups = {g: d for g, d in row["categories"].items() if g != "all"}
        found.append(
            Target(
                f"genobird {row['genobird_context']:,} bp at least the best baseline "
                f"({row['name']} {row['context']:,} bp, chosen on validation) in every group, "
                f"above it on {' and '.join(MUST_LEAD)}",
                all(d["low"] > (0.0 if g in MUST_LEAD else LEAD_MARGIN) for g, d in groups.items()),
                ", ".join(f"{g} {describe_difference(d)}" for g, d in groups.items()),
            )
        )
    return found


def peak_targets(summary: dict) -> list[Target]:
    """TF median AUROC at least the narrowest DeepSEA CNN's (both at the narrowest
    context), and a category where the widest context beats the narrowest."""
    found = []
    contexts = summary["arms"][GENOBIRD]["contexts"]
    narrowest, widest = min(contexts), max(contexts)
    cnn = [
        row
        for row in summary["same_context"]
        if row["kind"] == "deepsea-cnn" and row["context"] == narrowest
    ]
    if cnn and "TF" in cnn[0]["categories"]:
        row = cnn[0]["categories"]["TF"]
        found.append(
            Target(
                f"TF median AUROC >= the {narrowest:,} bp DeepSEA CNN's",
                row["difference"] >= 0,
                f"genobird {row['a']:.3f}, CNN {row['b']:.3f}, {describe_difference(row)}",
            )
        )
    gains = summary["gain_over_narrowest"][GENOBIRD].get(widest, {})
    helped = [c for c, row in gains.items() if c != "all" and row["low"] > 0]
    found.append(
        Target(
            f"{widest:,} bp above {narrowest:,} bp with the interval above zero in a category",
            bool(helped),
            ", ".join(helped) or "none",
        )
    )
    return found
