"""On the demo genome: the chromatin features whose labels need kilobases apart from
the local ones, beside each baseline (the pipeline's comparisons.json:
`genobird evaluate runs`)."""

from __future__ import annotations

from pathlib import Path

from genobird.report.names import MODEL_NAMES, SHORT_NAMES
from genobird.report.page import difference_cell, html_table
from genobird.report.sources import comparisons_record


def structure_auroc_section(results: Path) -> str:
    """On the demo genome: the chromatin predictor's median test AUROC over the features
    whose labels need kilobases of context and over the local ones, beside each
    baseline, with paired 95% intervals (test bins resampled)."""
    comparison = comparisons_record(results).get("long_range")
    if not comparison:
        return ""
    rows = []
    for kind, paired in comparison["baselines"].items():
        for group in ("long-range", "local"):
            if group in paired:
                row = paired[group]
                rows.append(
                    (
                        group,
                        row["features"],
                        MODEL_NAMES.get(kind, kind),
                        row["a"],
                        row["b"],
                        difference_cell(row),
                    )
                )
    if not rows:
        return ""
    names = ", ".join(comparison["features"])
    return (
        "<h3>Chromatin features by the context their labels need</h3><p>Median test AUROC "
        f"over the long-range features ({names}: set by DNA kilobases from the bin) and "
        "over the local ones, genobird beside each baseline; the difference with its 95% "
        f"interval over {comparison['resamples']:,} paired resamples of the test bins.</p>"
        + html_table(
            rows,
            ("features", "count", "baseline", "genobird", "baseline's", "genobird minus baseline"),
        )
    )


ORDER = 70


def long_range_checks(results: Path) -> list[dict]:
    comparison = comparisons_record(results).get("long_range") or {}
    rows = []
    for kind, paired in comparison.get("baselines", {}).items():
        row = paired.get("long-range")
        if row is None:
            continue
        rows.append(
            {
                "name": "long_range",
                "check": f"long-range chromatin features: median AUROC above the "
                f"{SHORT_NAMES[kind]}'s",
                "genobird": row["a"],
                "baseline": row["b"],
                "difference": [row["difference"], row["low"], row["high"]],
                "met": row["difference"] > 0,
            }
        )
    return rows


CHECKS = ((30, long_range_checks),)


def section(report) -> str:
    return structure_auroc_section(report.results)
