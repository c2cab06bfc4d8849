"""A chromatin task fine-tuned at several contexts, beside its baselines: the paper's
Table 7 as an ablation, on one task folder of the pipeline
(RESULTS/chromatin_tasks/NAME: context-BP/ for genobird at each context,
baselines/KIND-BP/ for each baseline, every run's report/test_predictions.npz on the same
test bins).

Each figure is a median over a category's features (DNase, TF, Histone), counting the
features with at least `min_positives` test positives: a feature with five positives has
an AUROC of little meaning. Differences are paired over the test bins
(`paired_median_auroc`): each context's gain over the narrowest, and genobird at its
chosen context against each baseline. The context genobird is judged at is chosen on the
validation split (its mean validation AUROC), never on the test split.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from genobird.errors import InputError
from genobird.tasks.compare import feature_groups, paired_median_auroc, read_feature_predictions
from genobird.tasks.metrics import PREDICTIONS

BASELINE_NAMES = {"deepsea-cnn": "DeepSEA CNN", "kmer-lr": "k-mer LR", "cnn": "3-layer CNN"}
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


def medians(run, min_positives: int) -> dict:
    """{category: (median AUROC, median AUPRC, features)} over the features with enough
    test positives, from one run's metrics.json."""
    metrics = json.loads((run / "metrics.json").read_text())
    per_feature = metrics["per_feature"]
    predictions = read_feature_predictions(run)
    out = {}
    for category, columns in feature_groups(predictions, min_positives).items():
        names = [predictions.feature_names[c] for c in columns if
                 predictions.feature_names[c] in per_feature]  # fmt: skip
        if names:
            out[category] = (float(np.median([per_feature[n]["auroc"] for n in names])),
                             float(np.median([per_feature[n]["auprc"] for n in names])),
                             len(names))  # fmt: skip
    return out


def chosen_context(runs: dict[int, Path]) -> int:
    """The context whose kept weights scored the highest validation AUROC (the widest
    where runs tie or recorded none)."""

    def score(bp: int) -> float:
        metrics = json.loads((runs[bp] / "metrics.json").read_text())
        value = (metrics.get("training") or {}).get("best_validation_auroc")
        return float(value) if value is not None else float("-inf")

    return max(runs, key=lambda bp: (score(bp), bp))


def summarise(task: str | Path, min_positives: int = 20, resamples: int = 1000,
              seed: int = 0) -> dict:  # fmt: skip
    """The context ablation of one chromatin task folder, as a dict (the report's tables
    and `benchmarks/chromatin_context.py`'s targets read it)."""
    task = Path(task)
    runs = context_runs(task)
    if not runs:
        raise InputError(f"{task}: no context-BP/report/{PREDICTIONS}; fine-tune the task first")
    narrowest, chosen = min(runs), chosen_context(runs)
    predictions = {bp: read_feature_predictions(folder) for bp, folder in runs.items()}
    summary = {
        "task": task.name,
        "min_positives": min_positives,
        "resamples": resamples,
        "chosen_context": chosen,
        "genobird": {bp: medians(folder, min_positives) for bp, folder in runs.items()},
        "gain_over_narrowest": {},
        "baselines": [],
        "genobird_minus_baseline": [],
    }
    for bp in runs:
        if bp != narrowest:
            summary["gain_over_narrowest"][bp] = paired_median_auroc(
                predictions[bp], predictions[narrowest], resamples, seed, min_positives
            )["categories"]
    for kind, bp, folder in baseline_runs(task):
        name = f"{BASELINE_NAMES.get(kind, kind)}, {bp:,} bp"
        summary["baselines"].append({"name": name, "kind": kind, "context": bp,
                                     "medians": medians(folder, min_positives)})  # fmt: skip
        difference = paired_median_auroc(predictions[chosen], read_feature_predictions(folder),
                                         resamples, seed, min_positives)  # fmt: skip
        summary["genobird_minus_baseline"].append({"name": name, "kind": kind, "context": bp,
                                                   **difference})  # fmt: skip
    return summary


def plot_context_ablation(summary: dict, path: Path | None = None):
    """Median AUROC by context per category (genobird's line, the baselines' markers);
    returns the figure (saved to `path` where given)."""
    from genobird.tasks.metrics import _figure

    plt = _figure()
    categories = sorted({c for values in summary["genobird"].values() for c in values})
    figure, axes = plt.subplots(1, max(len(categories), 1), figsize=(4 * len(categories), 3.4),
                                squeeze=False)  # fmt: skip
    contexts = sorted(summary["genobird"])
    for axis, category in zip(axes[0], categories, strict=False):
        values = [summary["genobird"][bp].get(category, (np.nan,))[0] for bp in contexts]
        axis.plot(contexts, values, marker="o", label="genobird")
        for baseline in summary["baselines"]:
            if category in baseline["medians"]:
                axis.scatter([baseline["context"]], [baseline["medians"][category][0]],
                             marker="x", label=baseline["name"])  # fmt: skip
        axis.set_xscale("log")
        axis.set(title=category, xlabel="context (bp)", ylabel="median AUROC")
        axis.legend(fontsize=7)
    figure.tight_layout()
    if path is not None:
        figure.savefig(path, dpi=110)
    return figure
