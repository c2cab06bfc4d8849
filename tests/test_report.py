"""The pipeline's HTML report: genobird beside its baselines, and prediction spread."""

from __future__ import annotations

import json
from pathlib import Path

from genobird.report import build_report
from genobird.training.pretraining import HELDOUT_SCORING


def _write_json(path: Path, value: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))


def test_report_sets_genobird_beside_markov_and_classifier_baselines(tmp_path):
    results = tmp_path / "results"
    _write_json(results / "pretrain" / "model" / "training_summary.json",
                {"eval": {"bits_per_character": 1.7712, "mlm_accuracy": 0.061},
                 "heldout_scoring": HELDOUT_SCORING})  # fmt: skip
    _write_json(results / "baselines" / "markov.json",
                {"order": 9, "alpha": 2.0, "bits_per_bp": 1.8123})  # fmt: skip
    binary = {"split": "test", "f1": 0.8, "mcc": 0.6123, "auroc": 0.9, "auprc": 0.88,
              "examples": 100, "positives": 50,
              "prediction_spread": {"min_std": 0.21, "median_std": 0.21, "max_std": 0.21,
                                    "std_by_feature": {"label": 0.21}}}  # fmt: skip
    _write_json(results / "tasks" / "tf0" / "report" / "metrics.json", binary)
    _write_json(results / "tasks" / "tf0" / "baselines" / "kmer-lr" / "report" / "metrics.json",
                {**binary, "mcc": 0.6512})  # fmt: skip
    _write_json(results / "chromatin" / "report" / "metrics.json", {
        "split": "test", "examples": 60, "median_auroc": 0.81, "median_auprc": 0.4,
        "median_auroc_by_category": {"TF": 0.8},
        "prediction_spread": {"min_std": 5e-5, "median_std": 0.02, "max_std": 0.1,
                              "std_by_feature": {"CTCF": 5e-5, "DNase_a": 0.1}}})  # fmt: skip
    page = build_report(results, tmp_path / "report.html", context_lengths=()).read_text()
    assert "Bits per base on the held-out chromosomes" in page
    assert "<td>1.771</td>" in page and "<td>1.812</td>" in page
    assert "order-9 Markov (alpha 2" in page
    assert "Fine-tuning: tf0" in page and "k-mer (3-6) logistic regression" in page
    assert "<td>0.6123</td>" in page and "<td>0.6512</td>" in page
    assert "prediction std, CTCF</td><td>5e-05" in page  # a collapsed feature shows
    assert "Fine-tuning: chromatin" in page


def test_report_withholds_held_out_figures_scored_with_the_answers_visible(tmp_path):
    """A training summary without `heldout_scoring` was written when scoring left BERT's
    unchanged tenth of the masked tokens visible: its bits are not comparable with the
    Markov baseline. With no held-out instances to score the model again, the report
    says so and shows neither figure."""
    results = tmp_path / "results"
    _write_json(results / "pretrain" / "model" / "training_summary.json",
                {"eval": {"bits_per_character": 1.7469, "mlm_accuracy": 0.086}})  # fmt: skip
    _write_json(results / "baselines" / "markov.json",
                {"order": 10, "alpha": 4.0, "bits_per_bp": 1.7697})  # fmt: skip
    page = build_report(results, tmp_path / "report.html", context_lengths=()).read_text()
    assert "Held-out evaluation" in page and "Not shown" in page
    assert "1.747" not in page and "Bits per base on the held-out chromosomes" not in page


def test_report_sets_zero_shot_genobird_beside_the_markov_models(tmp_path):
    results = tmp_path / "results"
    _write_json(results / "pretrain" / "model" / "training_summary.json",
                {"eval": {"bits_per_character": 1.77, "mlm_accuracy": 0.06},
                 "heldout_scoring": HELDOUT_SCORING})  # fmt: skip
    binary = {"split": "test", "f1": 0.9, "mcc": 0.8, "auroc": 0.95, "auprc": 0.9,
              "examples": 10, "positives": 5}  # fmt: skip
    task = results / "tasks" / "tata"
    _write_json(task / "report" / "metrics.json", binary)
    page = build_report(results, tmp_path / "report.html", context_lengths=()).read_text()
    assert "Zero-shot" not in page  # not run: no section
    _write_json(task / "zero-shot" / "genobird" / "report" / "metrics.json",
                {**binary, "auroc": 0.9721})  # fmt: skip
    _write_json(task / "zero-shot" / "markov" / "report" / "metrics.json",
                {**binary, "auroc": 0.9464, "order": 8})  # fmt: skip
    page = build_report(results, tmp_path / "report.html", context_lengths=()).read_text()
    assert "Zero-shot, by likelihood alone" in page and "(order 8 chosen" in page
    zero_shot = page[page.index("Zero-shot, by likelihood alone") :]
    assert zero_shot.index("genobird zero-shot") < zero_shot.index("<td>0.9721</td>")
    assert zero_shot.index("Markov model zero-shot") < zero_shot.index("<td>0.9464</td>")
