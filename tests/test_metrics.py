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


def test_best_f1_threshold_matches_brute_force():
    from genobird.datasets.metrics import best_f1_threshold

    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 300)
    probabilities = np.clip(labels * 0.3 + rng.random(300) * 0.7, 0, 1)
    threshold = best_f1_threshold(labels, probabilities)
    brute = max(skm.f1_score(labels, probabilities >= t) for t in np.unique(probabilities))
    assert skm.f1_score(labels, probabilities >= threshold) == pytest.approx(brute)
