"""A window's DNA to model inputs: its tokens (the tokenizer's cut or sampled BPE-dropout
cuts, on one strand or both), framed by [CLS] and [SEP] and cut to the model's length,
and batches padded for block-sparse attention. One home for what fine-tuning,
evaluation, scoring and likelihood all feed a model (below them all)."""

from __future__ import annotations

from functools import partial

import numpy as np
import torch

from genobird.corpus.tokenizer import Tokenizer
from genobird.errors import SequenceError
from genobird.genome.alphabet import normalise_dna, reverse_complement

# A window the model reads whose bases are more than this share N (an assembly gap, the
# padding past a contig's end or around a record shorter than the window) is not scored:
# a model scores such a window as confidently as any other (an all-N window scored 0.99
# as a chromatin peak), and a track would paint a gap as a peak. Scorers reject it, with
# its share, and write every scored row's share (`n_fraction`); data sets skip it.
MAX_N_FRACTION = 0.5


def n_fraction(window: str) -> float:
    """The share of a window's bases that are N (1 for an empty window)."""
    return (window.count("N") + window.count("n")) / len(window) if window else 1.0


def mostly_n(window: str) -> bool:
    """Whether a window is too much N to be scored or learnt from (`MAX_N_FRACTION`)."""
    return n_fraction(window) > MAX_N_FRACTION


def mostly_n_reason(share: float, length: int, what: str = "the window") -> str:
    """Why a window of `length` bp, `share` of them N, is not scored, in words a user can
    act on."""
    return (
        f"{what} is {share:.0%} N in the {length:,} bp the model reads (more than "
        f"{MAX_N_FRACTION:.0%}: an assembly gap, or N padding past a contig end or around "
        "a record shorter than the model's window); nothing is scored there"
    )


def fit_window(sequence: str, length: int) -> str:
    """Centre-crop or N-pad (both sides) to `length`, keeping the centre in the middle:
    how a record of another length is read as a model's window."""
    if len(sequence) >= length:
        first = (len(sequence) - length) // 2
        return sequence[first : first + length]
    left = (length - len(sequence)) // 2
    return "N" * left + sequence + "N" * (length - len(sequence) - left)


def scorable_sequences(sequences, what: str = "sequences") -> list[str]:
    """A list of DNA strings given to a scorer, normalised, with what the command line
    refuses refused here too: a bare string (a TypeError: it would be read as one
    sequence per character), an empty sequence, or one without an A/C/G/T base."""
    if isinstance(sequences, (str, bytes)):
        raise TypeError(
            f"{what} must be a list of DNA strings, got one string: pass "
            f"[sequence] to score a single sequence"
        )
    checked = []
    for index, sequence in enumerate(sequences):
        dna = normalise_dna(sequence, record=f"sequence {index}")
        if not dna.strip("N"):
            what_it_is = "is empty" if not dna else f"is all N ({len(dna)} bp)"
            raise SequenceError(
                f"sequence {index} {what_it_is}: it has no A/C/G/T base to score; leave it out"
            )
        checked.append(dna)
    return checked


def token_limit(max_tokens: int, max_position: int, sampled_cuts: bool) -> int:
    """A window's token limit: `max_tokens` for the tokenizer's own cut, every position
    the model has for sampled BPE-dropout cuts, which run about 1.2x longer at 0.1 and so
    keep their flanks, as they did in training."""
    return max_position if sampled_cuts else max_tokens


def window_ids(tokenizer: Tokenizer, sequence: str, max_tokens: int) -> np.ndarray:
    """[CLS] + the window's central tokens + [SEP], at most `max_tokens`, unpadded."""
    return framed_ids(tokenizer, tokenizer.encode(sequence, normalise=False), max_tokens)


def sampled_cut(tokenizer: Tokenizer, sequence: str, dropout: float, cut: int) -> list[int]:
    """The `cut`-th BPE-dropout segmentation of `sequence`: its draws are seeded by `cut`
    alone and keyed by each merge's place in the window, so a window is cut the same ways
    wherever it is read (which file, row or batch; a saved predictor scores it as its
    evaluation did), and a window and a one-base variant of it are cut alike away from
    the variant, so a variant's effect is not the noise of two unrelated cuts."""
    return tokenizer.encode_sampled(sequence, dropout, seed=cut, by_position=True)


def window_views(
    tokenizer: Tokenizer,
    window: str,
    max_tokens: int,
    both_strands: bool,
    cuts: int = 0,
    dropout: float = 0.0,
) -> list[np.ndarray]:
    """The inputs whose predictions are averaged for one window: each strand asked for,
    in the tokenizer's own segmentation, or (`cuts` > 0) in `cuts` BPE-dropout
    segmentations at `dropout` (`sampled_cut`), strand by strand."""
    strands = [window, reverse_complement(window)] if both_strands else [window]
    if not cuts:
        return [window_ids(tokenizer, strand, max_tokens) for strand in strands]
    return [
        framed_ids(tokenizer, sampled_cut(tokenizer, strand, dropout, cut), max_tokens)
        for strand in strands
        for cut in range(cuts)
    ]


def framed_ids(tokenizer: Tokenizer, ids: list[int], max_tokens: int) -> np.ndarray:
    """A window's token ids, its central ones when there are too many, between [CLS]
    and [SEP]: at most `max_tokens` in all."""
    room = max_tokens - 2
    if len(ids) > room:
        first = (len(ids) - room) // 2
        ids = ids[first : first + room]
    ids = np.asarray(ids, dtype=np.int64)
    return np.concatenate(([tokenizer.cls_id], ids, [tokenizer.sep_id]))


SHORT_MULTIPLE = 8


def padded_length(longest: int, block_size: int, dense_length: int = 0) -> int:
    """A batch's length: its longest input rounded up to whole attention blocks, so a
    data set of similar windows meets few distinct lengths (one layout each). Inputs the
    model attends densely whatever their length (one block, or up to `dense_length`:
    `BigBirdEncoder.dense_input_length`) round up to a multiple of 8 only: a 101 bp GUE
    sequence, 27 tokens, costs 32 positions, not 64; a 500 bp one, 85 tokens, 88, not 128."""
    step = SHORT_MULTIPLE if longest <= max(block_size, dense_length) else block_size
    return -(-longest // step) * step


def pad_ids(
    rows: list[np.ndarray], block_size: int, pad_id: int, dense_length: int = 0
) -> torch.Tensor:
    """long [B, N] of token id rows padded with the tokenizer's [PAD] id to
    `padded_length` of the longest."""
    length = padded_length(max(len(row) for row in rows), block_size, dense_length)
    out = np.full((len(rows), length), pad_id, dtype=np.int64)
    for index, row in enumerate(rows):
        out[index, : len(row)] = row
    return torch.from_numpy(out)


def collate_windows(items: list[dict], block_size: int, pad_id: int, dense_length: int = 0) -> dict:
    """Stack WindowDataset items into a batch padded to its own longest window
    (`padded_length`), not to `max_tokens`: a 300 bp window costs about 56 positions,
    not 1,024."""
    input_ids = pad_ids([item["input_ids"] for item in items], block_size, pad_id, dense_length)
    return {
        "input_ids": input_ids,
        "segment_ids": torch.zeros_like(input_ids),
        "attention_mask": input_ids != pad_id,
        "labels": torch.from_numpy(np.stack([item["labels"] for item in items])),
    }


def model_padding(model) -> dict:
    """The `padded_length` arguments that fit `model`: its block size and the length it
    attends densely. The one home of how a model's batches are padded."""
    return {
        "block_size": model.config.block_size,
        "dense_length": model.encoder.dense_input_length(),
    }


def window_collate(model, pad_id: int):
    """`collate_windows` fitted to `model` (`model_padding`)."""
    return partial(collate_windows, pad_id=pad_id, **model_padding(model))


def central(sequence: str, window_bp: int | None) -> str:
    """The central `window_bp` bases of a window (all of it when None or longer): a data
    set of 8 kb windows read at 1 kb keeps the same bins, centred as they were."""
    if window_bp is None or len(sequence) <= window_bp:
        return sequence
    first = (len(sequence) - window_bp) // 2
    return sequence[first : first + window_bp]
