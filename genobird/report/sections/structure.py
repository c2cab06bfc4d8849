"""On the demo genome: the chromatin features whose labels need kilobases apart from
the local ones, beside each baseline."""

from __future__ import annotations

import json
from pathlib import Path

from genobird.report.page import difference_cell, html_table
from genobird.report.sections.tasks import MODEL_NAMES, SHORT_NAMES


def structure_auroc_section(results: Path, resamples: int = 1000,
                            findings: dict | None = None) -> str:  # fmt: skip
    """On the demo genome: the chromatin predictor's median test AUROC over the features
    whose labels need kilobases of context and over the local ones, beside each
    baseline, with paired 95% intervals (test bins resampled); the long-range rows go
    into `findings`."""
    from dataclasses import replace

    from genobird.evaluation.compare import paired_median_auroc, read_feature_predictions

    manifest_path = results / "reference" / "manifest.json"
    ours_path = results / "chromatin" / "report" / "test_predictions.npz"
    if not (manifest_path.is_file() and ours_path.is_file()):
        return ""
    long_range = set(json.loads(manifest_path.read_text()).get("long_range_features", []))
    if not long_range:
        return ""

    def by_reach(run):
        groups = ["long-range" if name in long_range else "local" for name in run.feature_names]
        return replace(run, categories=groups)

    ours = by_reach(read_feature_predictions(ours_path))
    rows = []
    for kind in ("cnn", "kmer-lr"):
        theirs_path = results / "chromatin" / "baselines" / kind / "report" / "test_predictions.npz"
        if not theirs_path.is_file():
            continue
        theirs = by_reach(read_feature_predictions(theirs_path))
        paired = paired_median_auroc(ours, theirs, resamples)["categories"]
        if findings is not None and "long-range" in paired:
            findings.setdefault("long_range", {})[SHORT_NAMES[kind]] = paired["long-range"]
        for group in ("long-range", "local"):
            if group in paired:
                row = paired[group]
                rows.append((group, row["features"], MODEL_NAMES.get(kind, kind), row["a"],
                             row["b"], difference_cell(row)))  # fmt: skip
    if not rows:
        return ""
    names = ", ".join(sorted(long_range))
    return (
        "<h3>Chromatin features by the context their labels need</h3><p>Median test AUROC "
        f"over the long-range features ({names}: set by DNA kilobases from the bin) and "
        "over the local ones, genobird beside each baseline; the difference with its 95% "
        f"interval over {resamples:,} paired resamples of the test bins.</p>"
        + html_table(
            rows,
            ("features", "count", "baseline", "genobird", "baseline's", "genobird minus baseline"),
        )
    )


ORDER = 70


def section(report) -> str:
    return structure_auroc_section(report.results, findings=report.findings)
