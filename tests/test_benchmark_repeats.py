"""benchmarks/repeats.py, run as a user runs it: the counting behind "where a genome's
predictable bits lie", on a soft-masked genome whose repeat copies are known."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import write

REPO = Path(__file__).resolve().parents[1]


def random_dna(rng, length: int) -> str:
    return "".join(rng.choice(list("ACGT"), length))


def genome_with_a_repeat(rng, element: str, length: int, copies: int) -> str:
    """Random bases with copies of one element, in lowercase."""
    parts = []
    for _ in range(copies):
        parts += [random_dna(rng, length // copies - len(element)), element.lower()]
    return "".join(parts)


def run_repeats(tmp_path, tokenizer, *options):
    """The script on chrA (training) and chrB (held out) of tmp_path/genome.fa, with a
    pipeline config of its own (so that no pipeline's model is found)."""
    config = write(
        tmp_path / "none.yaml",
        f"results: {tmp_path / 'none'}\ncorpus:\n"
        "  train_chromosomes: [chrA]\n  heldout_chromosomes: [chrB]\n",
    )
    return subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "repeats.py"),
            "--config",
            str(config),
            "--reference",
            str(tmp_path / "genome.fa"),
            "--tokenizer",
            str(tokenizer),
            *options,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )


def table(printed: str) -> dict[str, list[float]]:
    """Each printed row's bits per bp: all, repeat bases, other bases."""
    rows = re.findall(r"^\| (.+?) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", printed, re.M)
    return {name: [float(x) for x in values] for name, *values in rows}


@pytest.fixture(scope="module")
def genome(tmp_path_factory):
    rng = np.random.default_rng(0)
    element = random_dna(rng, 200)
    folder = tmp_path_factory.mktemp("repeats")
    chromosomes = {
        "chrA": genome_with_a_repeat(rng, element, 60_000, 40),
        "chrB": genome_with_a_repeat(rng, element, 20_000, 10),
    }
    write(folder / "genome.fa", "".join(f">{n}\n{s}\n" for n, s in chromosomes.items()))
    return folder, chromosomes


def test_the_bits_saved_on_a_genome_lie_in_its_repeat_copies(genome, pretraining_data):
    folder, chromosomes = genome
    done = run_repeats(folder, pretraining_data["tokenizer"])
    assert done.returncode == 0, done.stderr
    share = np.mean([c.islower() for c in chromosomes["chrB"]])
    assert f"{share:.1%} of bases in repeat copies" in done.stdout
    rows = table(done.stdout)
    assert rows["order 0"][1] == pytest.approx(rows["order 0"][2], abs=0.05)  # no context
    assert rows["order 10"][1] < 0.5 < 1.9 < rows["order 10"][2]  # the copies are memorised
    # pieces: their neighbours predict a copy's pieces better than their frequency does
    frequency, neighbours = rows["piece frequency"], rows["piece given both neighbours"]
    assert neighbours[1] < 0.5 * frequency[1] and all(np.isfinite(frequency + neighbours))


def test_a_model_of_another_vocabulary_or_not_a_model_is_refused_before_scoring(
    genome, pretraining_data, tmp_path
):
    from genobird.corpus import VocabSpec, train_vocabulary
    from genobird.corpus.tokenizer import load_tokenizer

    folder, _ = genome
    model = tmp_path / "model"
    model.mkdir()
    done = run_repeats(folder, pretraining_data["tokenizer"], "--model", str(model))
    assert done.returncode != 0 and "not a genobird model directory" in done.stderr
    load_tokenizer(pretraining_data["tokenizer"]).save(model)
    (model / "config.json").write_text("{}")
    other = tmp_path / "other.model"
    train_vocabulary(pretraining_data["folder"] / "train.txt", other, VocabSpec(300))
    done = run_repeats(folder, other, "--model", str(model))
    assert done.returncode != 0 and "trained with another vocabulary" in done.stderr
    assert "Traceback" not in done.stderr and "bits per bp" not in done.stdout.lower()
