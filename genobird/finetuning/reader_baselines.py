"""The base readers fitted as genobird's own baselines: the base CNN trained alone as the CNN
baseline is, the base k-mers fitted as the k-mer LR baseline is, each read back from a
cache or a `genobird baseline` run that fitted it exactly so (baselines.saved), and their
logits on each strand the classifier reads (finetuning.base_start blends them)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import safetensors.torch
import torch

from genobird.baselines.saved import (
    SAVED_FOLDER,
    cnn_identity,
    cnn_stem,
    kmer_identity,
    kmer_stem,
    mismatches,
    read_saved,
    write_saved,
)
from genobird.device import default_device
from genobird.errors import ConfigError
from genobird.finetuning.recipe import BaseReaderRecipe
from genobird.genome.alphabet import reverse_complement
from genobird.inputs import central

log = logging.getLogger(__name__)


def base_cnn(
    data,
    base: BaseReaderRecipe,
    window_bp: int | None,
    seed: int,
    cache: Path,
    rc_average: bool,
    sources=(),
):
    """The base CNN trained alone as genobird's CNN baseline (`baselines.cnn.train_cnn`:
    the same architecture, tower, data, strands, budget and validation choice of epoch),
    or read where it was saved: `cache`, or a baseline run in `sources`."""
    from genobird.baselines.cnn import ARCHITECTURES, CNNSpec, train_cnn

    cnn_spec = CNNSpec(
        architecture=base.cnn_architecture,
        channels=base.cnn_channels,
        rc_average=rc_average,
        window_bp=window_bp,
        seed=seed,
        max_epochs=base.cnn_epochs,
        max_minutes=base.cnn_minutes,
    )
    if cnn_spec.architecture == "deepsea-cnn":
        check_one_length(data, window_bp)
    stem, identity = cnn_stem(rc_average), cnn_identity(cnn_spec, data)
    if found := saved_baseline("base CNN", stem, identity, cache, sources):
        record, path = found
        cnn = ARCHITECTURES[cnn_spec.architecture](
            data.num_outputs, cnn_spec.channels, cnn_spec.dropout
        )
        if cnn_spec.architecture == "deepsea-cnn":
            cnn.tower.materialize()
        safetensors.torch.load_model(cnn, str(path))
        return cnn.eval(), record
    # trained on the device fine-tuning will use, its random draws (the GPU's too: its
    # dropout) forked, so that fine-tuning draws the same as when the CNN is read
    device = default_device()
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        cnn, details = train_cnn(data, cnn_spec, device)
    log.info(
        "base CNN trained alone: validation AUROC %.4f after %d epochs (%.0f s)",
        max(details["validation_auroc_by_epoch"]),
        details["epochs"],
        details["seconds"],
    )
    write_saved(cache, stem, identity, details, cnn.state_dict())
    return cnn.eval(), details


def check_one_length(data, window_bp: int | None) -> None:
    """DeepSEA's fully connected layer reads positions, so its windows must share one
    length (padding a shorter one would move what it reads with its batch)."""
    lengths = {
        len(central(s, window_bp))
        for split in (data.train, data.valid, data.test)
        for s in split.sequences
    }
    if len(lengths) > 1:
        raise ConfigError(
            f"{data.path}: its windows are {min(lengths)}-{max(lengths)} bp, but "
            "base_cnn_architecture deepsea-cnn reads positions and needs one length: give "
            "--window-bp (at most the shortest) or --base-cnn-architecture cnn"
        )


def base_kmer_lr(
    data,
    kmers: int,
    window_bp: int | None,
    seed: int,
    cache: Path,
    sources=(),
    both_strands: bool = False,
):
    """The k-mer LR of the base k-mers fitted as genobird's k-mer LR baseline
    (`baselines.kmer.fit_kmer_lr`: counts of 3- to `kmers`-mers, on both strands with
    `both_strands`, C chosen on validation), as (weights, biases, scale), or read where
    it was saved: `cache`, or a baseline run in `sources`."""
    from genobird.baselines.kmer import fit_kmer_lr
    from genobird.model.base_readers import base_kmer_lengths

    ks = base_kmer_lengths(kmers)
    identity = kmer_identity(ks, window_bp, seed, data, both_strands)
    stem = kmer_stem(both_strands)
    if found := saved_baseline("base k-mer LR", stem, identity, cache, sources):
        record, path = found
        tensors = safetensors.torch.load_file(str(path))
        return tuple(tensors[k].numpy() for k in ("weights", "biases", "scale")), record
    fitted = fit_kmer_lr(data, ks, seed=seed, window_bp=window_bp, both_strands=both_strands)
    linear = fitted.linear()
    details = fitted.details
    log.info(
        "base k-mer LR fitted: C %g, validation AUROC %.4f (%.0f s)",
        details["C"],
        max(details["validation_auroc_by_C"].values()),
        details["seconds"],
    )
    tensors = dict(zip(("weights", "biases", "scale"), map(torch.from_numpy, linear), strict=True))
    write_saved(cache, stem, identity, details, tensors)
    return linear, details


def saved_baseline(name: str, stem: str, identity: dict, cache: Path, sources):
    """(details, tensors' path) of the baseline saved in `cache` or in a baseline run of
    `sources` (RUN/fitted) with exactly `identity`, else None. A run given whose baseline
    was fitted otherwise is named with its differences: this run then fits its own."""
    folders = [cache, *(Path(run) / SAVED_FOLDER for run in sources)]
    if found := read_saved(folders, stem, identity):
        record, path = found
        log.info("%s read from %s", name, path)
        return {**record["details"], "read_from": str(path)}, path
    for other in mismatches(folders[1:], stem, identity):
        log.warning("%s: %s was fitted otherwise, so this run fits its own", name, other)
    return None


def strand_windows(sequences: list[str], window_bp: int | None, both: bool) -> list[list[str]]:
    """The windows (their central `window_bp` bases) on each strand the classifier reads."""
    windows = [central(s, window_bp) for s in sequences]
    return [windows, [reverse_complement(s) for s in windows]] if both else [windows]


def cnn_logits(cnn, sequences: list[str], window_bp: int | None, rc_average: bool) -> np.ndarray:
    """The CNN's logits [S, N, F] on each strand the classifier reads (S = 2 with
    `rc_average`, the reverse-complemented windows second)."""
    from genobird.baselines.cnn import encode

    cnn.eval()
    logits = []
    with torch.no_grad():
        for strand in strand_windows(sequences, window_bp, rc_average):
            logits.append(
                torch.cat(
                    [
                        cnn.strand_logits(encode(strand[i : i + 256]))
                        for i in range(0, len(strand), 256)
                    ]
                ).numpy()
            )
    return np.stack(logits)


def kmer_logits(
    linear,
    sequences: list[str],
    kmers: int,
    window_bp: int | None,
    rc_average: bool,
    both_strands: bool = False,
) -> np.ndarray:
    """The k-mer LR's logits [S, N, F] from (weights, biases, scale) of 3- to `kmers`-mers
    on each strand the classifier reads (S = 2 with `rc_average`) of the windows' central
    `window_bp` bases, of the counts of both strands with `both_strands`."""
    from genobird.baselines.kmer import kmer_matrix
    from genobird.model.base_readers import base_kmer_lengths

    weights, biases, scale = linear
    ks = base_kmer_lengths(kmers)
    strands = strand_windows(sequences, window_bp, rc_average)
    return np.stack(
        [
            np.asarray(kmer_matrix(strand, ks, both_strands).multiply(scale[None]) @ weights.T)
            + biases
            for strand in strands
        ]
    )
