"""The chromatin context ablation's summary, report section and benchmark script, on
runs whose test predictions are made up to differ in known ways."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from genobird.datasets.metrics import write_evaluation
from genobird.datasets.windows import WindowSet
from genobird.evaluation.context_ablation import best_baseline, chosen_context, summarise, targets
from tests.conftest import drawn_report

CATEGORIES = ["TF"] * 4 + ["Histone"] * 2


def _task(tmp_path: Path, scales: bool = True) -> Path:
    """A task folder: a data set (TF features local, histone marks broad), genobird at 1
    and 8 kb (8 kb better on histone marks only, and chosen on validation), a CNN at 1 kb
    (as good as genobird at 1 kb) and a k-mer LR at 1 and 8 kb (8 kb chosen on validation,
    better on histone marks than at 1 kb, below genobird at 8 kb)."""
    task = tmp_path / "chromatin_tasks" / "toy"
    rng = np.random.default_rng(0)
    examples = 800
    labels = rng.integers(0, 2, (examples, 6)).astype(np.uint8)
    labels[: examples // 4, 4:] = 255  # histone marks unknown on a quarter of the bins
    windows = WindowSet(
        "chromatin",
        [f"f{i}" for i in range(6)],
        CATEGORIES,
        scales=["local"] * 4 + ["broad"] * 2 if scales else [],
    )
    for row in range(examples):
        windows.add("ACGT" * 50, labels[row], "chr1", row * 200, row * 200 + 200, "+", "test")
    windows.add("ACGT" * 50, np.zeros(6), "chr2", 0, 200, "+", "train")
    data = windows.write(task / "data.h5")
    known = np.where(labels == 255, 0, labels).astype(float)
    meta = {
        "task": "chromatin",
        "feature_names": windows.feature_names,
        "categories": CATEGORIES,
        "window_bp": 200,
    }
    test_labels = np.where(labels == 255, np.nan, labels).astype(float)

    def run(folder: str, signal: np.ndarray, extra: dict):
        probabilities = np.clip(known * signal + rng.normal(0.3, 0.2, known.shape), 0, 1)
        write_evaluation(
            task / folder / "report", meta, (test_labels, probabilities), None, extra, data
        )

    run("context-1000", np.array([0.3] * 6), {"training": {"best_validation_auroc": 0.70}})
    run(
        "context-8000",
        np.array([0.3] * 4 + [0.8] * 2),
        {"training": {"best_validation_auroc": 0.75}},
    )
    run("baselines/deepsea-cnn-1000", np.array([0.3] * 6), {"baseline": {}})
    run("baselines/kmer-lr-1000", np.array([0.3] * 6), {"baseline": {"validation_auroc": 0.6}})
    run(
        "baselines/kmer-lr-8000",
        np.array([0.3] * 4 + [0.5] * 2),
        {"baseline": {"validation_auroc": 0.65}},
    )
    (task / "context-8000" / "benchmark.tsv").write_text("s\th:m:s\tmax_rss\n90.0\t0:01:30\t1\n")
    return task


def test_context_gains_and_baseline_differences_are_paired_by_category(tmp_path):
    task = _task(tmp_path)
    summary = summarise(task, min_positives=20, resamples=300)
    assert summary["chosen_context"] == 8000  # the higher validation AUROC
    assert set(summary["genobird"]) == {1000, 8000}
    auroc_8k, _, features = summary["genobird"][8000]["Histone"]
    assert features == 2 and auroc_8k > summary["genobird"][1000]["Histone"][0]
    gain = summary["gain_over_narrowest"]["genobird"][8000]
    assert gain["Histone"]["low"] > 0  # the planted gain is found
    assert gain["TF"]["low"] < 0 < gain["TF"]["high"] or abs(gain["TF"]["difference"]) < 0.05
    kmer = summary["arms"]["kmer-lr"]
    assert kmer["best_context"] == 8000 and kmer["contexts"][1000]["validation_auroc"] == 0.6
    assert summary["gain_over_narrowest"]["kmer-lr"][8000]["Histone"]["low"] > 0
    assert summary["arms"]["genobird"]["contexts"][8000]["seconds"] == 90.0
    assert summary["arms"]["genobird"]["contexts"][1000]["seconds"] is None
    same = {(row["kind"], row["context"]): row["categories"] for row in summary["same_context"]}
    assert set(same) == {("deepsea-cnn", 1000), ("kmer-lr", 1000), ("kmer-lr", 8000)}
    assert same[("kmer-lr", 8000)]["Histone"]["low"] > 0  # 0.8 against 0.5 of signal
    assert abs(same[("deepsea-cnn", 1000)]["Histone"]["difference"]) < 0.05
    best = {row["kind"]: row for row in summary["best_against_best"]}
    assert best["kmer-lr"]["context"] == 8000 and best["kmer-lr"]["genobird_context"] == 8000
    assert best_baseline(summary)["kind"] == "kmer-lr"  # the CNN recorded no validation
    # features with too few test positives drop out of every median
    assert summarise(task, min_positives=10_000, resamples=200)["genobird"][1000] == {}


def test_features_group_by_scale_where_the_tables_give_one(tmp_path):
    task = _task(tmp_path)
    summary = summarise(task, min_positives=20, resamples=200, by="scale")
    assert set(summary["genobird"][8000]) == {"local", "broad"}
    assert summary["genobird"][8000]["broad"][2] == 2
    assert summary["gain_over_narrowest"]["genobird"][8000]["broad"]["low"] > 0
    from genobird.errors import InputError

    with pytest.raises(InputError, match="group the features by one of"):
        summarise(task, by="cell")


def test_chosen_context_reads_validation_never_test(tmp_path):
    task = _task(tmp_path)
    metrics = task / "context-8000" / "report" / "metrics.json"
    report = json.loads(metrics.read_text())
    report["training"]["best_validation_auroc"] = 0.5  # worse on validation, better on test
    metrics.write_text(json.dumps(report))
    assert (
        chosen_context(
            {1000: task / "context-1000" / "report", 8000: task / "context-8000" / "report"}
        )
        == 1000
    )


def test_the_report_shows_every_arm_both_groupings_and_the_targets(tmp_path):
    _task(tmp_path)
    page = drawn_report(tmp_path, tmp_path / "report.html").read_text()
    assert "Chromatin profiles: toy" in page and "genobird, 8,000 bp minus 1,000 bp" in page
    assert "genobird minus DeepSEA CNN, both at 1,000 bp" in page
    assert "k-mer LR, 8,000 bp minus 1,000 bp" in page and "By scale" in page
    assert 'alt="predicted and observed along the held-out region"' in page
    assert "features with 20+" in page  # positives per split
    assert "met: genobird 8,000 bp (its best of 4 kb or more) above 1,000 bp" in page


def test_predictions_along_the_region_are_the_runs_own_in_genome_order(tmp_path):
    from genobird.errors import InputError
    from genobird.evaluation.run_comparisons import ablation
    from genobird.report.chromatin_plots import broken_at_gaps, plot_along_region, shown_features

    task = _task(tmp_path)
    curves = ablation(task)["region_curves"]
    axes = plot_along_region(task, curves, limit=3).axes
    path = task / "context-8000" / "report" / "test_predictions.npz"
    saved = dict(np.load(path))
    # in each category the feature with the most test positives (TF, Histone), then the
    # next TF; unknown labels (255) are not positives
    positives = (saved["labels"] == 1).sum(axis=0)
    tf = np.argsort(-positives[:4], kind="stable")
    histone = 4 + np.argsort(-positives[4:], kind="stable")
    expected = [f"f{tf[0]} (TF)", f"f{histone[0]} (Histone)", f"f{tf[1]} (TF)"]
    assert [ax.get_title(loc="left") for ax in axes] == expected
    genobird, kmer = axes[0].get_lines()
    # the test windows were written 200 bp apart in order: centres 0.0001, 0.0003, ... Mb
    assert np.allclose(genobird.get_xdata(), (np.arange(800) * 200 + 100) / 1e6)
    assert np.array_equal(genobird.get_ydata(), saved["probabilities"][:, tf[0]])
    assert genobird.get_label() == "genobird, 8,000 bp" and kmer.get_label() == "k-mer LR, 8,000 bp"
    assert shown_features(np.array([[1, 0, 1], [1, 0, 0]]), ["a", "a", "b"], 5) == [0, 2]
    x, y = broken_at_gaps(np.array([0.1, 0.105, 0.2]), np.array([1, 2, 3]))
    assert np.array_equal(x, [0.1, 0.105, np.nan, 0.2], equal_nan=True) and np.isnan(y[2])
    # predictions of another test split are refused, not drawn
    np.savez(path, **{**saved, "fingerprint": "0" * 64})
    with pytest.raises(InputError, match="another test split"):
        plot_along_region(task, curves)


def test_state_targets_read_broad_groups_and_the_best_baseline(tmp_path):
    task = _task(tmp_path)
    summary = summarise(task, min_positives=20, resamples=200)
    found = {t.claim.split(" (")[0]: t for t in targets(task, summary)}
    cost = found["the whole ablation within 90 minutes"]
    assert not cost.met and "1 runs" not in cost.detail and "4 runs without" in cost.detail
    long = found["genobird 8,000 bp"]  # its best of 4 kb or more, above 1 kb on Histone
    assert long.met and long.detail.startswith("Histone +")
    lead = found["genobird 8,000 bp at least the best baseline"]
    assert "k-mer LR 8,000 bp, chosen on validation" in lead.claim
    assert "Histone +" in lead.detail and "TF " in lead.detail


def test_peak_tasks_get_the_peak_targets(tmp_path):
    task = _task(tmp_path, scales=False)
    found = targets(task, summarise(task, min_positives=20, resamples=200))
    claims = {t.claim: t for t in found}
    assert "TF median AUROC >= the 1,000 bp DeepSEA CNN's" in claims
    widest = claims["8,000 bp above 1,000 bp with the interval above zero in a category"]
    assert widest.met and widest.detail == "Histone"


def test_a_task_without_runs_is_a_one_line_error(tmp_path):
    from genobird.errors import InputError

    with pytest.raises(InputError, match="fine-tune the task first"):
        summarise(tmp_path)


def _set_run(task: Path, run: str, part: str, values: dict) -> None:
    path = task / run / "report" / "metrics.json"
    metrics = json.loads(path.read_text())
    metrics[part] = {**metrics.get(part, {}), **values}
    path.write_text(json.dumps(metrics))


def test_runs_their_budget_ended_while_validation_rose_are_named(tmp_path, capsys):
    """A CNN whose kept epoch is its last was cut by its minutes with validation still
    rising; a fine-tuning run whose kept check is its last ran its whole schedule (cut
    only where its minutes ended it first); the summary, the benchmark and the report
    name the runs cut short."""
    import importlib.util

    from genobird.evaluation.context_ablation import cut_short, how_it_stopped

    task = _task(tmp_path)
    # genobird 1 kb: best at its last step, its schedule's end
    _set_run(
        task, "context-1000", "training", {"steps": 300, "best_step": 300, "stopped_early": False}
    )
    # genobird 8 kb: validation peaked at 450 and patience stopped it at 600
    _set_run(
        task, "context-8000", "training", {"steps": 600, "best_step": 450, "stopped_early": True}
    )
    # the CNN: 3 epochs of 30, each better than the last: its 4 minutes ended it
    _set_run(
        task,
        "baselines/deepsea-cnn-1000",
        "baseline",
        {
            "epochs": 3,
            "best_epoch": 3,
            "max_epochs": 30,
            "max_minutes": 4.0,
            "validation_auroc": 0.6,
        },
    )
    genobird_1kb = task / "context-1000" / "report"
    assert how_it_stopped(genobird_1kb) == {
        "cut": False,
        "detail": "best at its schedule's end (step 300, learning rate zero)",
    }
    assert how_it_stopped(task / "context-8000" / "report") == {
        "cut": False,
        "detail": "stopped by validation at step 600 (best 450)",
    }
    assert how_it_stopped(task / "baselines" / "deepsea-cnn-1000" / "report") == {
        "cut": True,
        "detail": "cut by its 4-minute budget: still improving at epoch 3",
    }
    assert how_it_stopped(task / "baselines" / "kmer-lr-1000" / "report") is None
    summary = summarise(task, min_positives=20, resamples=100)
    assert cut_short(summary) == ["DeepSEA CNN 1,000 bp"]
    # a fine-tuning run its minutes ended at its best check was cut short too
    _set_run(task, "context-1000", "training", {"stopped_at_time": True})
    assert how_it_stopped(genobird_1kb)["cut"]
    # a CNN whose best epoch came before its last was stopped by validation
    _set_run(task, "baselines/deepsea-cnn-1000", "baseline", {"epochs": 6, "best_epoch": 3})
    assert cut_short(summarise(task, min_positives=20, resamples=100)) == ["genobird 1,000 bp"]

    script = Path(__file__).parents[1] / "benchmarks" / "chromatin_context.py"
    spec = importlib.util.spec_from_file_location("chromatin_context", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([str(task), "--resamples", "100"]) == 0
    printed = capsys.readouterr().out
    assert "validation 0.7000; cut by its minutes at step 300: still improving" in printed
    assert printed.rstrip().endswith(
        "cut short by their budget, validation still rising: genobird 1,000 bp"
    )
    page = drawn_report(tmp_path, tmp_path / "report.html").read_text()
    assert (
        "Cut short by their budget, validation still rising at their last check: "
        "genobird 1,000 bp." in page
    )
    assert "validation best at epoch 3 of 6" in page


def test_a_run_started_from_the_baseline_runs_names_them(tmp_path, capsys):
    """A genobird run that read its base readers from the baseline arms (base-start.json's
    read_from: RUN/fitted/...) names those runs beside its minutes; one that fitted its
    own (its cache, OUTPUT/base-cnn) names none."""
    import importlib.util

    task = _task(tmp_path)
    fitted = task / "baselines" / "kmer-lr-8000" / "fitted" / "kmer-lr.safetensors"
    (task / "context-8000" / "base-start.json").write_text(
        json.dumps({"base_kmer_lr": {"C": 0.01, "read_from": str(fitted)}})
    )
    own = task / "context-1000" / "base-cnn" / "kmer-lr.safetensors"
    (task / "context-1000" / "base-start.json").write_text(
        json.dumps({"base_kmer_lr": {"C": 0.01, "read_from": str(own)}})
    )
    contexts = summarise(task, min_positives=20, resamples=100)["arms"]["genobird"]["contexts"]
    assert contexts[8000]["started_from"] == ["kmer-lr-8000"]
    assert contexts[1000]["started_from"] == []
    script = Path(__file__).parents[1] / "benchmarks" / "chromatin_context.py"
    spec = importlib.util.spec_from_file_location("chromatin_context", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([str(task), "--resamples", "100"]) == 0
    assert "1.5 min; started from the runs kmer-lr-8000 (their minutes counted there)" in (
        capsys.readouterr().out
    )
    page = drawn_report(tmp_path, tmp_path / "report.html").read_text()
    assert "1.5 (+ kmer-lr-8000)" in page
