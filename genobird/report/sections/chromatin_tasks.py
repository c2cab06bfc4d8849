"""Each chromatin task's context ablation (the pipeline's chromatin_tasks): every arm
at every context, by category and by scale, paired differences and targets."""

from __future__ import annotations

import html
import json
import statistics
from pathlib import Path

from genobird.artifacts import ResultsFolder
from genobird.report.chromatin_plots import plot_along_region, plot_context_ablation
from genobird.report.evaluated import how_evaluated
from genobird.report.page import (
    difference_cell,
    figure_png,
    html_image,
    html_table,
    median_cell,
)
from genobird.report.sources import ablation


def chromatin_task_section(results: Path, task: Path) -> str:
    """A chromatin task fine-tuned at several contexts (the pipeline's chromatin_tasks):
    positives per split, every arm at every context by category (and by scale, where the
    feature tables give one), each context's gain over the narrowest per arm, and genobird
    against each baseline at the same context and at each one's best, paired over the test
    bins (the ablation the run comparisons hold)."""
    found = ablation(results, task.name)
    summary = found["summary"]
    text = f"<h2>Chromatin profiles: {html.escape(task.name)}</h2>"
    text += positives_table(task / "data.h5")
    first = json.loads((context_runs_metrics(task, summary)).read_text())
    text += how_evaluated(first)
    pretrained = (first.get("training") or {}).get("pretrained")
    if pretrained:
        text += f"<p>Every context fine-tunes the pretrained model {html.escape(pretrained)}.</p>"
    text += context_ablation_tables(summary)
    claims = "".join(
        f"<li>{'met' if t['met'] else 'NOT met'}: {html.escape(t['claim'])} "
        f"({html.escape(t['detail'])})</li>"
        for t in found["targets"]
    )
    text += f"<p>Targets:</p><ul>{claims}</ul>"
    if cut := found["cut_short"]:
        text += (
            f"<p>Cut short by their budget, validation still rising at their last check: "
            f"{html.escape(', '.join(cut))}. Their figures are the budget's, not the "
            "arm's best.</p>"
        )
    if found["by_scale"]:
        text += "<h3>By scale</h3>" + context_ablation_tables(found["by_scale"])
    text += html_image(figure_png(plot_context_ablation(summary)), "median AUROC by context")
    text += along_region(task, found["region_curves"])
    return text


def along_region(task: Path, curves: list[dict]) -> str:
    """A few features' predictions along the held-out region beside what was observed."""
    text = (
        "<p>Predicted against observed along the held-out chromosome, in each category "
        "the feature with the most test positives: genobird at its best context and the "
        "best baseline at its own, each chosen on validation; grey ticks are the "
        "positive test bins (the bins are those sampled for the test split).</p>"
    )
    return text + html_image(
        figure_png(plot_along_region(task, curves)),
        "predicted and observed along the held-out region",
    )


def minutes_cell(row: dict) -> str:
    minutes = "-" if row["seconds"] is None else f"{row['seconds'] / 60:.1f}"
    if row.get("started_from"):
        minutes += f" (+ {', '.join(row['started_from'])})"
    return minutes


def context_ablation_tables(summary: dict) -> str:
    """The ablation's tables, grouped as the summary is (by category or by scale)."""
    groups = sorted(
        {
            g
            for arm in summary["arms"].values()
            for row in arm["contexts"].values()
            for g in row["medians"]
        }
    )
    rows = []
    for arm in summary["arms"].values():
        for bp, row in arm["contexts"].items():
            best = " (best on validation)" if bp == arm["best_context"] else ""
            valid = row["validation_auroc"]
            rows.append(
                (
                    f"{arm['name']}, {bp:,} bp{best}",
                    "-" if valid is None else f"{valid:.3f}",
                    minutes_cell(row),
                    row["stop"]["detail"] if row["stop"] else "-",
                    *(median_cell(row["medians"].get(g)) for g in groups),
                )
            )
    text = (
        f"<p>Test median AUROC / AUPRC by {summary['by']} over the features with at least "
        f"{summary['min_positives']} test positives (their count in brackets), beside "
        "each run's mean validation AUROC (what chooses an arm's best context), wall "
        "time (a run that starts from baseline runs names them: their minutes are "
        "theirs) and what ended it.</p>"
    )
    text += html_table(rows, ("model", "validation AUROC", "minutes", "ended by", *groups))
    gains = []
    for arm, runs in summary["gain_over_narrowest"].items():
        narrowest = min(summary["arms"][arm]["contexts"])
        gains += [
            (
                f"{summary['arms'][arm]['name']}, {bp:,} bp minus {narrowest:,} bp",
                *(difference_cell(row.get(g)) for g in groups),
            )
            for bp, row in runs.items()
        ]
    if gains:
        text += (
            "<p>What more context adds to each arm: the median AUROC difference with "
            f"its 95% interval over {summary['resamples']:,} paired resamples of the test "
            "bins.</p>" + html_table(gains, ("comparison", *groups))
        )
    against = [
        (
            f"genobird minus {row['name']}, both at {row['context']:,} bp",
            *(difference_cell(row["categories"].get(g)) for g in groups),
        )
        for row in summary["same_context"]
    ]
    against += [
        (
            f"genobird {row['genobird_context']:,} bp minus {row['name']} "
            f"{row['context']:,} bp, each at its best",
            *(difference_cell(row["categories"].get(g)) for g in groups),
        )
        for row in summary["best_against_best"]
    ]
    if against:
        text += html_table(against, ("comparison", *groups))
    return text


def context_runs_metrics(task: Path, summary: dict) -> Path:
    return task / f"context-{summary['chosen_context']}" / "report" / "metrics.json"


def positives_table(data: Path) -> str:
    """Positives per feature in each split, by category (a held-out split whose features
    have few positives cannot evaluate them)."""
    from genobird.datasets.windows import read_metadata

    if not data.is_file():
        return ""
    meta = read_metadata(data)
    categories = meta["categories"] or ["all"] * len(meta["feature_names"])
    rows = []
    for split, positives in meta["positives_by_split"].items():
        for category in sorted(set(categories)):
            counts = [p for p, c in zip(positives, categories, strict=True) if c == category]
            rows.append(
                (
                    split,
                    category,
                    meta["counts"][split],
                    len(counts),
                    int(statistics.median(counts)),
                    min(counts),
                    sum(count >= 20 for count in counts),
                )
            )
    header = (
        "split",
        "category",
        "windows",
        "features",
        "median positives",
        "fewest",
        "features with 20+",
    )
    return html_table(rows, header)


ORDER = 60


def section(report) -> str:
    results = report.results
    return "".join(
        chromatin_task_section(results, task)
        for task in ResultsFolder(results).chromatin_task_folders()
    )
