"""BPE-dropout from genobird's own generator: sentencepiece's merges, its skip rule, and
one cut per seed in every process (sentencepiece's sampler gives other cuts in each)."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import pytest
import sentencepiece as spm

from genobird.corpus import Tokenizer
from genobird.corpus.bpe_dropout import DropoutBPE
from genobird.corpus.fast_bpe import PROBES


def _windows(count: int, length: int = 101) -> list[str]:
    rng = random.Random(7)
    return ["".join(rng.choices("ACGT", k=length)) for _ in range(count)]


def test_without_dropout_it_is_sentencepieces_own_encoding(pretraining_data):
    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    sampler = tokenizer._dropout_bpe
    sequences = [p for p in PROBES if sampler.spells(p)] + _windows(200) + ["A" * 300]
    for sequence in sequences:
        expected = tokenizer._processor.encode(sequence)
        assert sampler.encode(sequence, 0.0, np.random.default_rng(0)) == expected, sequence
        keyed = sampler.encode(sequence, 0.0, np.random.default_rng(0), by_position=True)
        assert keyed == expected, sequence
        for by_position in (False, True):  # the Python loop, where the C one is not built
            python = DropoutBPE(sampler._pieces).encode(
                sequence, 0.0, np.random.default_rng(0), by_position
            )
            assert python == expected, sequence


def test_the_c_loop_makes_the_python_loops_cuts_draw_for_draw(pretraining_data):
    """The merging loop in C (through fast_bpe's table) and the Python one, given the same
    draws, cut every window alike: in merge order and keyed (where C computes numpy's
    PCG64 draws itself), sparse and dense dropout, windows with N runs and the repeats
    that stress the leftmost-first rule."""
    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    sampler = tokenizer._dropout_bpe
    assert sampler._fast is not None  # `make setup` builds the extension
    reference = DropoutBPE(sampler._pieces)  # no C loop: the Python one
    rng = random.Random(11)
    with_n = ["".join(rng.choices("ACGTN", [30, 20, 20, 29, 1], k=400)) for _ in range(20)]
    repeats = ["A" * 250, "AC" * 90, "ACGT" * 70, "AAT" * 50 + "G" + "AAT" * 50, "G", ""]
    sequences = _windows(60, 300) + with_n + repeats
    differ = 0
    for dropout in (0.05, 0.3, 0.95):
        for by_position in (False, True):
            for seed, sequence in enumerate(sequences):
                fast_rng, slow_rng = np.random.default_rng(seed), np.random.default_rng(seed)
                fast = sampler.encode(sequence, dropout, fast_rng, by_position)
                slow = reference.encode(sequence, dropout, slow_rng, by_position)
                assert fast == slow, (sequence, dropout, by_position)
                assert sampler.encode_seeded(sequence, dropout, seed, by_position) == slow
                # the generator is left where the draws left it (keyed: without drawing)
                assert fast_rng.random() == slow_rng.random()
                differ += fast != tokenizer._processor.encode(sequence)
    assert differ > len(sequences)  # the draws did cut differently from the tokenizer


def test_the_c_loop_refuses_draws_it_cannot_read(pretraining_data):
    fast = Tokenizer(pretraining_data["tokenizer"])._dropout_bpe._fast
    with pytest.raises(ValueError, match="do not cover the merges"):
        fast.encode_sampled("ACGT" * 10, np.zeros(3), 0.5)
    with pytest.raises(ValueError, match="do not cover the merges"):  # merges past the stride
        fast.encode_keyed("A" * 40, 1, 1, 0.5, stride=2)
    with pytest.raises(TypeError, match="float64"):
        fast.encode_sampled("ACGT", np.zeros(13, dtype=np.float32), 0.5)
    assert fast.encode_sampled("ACGU", np.ones(13), 0.5) is None  # no piece for U


def test_dropout_cuts_as_many_pieces_as_sentencepieces_sampler(pretraining_data):
    """The same skip rule: over 600 windows the mean piece count at dropout 0.1 and 0.3
    matches sentencepiece's sampled one within four standard errors, with the draws made
    in merge order or keyed by each merge's place."""
    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    windows = _windows(600)
    plain = np.mean([len(tokenizer._processor.encode(w)) for w in windows])
    for dropout in (0.1, 0.3):
        theirs = []
        for i, window in enumerate(windows):
            spm.set_random_generator_seed(i)
            theirs.append(
                len(tokenizer._processor.encode(window, enable_sampling=True, alpha=dropout))
            )
        for by_position in (False, True):
            ours = [
                len(tokenizer.encode_sampled(w, dropout, i, by_position))
                for i, w in enumerate(windows)
            ]
            error = np.sqrt((np.var(ours) + np.var(theirs)) / len(windows))
            assert np.mean(ours) > plain + 1  # merges were skipped
            assert abs(np.mean(ours) - np.mean(theirs)) < 4 * error, (dropout, by_position)


def _spans(tokenizer: Tokenizer, ids: list[int]) -> set[tuple[int, int]]:
    """(first base, end) of each piece of a cut."""
    spans, start = set(), 0
    for piece_id in ids:
        end = start + len(tokenizer.id_to_piece(piece_id))
        spans.add((start, end))
        start = end
    return spans


def test_keyed_draws_cut_a_window_and_its_variant_alike_away_from_the_variant(
    pretraining_data,
):
    """With draws keyed by place, a one-base variant changes a cut only near itself
    (every piece 20 bases or more from it is kept, on 200 windows); with draws in merge
    order, the variant reorders the draws and cuts the whole window anew."""
    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    change = str.maketrans("ACGT", "CGTA")
    kept = {True: [], False: []}
    for seed, window in enumerate(_windows(200)):
        variant = window[:50] + window[50].translate(change) + window[51:]
        for by_position in kept:
            cuts = [
                _spans(tokenizer, tokenizer.encode_sampled(w, 0.1, seed, by_position))
                for w in (window, variant)
            ]
            far = {span for span in cuts[0] if span[1] <= 30 or span[0] > 70}
            kept[by_position].append(len(far & cuts[1]) / max(1, len(far)))
    assert min(kept[True]) == 1.0
    assert np.mean(kept[False]) < 0.9


CUTS = """
import json, sys
from genobird.corpus import Tokenizer
tokenizer = Tokenizer(sys.argv[1])
print(json.dumps([tokenizer.encode_sampled(w, 0.2, seed) for seed, w in enumerate(sys.argv[2:])]))
"""


def test_a_seed_gives_one_cut_in_every_process(pretraining_data):
    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    windows = _windows(20)
    command = [sys.executable, "-c", CUTS, str(pretraining_data["tokenizer"]), *windows]
    runs = [
        json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
        for _ in range(2)
    ]
    here = [tokenizer.encode_sampled(w, 0.2, seed) for seed, w in enumerate(windows)]
    assert runs[0] == runs[1] == here
    assert here != [tokenizer._processor.encode(w) for w in windows]  # it did sample
    assert [tokenizer.decode(ids) for ids in here] == windows
