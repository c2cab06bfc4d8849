"""Each fine-tuned sequence task beside its baselines: figures, how they were made,
paired differences, zero-shot scores, seeds."""

from __future__ import annotations

import html
import json
import statistics
from pathlib import Path

from genobird.artifacts import ResultsFolder, describe_difference
from genobird.report.evaluated import how_evaluated
from genobird.report.names import MODEL_NAMES
from genobird.report.page import html_image, html_table
from genobird.report.sources import comparisons_record, task_table

TASKS = ("promoter", "chromatin")


# MCC and F1 at the threshold chosen on validation (metrics.json's `threshold`), then at 0.5
PROMOTER_KEYS = (
    "examples",
    "positives",
    "auroc",
    "auprc",
    "f1",
    "mcc",
    "threshold",
    "f1 at 0.5",
    "mcc at 0.5",
)


BINARY_COLUMNS = ("mcc", "f1", "threshold", "mcc at 0.5", "auroc", "auprc")


def figure(metrics: dict, key: str, missing=None):
    """A figure of metrics.json by its column name: 'mcc at 0.5' is at_0.5's mcc (a run
    written before thresholds were chosen on validation called at 0.5: its own mcc)."""
    name, _, at = key.partition(" at ")
    if not at:
        return metrics.get(key, missing)
    if "at_" + at in metrics:
        return metrics["at_" + at].get(name, missing)
    return metrics.get(name, missing) if "threshold" not in metrics else missing


MULTILABEL_COLUMNS = ("median_auroc", "median_auprc")


GENOBIRD_NAME = "genobird (fine-tuned BigBird)"


ZERO_SHOT_NAMES = {
    "genobird": "genobird zero-shot (pretrained BigBird)",
    "markov": "order-k Markov model zero-shot",
}


def task_folders(results: Path) -> list[str]:
    """Results-relative folders of every fine-tuning task that has a report."""
    return ResultsFolder(results).task_folders()


def comparison_table(results: Path, folder: str) -> str:
    """genobird against each baseline that ran on the same data set (test split); with
    further fine-tuning seeds, each seed and their mean."""
    layout = ResultsFolder(results)
    main = layout.task_report(folder) / "metrics.json"
    seeds = [
        (f"genobird, seed {report.parts[-2]}", report / "metrics.json")
        for report in layout.seed_reports(folder)
    ]
    genobird = [("genobird, seed 0", main), *seeds] if seeds else [(GENOBIRD_NAME, main)]
    baselines = [
        (MODEL_NAMES.get(report.parts[-2], report.parts[-2]), report / "metrics.json")
        for report in layout.baseline_reports(folder)
    ]
    return runs_table(results, folder, genobird + baselines, seeds=len(genobird))


def zero_shot_table(results: Path, folder: str) -> str:
    """The data set classified by likelihood alone (genobird zero-shot): the pretrained
    model against the Markov models of the same DNA; empty where neither ran."""
    layout = ResultsFolder(results)
    runs = [
        (name, layout.zero_shot_report(folder, kind) / "metrics.json")
        for kind, name in ZERO_SHOT_NAMES.items()
    ]
    runs = [(name, path) for name, path in runs if path.is_file()]
    if not runs:
        return ""
    markov = layout.zero_shot_report(folder, "markov") / "metrics.json"
    order = json.loads(markov.read_text()).get("order") if markov.is_file() else "k"
    note = (
        "<p>No fine-tuning: each test sequence's bits per bp under the pretrained model, "
        "and under order-k Markov models of the DNA it was pretrained on (order "
        f"{order} chosen on the validation split), made a probability by a one-feature "
        "logistic fit on the training split.</p>"
    )
    return (
        "<h3>Zero-shot, by likelihood alone</h3>"
        + note
        + runs_table(results, f"{folder}/zero-shot", runs)
    )


def runs_table(results: Path, key: str, runs: list[tuple[str, Path]], seeds: int = 1) -> str:
    """The test metrics of runs on one data set, and the first minus each other, paired
    (the comparisons' table `key`). The first `seeds` runs are one recipe's seeds: they get
    a row of their mean, and it is their mean that is paired with each other run."""
    reports = [(name, json.loads(path.read_text())) for name, path in runs]
    columns = BINARY_COLUMNS if "f1" in reports[0][1] else MULTILABEL_COLUMNS
    rows = [(name, *(figure(report, key, "-") for key in columns)) for name, report in reports]
    if seeds > 1:
        means = [
            mean_cell([figure(report, key) for _, report in reports[:seeds]]) for key in columns
        ]
        rows.insert(seeds, (f"{GENOBIRD_NAME}, mean of {seeds} seeds", *means))
    text = html_table(rows, ("model", *columns))
    if "f1" in reports[0][1]:
        text += paired_difference_table(results, key, runs, seeds)
    return text


def mean_cell(values: list):
    """The mean of a column's figures, or '-' where a run lacks one."""
    if any(value is None for value in values):
        return "-"
    return round(statistics.fmean(values), 4)


def paired_difference_table(
    results: Path, key: str, runs: list[tuple[str, Path]], seeds: int = 1
) -> str:
    """genobird (the mean of its first `seeds` runs) minus each baseline on the same test
    sequences, with 95% intervals (the comparisons' table `key`); empty where genobird's
    first run wrote no test predictions."""
    table = task_table(results, key)
    if table is None:
        return ""
    layout, metrics, rows = ResultsFolder(results), table["metrics"], []
    for name, path in runs[seeds:]:
        row = table["rows"].get(layout.relative(path.parent))
        if row is None:  # a run without test predictions
            continue
        if "error" in row:  # another data set's split: no pairing, say why
            rows.append((name, *["-"] * (len(metrics) - 1), row["error"]))
            continue
        rows.append((name, *(describe_difference(row["metrics"][m]) for m in metrics)))
    runs_paired = table["runs"]
    side = "genobird" if runs_paired == 1 else f"The mean of genobird's {runs_paired} seeds"
    note = (
        f"<p>{side} minus each baseline on the same {table['examples']:,} test "
        f"sequences, with 95% paired bootstrap intervals ({table['resamples']:,} resamples); "
        "an interval that holds 0 is a tie on this split.</p>"
    )
    return note + html_table(rows, ("genobird minus", *metrics))


def spread_rows(metrics: dict, shown: int = 20) -> list[tuple]:
    spread = metrics.get("prediction_spread")
    if not spread:
        return []
    rows = [
        (f"prediction std over test sequences, {k.removesuffix('_std')}", spread[k])
        for k in ("min_std", "median_std", "max_std")
    ]
    by_feature = spread["std_by_feature"]
    if len(by_feature) > 1:
        rows += [
            (f"prediction std, {name}", value) for name, value in list(by_feature.items())[:shown]
        ]
    return rows


# what a promoter predictor of genobird's promoter data sets has learnt to tell apart
PROMOTER_SCOPE = (
    "What this model knows: its negatives are DeePromoter's, each promoter with 12 of its "
    "20 segments replaced by random bases (unless the data set was built with "
    "--hard-negatives). It tells a promoter from its scramble, not a promoter from the rest "
    "of the genome, and scores most genomic windows high: judge it on genomic negatives "
    "before scanning a genome with it (docs/scoring.md)."
)


def finetune_section(results: Path, folder: str) -> str:
    report_dir = results / folder / "report"
    metrics = json.loads((report_dir / "metrics.json").read_text())
    name = folder.removeprefix("tasks/")
    split = html.escape(metrics.get("split", "?"))
    text = f"<h2>Fine-tuning: {html.escape(name)} (split: {split})</h2>"
    text += how_evaluated(metrics)
    if metrics.get("task") == "promoter":
        text += f"<p>{PROMOTER_SCOPE}</p>"
    text += "<h3>Against baselines on the same data</h3>" + comparison_table(results, folder)
    text += zero_shot_table(results, folder)
    if "f1" in metrics:
        rows = [
            (key, figure(metrics, key)) for key in PROMOTER_KEYS if figure(metrics, key) is not None
        ]
    else:
        rows = [
            ("examples", metrics["examples"]),
            ("median AUROC", metrics["median_auroc"]),
            ("median AUPRC", metrics["median_auprc"]),
        ]
        rows += [
            (f"median AUROC, {category}", value)
            for category, value in sorted(metrics.get("median_auroc_by_category", {}).items())
        ]
    text += html_table(rows + spread_rows(metrics))
    for png in sorted(report_dir.glob("*.png")):
        text += html_image(png.read_bytes(), f"{name} {png.stem}")
    return text


ORDER = 50


def promoter_check(results: Path) -> dict | None:
    """The promoter predictor's test MCC against the k-mer LR's on the same windows."""
    row = comparisons_record(results).get("promoter")
    if row is None:
        return None
    return {
        "name": "promoter",
        "check": "promoter MCC at least the k-mer LR's",
        "genobird": row["a"],
        "baseline": row["b"],
        "difference": [row["difference"], row["low"], row["high"]],
        "met": row["a"] >= row["b"],
    }


CHECKS = ((40, promoter_check),)


def section(report) -> str:
    return "".join(
        finetune_section(report.results, folder) for folder in task_folders(report.results)
    )
