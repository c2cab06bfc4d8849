"""BPE-dropout (Provilkov et al., 2020) drawn from genobird's own generator.

sentencepiece samples BPE-dropout itself, but for one `set_random_generator_seed` its cuts
differ from process to process (sentencepiece 0.2.3: one 150 bp window, the same seed,
49, 39 and 38 pieces in three processes), so a fine-tuning run with BPE-dropout could not
repeat, nor a resumed one continue its draws. This module merges as sentencepiece's BPE
does (the adjacent pair whose concatenation is the best-scoring piece, leftmost first on
ties) and, as sentencepiece does, skips the merge it is about to make with probability
`dropout`; a skipped pair is not tried again until one of its symbols changes. The draws
come from a numpy generator seeded by the caller, so a seed gives one cut everywhere:
in the order the merges are made (training), or keyed by each merge's place in the
window (`by_position`, the cuts evaluation averages): then a window and a one-base
variant of it make the same decision for every merge they share, and their cuts differ
only near the variant.
With dropout 0 it is sentencepiece's own encoding; the tests hold it to that, and to
sentencepiece's sampler in the mean number of pieces. Given the C encoder of
`genobird.corpus.fast_bpe`, the merging runs in C on the same draws; keyed, C computes
each of numpy's PCG64 draws where it is read instead of drawing the whole table (a
101 bp window: about 10x faster in merge order, 15x keyed; benchmarks/README.md). The
Python loop stays as the reference the tests hold the C one to, and as the path where
the extension is not built.
"""

from __future__ import annotations

import functools
import heapq

import numpy as np
import sentencepiece as spm

from genobird.corpus.fast_bpe import FastBPE


class DropoutBPE:
    def __init__(self, pieces: dict[str, tuple[int, float]], fast: FastBPE | None = None):
        self._pieces = pieces  # piece -> (id, score)
        self._longest = max(map(len, pieces), default=1)
        self._fast = fast  # the C merging loop, where built for this model

    @classmethod
    def create(
        cls, processor: spm.SentencePieceProcessor, fast: FastBPE | None = None
    ) -> DropoutBPE:
        pieces = {}
        for piece_id in range(processor.get_piece_size()):
            if processor.is_control(piece_id) or processor.is_unknown(piece_id):
                continue
            pieces[processor.id_to_piece(piece_id)] = (piece_id, processor.get_score(piece_id))
        return cls(pieces, fast)

    def spells(self, sequence: str) -> bool:
        """Whether every character of `sequence` is a piece (else sentencepiece's unknown
        rules apply, which this encoder does not reproduce)."""
        return all(character in self._pieces for character in set(sequence))

    def encode(
        self, sequence: str, dropout: float, rng: np.random.Generator, by_position: bool = False
    ) -> list[int]:
        """Ids of `sequence` with each merge skipped with probability `dropout`; with
        `by_position`, the draw of a merge is the one of its first base and length."""
        # each pop draws at most once; pushes (hence pops) are at most 3 per character.
        # A span (first base, length) is queued at most once, so keyed draws skip each
        # merge independently, as drawing in merge order does.
        if by_position:
            table = (len(sequence), self._longest + 1)
            ids = self._keyed_in_c(sequence, dropout, rng.bit_generator.state)
            if ids is None:
                return self._merge(sequence, rng.random(table), dropout, by_position)
            rng.bit_generator.advance(table[0] * table[1])  # where drawing the table leaves it
            return ids
        draws = rng.random(3 * len(sequence) + 1)
        if self._fast is not None:
            ids = self._fast.encode_sampled(sequence, draws, dropout)
            if ids is not None:
                return ids
        return self._merge(sequence, draws, dropout, by_position)

    def encode_seeded(
        self, sequence: str, dropout: float, seed: int, by_position: bool = False
    ) -> list[int]:
        """`encode` with `np.random.default_rng(seed)`. A keyed cut starts from a cached
        state: evaluation and scoring cut every window with the same few seeds (0..K-1),
        and making the generator took longer than the cut."""
        if by_position:
            ids = self._keyed_in_c(sequence, dropout, _seeded_state(seed))
            if ids is not None:
                return ids
        return self.encode(sequence, dropout, np.random.default_rng(seed), by_position)

    def _keyed_in_c(self, sequence: str, dropout: float, state: dict):
        """The keyed cut in C from a generator's state, each draw computed where it is
        read (the table is len x (longest + 1) numbers, most never read); None where the
        C loop cannot take it (the Python loop then draws the table)."""
        stride = self._longest + 1
        if self._fast is None or state["bit_generator"] != "PCG64" or stride > 256:
            return None
        pcg = state["state"]
        return self._fast.encode_keyed(sequence, pcg["state"], pcg["inc"], dropout, stride)

    def _merge(
        self, sequence: str, draws: np.ndarray, dropout: float, by_position: bool
    ) -> list[int]:
        """The merging loop in Python (the reference of the C one)."""
        symbols: list[str | None] = list(sequence)
        following = [*range(1, len(symbols)), -1]
        preceding = list(range(-1, len(symbols) - 1))
        drawn = 0
        agenda: list[tuple[float, int, str]] = []

        def consider(left: int) -> None:
            right = following[left]
            if right != -1:
                merged = symbols[left] + symbols[right]
                if merged in self._pieces:  # best score first, then leftmost
                    heapq.heappush(agenda, (-self._pieces[merged][1], left, merged))

        for left in range(len(symbols) - 1):
            consider(left)
        while agenda:
            _, left, merged = heapq.heappop(agenda)
            right = following[left]
            if symbols[left] is None or right == -1 or symbols[left] + symbols[right] != merged:
                continue  # a symbol of this pair has changed since it was queued
            if by_position:
                skipped = draws[left, len(merged)] < dropout
            else:
                skipped, drawn = draws[drawn] < dropout, drawn + 1
            if skipped:
                continue
            symbols[left], symbols[right] = merged, None
            following[left] = following[right]
            if following[left] != -1:
                preceding[following[left]] = left
            if preceding[left] != -1:
                consider(preceding[left])
            consider(left)
        return [self._pieces[symbol][0] for symbol in symbols if symbol is not None]


@functools.lru_cache(maxsize=256)
def _seeded_state(seed: int) -> dict:
    """The state of `np.random.default_rng(seed)`, made once per seed."""
    return np.random.default_rng(seed).bit_generator.state
