"""Paired comparison of two predictors on one test split (`genobird baseline compare`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from sklearn import metrics as skm

from genobird.cli import main
from genobird.datasets.metrics import PREDICTIONS
from genobird.errors import InputError
from genobird.evaluation.compare import (
    Predictions,
    paired_bootstrap,
    resample_counts,
    resampled_auroc,
    resampled_f1,
    resampled_mcc,
)
from tests.conftest import drawn_report
from tests.test_baselines import _motif_dataset

# a fine-tuning run whose test is not about the base readers trains none (they are
# trained first by default: a CNN and a k-mer LR per run)
NO_BASE_READERS = ["--base-cnn-channels", "0", "--base-kmers", "0"]


def _scores(seed: int, examples: int = 400, noise: float = 0.3):
    """Labels and probabilities that follow them, rounded so that scores tie."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, examples)
    probabilities = np.clip(0.5 + (labels - 0.5) * 0.4 + rng.normal(0, noise, examples), 0, 1)
    return labels, np.round(probabilities, 2)


def _predictions(labels, probabilities, name: str, fingerprint: str = "split") -> Predictions:
    return Predictions(labels, probabilities, fingerprint, Path(name))


def test_resampled_metrics_equal_scikit_learn_with_sample_weights():
    labels, probabilities = _scores(0)
    counts = next(resample_counts(np.random.default_rng(1), len(labels), 6))
    assert counts.shape == (6, len(labels)) and (counts.sum(1) == len(labels)).all()
    for threshold in (0.5, 0.37):
        predicted = probabilities >= threshold
        for row in range(len(counts)):
            weight = counts[row]
            assert resampled_mcc(counts, labels, probabilities, threshold)[row] == pytest.approx(
                skm.matthews_corrcoef(labels, predicted, sample_weight=weight)
            )
            assert resampled_f1(counts, labels, probabilities, threshold)[row] == pytest.approx(
                skm.f1_score(labels, predicted, sample_weight=weight)
            )
    for row in range(len(counts)):
        weight = counts[row]
        assert resampled_auroc(counts, labels, probabilities)[row] == pytest.approx(
            skm.roc_auc_score(labels, probabilities, sample_weight=weight)
        )
    # a predictor of one class: MCC 0 (scikit-learn's convention), not NaN
    constant = np.zeros_like(probabilities)
    assert resampled_mcc(counts, labels, constant, 0.5).tolist() == [0.0] * len(counts)


def test_paired_bootstrap_measures_a_real_difference_and_finds_none_between_equals():
    labels, good = _scores(2, examples=1000, noise=0.25)
    _, poor = _scores(2, examples=1000, noise=0.6)  # the same labels, noisier scores
    better, worse = _predictions(labels, good, "a"), _predictions(labels, poor, "b")
    result = paired_bootstrap(better, worse, resamples=500, seed=3)
    assert result["examples"] == 1000 and result["resamples"] == 500
    for name, row in result["metrics"].items():
        whole = {"mcc": skm.matthews_corrcoef, "f1": skm.f1_score}.get(name.split("_at_")[0])
        if whole is not None:
            assert row["a"] == pytest.approx(whole(labels, good >= 0.5))
        assert row["difference"] == pytest.approx(row["a"] - row["b"])
        assert 0 < row["low"] < row["difference"] < row["high"], name
        for side in "ab":  # each predictor's own interval holds its figure
            assert row[f"{side}_low"] < row[side] < row[f"{side}_high"], (name, side)
        # paired resamples: the two predictors' errors largely cancel in the difference, so
        # its interval is narrower than the wider own interval (independent resamples
        # would give about the root of the sum of their squares, wider than both)
        widest = max(row["a_high"] - row["a_low"], row["b_high"] - row["b_low"])
        assert row["high"] - row["low"] < widest, name
        assert row["a_better_share"] == 1.0
    # the same resamples, the other way round: the interval mirrored
    swapped = paired_bootstrap(worse, better, resamples=500, seed=3)["metrics"]["mcc"]
    assert swapped["low"] == pytest.approx(-result["metrics"]["mcc"]["high"])
    itself = paired_bootstrap(better, better, resamples=200)["metrics"]["auroc"]
    assert itself["difference"] == itself["low"] == itself["high"] == 0.0
    assert itself["a_better_share"] == 0.0


def test_a_side_of_several_runs_counts_as_their_mean_on_every_resample():
    labels, good = _scores(5, examples=600, noise=0.25)
    _, fair = _scores(5, examples=600, noise=0.4)
    _, poor = _scores(5, examples=600, noise=0.7)
    good, fair, poor = (
        _predictions(labels, p, n) for p, n in ((good, "g"), (fair, "f"), (poor, "p"))
    )
    alone = {
        run.source: paired_bootstrap(run, poor, resamples=300, seed=7)["metrics"]
        for run in (good, fair)
    }
    both = paired_bootstrap([good, fair], poor, resamples=300, seed=7)["metrics"]
    for name, row in both.items():
        singles = [alone[run.source][name] for run in (good, fair)]
        assert row["a_runs"] == pytest.approx([single["a"] for single in singles])
        assert row["a"] == pytest.approx(np.mean(row["a_runs"]))
        assert row["b_runs"] == [singles[0]["b"]]
        assert row["difference"] == pytest.approx(np.mean([s["difference"] for s in singles]))
    # the interval is taken over the resamples of the mean: rebuilt here from the same draws
    counts = np.concatenate(list(resample_counts(np.random.default_rng(7), 600, 300)))
    means = (
        resampled_mcc(counts, labels, good.probabilities, 0.5)
        + resampled_mcc(counts, labels, fair.probabilities, 0.5)
    ) / 2
    spread = means - resampled_mcc(counts, labels, poor.probabilities, 0.5)
    expected = np.percentile(spread, [2.5, 97.5])
    assert [both["mcc"]["low"], both["mcc"]["high"]] == pytest.approx(expected)
    assert both["mcc"]["high"] - both["mcc"]["low"] < max(
        alone[run.source]["mcc"]["high"] - alone[run.source]["mcc"]["low"] for run in (good, fair)
    )
    # the same run twice is that run
    twice = paired_bootstrap([good, good], poor, resamples=300, seed=7)["metrics"]["mcc"]
    assert twice["low"] == pytest.approx(alone[good.source]["mcc"]["low"])
    elsewhere = _predictions(labels, fair.probabilities, "other", "split-2")
    with pytest.raises(InputError, match="scored different test splits"):
        paired_bootstrap([good, elsewhere], poor)
    with pytest.raises(InputError, match="at least one run"):
        paired_bootstrap([], poor)


def test_predictions_of_different_splits_are_not_paired():
    labels, probabilities = _scores(4)
    first = _predictions(labels, probabilities, "a", "split-1")
    with pytest.raises(InputError, match="scored different test splits"):
        paired_bootstrap(first, _predictions(labels, probabilities, "b", "split-2"))
    with pytest.raises(InputError, match="resamples must be at least 100"):
        paired_bootstrap(first, first, resamples=10)


def test_compare_pairs_a_fine_tuned_run_with_a_baseline_and_the_report_shows_it(
    pretraining_data, tmp_path, capsys
):
    data = _motif_dataset(tmp_path / "motif.h5", n=300)
    finetuned, kmer = tmp_path / "finetuned", tmp_path / "kmer"
    assert (
        main(
            [
                "-q",
                "finetune",
                "classify",
                *NO_BASE_READERS,
                "--data",
                str(data),
                "--from-scratch",
                "--tokenizer",
                str(pretraining_data["tokenizer"]),
                "--max-steps",
                "3",
                "--batch-size",
                "8",
                "--out",
                str(finetuned),
            ]
        )
        == 0
    )
    assert main(["-q", "baseline", "kmer-lr", "--data", str(data), "--out", str(kmer)]) == 0
    capsys.readouterr()
    out = tmp_path / "compare.json"
    assert main(["baseline", "compare", str(finetuned), str(kmer), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "60 test sequences, 2,000 paired resamples" in printed
    result = json.loads(out.read_text())
    # the predictions files hold what each run's metrics.json was computed from: MCC and
    # F1 at the threshold each run chose on its validation split, and at 0.5
    for run, side in ((finetuned, "a"), (kmer, "b")):
        report = json.loads((run / "report" / "metrics.json").read_text())
        for name in ("mcc", "f1", "auroc"):
            assert result["metrics"][name][side] == pytest.approx(report[name])
        for name in ("mcc", "f1"):
            assert result["metrics"][f"{name}_at_0.5"][side] == pytest.approx(
                report["at_0.5"][name]
            )
        assert result["metrics"]["mcc"][f"{side}_thresholds"] == [report["threshold"]]
        assert f"{PREDICTIONS} (called at {report['threshold']:.3g})" in printed
    assert result["metrics"]["auroc"]["difference"] < 0  # 3 steps from scratch vs k-mers
    mcc = result["metrics"]["mcc"]
    assert f"mcc        A {mcc['a']:.3f} [{mcc['a_low']:.3f}, {mcc['a_high']:.3f}]" in printed

    # seeds of one recipe against a baseline: A is the mean of its runs
    reseeded = tmp_path / "reseeded"
    assert (
        main(
            [
                "-q",
                "finetune",
                "classify",
                *NO_BASE_READERS,
                "--data",
                str(data),
                "--from-scratch",
                "--tokenizer",
                str(pretraining_data["tokenizer"]),
                "--max-steps",
                "3",
                "--batch-size",
                "8",
                "--seed",
                "1",
                "--out",
                str(reseeded),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert (
        main(
            [
                "baseline",
                "compare",
                str(finetuned),
                str(reseeded),
                "--against",
                str(kmer),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    seeds = json.loads(out.read_text())
    assert printed.startswith("A the mean of 2 runs: ")
    assert len(seeds["a"]) == 2 and len(seeds["b"]) == 1
    auroc = seeds["metrics"]["auroc"]
    assert auroc["a_runs"][0] == pytest.approx(result["metrics"]["auroc"]["a"])
    assert auroc["a_runs"][0] != auroc["a_runs"][1]  # another seed, other predictions
    assert "A's runs " + " / ".join(f"{v:.3f}" for v in auroc["a_runs"]) in printed
    assert main(["baseline", "compare", str(finetuned), str(reseeded), str(kmer)]) == 1
    error = capsys.readouterr().err.strip()
    assert "compare takes two runs (A, then B), got 3" in error and "\n" not in error

    other = _motif_dataset(tmp_path / "other.h5", n=300, seed=1)
    assert (
        main(["-q", "baseline", "kmer-lr", "--data", str(other), "--out", str(tmp_path / "other")])
        == 0
    )
    capsys.readouterr()
    assert main(["baseline", "compare", str(finetuned), str(tmp_path / "other")]) == 1
    error = capsys.readouterr().err.strip()
    assert "scored different test splits" in error and "\n" not in error
    assert main(["baseline", "compare", str(finetuned), str(tmp_path)]) == 1
    assert "no test_predictions.npz" in capsys.readouterr().err

    results = tmp_path / "results"
    shutil.copytree(finetuned / "report", results / "tasks" / "motif" / "report")
    shutil.copytree(kmer, results / "tasks" / "motif" / "baselines" / "kmer-lr")
    page = drawn_report(results, tmp_path / "report.html").read_text()
    assert "genobird minus each baseline on the same 60 test sequences" in page
    low, high = result["metrics"]["auroc"]["low"], result["metrics"]["auroc"]["high"]
    assert f"[{low:+.3f}, {high:+.3f}]" in page  # the same 2,000 resamples (seed 0)


def test_a_split_fingerprint_follows_that_split_only(tmp_path):
    import h5py

    from genobird.datasets.windows import split_fingerprint

    data = _motif_dataset(tmp_path / "motif.h5", n=50)
    test = split_fingerprint(data, "test")
    assert split_fingerprint(data, "test", rows_per_read=7) == test  # read in slices
    with h5py.File(data, "r+") as handle:
        splits = handle["split"][:].astype(str)
        first_train, first_test = (int(np.flatnonzero(splits == s)[0]) for s in ("train", "test"))
        handle["sequences"][first_train] = b"A" * len(handle["sequences"][first_train])
    assert split_fingerprint(data, "test") == test  # a training row changed
    with h5py.File(data, "r+") as handle:
        handle["labels"][first_test] = 1 - handle["labels"][first_test]
    assert split_fingerprint(data, "test") != test


# --------------------------------------------------------------------------- many features
def _feature_run(probabilities, labels, name: str, categories, fingerprint: str = "split"):
    from genobird.evaluation.compare import FeaturePredictions

    names = [f"f{i}" for i in range(labels.shape[1])]
    return FeaturePredictions(labels, probabilities, names, categories, fingerprint, Path(name))


def test_median_auroc_by_category_is_compared_paired_over_test_examples():
    from genobird.evaluation.compare import paired_median_auroc

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, (600, 5)).astype(np.uint8)
    labels[:300, 4] = 255  # a feature known on half the examples only
    categories = ["TF", "TF", "TF", "Histone", "Histone"]
    good = np.clip(labels * 0.3 + rng.normal(0.35, 0.25, labels.shape), 0, 1)
    poor = np.clip(labels * 0.1 + rng.normal(0.45, 0.25, labels.shape), 0, 1)
    a, b = (_feature_run(p, labels, n, categories) for p, n in ((good, "a"), (poor, "b")))
    result = paired_median_auroc(a, b, resamples=300, seed=1)

    def auroc(probabilities, column):
        known = labels[:, column] != 255
        return skm.roc_auc_score(labels[known, column], probabilities[known, column])

    tf = result["categories"]["TF"]
    assert tf["features"] == 3
    assert tf["a"] == pytest.approx(np.median([auroc(good, c) for c in range(3)]))
    assert tf["b"] == pytest.approx(np.median([auroc(poor, c) for c in range(3)]))
    assert tf["low"] > 0 and tf["a_better_share"] == 1.0
    histone = result["categories"]["Histone"]
    assert histone["a"] == pytest.approx(np.median([auroc(good, 3), auroc(good, 4)]))
    assert result["categories"]["all"]["features"] == 5
    # a model against itself: no difference, an interval of zero width
    same = paired_median_auroc(a, a, resamples=200)["categories"]["TF"]
    assert same["difference"] == 0 and same["low"] == 0 == same["high"]
    # features with too few test positives are left out of every median
    few = paired_median_auroc(a, b, resamples=200, min_positives=10_000)
    assert few["categories"] == {}


def test_feature_runs_on_other_test_splits_are_refused():
    from genobird.evaluation.compare import paired_median_auroc

    labels = np.random.default_rng(0).integers(0, 2, (50, 2)).astype(np.uint8)
    probabilities = np.random.default_rng(1).random((50, 2))
    a = _feature_run(probabilities, labels, "a", ["TF", "TF"], fingerprint="one")
    b = _feature_run(probabilities, labels, "b", ["TF", "TF"], fingerprint="two")
    with pytest.raises(InputError, match="scored different test splits"):
        paired_median_auroc(a, b)


def test_compare_of_two_chromatin_runs_from_the_command_line(tmp_path, capsys):
    from genobird.baselines import run_classifier_baseline

    data = _motif_dataset(tmp_path / "m.h5", n=400, task="chromatin", features=2)
    run_classifier_baseline("kmer-lr", data, tmp_path / "kmer")
    run_classifier_baseline("kmer-lr", data, tmp_path / "kmer-40", window_bp=40)
    out = tmp_path / "compare.json"
    assert (
        main(
            [
                "-q",
                "baseline",
                "compare",
                str(tmp_path / "kmer"),
                str(tmp_path / "kmer-40"),
                "--resamples",
                "200",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "median AUROC over the features" in printed and "TF" in printed
    result = json.loads(out.read_text())
    assert result["categories"]["TF"]["features"] == 2
    # the whole 100 bp window holds every planted motif; its central 40 bp, fewer of them
    assert result["categories"]["TF"]["difference"] > 0
