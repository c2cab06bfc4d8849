"""The pipeline's paired comparisons of its fine-tuned models with their baselines,
written as one artifact (results/comparisons.json, `genobird evaluate runs`) that the
report's sections and checks draw:

- on a genome with long-range chromatin features (the demo's manifest lists them): the
  chromatin predictor's median test AUROC over those features and over the local ones,
  beside each baseline's, test bins resampled in pairs;
- the promoter predictor's test MCC beside the k-mer LR's, test windows resampled in
  pairs.
"""

from __future__ import annotations

import json
from dataclasses import replace

from genobird.evaluation.results import ResultsFolder, newer_than_inputs
from genobird.fileio import atomic_write

# paired resamples of each comparison
LONG_RANGE_RESAMPLES = 1000
PROMOTER_RESAMPLES = 2000
# the chromatin baselines the long-range features are compared with
CHROMATIN_BASELINES = ("cnn", "kmer-lr")


def compare_runs(results) -> dict:
    """Every comparison the results folder has the runs for, written to
    results/comparisons.json; returns the record ({} entries where a run is missing)."""
    folder = ResultsFolder(results)
    record = {"long_range": long_range_comparison(folder),
              "promoter": promoter_comparison(folder)}  # fmt: skip
    with atomic_write(folder.comparisons) as handle:
        json.dump(record, handle, indent=1)
    return record


def comparison_inputs(folder: ResultsFolder) -> list:
    """The files the comparisons read."""
    from genobird.datasets.metrics import PREDICTIONS

    chromatin = [folder.baseline_report("chromatin", kind) for kind in CHROMATIN_BASELINES]
    runs = [folder.task_report("chromatin"), *chromatin, folder.task_report("promoter"),
            folder.baseline_report("promoter", "kmer-lr")]  # fmt: skip
    return [folder.manifest, *(run / PREDICTIONS for run in runs)]


def ensure_comparisons(results) -> bool:
    """Compare the runs unless results/comparisons.json was written after the files it
    reads (a pipeline's comparison rule wrote it), or the folder has no run to compare
    (a folder that is not a pipeline's gets no file); True when it ran."""
    folder = ResultsFolder(results)
    inputs = comparison_inputs(folder)
    if not any(path.exists() for path in inputs[1:]):  # no run to compare: nothing written
        return False
    if newer_than_inputs(folder.comparisons, inputs):
        return False
    compare_runs(results)
    return True


def read_comparisons(results) -> dict:
    path = ResultsFolder(results).comparisons
    return json.loads(path.read_text()) if path.is_file() else {}


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
    return {"features": sorted(long_range), "resamples": LONG_RANGE_RESAMPLES,
            "baselines": baselines}  # fmt: skip


def promoter_comparison(folder: ResultsFolder) -> dict | None:
    """The promoter predictor's test MCC against the k-mer LR's on the same windows (a
    paired bootstrap row), or None without both runs."""
    from genobird.datasets.metrics import PREDICTIONS
    from genobird.evaluation.compare import paired_bootstrap, read_predictions

    ours = folder.task_report("promoter")
    theirs = folder.baseline_report("promoter", "kmer-lr")
    if not ((ours / PREDICTIONS).is_file() and (theirs / PREDICTIONS).is_file()):
        return None
    return paired_bootstrap(read_predictions(ours), read_predictions(theirs),
                            PROMOTER_RESAMPLES, metrics=("mcc",))["metrics"]["mcc"]  # fmt: skip
