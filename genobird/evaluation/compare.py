"""Two predictors on the same test split, compared example by example.

A test split of 1,000 sequences gives an MCC a standard error of about 0.025, so two
models' figures a few hundredths apart may not differ at all. Both predictors scored
the same sequences, so their difference is measured paired: the test sequences are
resampled with replacement (`resamples` times), each metric is computed for both
predictors on every resample, and the 2.5th and 97.5th percentiles of the differences
give a 95% interval (Efron and Tibshirani's percentile bootstrap). An interval that
holds zero means the split cannot tell the two apart.

A side may be several runs of one recipe (seeds): its figure on each resample is the
mean of its runs' figures on that resample. The interval then covers the test split's
sampling for those seeds; how far the seeds spread is reported beside it (each run's
figure on the whole split), since a few seeds cannot be resampled meaningfully.

MCC and F1 are headlined as each run reports them: at the threshold its run chose on
its validation split (test_predictions.npz's `threshold`; 0.5 for a run without one), so
that a model calibrated otherwise than at 0.5 is not compared at a point it would not
call; the same figures at 0.5 are kept beside them (`mcc_at_0.5`, `f1_at_0.5`). AUROC
needs no threshold.

A resample is a vector of counts per test sequence; the metrics are computed as
count-weighted sums, many resamples at once (scikit-learn's metrics with
`sample_weight` are the oracle in the tests).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from genobird.datasets.metrics import PREDICTIONS
from genobird.datasets.windows import MISSING_LABEL
from genobird.errors import InputError
from genobird.fileio import atomic_write

METRICS = ("mcc", "f1", "auroc", "mcc_at_0.5", "f1_at_0.5")
log = logging.getLogger(__name__)

# a run without a threshold chosen on validation calls its windows at 0.5 (binary_metrics)
DEFAULT_THRESHOLD = 0.5
# resample counts held at once ([batch, N]; the AUROC keeps a few float64 copies)
CELLS_PER_BATCH = 4_000_000


@dataclass(frozen=True)
class Predictions:
    labels: np.ndarray  # int [N]
    probabilities: np.ndarray  # float [N]
    fingerprint: str
    source: Path
    # predicted positive at probability >= threshold: the one its run chose on validation
    threshold: float = DEFAULT_THRESHOLD


def predictions_file(location: str | Path) -> Path:
    """The test_predictions.npz of a run folder, its report folder, or the file itself."""
    location = Path(location)
    for candidate in (location, location / PREDICTIONS, location / "report" / PREDICTIONS):
        if candidate.is_file():
            return candidate
    raise InputError(
        f"{location}: no {PREDICTIONS} (give a fine-tuning or baseline output folder; runs "
        "made before the predictions were written must be rerun)"
    )


def read_predictions(location: str | Path) -> Predictions:
    path = predictions_file(location)
    try:
        with np.load(path, allow_pickle=False) as saved:
            labels, probabilities = saved["labels"], saved["probabilities"]
            fingerprint = str(saved["fingerprint"])
            threshold = float(saved["threshold"]) if "threshold" in saved else np.nan
    except (OSError, ValueError, KeyError) as error:
        raise InputError(f"{path}: not a genobird predictions file ({error})") from None
    if labels.shape[1] != 1:
        raise InputError(
            f"{path}: {labels.shape[1]} features; comparison is for single-feature tasks "
            "(promoter, classify)"
        )
    threshold = DEFAULT_THRESHOLD if not np.isfinite(threshold) else threshold
    return Predictions(
        labels[:, 0].astype(int), probabilities[:, 0].astype(float), fingerprint, path, threshold
    )


def weighted_confusion(counts: np.ndarray, labels: np.ndarray, predicted: np.ndarray):
    """(tp, fp, fn, tn), each [R], of R resamples given as counts per example [R, N]."""
    positive, negative = labels == 1, labels == 0
    counts = counts.astype(np.float64)
    return (
        counts @ (positive & predicted),
        counts @ (negative & predicted),
        counts @ (positive & ~predicted),
        counts @ (negative & ~predicted),
    )


def resampled_mcc(counts, labels, probabilities, threshold: float) -> np.ndarray:
    tp, fp, fn, tn = weighted_confusion(counts, labels, probabilities >= threshold)
    denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    with np.errstate(invalid="ignore", divide="ignore"):
        mcc = (tp * tn - fp * fn) / denominator
    return np.where(denominator > 0, mcc, 0.0)  # scikit-learn's value when undefined


def resampled_f1(counts, labels, probabilities, threshold: float) -> np.ndarray:
    tp, fp, fn, _ = weighted_confusion(counts, labels, probabilities >= threshold)
    denominator = 2 * tp + fp + fn
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, 2 * tp / denominator, 0.0)


def resampled_auroc(counts, labels, probabilities) -> np.ndarray:
    """AUROC of each resample: for every positive, the weight of the negatives scored
    below it, plus half of those tied with it (the Mann-Whitney statistic)."""
    order = np.argsort(probabilities, kind="stable")
    scores, labels, counts = probabilities[order], labels[order], counts[:, order]
    starts = np.flatnonzero(np.r_[True, scores[1:] != scores[:-1]])  # groups of equal scores
    counts = counts.astype(np.float64)
    negatives = np.add.reduceat(counts * (labels == 0), starts, axis=1)
    positives = np.add.reduceat(counts * (labels == 1), starts, axis=1)
    below = np.cumsum(negatives, axis=1) - negatives
    pairs = positives.sum(1) * negatives.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (positives * (below + negatives / 2)).sum(1) / pairs


def resampled(name: str, counts: np.ndarray, run: Predictions) -> np.ndarray:
    """Metric `name` (METRICS) of each resample of one run: MCC and F1 at the run's own
    threshold, or at 0.5 (`..._at_0.5`)."""
    if name == "auroc":
        return resampled_auroc(counts, run.labels, run.probabilities)
    metric, _, at = name.partition("_at_")
    threshold = float(at) if at else run.threshold
    function = {"mcc": resampled_mcc, "f1": resampled_f1}[metric]
    return function(counts, run.labels, run.probabilities, threshold)


def check_same_split(a: Predictions, b: Predictions) -> None:
    if a.fingerprint != b.fingerprint or not np.array_equal(a.labels, b.labels):
        raise InputError(
            f"{a.source} and {b.source} scored different test splits; compare two runs on "
            "the same data set"
        )
    if len(np.unique(a.labels)) < 2:
        raise InputError(f"{a.source}: the test split has one class only; nothing to compare")


def as_runs(side: Predictions | Sequence[Predictions]) -> tuple[Predictions, ...]:
    """One run, or several runs of one recipe, as a non-empty tuple."""
    runs = (side,) if isinstance(side, Predictions) else tuple(side)
    if not runs:
        raise InputError("each side of a comparison needs at least one run")
    return runs


def mean_over_runs(name: str, counts: np.ndarray, runs: Sequence[Predictions]) -> np.ndarray:
    """Metric `name` of each resample, averaged over the runs."""
    values = [resampled(name, counts, run) for run in runs]
    return np.mean(values, axis=0)


def resample_counts(rng: np.random.Generator, examples: int, resamples: int):
    """Batches of resamples, each [batch, examples]: how often each test sequence is drawn."""
    batch = max(1, CELLS_PER_BATCH // examples)
    for start in range(0, resamples, batch):
        size = min(batch, resamples - start)
        drawn = rng.integers(0, examples, size=(size, examples))
        drawn += np.arange(size)[:, None] * examples  # resample r counts into row r
        yield np.bincount(drawn.ravel(), minlength=size * examples).reshape(size, examples)


def paired_bootstrap(
    a: Predictions | Sequence[Predictions],
    b: Predictions | Sequence[Predictions],
    resamples: int = 2000,
    seed: int = 0,
    metrics=METRICS,
) -> dict:
    """Each metric for a and b on the whole split with its own 95% interval, a - b with
    the 95% percentile interval of a - b over `resamples` paired resamples, and the share
    of resamples where a wins. A side given as several runs counts as their mean, and
    `{side}_runs` lists each run's figure on the whole split."""
    sides = {"a": as_runs(a), "b": as_runs(b)}
    first = sides["a"][0]
    for run in sides["a"][1:] + sides["b"]:
        check_same_split(first, run)
    if resamples < 100:
        raise InputError(f"resamples must be at least 100 for a 95% interval, got {resamples}")
    drawn = {(name, side): [] for name in metrics for side in sides}
    for counts in resample_counts(np.random.default_rng(seed), len(first.labels), resamples):
        for name in metrics:
            for side, runs in sides.items():
                drawn[name, side].append(mean_over_runs(name, counts, runs))
    whole = np.ones((1, len(first.labels)), dtype=np.int32)
    result = {"examples": len(first.labels), "resamples": resamples, "seed": seed, "metrics": {}}
    for name in metrics:
        row = {}
        if name in ("mcc", "f1"):  # each run's own threshold, chosen on its validation
            for side, runs in sides.items():
                row[f"{side}_thresholds"] = [run.threshold for run in runs]
        for side, runs in sides.items():
            each = [float(mean_over_runs(name, whole, (run,))[0]) for run in runs]
            row[side] = float(np.mean(each))
            row[f"{side}_low"], row[f"{side}_high"] = interval(np.concatenate(drawn[name, side]))
            row[f"{side}_runs"] = each
        spread = np.concatenate(drawn[name, "a"]) - np.concatenate(drawn[name, "b"])
        row["difference"] = row["a"] - row["b"]
        row["low"], row["high"] = interval(spread)
        row["a_better_share"] = float((spread[np.isfinite(spread)] > 0).mean())
        result["metrics"][name] = row
    return result


def interval(values: np.ndarray) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles, over the resamples where the metric is defined
    (a resample with one class has no AUROC)."""
    low, high = np.percentile(values[np.isfinite(values)], [2.5, 97.5])
    return float(low), float(high)


# =========================================================================== many features
@dataclass(frozen=True)
class FeaturePredictions:
    """A multi-feature run's test predictions (chromatin profiles)."""

    labels: np.ndarray  # uint8 [N, F], MISSING_LABEL where unknown
    probabilities: np.ndarray  # float [N, F]
    feature_names: list[str]
    categories: list[str]
    fingerprint: str
    source: Path


def read_feature_predictions(location: str | Path) -> FeaturePredictions:
    path = predictions_file(location)
    try:
        with np.load(path, allow_pickle=False) as saved:
            categories = saved["categories"].tolist() if "categories" in saved else []
            names = saved["feature_names"].tolist()
            return FeaturePredictions(
                saved["labels"],
                saved["probabilities"].astype(float),
                names,
                categories or ["all"] * len(names),
                str(saved["fingerprint"]),
                path,
            )
    except (OSError, ValueError, KeyError) as error:
        raise InputError(f"{path}: not a genobird predictions file ({error})") from None


def feature_groups(run: FeaturePredictions, min_positives: int = 1) -> dict[str, list[int]]:
    """Feature columns by category, those with at least `min_positives` known positives
    and a known negative in the test split."""
    groups: dict[str, list[int]] = {}
    for column, category in enumerate(run.categories):
        labels = run.labels[:, column]
        if (labels == 1).sum() >= max(min_positives, 1) and (labels == 0).any():
            groups.setdefault(category, []).append(column)
    return groups


def resampled_feature_aurocs(counts: np.ndarray, run: FeaturePredictions, columns) -> np.ndarray:
    """AUROC [len(columns), R] of each feature on each resample, over its known labels."""
    rows = []
    for column in columns:
        known = run.labels[:, column] != MISSING_LABEL
        rows.append(
            resampled_auroc(
                counts[:, known],
                run.labels[known, column].astype(int),
                run.probabilities[known, column],
            )
        )
    return np.asarray(rows)


def paired_median_auroc(
    a: FeaturePredictions,
    b: FeaturePredictions,
    resamples: int = 1000,
    seed: int = 0,
    min_positives: int = 1,
) -> dict:
    """Per category, the median AUROC over its features (those with `min_positives` test
    positives) of a and b, and a - b with its 95% percentile interval over paired
    resamples of the test examples (every feature's AUROC computed on the same resample,
    then the medians). Paper Table 7's figure, with the interval it lacks."""
    if a.fingerprint != b.fingerprint or not np.array_equal(a.labels, b.labels):
        raise InputError(
            f"{a.source} and {b.source} scored different test splits; compare two runs on "
            "the same data set"
        )
    if resamples < 100:
        raise InputError(f"resamples must be at least 100 for a 95% interval, got {resamples}")
    groups = feature_groups(a, min_positives)
    columns = sorted(c for members in groups.values() for c in members)
    result = {
        "examples": len(a.labels),
        "resamples": resamples,
        "seed": seed,
        "min_positives": min_positives,
        "categories": {},
    }
    if not columns:  # no feature has enough test positives to be compared
        return result
    position = {column: index for index, column in enumerate(columns)}
    drawn = {"a": [], "b": []}
    for counts in resample_counts(np.random.default_rng(seed), len(a.labels), resamples):
        drawn["a"].append(resampled_feature_aurocs(counts, a, columns))
        drawn["b"].append(resampled_feature_aurocs(counts, b, columns))
    whole = np.ones((1, len(a.labels)), dtype=np.int32)
    full = {
        side: resampled_feature_aurocs(whole, run, columns)[:, 0]
        for side, run in (("a", a), ("b", b))
    }
    for category, members in {**groups, "all": columns}.items():
        if not members:
            continue
        index = [position[c] for c in members]
        a_medians = np.nanmedian(np.concatenate(drawn["a"], axis=1)[index], axis=0)
        b_medians = np.nanmedian(np.concatenate(drawn["b"], axis=1)[index], axis=0)
        spread = a_medians - b_medians
        row = {
            "features": len(members),
            "a": float(np.median(full["a"][index])),
            "b": float(np.median(full["b"][index])),
        }
        row["difference"] = row["a"] - row["b"]
        row["low"], row["high"] = interval(spread)
        row["a_better_share"] = float((spread[np.isfinite(spread)] > 0).mean())
        result["categories"][category] = row
    return result


# =========================================================================== a run's own
# a run's model paired with the baselines beside it (RUN/report/compare.json), which the
# run's page draws
RUN_COMPARISONS = "compare.json"


# the work a run's own comparison of many features may take, in (window, feature) cells
# resampled: every feature's AUROC is recomputed on each resample (about 8 s per 100
# resamples of 10,000 windows x 96 features on 2 cores), so a large run is paired with
# fewer resamples, and one too large for 100 is left to `genobird baseline compare`
FEATURE_CELLS_BUDGET = 200_000_000
MIN_RESAMPLES = 100


def compare_run(
    run: str | Path, others: dict[str, Path], resamples: int = 2000, seed: int = 0
) -> Path | None:
    """Pair a run's test predictions with each of `others` ({name: a run folder or
    predictions file on the same test split}): AUROC, AUPRC, MCC and F1 for one feature
    (`paired_bootstrap`), each category's median AUROC for several
    (`paired_median_auroc`, at most the resamples FEATURE_CELLS_BUDGET allows); written
    to RUN/report/compare.json as {name: result}. None where there is nothing to pair
    with, or the run is too large to pair as it ends (said in the log)."""
    run = Path(run)
    if not others:
        return None
    ours = read_feature_predictions(run)
    several = len(ours.feature_names) > 1
    if several:
        cells = ours.labels.shape[0] * ours.labels.shape[1]
        resamples = min(resamples, FEATURE_CELLS_BUDGET // max(cells, 1))
        if resamples < MIN_RESAMPLES:
            log.info(
                "%s: %s test windows x %s features are too many to pair with its "
                "baselines as the run ends; `genobird baseline compare %s BASELINE` "
                "pairs them",
                run,
                f"{ours.labels.shape[0]:,}",
                f"{ours.labels.shape[1]:,}",
                run,
            )
            return None
    results = {}
    for name, other in others.items():
        if several:
            result = paired_median_auroc(ours, read_feature_predictions(other), resamples, seed)
        else:
            result = paired_bootstrap(
                read_predictions(run), read_predictions(other), resamples, seed
            )
        results[name] = {**result, "b": str(predictions_file(other))}
    path = run / "report" / RUN_COMPARISONS
    with atomic_write(path) as handle:
        json.dump(results, handle, indent=2)
    return path
