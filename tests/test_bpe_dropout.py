"""BPE-dropout from genobird's own generator: sentencepiece's merges, its skip rule, and
one cut per seed in every process (sentencepiece's sampler gives other cuts in each)."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import sentencepiece as spm

from genobird.corpus import Tokenizer
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


def test_dropout_cuts_as_many_pieces_as_sentencepieces_sampler(pretraining_data):
    """The same skip rule: over 600 windows the mean piece count at dropout 0.1 and 0.3
    matches sentencepiece's sampled one within four standard errors."""
    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    windows = _windows(600)
    plain = np.mean([len(tokenizer._processor.encode(w)) for w in windows])
    for dropout in (0.1, 0.3):
        ours = [len(tokenizer.encode_sampled(w, dropout, i)) for i, w in enumerate(windows)]
        theirs = []
        for i, window in enumerate(windows):
            spm.set_random_generator_seed(i)
            theirs.append(len(tokenizer._processor.encode(window, enable_sampling=True,
                                                          alpha=dropout)))  # fmt: skip
        error = np.sqrt((np.var(ours) + np.var(theirs)) / len(windows))
        assert np.mean(ours) > plain + 1  # merges were skipped
        assert abs(np.mean(ours) - np.mean(theirs)) < 4 * error, (dropout, error)


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
    runs = [json.loads(subprocess.run(command, capture_output=True, text=True,
                                      check=True).stdout) for _ in range(2)]  # fmt: skip
    here = [tokenizer.encode_sampled(w, 0.2, seed) for seed, w in enumerate(windows)]
    assert runs[0] == runs[1] == here
    assert here != [tokenizer._processor.encode(w) for w in windows]  # it did sample
    assert [tokenizer.decode(ids) for ids in here] == windows
