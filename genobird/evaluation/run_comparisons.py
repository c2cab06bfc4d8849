"""The pipeline's paired comparisons of its fine-tuned models with their baselines,
written as one artifact (results/comparisons.json, `genobird evaluate runs`) that the
report's sections and checks draw:

- on a genome with long-range chromatin features (the demo's manifest lists them): the
  chromatin predictor's median test AUROC over those features and over the local ones,
  beside each baseline's, test bins resampled in pairs;
- the promoter predictor's test MCC beside the k-mer LR's, test windows resampled in
  pairs;
- each fine-tuned task's table: genobird (the mean of its seeds) minus each baseline run
  on the same data, and genobird zero-shot minus the Markov models, test sequences
  resampled in pairs;
- each chromatin task's context ablation (genobird.evaluation.context_ablation).
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

from genobird.artifacts import ResultsFolder, RunComparisons, newer_than_inputs
from genobird.errors import InputError

# paired resamples of each comparison
LONG_RANGE_RESAMPLES = 1000
PROMOTER_RESAMPLES = 2000
TABLE_RESAMPLES = 2000
# the chromatin baselines the long-range features are compared with
CHROMATIN_BASELINES = ("cnn", "kmer-lr")


def compare_runs(results) -> RunComparisons:
    """Every comparison the results folder has the runs for, written to
    results/comparisons.json; returns the record (None entries where a run is missing)."""
    folder = ResultsFolder(results)
    record = RunComparisons(
        long_range=long_range_comparison(folder),
        promoter=promoter_comparison(folder),
        tables=task_tables(folder),
        chromatin_tasks={task.name: ablation(task) for task in folder.chromatin_task_folders()},
    )
    record.write(folder.root)
    return record


def comparison_inputs(folder: ResultsFolder) -> list:
    """The files the comparisons read."""
    from genobird.datasets.metrics import PREDICTIONS

    chromatin = [folder.baseline_report("chromatin", kind) for kind in CHROMATIN_BASELINES]
    runs = [
        folder.task_report("chromatin"),
        *chromatin,
        folder.task_report("promoter"),
        folder.baseline_report("promoter", "kmer-lr"),
    ]
    for task in folder.task_folders():
        runs += [run for table in table_runs(folder, task).values() for run in table[0]]
    for task in folder.chromatin_task_folders():
        runs += sorted(task.glob("context-*/report")) + sorted(task.glob("baselines/*/report"))
    # a run's metrics too: a task whose runs wrote no predictions still gets its table's
    # entry (None)
    files = [run / name for run in runs for name in (PREDICTIONS, "metrics.json")]
    return [folder.manifest, *files]


def ensure_comparisons(results) -> bool:
    """Compare the runs unless results/comparisons.json was written after the files it
    reads (a pipeline's comparison rule wrote it), or the folder has no run to compare
    (a folder that is not a pipeline's gets no file); True when it ran."""
    folder = ResultsFolder(results)
    if not folder.has_runs() or newer_than_inputs(folder.comparisons, comparison_inputs(folder)):
        return False
    compare_runs(results)
    return True


def long_range_comparison(folder: ResultsFolder) -> dict | None:
    """{"features": the long-range ones, "resamples": N, "baselines": {kind: {"long-range":
    row, "local": row}}}, each row a paired median AUROC (evaluation.compare), or None
    without long-range features or the chromatin predictor's test predictions."""
    from genobird.datasets.metrics import PREDICTIONS
    from genobird.evaluation.compare import paired_median_auroc, read_feature_predictions

    ours_path = folder.task_report("chromatin") / PREDICTIONS
    if not (folder.manifest.is_file() and ours_path.is_file()):
        return None
    long_range = set(json.loads(folder.manifest.read_text()).get("long_range_features", []))
    if not long_range:
        return None

    def by_reach(run):
        groups = ["long-range" if name in long_range else "local" for name in run.feature_names]
        return replace(run, categories=groups)

    ours = by_reach(read_feature_predictions(ours_path))
    baselines = {}
    for kind in CHROMATIN_BASELINES:
        theirs_path = folder.baseline_report("chromatin", kind) / PREDICTIONS
        if theirs_path.is_file():
            theirs = by_reach(read_feature_predictions(theirs_path))
            paired = paired_median_auroc(ours, theirs, LONG_RANGE_RESAMPLES)["categories"]
            baselines[kind] = paired
    return {
        "features": sorted(long_range),
        "resamples": LONG_RANGE_RESAMPLES,
        "baselines": baselines,
    }


def promoter_comparison(folder: ResultsFolder) -> dict | None:
    """The promoter predictor's test MCC against the k-mer LR's on the same windows (a
    paired bootstrap row), or None without both runs."""
    from genobird.datasets.metrics import PREDICTIONS
    from genobird.evaluation.compare import paired_bootstrap, read_predictions

    ours = folder.task_report("promoter")
    theirs = folder.baseline_report("promoter", "kmer-lr")
    if not ((ours / PREDICTIONS).is_file() and (theirs / PREDICTIONS).is_file()):
        return None
    return paired_bootstrap(
        read_predictions(ours), read_predictions(theirs), PROMOTER_RESAMPLES, metrics=("mcc",)
    )["metrics"]["mcc"]


def table_runs(folder: ResultsFolder, task: str) -> dict[str, tuple[list[Path], int]]:
    """{table key: (report folders, how many of the first are genobird's seeds)} of a
    task: its fine-tuned model (and further seeds) beside its baselines, and its
    zero-shot runs (genobird's beside the Markov models'), where they ran."""
    seeds = folder.seed_reports(task)
    genobird = [folder.task_report(task), *seeds]
    tables = {task: (genobird + folder.baseline_reports(task), len(genobird))}
    zero_shot = [
        run
        for run in (folder.zero_shot_report(task, kind) for kind in ("genobird", "markov"))
        if (run / "metrics.json").is_file()
    ]
    if zero_shot:
        tables[f"{task}/zero-shot"] = (zero_shot, 1)
    return tables


def task_tables(folder: ResultsFolder) -> dict[str, dict | None]:
    """Each task's tables (`table_runs`), each `paired_table`'s."""
    return {
        key: paired_table(folder, runs, seeds)
        for task in folder.task_folders()
        for key, (runs, seeds) in table_runs(folder, task).items()
    }


def paired_table(folder: ResultsFolder, runs: list[Path], seeds: int) -> dict | None:
    """genobird (the mean of the first `seeds` runs) minus each other run on the same test
    sequences, as paired bootstrap rows by metric ({"metrics": their names, "runs":
    genobird's runs paired,
    "examples", "resamples", "rows": {run folder: {"metrics": ...} or {"error": why no
    pairing}}}); None where genobird's first run or every other wrote no test predictions,
    or the task has several outputs."""
    from genobird.datasets.metrics import PREDICTIONS
    from genobird.evaluation.compare import METRICS, paired_bootstrap, read_predictions

    present = [run for run in runs if (run / PREDICTIONS).is_file()]
    others = [run for run in runs[seeds:] if run in present]
    if runs[0] not in present or not others or not binary(runs[0]):
        return None
    genobird = [read_predictions(run) for run in runs[:seeds] if run in present]
    rows = {}
    for run in others:
        try:
            result = paired_bootstrap(genobird, read_predictions(run), TABLE_RESAMPLES)
        except InputError as error:  # another data set's split: no pairing, say why
            rows[folder.relative(run)] = {"error": str(error)}
            continue
        rows[folder.relative(run)] = {"metrics": result["metrics"]}
    return {
        "metrics": list(METRICS),
        "runs": len(genobird),
        "examples": int(genobird[0].labels.size),
        "resamples": TABLE_RESAMPLES,
        "rows": rows,
    }


def binary(run: Path) -> bool:
    """Whether a run's task has one output, scored with F1 and MCC (a chromatin
    predictor's figures are per feature: its comparisons are the long-range ones)."""
    metrics = run / "metrics.json"
    return metrics.is_file() and "f1" in json.loads(metrics.read_text())


def ablation(task: Path) -> dict:
    """A chromatin task's context ablation: its summary by category (and by scale where
    the feature tables give one), the targets it is held to, the runs cut short, and the
    runs its region plot draws (genobird at its best context, the best baseline at its)."""
    from genobird.evaluation.context_ablation import (
        GENOBIRD,
        arm_runs,
        best_baseline,
        cut_short,
        feature_scales,
        summarise,
        targets,
    )

    summary = summarise(task)
    arms = arm_runs(task)
    best = summary["arms"][GENOBIRD]["best_context"]
    curves = [
        {
            "name": f"genobird, {best:,} bp",
            "report": arms[GENOBIRD][best].relative_to(task).as_posix(),
        }
    ]
    if (baseline := best_baseline(summary)) is not None:
        run = arms[baseline["kind"]][baseline["context"]]
        curves.append(
            {
                "name": f"{baseline['name']}, {baseline['context']:,} bp",
                "report": run.relative_to(task).as_posix(),
            }
        )
    by_scale = summarise(task, by="scale") if any(feature_scales(task).values()) else None
    return {
        "summary": summary,
        "by_scale": by_scale,
        "targets": [asdict(target) for target in targets(task, summary)],
        "cut_short": cut_short(summary),
        "region_curves": curves,
    }
