"""benchmarks/repeats.py: the counting behind "where a genome's predictable bits lie"."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def repeats():
    spec = importlib.util.spec_from_file_location("repeats", REPO / "benchmarks" / "repeats.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_dna(rng, length: int) -> str:
    return "".join(rng.choice(list("ACGT"), length))


def genome_with_a_repeat(rng, element: str, length: int, copies: int) -> str:
    """Random bases with copies of one element, in lowercase."""
    parts = []
    for _ in range(copies):
        parts += [random_dna(rng, length // copies - len(element)), element.lower()]
    return "".join(parts)


def test_markov_bits_split_the_saving_to_the_repeat_copies(repeats):
    rng = np.random.default_rng(0)
    element = random_dna(rng, 200)
    train = [genome_with_a_repeat(rng, element, 60_000, 40)]
    heldout = [genome_with_a_repeat(rng, element, 20_000, 10)]
    table = repeats.markov_bits_by_case(train, heldout)
    assert table[0]["repeat_share"] == pytest.approx(np.mean(repeats.is_lowercase(heldout[0])))
    assert table[0]["repeat"] == pytest.approx(table[0]["other"], abs=0.05)  # no context
    assert table[10]["repeat"] < 0.5 < 1.9 < table[10]["other"]  # the copies are memorised


def test_neighbour_probabilities_sum_to_one(repeats):
    runs = [([5, 6, 7, 5, 6, 8, 5, 6, 7], None), ([7, 7, 6, 5], None)]
    counts = repeats.PieceCounts(runs, vocab_size=10)
    for left, right in ((5, 7), (6, 5), (9, 9)):  # seen pair, left seen only, unseen
        total = sum(counts.given_neighbours(left, piece, right) for piece in range(10))
        assert total == pytest.approx(1.0)
    assert counts.given_neighbours(5, 6, 7) > counts.frequency(6)


def test_a_model_of_another_vocabulary_is_refused_before_scoring(
    repeats, pretraining_data, tmp_path
):
    from genobird.corpus import VocabSpec, train_vocabulary
    from genobird.corpus.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(pretraining_data["tokenizer"])
    tokenizer.save(tmp_path / "model")
    repeats.require_vocabulary(tmp_path / "model", tokenizer)  # its own: accepted
    other = train_vocabulary(
        pretraining_data["folder"] / "train.txt", tmp_path / "other.model", VocabSpec(300)
    )
    with pytest.raises(SystemExit, match="trained with another vocabulary"):
        repeats.require_vocabulary(tmp_path / "model", other)


def test_a_named_model_that_is_not_one_is_an_error_the_default_is_optional(repeats, tmp_path):
    (tmp_path / "model").mkdir()
    assert repeats.scored_model(tmp_path / "model", given=False) is None  # not trained yet
    with pytest.raises(SystemExit, match="not a genobird model directory"):
        repeats.scored_model(tmp_path / "model", given=True)
    (tmp_path / "model" / "config.json").write_text("{}")
    assert repeats.scored_model(tmp_path / "model", given=True) == tmp_path / "model"
