"""Exact BPE encoding of DNA for a sentencepiece BPE model, about twice as fast as
sentencepiece's own encoder (benchmarks/README.md), through the C extension `_bpe`.

sentencepiece's BPE merges, in a sentence, the adjacent pair whose concatenation is the
best-scoring piece, leftmost first on ties, until no pair concatenates to a piece. The
extension does exactly that with a cheaper queue; this module lists the pairs it needs
(every split of every piece into two pieces) and, before trusting it, checks it against
sentencepiece on probe sequences. Where the extension is not built, or the model is not
one it reproduces on the probes (a unigram model, say), `FastBPE.create` returns None
and callers keep sentencepiece. Sequences with a character the model lacks are
handed to sentencepiece one by one.
"""

from __future__ import annotations

import logging
import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import sentencepiece as spm

try:
    from genobird.corpus import _bpe
except ImportError:  # not compiled (a source tree without `pip install -e .`)
    _bpe = None

log = logging.getLogger(__name__)

# Checked against sentencepiece when a model is loaded: random DNA with N runs and the
# repeats that stress tie-breaking (homopolymers, tandem repeats).
PROBES = [
    "".join(random.Random(seed).choices("ACGTN", [30, 20, 20, 29, 1], k=700)) for seed in range(8)
] + ["A" * 97, "AC" * 61, "ACGT" * 53, "N" * 40 + "ACGTTGCA" * 20 + "N" * 9, "G", ""]


class FastBPE:
    def __init__(self, processor: spm.SentencePieceProcessor, table):
        self._processor = processor
        self._table = table

    @classmethod
    def create(cls, processor: spm.SentencePieceProcessor) -> FastBPE | None:
        """The fast encoder for this model, or None where it cannot be exact."""
        if _bpe is None:
            return None
        pieces = _regular_pieces(processor)
        if pieces is None:
            return None
        encoder = cls(processor, _build_table(processor, pieces))
        if encoder.encode(PROBES) != processor.encode(PROBES):
            log.debug("fast BPE differs from sentencepiece on the probes; not used")
            return None
        return encoder

    def encode(self, sequences: list[str], threads: int = 1) -> list[list[int]]:
        """Token ids of each sequence, as sentencepiece's `encode` gives them."""
        if threads > 1 and len(sequences) >= 2 * threads:
            size = -(-len(sequences) // threads)
            chunks = [sequences[i : i + size] for i in range(0, len(sequences), size)]
            with ThreadPoolExecutor(threads) as pool:  # the merging releases the GIL
                return [row for rows in pool.map(self._encode_chunk, chunks) for row in rows]
        return self._encode_chunk(sequences)

    def encode_sampled(self, sequence: str, draws: np.ndarray, dropout: float) -> list[int] | None:
        """BPE-dropout ids of one sequence, `bpe_dropout.DropoutBPE`'s loop in C, draw for
        draw, the draws in merge order; None where the sequence holds a character
        without a piece."""
        return _bpe.encode_sampled(self._table, sequence, draws, dropout)

    def encode_keyed(
        self, sequence: str, state: int, increment: int, dropout: float, stride: int
    ) -> list[int] | None:
        """The same with draws keyed by place: those numpy's PCG64 of this state and
        increment would give as `random((len(sequence), stride))`, without making them."""
        low = (1 << 64) - 1
        return _bpe.encode_keyed(
            self._table,
            sequence,
            state >> 64,
            state & low,
            increment >> 64,
            increment & low,
            dropout,
            stride,
        )

    def _encode_chunk(self, sequences: list[str]) -> list[list[int]]:
        rows = _bpe.encode(self._table, sequences)
        for index, row in enumerate(rows):
            if row is None:  # a character without a piece: sentencepiece's unknown rules
                rows[index] = self._processor.encode(sequences[index])
        return rows


def _regular_pieces(processor: spm.SentencePieceProcessor) -> dict[str, int] | None:
    """piece -> id of the pieces that BPE merges into, or None if the model has unused or
    byte pieces (sentencepiece re-splits or falls back to them; the extension does not)."""
    pieces = {}
    for piece_id in range(processor.get_piece_size()):
        if processor.is_control(piece_id) or processor.is_unknown(piece_id):
            continue
        if processor.is_unused(piece_id) or processor.is_byte(piece_id):
            return None
        pieces[processor.id_to_piece(piece_id)] = piece_id
    return pieces


def _build_table(processor: spm.SentencePieceProcessor, pieces: dict[str, int]):
    keys, merged, scores = [], [], []
    for piece, piece_id in pieces.items():
        for cut in range(1, len(piece)):
            left, right = pieces.get(piece[:cut]), pieces.get(piece[cut:])
            if left is not None and right is not None:
                keys.append(left << 32 | right)
                merged.append(piece_id)
                scores.append(processor.get_score(piece_id))
    distinct = np.unique(np.asarray(scores, dtype=np.float32))[::-1]  # best first
    ranks = np.searchsorted(-distinct, -np.asarray(scores, dtype=np.float32))
    char_ids = np.full(256, -1, dtype=np.int32)
    for piece, piece_id in pieces.items():
        if len(piece) == 1 and ord(piece) < 256:
            char_ids[ord(piece)] = piece_id
    return _bpe.make_table(
        np.asarray(keys, dtype=np.uint64),
        np.asarray(merged, dtype=np.int32),
        ranks.astype(np.int32),
        max(1, len(distinct)),
        char_ids,
    )
