"""Baselines computed on the same data as genobird's models, so that a figure of genobird
stands beside what simple models reach: an order-k Markov model for bits per base, a
k-mer logistic regression and a small CNN for classification (same splits, same report).
"""

from __future__ import annotations

from pathlib import Path

from genobird.baselines.data import BaselineData, load_baseline_data
from genobird.tasks.metrics import write_evaluation

CLASSIFIERS = ("kmer-lr", "cnn")


def run_classifier_baseline(kind: str, data_path, output, seed: int = 0, **options) -> dict:
    """Fit baseline `kind` on a data set's train split (choices on its validation split),
    write OUTPUT/report/metrics.json (the fields of `genobird finetune`) and return it."""
    from genobird.baselines.cnn import CNNSpec, cnn_baseline
    from genobird.baselines.kmer import kmer_baseline

    data = load_baseline_data(data_path, seed)
    if kind == "kmer-lr":
        test, valid, details = kmer_baseline(data, seed=seed, **options)
    elif kind == "cnn":
        rc_average = options.pop("rc_average", None)
        if rc_average is None:  # promoter windows are oriented by strand; others are not
            rc_average = data.meta["task"] != "promoter"
        test, valid, details = cnn_baseline(
            data, CNNSpec(seed=seed, rc_average=rc_average, **options)
        )
    else:
        raise ValueError(f"unknown baseline {kind!r}; choose from {CLASSIFIERS}")
    return write_evaluation(
        Path(output) / "report",
        data.meta,
        (data.test.labels, test),
        None if data.multilabel else (data.valid.labels, valid),
        {"baseline": details},
        data.path,
    )


__all__ = ["CLASSIFIERS", "BaselineData", "load_baseline_data", "run_classifier_baseline"]
