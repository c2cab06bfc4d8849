"""A chromatin task's plots: predicted against observed along the held-out region (the
task's test bins in genome order, for a few features, genobird at its best context beside
the best baseline at its own, each chosen on validation: what a user sees who loads
`genobird tracks` output beside the real peaks in a genome browser, drawn from the runs'
own test predictions), and the context ablation's median AUROC by context."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

from genobird.datasets.metrics import PREDICTIONS
from genobird.errors import InputError


def test_bins(data_path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(chrom, start, end) of the data set's test windows, in file order (the order of
    every run's test predictions)."""
    with h5py.File(data_path, "r") as handle:
        test = handle["split"][:].astype(str) == "test"
        chroms = handle["chrom"][:].astype(str)[test]
        return chroms, handle["start"][:][test], handle["end"][:][test]


def shown_features(labels: np.ndarray, categories: list[str], limit: int) -> list[int]:
    """Up to `limit` features: in each category (in table order) the one with the most
    test positives, then the next categories' second best, and so on; features with no
    test positive are not shown."""
    positives = np.where(labels == 1, 1, 0).sum(axis=0)
    by_category: dict[str, list[int]] = {}
    for index in np.argsort(-positives, kind="stable"):
        if positives[index]:
            by_category.setdefault(categories[index], []).append(int(index))
    order = [c for c in dict.fromkeys(categories) if c in by_category]
    shown, rank = [], 0
    while len(shown) < limit and any(rank < len(by_category[c]) for c in order):
        shown += [by_category[c][rank] for c in order if rank < len(by_category[c])]
        rank += 1
    return shown[:limit]


def read_run(report: Path, fingerprint: str) -> dict:
    """A run's test predictions, checked to be of this data set's test split."""
    with np.load(report / PREDICTIONS) as saved:
        run = {key: saved[key] for key in saved.files}
    if str(run["fingerprint"]) != fingerprint:
        raise InputError(
            f"{report / PREDICTIONS}: predictions of another test split than the "
            "task's data.h5; rerun the run or the data set"
        )
    return run


# Test bins further apart than this (an N gap, an unsampled stretch) are not joined by
# the prediction's line.
GAP_MB = 0.01


def broken_at_gaps(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x and y with a NaN between neighbours more than GAP_MB apart (matplotlib draws no
    line through NaN)."""
    cuts = np.flatnonzero(np.diff(x) > GAP_MB) + 1
    return np.insert(x.astype(float), cuts, np.nan), np.insert(y.astype(float), cuts, np.nan)


def plot_along_region(task: str | Path, curves: list[dict], limit: int = 4):
    """One panel per shown feature along the chromosome with the most test bins: its
    observed positives (grey ticks) and each of `curves`' predicted probability
    ({"name", "report": the run's report folder in the task}: the ablation's
    `region_curves`, genobird at its best context and the best baseline at its own).
    Returns the figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from genobird.datasets.windows import read_metadata, split_fingerprint

    task = Path(task)
    data = task / "data.h5"
    fingerprint = split_fingerprint(data, "test")
    curves = [(curve["name"], read_run(task / curve["report"], fingerprint)) for curve in curves]
    chroms, starts, ends = test_bins(data)
    names, counts = np.unique(chroms, return_counts=True)
    chrom = names[np.argmax(counts)]
    rows = np.flatnonzero(chroms == chrom)
    rows = rows[np.argsort(starts[rows], kind="stable")]
    centres = (starts[rows] + ends[rows]) / 2 / 1e6
    meta = read_metadata(data)
    labels = curves[0][1]["labels"]
    categories = meta["categories"] or [""] * len(meta["feature_names"])
    features = shown_features(labels[rows], categories, limit)
    if not features:
        raise InputError(f"{task}: no feature has a positive test bin on {chrom}; nothing to plot")
    figure, axes = plt.subplots(
        len(features), 1, figsize=(10, 1.8 * len(features)), sharex=True, squeeze=False
    )
    for ax, feature in zip(axes[:, 0], features, strict=True):
        observed = labels[rows, feature] == 1
        ax.vlines(centres[observed], 0, 1, color="0.8", linewidth=1, label="observed")
        for name, run in curves:
            x, y = broken_at_gaps(centres, run["probabilities"][rows, feature])
            ax.plot(x, y, linewidth=0.8, label=name)
        title = meta["feature_names"][feature]
        ax.set_title(
            f"{title} ({categories[feature]})" if categories[feature] else title,
            fontsize=9,
            loc="left",
        )
        ax.set_ylim(0, 1)
        ax.set_ylabel("probability")
    axes[-1, 0].set_xlabel(f"{chrom} (Mb), {len(rows):,} test bins")
    axes[0, 0].legend(fontsize=7, loc="upper right", ncol=len(curves) + 1)
    figure.tight_layout()
    return figure


def plot_context_ablation(summary: dict, path: Path | None = None):
    """Median AUROC by context per group, one line per arm; returns the figure (saved to
    `path` where given)."""
    from genobird.datasets.metrics import _figure

    plt = _figure()
    groups = sorted(
        {
            g
            for arm in summary["arms"].values()
            for row in arm["contexts"].values()
            for g in row["medians"]
        }
    )
    columns = max(min(len(groups), 4), 1)
    rows = max(-(-len(groups) // columns), 1)
    figure, axes = plt.subplots(rows, columns, figsize=(3.6 * columns, 3.0 * rows), squeeze=False)
    for axis, group in zip(axes.flat, groups, strict=False):
        for arm in summary["arms"].values():
            contexts = sorted(arm["contexts"])
            values = [arm["contexts"][bp]["medians"].get(group, (np.nan,))[0] for bp in contexts]
            axis.plot(contexts, values, marker="o", label=arm["name"])
        axis.set_xscale("log")
        axis.set(title=group, xlabel="context (bp)", ylabel="median AUROC")
        axis.legend(fontsize=7)
    for axis in list(axes.flat)[len(groups) :]:
        axis.axis("off")
    figure.tight_layout()
    if path is not None:
        figure.savefig(path, dpi=110)
    return figure
