"""Baselines computed on the same data as genobird's models, so that a figure of genobird
stands beside what simple models reach: an order-k Markov model for bits per base, a
k-mer logistic regression and a small CNN for classification (same splits, same report).
"""

from __future__ import annotations

from pathlib import Path

from genobird.baselines.data import BaselineData, load_baseline_data, validation_auroc
from genobird.datasets.metrics import write_evaluation
from genobird.errors import ConfigError

CLASSIFIERS = ("kmer-lr", "cnn", "deepsea-cnn")


def run_classifier_baseline(
    kind: str, data_path, output, seed: int = 0, device="auto", **options
) -> dict:
    """Fit baseline `kind` on a data set's train split (choices on its validation split;
    a CNN trained on `device`: auto, the GPU where there is one), write OUTPUT/report/
    metrics.json (the fields of `genobird finetune`) and the fitted model in OUTPUT/fitted
    (baselines.saved: what a fine-tuning run can start from), and return the report."""
    import torch

    from genobird.baselines.cnn import CNNSpec, cnn_baseline
    from genobird.baselines.kmer import DEFAULT_KS, kmer_baseline
    from genobird.baselines.saved import (
        SAVED_FOLDER,
        cnn_identity,
        cnn_stem,
        kmer_identity,
        kmer_stem,
        write_saved,
    )
    from genobird.device import resolve_device

    data = load_baseline_data(data_path, seed)
    window_bp = options.pop("window_bp", None)
    if window_bp is not None and window_bp > data.meta["window_bp"]:
        raise ConfigError(
            f"--window-bp {window_bp} is wider than the windows of {data_path} "
            f"({data.meta['window_bp']} bp)"
        )
    saved = Path(output) / SAVED_FOLDER
    names = list(data.meta["feature_names"])
    if kind == "kmer-lr":
        ks = options.pop("ks", DEFAULT_KS)
        both = bool(options.pop("rc_average", False))  # one strand unless asked
        test, valid, details, fitted = kmer_baseline(
            data, ks, seed=seed, window_bp=window_bp, both_strands=both, **options
        )
        tensors = dict(
            zip(("weights", "biases", "scale"), map(torch.from_numpy, fitted.linear()), strict=True)
        )
        write_saved(
            saved,
            kmer_stem(both),
            kmer_identity(ks, window_bp, seed, data, both),
            details,
            tensors,
            names,
        )
    elif kind in ("cnn", "deepsea-cnn"):
        rc_average = options.pop("rc_average", None)
        if rc_average is None:  # promoter windows are oriented by strand; others are not
            rc_average = data.meta["task"] != "promoter"
        spec = CNNSpec(
            architecture=kind, seed=seed, rc_average=rc_average, window_bp=window_bp, **options
        )
        test, valid, details, model = cnn_baseline(data, spec, resolve_device(device))
        write_saved(
            saved,
            cnn_stem(rc_average),
            cnn_identity(spec, data),
            details,
            model.state_dict(),
            names,
        )
    else:
        raise ValueError(f"unknown baseline {kind!r}; choose from {CLASSIFIERS}")
    details["window_bp"] = window_bp or data.meta["window_bp"]
    # the kept model's mean validation AUROC: what a comparison across contexts or arms
    # chooses by, as genobird's runs record their best_validation_auroc
    details["validation_auroc"] = validation_auroc(data, valid)
    return write_evaluation(
        Path(output) / "report",
        data.meta,
        (data.test.labels, test),
        None if data.multilabel else (data.valid.labels, valid),
        {"baseline": details},
        data.path,
    )


__all__ = ["CLASSIFIERS", "BaselineData", "load_baseline_data", "run_classifier_baseline"]
