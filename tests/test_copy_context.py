"""Bits per bp on copy-bearing and other DNA by context: the scored pieces, the split of
their bits between copies and the rest, and the Markov figures on the same bases."""

import math

import numpy as np
import pytest
import torch

from genobird.baselines.markov import dna_codes, fit_counts, sequence_bits
from genobird.corpus.tokenizer import load_tokenizer
from genobird.errors import ConfigError
from genobird.evaluation.copy_context import (
    bits_by_copy_context,
    copy_mask,
    scored_stretches,
    stretch_bits,
)
from tests.conftest import saved_model_dir, tiny_language_model, write


@pytest.fixture(scope="module")
def tokenizer(pretraining_data):
    return load_tokenizer(pretraining_data["tokenizer"])


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_language_model(tokenizer, 128)


@pytest.fixture(scope="module")
def model_dir(model, tokenizer, tmp_path_factory):
    return saved_model_dir(model, tokenizer, tmp_path_factory.mktemp("lm") / "model")


def _sequence(seed: int = 0, length: int = 6_000) -> str:
    rng = np.random.default_rng(seed)
    return "".join(rng.choice(list("ACGT"), length))


@torch.no_grad()
def _oracle_bits(model, tokenizer, window: list[int], masked: list[int], index: int) -> float:
    """Piece `index` of the window, with [MASK] on the pieces `masked`, by the model alone."""
    ids = list(window)
    for j in masked:
        ids[j] = tokenizer.mask_id
    input_ids = torch.tensor([[tokenizer.cls_id, *ids, tokenizer.sep_id]])
    out = model(input_ids, None, None, torch.tensor([[index + 1]]), torch.tensor([[window[index]]]))
    return -torch.log_softmax(out.mlm_logits[0].double(), -1)[window[index]].item() / math.log(2)


def test_stretch_bits_are_the_models_own_on_the_centred_window(model, tokenizer):
    sequence = _sequence()
    mask = np.zeros(len(sequence), dtype=bool)
    scored, longest, length, stride = 8, 126, 40, 3
    stretches = scored_stretches(sequence, mask, tokenizer, scored, longest, max_windows=3)
    bits = stretch_bits(model, tokenizer, stretches, length, scored, stride=stride)
    for row, stretch in enumerate(stretches):
        pieces = length - 2
        begin = stretch.first + scored // 2 - pieces // 2
        window = stretch.ids[begin : begin + pieces].tolist()
        for k in range(scored):
            masked = [stretch.first - begin + j for j in range(k % stride, scored, stride)]
            expected = _oracle_bits(model, tokenizer, window, masked, stretch.first - begin + k)
            assert bits[row, k] == pytest.approx(expected, rel=1e-4, abs=1e-5)


def test_stretches_count_the_bases_of_copies_and_the_markov_bits_of_each_base(tokenizer):
    sequence = _sequence(1)
    mask = np.zeros(len(sequence), dtype=bool)
    mask[2_000:2_600] = True
    counts = fit_counts([dna_codes(_sequence(2, 20_000))], 3, both_strands=True)
    stretches = scored_stretches(sequence, mask, tokenizer, 16, 126, 10_000, (counts, 3, 0.5))
    lengths = tokenizer.piece_lengths
    ids = tokenizer.encode(sequence, normalise=False)
    starts = np.concatenate([[0], np.cumsum(lengths[ids])[:-1]])
    for stretch in stretches:
        pieces = range(stretch.first, stretch.first + 16)
        assert stretch.bp.tolist() == [int(lengths[ids[p]]) for p in pieces]
        assert stretch.copy_bp.tolist() == [
            int(mask[starts[p] : starts[p] + lengths[ids[p]]].sum()) for p in pieces
        ]
        # Markov bits: the run scored as a whole, read back per base
        begin, end = int(starts[stretch.first]), int(starts[stretch.first + 15] + stretch.bp[-1])
        whole = sequence_bits(counts, dna_codes(sequence[:end]), 3, 0.5)
        before = sequence_bits(counts, dna_codes(sequence[:begin]), 3, 0.5)
        assert stretch.markov_all.sum() == pytest.approx(whole - before, rel=1e-9)
        assert (stretch.markov_copy <= stretch.markov_all + 1e-12).all()
    assert any(s.copy_bp.sum() for s in stretches) and any(not s.copy_bp.sum() for s in stretches)


def test_bits_by_copy_context_splits_the_same_bases_at_every_length(model_dir, tmp_path):
    sequence = _sequence(3, 8_000)
    fasta = write(tmp_path / "g.fa", ">chrT\n" + sequence + "\n")
    copies = write(
        tmp_path / "copies.bed",
        "chrT\t1000\t1600\tseg_1_source\t0\t+\nchrT\t2600\t3200\tseg_1_copy\t20\t+\n",
    )
    counts = fit_counts([dna_codes(_sequence(4, 20_000))], 4, both_strands=True)
    rows = bits_by_copy_context(
        model_dir, fasta, copies, ["chrT"], [24, 64, 128], markov=(counts, 4, 0.5), max_windows=40
    )
    assert [r["context_length"] for r in rows] == [24, 64, 128]
    mask = copy_mask(copies, "chrT", len(sequence))
    assert mask.sum() == 1200
    for row in rows:
        assert row["copy"]["bp"] == rows[0]["copy"]["bp"] > 0
        assert row["other"]["bp"] == rows[0]["other"]["bp"] > 0
        assert 0 < row["copy"]["bits_per_bp"] < 10 and 0 < row["markov"]["other"] < 3
    assert "saved_over_previous" not in rows[0]["copy"]
    value, low, high = rows[1]["copy"]["saved_over_previous"]
    assert low <= value <= high
    short = write(tmp_path / "short.fa", ">chrT\n" + sequence[:300] + "\n")
    with pytest.raises(ConfigError, match="shorter context lengths"):
        bits_by_copy_context(model_dir, short, copies, ["chrT"], [24, 128], max_windows=40)
