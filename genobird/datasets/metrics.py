"""Evaluation metrics (scikit-learn) and the report plots of fine-tuned predictors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from sklearn import metrics as skm

from genobird.datasets.windows import MISSING_LABEL, known_labels, split_fingerprint
from genobird.fileio import atomic_path, atomic_write


def binary_metrics(labels: np.ndarray, probabilities: np.ndarray, threshold: float = 0.5) -> dict:
    """F1, precision, recall, MCC, accuracy at `threshold`; AUROC and AUPRC (paper Table 6)."""
    labels = np.asarray(labels).astype(int).reshape(-1)
    probabilities = np.asarray(probabilities, dtype=float).reshape(-1)
    predicted = (probabilities >= threshold).astype(int)
    result = {
        "f1": skm.f1_score(labels, predicted, zero_division=0),
        "precision": skm.precision_score(labels, predicted, zero_division=0),
        "recall": skm.recall_score(labels, predicted, zero_division=0),
        "mcc": skm.matthews_corrcoef(labels, predicted),
        "accuracy": skm.accuracy_score(labels, predicted),
        "examples": len(labels),
        "positives": int(labels.sum()),
    }
    if 0 < labels.sum() < len(labels):
        result["auroc"] = skm.roc_auc_score(labels, probabilities)
        result["auprc"] = skm.average_precision_score(labels, probabilities)
    return {k: float(v) if isinstance(v, (float, np.floating)) else v for k, v in result.items()}


def best_mcc_threshold(labels: np.ndarray, probabilities: np.ndarray) -> float:
    """The probability threshold (a window is called positive at or above it) with the
    best MCC on these windows: chosen on the validation split, then applied unchanged to
    the test split. Among thresholds of equal MCC, the one nearest 0.5; 0.5 where the
    windows lack a class."""
    labels = np.asarray(labels).astype(int).reshape(-1)
    probabilities = np.asarray(probabilities, dtype=float).reshape(-1)
    positives, negatives = labels.sum(), len(labels) - labels.sum()
    if not positives or not negatives:
        return 0.5
    order = np.argsort(-probabilities, kind="stable")
    scores, ordered = probabilities[order], labels[order]
    last = np.flatnonzero(np.r_[scores[1:] != scores[:-1], True])  # each distinct score's end
    tp = np.cumsum(ordered)[last].astype(float)  # called positive: every window at or above
    fp = (last + 1) - tp
    fn, tn = positives - tp, negatives - fp
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    with np.errstate(invalid="ignore", divide="ignore"):
        mcc = np.where(denominator > 0, (tp * tn - fp * fn) / denominator, 0.0)
    best = np.flatnonzero(mcc >= mcc.max() - 1e-12)
    return float(min(scores[last[best]], key=lambda t: (abs(t - 0.5), t)))


def multilabel_metrics(
    labels: np.ndarray, probabilities: np.ndarray, feature_names: list[str], categories: list[str]
) -> dict:
    """Per-feature AUROC and AUPRC, and the median AUROC and AUPRC per category (paper
    Table 7), each feature over the examples where its label is known. Features without
    both classes there have no AUROC and are listed as skipped."""
    per_feature, skipped = {}, []
    for index, name in enumerate(feature_names):
        known = known_labels(labels[:, index])
        column, scores = labels[known, index].astype(int), probabilities[known, index]
        if 0 < column.sum() < len(column):
            per_feature[name] = {
                "auroc": float(skm.roc_auc_score(column, scores)),
                "auprc": float(skm.average_precision_score(column, scores)),
                "positives": int(column.sum()),
                "examples": int(known.sum()),
            }
        else:
            skipped.append(name)
    by_category: dict[str, list[str]] = {}
    for name, category in zip(
        feature_names, categories or ["all"] * len(feature_names), strict=True
    ):
        if name in per_feature:
            by_category.setdefault(category, []).append(name)
    aurocs = [value["auroc"] for value in per_feature.values()]

    def median_of(metric: str, names: list[str]) -> float:
        return float(np.median([per_feature[n][metric] for n in names]))

    return {
        "median_auroc": float(np.median(aurocs)) if aurocs else float("nan"),
        "median_auroc_by_category": {c: median_of("auroc", v) for c, v in by_category.items()},
        "median_auprc_by_category": {c: median_of("auprc", v) for c, v in by_category.items()},
        "median_auprc": float(np.median([v["auprc"] for v in per_feature.values()]))
        if aurocs
        else float("nan"),
        "per_feature": per_feature,
        "skipped_features": skipped,
        "examples": len(labels),
    }


def mean_auroc(labels: np.ndarray, probabilities: np.ndarray) -> float:
    """AUROC averaged over the features that have both classes among their known labels
    (NaN when none has): what model selection on a validation split maximises."""
    scores = []
    for f in range(labels.shape[1]):
        known = known_labels(labels[:, f])
        column = labels[known, f]
        if 0 < column.sum() < len(column):
            scores.append(skm.roc_auc_score(column, probabilities[known, f]))
    return float(np.mean(scores)) if scores else float("nan")


def is_multilabel(meta: dict) -> bool:
    """Chromatin and any data set with several features report per-feature metrics."""
    return meta["task"] == "chromatin" or len(meta["feature_names"]) > 1


def write_evaluation(
    report_dir: Path, meta: dict, test, valid=None, extra=None, data_path: Path | None = None
) -> dict:
    """The test-split report every predictor writes (fine-tuned model or baseline):
    metrics.json, the ROC/PR (and AUROC-by-category) plots, and, given the data set's
    `data_path`, each test sequence's predictions (test_predictions.npz, what `genobird
    baseline compare` pairs) in `report_dir`, up to `MAX_SAVED_PREDICTIONS` values.

    test, valid: (labels [N, F], probabilities [N, F]); binary tasks report F1, MCC etc.
    at the threshold chosen on `valid` (`thresholded_metrics`), and at 0.5 beside them."""
    labels, probabilities = test
    threshold = None if is_multilabel(meta) else chosen_threshold(valid)
    if data_path is not None and labels.size <= MAX_SAVED_PREDICTIONS:
        write_test_predictions(
            report_dir, meta, test, split_fingerprint(data_path, "test"), threshold and threshold[0]
        )
    names, categories = meta["feature_names"], meta["categories"]
    if is_multilabel(meta):
        metrics = multilabel_metrics(labels, probabilities, names, categories)
        plot_auroc_by_category(
            metrics, dict(zip(names, categories, strict=True)), report_dir / "auroc_by_category.png"
        )
    else:
        metrics = thresholded_metrics(test, *threshold)
    plot_roc_pr(labels, probabilities, names, report_dir / "roc_pr.png")
    metrics["prediction_spread"] = prediction_spread(probabilities, names)
    report = defined({"task": meta["task"], "split": "test", **(extra or {}), **metrics})
    with atomic_write(report_dir / "metrics.json") as handle:
        json.dump(report, handle, indent=2, allow_nan=False)
    return report


# why a figure of metrics.json is null
UNDEFINED = (
    "not defined on this split: no feature has both classes among its known "
    "labels (a split of one class has no AUROC)"
)


def defined(report: dict) -> dict:
    """`report` as valid JSON: a figure that is not a finite number (an AUROC of a split
    of one class) becomes null, named with the reason under `undefined`, never NaN."""
    undefined = {}

    def clean(value, path: str):
        if isinstance(value, dict):
            return {k: clean(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v, f"{path}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, (float, np.floating)) and not np.isfinite(value):
            undefined[path] = UNDEFINED
            return None
        return value

    cleaned = clean(report, "")
    if undefined:
        cleaned["undefined"] = undefined
    return cleaned


PREDICTIONS = "test_predictions.npz"
# Test predictions saved beside the metrics up to this many values (examples x features):
# a chromatin test split of a few thousand bins x 100 features is a few MB, and is what
# a paired comparison of two models needs; DeepSEA's 455,024 x 919 is not written
# (`genobird score` writes those where they are wanted).
MAX_SAVED_PREDICTIONS = 20_000_000


def write_test_predictions(
    report_dir: Path, meta: dict, test, fingerprint: str, threshold: float | None = None
) -> Path:
    """labels [N, F] (uint8, `MISSING_LABEL` where unknown), probabilities [N, F]
    (float32), the feature names and categories, the test split's fingerprint
    (genobird.datasets.windows.split_fingerprint) and, for a binary task, the threshold
    chosen on validation (NaN: none, 0.5 applies)."""
    labels, probabilities = test
    path = Path(report_dir) / PREDICTIONS
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez_compressed(
            handle,
            labels=np.where(known_labels(labels), np.nan_to_num(labels), MISSING_LABEL).astype(
                np.uint8
            ),
            probabilities=np.asarray(probabilities, dtype=np.float32),
            feature_names=np.asarray(meta["feature_names"], dtype=str),
            categories=np.asarray(meta.get("categories") or [], dtype=str),
            fingerprint=np.asarray(fingerprint),
            threshold=np.asarray(np.nan if threshold is None else threshold, dtype=np.float64),
        )
    return path


def prediction_spread(probabilities: np.ndarray, names: list[str]) -> dict:
    """How much each feature's predicted probability varies over the test sequences
    (standard deviation): a collapsed predictor returns its base rate for every input,
    which AUROC alone can hide when the differences are tiny."""
    spread = probabilities.std(axis=0).astype(float)
    return {
        "min_std": float(spread.min()),
        "median_std": float(np.median(spread)),
        "max_std": float(spread.max()),
        "std_by_feature": dict(zip(names, spread.tolist(), strict=True)),
    }


THRESHOLDED = ("f1", "precision", "recall", "mcc", "accuracy")


def chosen_threshold(valid=None) -> tuple[float, str]:
    """(the threshold a binary task's test windows are called at, how it was chosen): the
    best MCC on the validation split (`best_mcc_threshold`), or 0.5 without one."""
    if valid is not None and len(valid[0]):
        return best_mcc_threshold(valid[0][:, 0], valid[1][:, 0]), "the best MCC on validation"
    return 0.5, "0.5 (no validation split)"


def thresholded_metrics(test, threshold: float, chosen_by: str) -> dict:
    """A binary task's test figures at the threshold chosen on validation
    (`chosen_threshold`): the headline, since a model whose probabilities are calibrated
    otherwise than at 0.5 (a start from baselines, a weighted loss) ranks the windows as
    it ranks them but calls them at another point. The figures at 0.5 are kept beside
    them (`at_0.5`)."""
    labels, probabilities = test[0][:, 0], test[1][:, 0]
    metrics = binary_metrics(labels, probabilities, threshold)
    at_half = binary_metrics(labels, probabilities, 0.5)
    return {
        **metrics,
        "threshold": threshold,
        "threshold_chosen_by": chosen_by,
        "at_0.5": {key: at_half[key] for key in THRESHOLDED},
    }


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(figure, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=110)


def plot_roc_pr(
    labels: np.ndarray, probabilities: np.ndarray, names: list[str], path: Path
) -> None:
    """ROC and precision-recall curves; one line per column (at most 12 drawn)."""
    plt = _figure()
    figure, (roc, pr) = plt.subplots(1, 2, figsize=(9, 4))
    labels, probabilities = np.atleast_2d(labels.T).T, np.atleast_2d(probabilities.T).T
    for index, name in list(enumerate(names))[:12]:
        known = known_labels(labels[:, index])
        column, scores = labels[known, index].astype(int), probabilities[known, index]
        if not 0 < column.sum() < len(column):
            continue
        fpr, tpr, _ = skm.roc_curve(column, scores)
        precision, recall, _ = skm.precision_recall_curve(column, scores)
        roc.plot(fpr, tpr, label=f"{name} ({skm.auc(fpr, tpr):.3f})")
        pr.plot(recall, precision, label=name)
    roc.plot([0, 1], [0, 1], color="grey", linestyle=":")
    roc.set(xlabel="false positive rate", ylabel="true positive rate", title="ROC")
    pr.set(xlabel="recall", ylabel="precision", title="precision-recall")
    if roc.get_lines()[:-1]:  # the diagonal is always there; legend only for real curves
        roc.legend(fontsize=7)
    figure.tight_layout()
    _save(figure, path)
    plt.close(figure)


def plot_auroc_by_category(result: dict, categories: dict[str, str], path: Path) -> None:
    """Distribution of per-feature AUROC by category (DNase, TF, Histone)."""
    plt = _figure()
    groups: dict[str, list[float]] = {}
    for name, values in result["per_feature"].items():
        groups.setdefault(categories.get(name, "all"), []).append(values["auroc"])
    figure, axis = plt.subplots(figsize=(5, 3.5))
    names = sorted(groups)
    axis.boxplot([groups[n] for n in names])
    axis.set_xticks(range(1, len(names) + 1), names)
    axis.set_ylabel("AUROC per feature")
    axis.set_title("chromatin-profile AUROC by category")
    axis.axhline(0.5, color="grey", linestyle=":")
    figure.tight_layout()
    _save(figure, path)
    plt.close(figure)
