"""Evaluation metrics against scikit-learn and hand counts."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

from genobird.datasets.metrics import binary_metrics, multilabel_metrics

# --------------------------------------------------------------------------- negatives


# --------------------------------------------------------------------------- metrics
def test_binary_metrics_match_sklearn_and_hand_counts():
    labels = np.array([1, 1, 1, 0, 0, 0, 0, 1])
    probabilities = np.array([0.9, 0.8, 0.3, 0.6, 0.1, 0.2, 0.4, 0.7])
    result = binary_metrics(labels, probabilities)
    assert result["precision"] == pytest.approx(3 / 4) and result["recall"] == pytest.approx(3 / 4)
    assert result["f1"] == pytest.approx(0.75)
    assert result["auroc"] == pytest.approx(skm.roc_auc_score(labels, probabilities))


def test_multilabel_medians_by_category_and_skipped_features():
    labels = np.array([[1, 0, 1, 0], [0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]])
    probabilities = np.array(
        [[0.9, 0.2, 0.6, 0.1], [0.1, 0.8, 0.7, 0.1], [0.8, 0.7, 0.2, 0.2], [0.2, 0.1, 0.1, 0.3]]
    )
    result = multilabel_metrics(
        labels, probabilities, ["a", "b", "c", "d"], ["DNase", "TF", "TF", "TF"]
    )
    assert result["skipped_features"] == ["d"]  # no positive: AUROC undefined
    tf = np.median([skm.roc_auc_score(labels[:, i], probabilities[:, i]) for i in (1, 2)])
    assert result["median_auroc_by_category"]["TF"] == pytest.approx(tf)
    assert result["median_auroc_by_category"]["DNase"] == pytest.approx(1.0)


def test_the_validation_threshold_has_the_best_mcc_of_every_threshold():
    from genobird.datasets.metrics import best_mcc_threshold

    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 300)
    # calibrated far from 0.5 (every probability below it), as a weighted start can be
    probabilities = np.clip(labels * 0.1 + rng.random(300) * 0.3, 0, 1)
    probabilities[:40] = probabilities[40:80]  # ties
    threshold = best_mcc_threshold(labels, probabilities)
    brute = max(skm.matthews_corrcoef(labels, probabilities >= t) for t in np.unique(probabilities))
    assert skm.matthews_corrcoef(labels, probabilities >= threshold) == pytest.approx(brute)
    assert skm.matthews_corrcoef(labels, probabilities >= 0.5) == 0  # 0.5 calls nothing
    assert best_mcc_threshold(np.ones(5), rng.random(5)) == 0.5  # one class: nothing to choose


def test_a_binary_report_headlines_the_validation_threshold_and_keeps_0_5_beside_it(tmp_path):
    from genobird.datasets.metrics import write_evaluation

    rng = np.random.default_rng(5)
    meta = {"task": "classify", "feature_names": ["bound"], "categories": None}

    def split(n):
        labels = rng.integers(0, 2, (n, 1))
        return labels, np.clip(labels * 0.15 + rng.random((n, 1)) * 0.3, 0, 1)

    test, valid = split(200), split(200)
    report = write_evaluation(tmp_path, meta, test, valid)
    assert 0 < report["threshold"] < 0.5
    assert report["threshold_chosen_by"] == "the best MCC on validation"
    called = test[1][:, 0] >= report["threshold"]
    assert report["mcc"] == pytest.approx(skm.matthews_corrcoef(test[0][:, 0], called))
    assert report["at_0.5"]["mcc"] == pytest.approx(
        skm.matthews_corrcoef(test[0][:, 0], test[1][:, 0] >= 0.5)
    )
    assert report["mcc"] > report["at_0.5"]["mcc"] + 0.3
    without = write_evaluation(tmp_path / "b", meta, test)  # no validation split: 0.5
    assert without["threshold"] == 0.5 and without["mcc"] == without["at_0.5"]["mcc"]
