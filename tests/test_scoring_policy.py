"""What every scoring command reads, held alike across the commands: the same one-line
refusals of an input it cannot read, given before any model is loaded, and the same
verdict on a variant whose window runs past a contig's end (N-padded there and scored)."""

from __future__ import annotations

import h5py
import pandas as pd
import pytest

from genobird.cli import main
from genobird.genome import Reference
from tests.conftest import saved_model_dir, tiny_language_model, write

NEEDS_REFERENCE = "needs --reference FASTA to cut the windows from"
NOT_FASTA = "--chromosomes selects BED regions or VCF variants, not FASTA records"
REFUSALS = [
    *[
        (command, "bed", (), "--bed " + NEEDS_REFERENCE)
        for command in ("score", "likelihood", "embed", "ism")
    ],
    *[
        (command, "vcf", (), "--vcf " + NEEDS_REFERENCE)
        for command in ("score", "likelihood", "embed")
    ],
    *[
        (command, "fasta", ("--chromosomes", "chr1"), NOT_FASTA)
        for command in ("score", "likelihood")
    ],
]


@pytest.mark.parametrize(("command", "kind", "extra", "message"), REFUSALS)
def test_every_scoring_command_refuses_an_input_it_cannot_read_before_loading_a_model(
    tmp_path, capsys, command, kind, extra, message
):
    inputs = {
        "fasta": write(tmp_path / "a.fa", ">a\nACGTACGT\n"),
        "bed": write(tmp_path / "a.bed", "chr1\t100\t200\n"),
        "vcf": write(tmp_path / "a.vcf", "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\n"),
    }
    out = tmp_path / ("out.h5" if command in ("embed", "ism") else "out.tsv")
    model = tmp_path / "no-model"  # never read: the input is refused first
    argv = ["-q", command, "--model", str(model), f"--{kind}", str(inputs[kind]), *extra]
    if command == "ism":
        argv += ["--window-bp", "20"]
    assert main([*argv, "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not out.exists() and not list(tmp_path.glob(".out*"))


@pytest.fixture(scope="module")
def language_model(pretraining_data, tmp_path_factory):
    from genobird.corpus.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(pretraining_data["tokenizer"])
    model = tiny_language_model(tokenizer, max_position=128)
    return saved_model_dir(model, tokenizer, tmp_path_factory.mktemp("policy") / "model")


def test_a_variant_whose_window_runs_past_a_contig_end_is_padded_and_scored_alike(
    model_dir, language_model, demo_reference, tmp_path
):
    """`score --vcf`, `likelihood --vcf` and `embed --vcf` read one window policy: a
    window past a contig's start is N-padded there, and scored while at most half of it
    is padding (`inputs.MAX_N_FRACTION`)."""
    reference = Reference(demo_reference / "genome.fa")
    edge = reference.fetch("chr1", 20_000, 21_000)  # bases to both ends: no gap
    genome = write(tmp_path / "genome.fa", f">edge\n{edge}\n")
    rows = [("edge", 10, "end", edge[9]), ("edge", 500, "mid", edge[499])]
    vcf = write(
        tmp_path / "v.vcf",
        "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
        + "".join(
            f"{chrom}\t{pos}\t{name}\t{ref}\t{'A' if ref != 'A' else 'C'}\t.\t.\t.\n"
            for chrom, pos, name, ref in rows
        ),
    )
    variants = ["--vcf", str(vcf), "--reference", str(genome), "--device", "cpu"]
    score = ["-q", "score", "--model", str(model_dir), *variants]
    assert main([*score, "--out", str(tmp_path / "s.tsv")]) == 0
    language = ["--model", str(language_model), *variants, "--window-bp", "300"]
    assert main(["-q", "likelihood", *language, "--out", str(tmp_path / "l.tsv")]) == 0
    assert main(["-q", "embed", *language, "--out", str(tmp_path / "e.h5")]) == 0
    for table in ("s.tsv", "l.tsv"):
        assert pd.read_csv(tmp_path / table, sep="\t")["id"].tolist() == ["end", "mid"]
        assert not (tmp_path / f"{table}.rejected.tsv").exists()
    with h5py.File(tmp_path / "e.h5") as handle:
        embedded = [name.decode() for name in handle["rows/id"][:]]
    assert sorted(set(embedded)) == ["end", "mid"] and len(embedded) == 4  # REF and ALT each
