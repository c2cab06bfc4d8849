"""What every scoring command reads, held alike across the commands: the same one-line
refusals of an input it cannot read, given before any model is loaded, and the same
verdict on a variant whose window runs past a contig's end (N-padded there and scored)."""

from __future__ import annotations

from pathlib import Path

import h5py
import pandas as pd
import pytest

from genobird.cli import main
from genobird.genome import Reference
from tests.conftest import write

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


def test_a_variant_whose_window_runs_past_a_contig_end_is_padded_and_scored_alike(
    model_dir, language_model_dir, demo_reference, tmp_path
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
    language = ["--model", str(language_model_dir), *variants, "--window-bp", "300"]
    assert main(["-q", "likelihood", *language, "--out", str(tmp_path / "l.tsv")]) == 0
    assert main(["-q", "embed", *language, "--out", str(tmp_path / "e.h5")]) == 0
    for table in ("s.tsv", "l.tsv"):
        assert pd.read_csv(tmp_path / table, sep="\t")["id"].tolist() == ["end", "mid"]
        assert not (tmp_path / f"{table}.rejected.tsv").exists()
    with h5py.File(tmp_path / "e.h5") as handle:
        embedded = [name.decode() for name in handle["rows/id"][:]]
    assert sorted(set(embedded)) == ["end", "mid"] and len(embedded) == 4  # REF and ALT each


def _edge_inputs(demo_reference, tmp_path):
    """One genome and the same edge and bad records for every command: a contig of DNA with
    an assembly gap in it, FASTA records of each kind, BED lines of each kind (line numbers
    are the records' names' keys)."""
    reference = Reference(demo_reference / "genome.fa")
    dna = reference.fetch("chr1", 20_000, 21_600)
    genome = write(tmp_path / "genome.fa", f">c1\n{dna[:1000]}{'N' * 400}{dna[1000:]}\n")
    fasta = write(
        tmp_path / "edge.fa",
        f">ok\n{dna[:600]}\n"  # line 1
        f">short\n{dna[:50]}\n"  # line 3: a predictor's window would be mostly padding
        f">gap\n{'N' * 500}\n"  # line 5: no base
        f">half\n{dna[600:900]}{'N' * 300}\n"  # line 7: half N, not more
        f">mostly\n{dna[:100]}{'N' * 400}\n",  # line 9: more than half N
    )
    bed = write(
        tmp_path / "edge.bed",
        "c1\t100\t500\tok\n"  # line 1
        "c1\t1900\t1990\tnear_end\n"  # line 2: a 400 bp window runs past the end: padded
        "c1\t1950\t2100\tpast_end\n"  # line 3: the interval itself runs past the end
        "chrZ\t10\t100\tcontig\n"  # line 4: not in the reference
        "c1\t500\t400\tbackwards\n"  # line 5: end before start
        "c1\t1050\t1350\tin_gap\n"  # line 6: all N
        "c1\t900\t1300\tmostly_gap\n",  # line 7: 75% N (100 bases, then the gap)
    )
    return genome, fasta, bed


def _verdicts(out, table, column) -> tuple[set, set]:
    """(what a command scored, by `column`; the lines it rejected)."""
    if str(table).endswith(".h5"):
        with h5py.File(table) as handle:
            names = handle[column][:]
        scored = {n.decode() if isinstance(n, bytes) else str(n) for n in names}
    else:
        scored = set(pd.read_csv(table, sep="\t")[column].astype(str))
    rejected_file = f"{out}.rejected.tsv"
    rejected = (
        set(pd.read_csv(rejected_file, sep="\t")["line"]) if Path(rejected_file).exists() else set()
    )
    return scored, rejected


def test_every_command_reads_the_same_edge_records_by_its_declared_window(
    model_dir, language_model_dir, demo_reference, tmp_path
):
    """The same FASTA and BED records through score, likelihood, embed and ism: every record
    is scored or set aside with its line in OUT.rejected.tsv, none lost. What no command
    can read (a BED line past its contig's end, on an unknown contig, backwards, or in an
    assembly gap; a FASTA record without a base) every command rejects; a window past a
    contig end is N-padded by all, and a window more than half N is set aside by all. The
    one difference is the window each declares: score
    and ism read the model's input length (a 50 bp record would be mostly padding, so is
    rejected), likelihood and embed read records as they are."""
    genome, fasta, bed = _edge_inputs(demo_reference, tmp_path)
    device = ["--device", "cpu"]
    runs = {
        "score": (["score", "--model", str(model_dir)], "tsv", "name"),
        "likelihood": (["likelihood", "--model", str(language_model_dir)], "tsv", "name"),
        "embed": (["embed", "--model", str(language_model_dir)], "h5", "rows/name"),
        "ism": (["ism", "--model", str(model_dir), "--window-bp", "4"], "h5", "name"),
    }
    found = {}
    for command, (argv, suffix, column) in runs.items():
        for kind, path in (("fasta", fasta), ("bed", bed)):
            out = tmp_path / f"{command}_{kind}.{suffix}"
            where = ["--reference", str(genome)] if kind == "bed" else []
            given = ["-q", *argv, f"--{kind}", str(path), *where, "--out", str(out), *device]
            assert main(given) == 0, (command, kind)
            found[command, kind] = _verdicts(out, out, column)
    fixed_window = {"score", "ism"}
    for command in runs:
        scored, rejected = found[command, "fasta"]
        assert rejected >= {5, 9} and 7 not in rejected and {"ok", "half"} <= scored, command
        assert ("short" in scored) == (command not in fixed_window), command
        assert (3 in rejected) == (command in fixed_window), command
        assert len(scored) + len(rejected) == 5, command  # none lost
        scored, rejected = found[command, "bed"]
        assert rejected == {3, 4, 5, 6, 7}, (command, rejected)
        assert {"ok", "near_end"} <= scored, command
    # a window too much N is set aside in the same words by every command (the record
    # source's), naming the record as the input names it; only the window read differs
    for command in runs:
        fasta_reasons = _reasons(tmp_path / f"{command}_fasta.{runs[command][1]}")
        for line, name in ((5, "gap"), (9, "mostly")):
            reason, record = fasta_reasons[line]
            assert reason.startswith(f"record '{name}' is ") and " N in the " in reason, command
            assert record == name, command
            hint = "; give at least" in reason  # a record of one's own can be longer
            assert hint == (command in fixed_window), command
        bed_reasons = _reasons(tmp_path / f"{command}_bed.{runs[command][1]}")
        window = "the window around" if command in fixed_window else "region"
        for line, name, place in (
            (6, "in_gap", "c1:1,051-1,350"),
            (7, "mostly_gap", "c1:901-1,300"),
        ):
            reason, record = bed_reasons[line]
            assert reason.startswith(f"{window} {place} is "), (command, reason)
            assert record == name, command


def _reasons(out) -> dict[int, tuple[str, str]]:
    """{line: (reason, record)} of a command's OUT.rejected.tsv."""
    table = pd.read_csv(f"{out}.rejected.tsv", sep="\t")
    return {row.line: (row.reason, row.record) for row in table.itertuples()}
