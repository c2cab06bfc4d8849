"""Does the pretrained model read a masked piece from its copy in view? Bits per bp on
copy-bearing and on other held-out DNA, by context length, beside a Markov model.

A genome with copies of segments a few kilobases apart (the demo genome's copies.bed;
segmental duplications in real ones) lets a model that sees both copies predict a masked
piece of one from the other, which an order-k Markov model cannot. Here the held-out
chromosome is cut into the model's pieces, and stretches of `scored` pieces are scored
through centred windows of each context length (the same stretches at every length;
pieces `stride` apart masked together, as `genobird likelihood` does). Each piece's bits
are spread over its bases, and the bases are split by whether they lie in a copy or its
source. The Markov model scores the same bases (its bits do not depend on the window).

    rows = bits_by_copy_context(model_dir, "genome.fa", "copies.bed", ["chr3"],
                                [32, 128, 512, 1024], markov=(counts, order, alpha))
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch

from genobird.baselines.markov import base_bits, base_counts, dna_codes
from genobird.errors import ConfigError
from genobird.genome import open_reference, read_bed
from genobird.inputs import model_padding
from genobird.scoring.likelihood import DEFAULT_STRIDE, masked_batch_at, masked_bits

_ACGT_RUN = re.compile("[ACGT]+")


@dataclass
class _Stretch:
    """A scored stretch: its run's piece ids, where its window centre lies, and per
    scored piece the bases in copies and all its bases (with their Markov bits)."""

    ids: np.ndarray  # the whole run's piece ids
    first: int  # index of the first scored piece in `ids`
    copy_bp: np.ndarray  # per scored piece: bases inside a copy span
    bp: np.ndarray  # per scored piece: its bases
    markov_copy: np.ndarray  # per scored piece: Markov bits of its bases inside copies
    markov_all: np.ndarray  # per scored piece: Markov bits of all its bases


def copy_mask(bed, chrom: str, length: int) -> np.ndarray:
    """True on every base of `chrom` inside a span of the copies BED (copy or source)."""
    mask = np.zeros(length, dtype=bool)
    for interval in read_bed(bed):
        if interval.chrom == chrom:
            mask[interval.start : interval.end] = True
    return mask


def _markov_bits(run: str, markov) -> np.ndarray | None:
    if markov is None:
        return None
    counts, order, alpha = markov
    return base_bits(*base_counts(counts, dna_codes(run), order), alpha)


def scored_stretches(
    sequence: str,
    mask: np.ndarray,
    tokenizer,
    scored: int,
    longest: int,
    max_windows: int,
    markov=None,
) -> list[_Stretch]:
    """Stretches of `scored` pieces, `scored` apart, wherever a window of `longest`
    pieces fits around them inside one A/C/G/T run; at most `max_windows`, evenly spaced."""
    half = longest // 2
    found = []
    for match in _ACGT_RUN.finditer(sequence):
        ids = np.asarray(tokenizer.encode(match.group(), normalise=False))
        if len(ids) < longest:
            continue
        lengths = tokenizer.piece_lengths[ids]
        starts = match.start() + np.concatenate([[0], np.cumsum(lengths)[:-1]])
        bits = _markov_bits(match.group(), markov)
        for first in range(half - scored // 2, len(ids) - half - scored, scored):
            found.append((ids, first, starts, lengths, bits, match.start()))
    if not found:
        raise ConfigError(
            f"no A/C/G/T run holds a window of {longest} pieces; give shorter context lengths"
        )
    keep = np.unique(np.linspace(0, len(found) - 1, min(max_windows, len(found))).astype(int))
    stretches = []
    for ids, first, starts, lengths, bits, run_start in (found[i] for i in keep):
        copy_bp, bp, markov_copy, markov_all = [], [], [], []
        for piece in range(first, first + scored):
            begin, size = int(starts[piece]), int(lengths[piece])
            inside = mask[begin : begin + size]
            copy_bp.append(int(inside.sum()))
            bp.append(size)
            if bits is not None:
                piece_bits = bits[begin - run_start : begin - run_start + size]
                markov_copy.append(float(piece_bits[inside].sum()))
                markov_all.append(float(piece_bits.sum()))
        stretches.append(
            _Stretch(
                ids,
                first,
                np.array(copy_bp),
                np.array(bp),
                np.array(markov_copy),
                np.array(markov_all),
            )
        )
    return stretches


@torch.no_grad()
def stretch_bits(
    model,
    tokenizer,
    stretches: list[_Stretch],
    length: int,
    scored: int,
    stride: int = DEFAULT_STRIDE,
    batch_size: int = 16,
    device="cpu",
) -> np.ndarray:
    """Bits of every scored piece [stretches, scored], seen through a window of `length`
    tokens ([CLS] + length - 2 pieces + [SEP]) centred on the stretch."""
    model.eval()
    padding = model_padding(model)
    pieces = length - 2
    out = np.zeros((len(stretches), scored))
    for offset in range(min(stride, scored)):
        for start in range(0, len(stretches), batch_size):
            chunk = stretches[start : start + batch_size]
            windows, picked = [], []
            for stretch in chunk:
                begin = stretch.first + scored // 2 - pieces // 2
                windows.append(stretch.ids[begin : begin + pieces].tolist())
                picked.append(np.arange(offset, scored, stride) + stretch.first - begin)
            batch = masked_batch_at(windows, picked, tokenizer, padding)
            values = masked_bits(model, batch, device)
            per_row = len(range(offset, scored, stride))
            out[start : start + len(chunk), offset::stride] = values.reshape(len(chunk), per_row)
    return out


def _class_bits(bits: np.ndarray, stretches: list[_Stretch]) -> dict[str, np.ndarray]:
    """Per stretch, (bits, bp) in copies and outside them: a piece's bits spread evenly
    over its bases."""
    bp = np.stack([s.bp for s in stretches])
    copy_bp = np.stack([s.copy_bp for s in stretches])
    per_bp = bits / bp
    return {
        "copy": np.stack([(per_bp * copy_bp).sum(1), copy_bp.sum(1)], axis=1),
        "other": np.stack([(per_bp * (bp - copy_bp)).sum(1), (bp - copy_bp).sum(1)], axis=1),
    }


def _ratio_interval(saved: np.ndarray, bp: np.ndarray, rng, resamples: int = 1000):
    """Bits per bp saved and its 95% interval, resampling stretches with replacement."""
    draws = rng.integers(0, len(saved), size=(resamples, len(saved)))
    ratios = saved[draws].sum(1) / np.maximum(bp[draws].sum(1), 1)
    value = float(saved.sum() / max(bp.sum(), 1))
    return value, float(np.quantile(ratios, 0.025)), float(np.quantile(ratios, 0.975))


def bits_by_copy_context(
    model_dir,
    fasta,
    copies_bed,
    chromosomes: list[str],
    lengths: list[int],
    markov=None,
    max_windows: int = 300,
    device="cpu",
    seed: int = 0,
) -> list[dict]:
    """One row per context length: bits per bp on bases in copies and on the others
    (genobird; and the Markov model `markov` = (MarkovCounts, order, alpha) when given),
    and from the second length on the bits per bp saved over the previous length with a
    95% interval (stretches resampled), on the same bases."""
    from genobird.corpus.tokenizer import load_tokenizer
    from genobird.model.io import from_pretrained

    model = from_pretrained(model_dir, device).eval()
    tokenizer = load_tokenizer(model_dir)
    # lengths beyond the model's inputs are left out (as mlm_accuracy_by_context does)
    lengths = sorted(n for n in set(lengths) if n <= model.config.max_position)
    if not lengths or lengths[0] < 10:
        raise ConfigError(f"context lengths must lie in 10..{model.config.max_position}")
    scored = (lengths[0] - 2) // 2
    reference = open_reference(fasta)
    stretches = []
    for chrom in chromosomes:
        sequence = reference.fetch_contig(chrom)
        mask = copy_mask(copies_bed, chrom, len(sequence))
        stretches += scored_stretches(
            sequence, mask, tokenizer, scored, lengths[-1] - 2, max_windows, markov
        )
    rng = np.random.default_rng(seed)
    rows, previous = [], None
    for length in lengths:
        bits = stretch_bits(model, tokenizer, stretches, length, scored, device=device)
        classes = _class_bits(bits, stretches)
        row = {"context_length": length, "stretches": len(stretches)}
        for name, values in classes.items():
            row[name] = {
                "bp": int(values[:, 1].sum()),
                "bits_per_bp": float(values[:, 0].sum() / max(values[:, 1].sum(), 1)),
            }
            if previous is not None:
                saved = previous[name][:, 0] - values[:, 0]
                row[name]["saved_over_previous"] = _ratio_interval(saved, values[:, 1], rng)
        if markov is not None:
            copy_bp = sum(int(s.copy_bp.sum()) for s in stretches)
            all_bp = sum(int(s.bp.sum()) for s in stretches)
            copy_bits = sum(float(s.markov_copy.sum()) for s in stretches)
            all_bits = sum(float(s.markov_all.sum()) for s in stretches)
            row["markov"] = {
                "copy": copy_bits / max(copy_bp, 1),
                "other": (all_bits - copy_bits) / max(all_bp - copy_bp, 1),
            }
        rows.append(row)
        previous = classes
    return rows
