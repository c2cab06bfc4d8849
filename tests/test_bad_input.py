"""Answers at the edges are never silent: what a user gives that should not be scored is
refused or set aside with its reason, through the command line and the Python API alike,
and nothing is scored that should not be. A window more than half N (an assembly gap, a
contig's end, a short record's padding) is not scored anywhere; splits are what was asked;
every metrics.json is valid JSON; VCF alleles follow one policy in `score` and
`likelihood`; rows keep the input's contig names; track bins cover every base."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from genobird.cli import main
from genobird.errors import SequenceError
from tests.conftest import write

# a genome with an assembly gap: 3 kb of DNA, 3 kb of N, 3 kb of DNA (the model reads 400 bp)
GAP = (3000, 6000)


@pytest.fixture(scope="module")
def gapped(tmp_path_factory):
    rng = np.random.default_rng(0)
    dna = "".join(rng.choice(list("ACGT"), 9000))
    sequence = dna[: GAP[0]] + "N" * (GAP[1] - GAP[0]) + dna[GAP[1] :]
    folder = tmp_path_factory.mktemp("gapped")
    lines = [sequence[i : i + 60] for i in range(0, len(sequence), 60)]
    return write(folder / "genome.fa", ">chr20\n" + "\n".join(lines) + "\n")


def rejected_reasons(out) -> list[str]:
    path = out.parent / f"{out.name}.rejected.tsv"
    return pd.read_csv(path, sep="\t")["reason"].tolist() if path.is_file() else []


# --------------------------------------------------------------------------- runs of N
def test_the_python_api_refuses_a_window_mostly_n(predictor):
    with pytest.raises(SequenceError, match=r"sequence 1 is all N \(4 bp\)"):
        predictor.predict(["ACGT" * 100, "NNNN"])
    with pytest.raises(
        SequenceError,
        match=r"sequence 0: the window is 9[89]% N in the 400 bp "
        r".*give at least 200 bp of A/C/G/T",
    ):
        predictor.predict(["ACGTAC"])  # 6 bp padded to the model's 400
    half = predictor.predict(["ACGT" * 50])  # 200 bp: half of the window, scored
    assert np.isfinite(half).all()


def test_fasta_records_mostly_n_are_rejected_and_each_row_says_its_n_share(
    predictor,
    tmp_path,
    capsys,
):
    fasta = write(
        tmp_path / "r.fa",
        ">whole\n"
        + "ACGT" * 100
        + "\n>gap\n"
        + "N" * 400
        + "\n>short\nACGTAC\n>padded\n"
        + "ACGT" * 60
        + "\n>cut\n"
        + "ACGT" * 37
        + "\n",
    )
    out = tmp_path / "s.tsv"
    assert (
        main(
            [
                "-q",
                "score",
                "--model",
                str(predictor.model_dir),
                "--fasta",
                str(fasta),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    table = pd.read_csv(out, sep="\t")
    assert table["name"].tolist() == ["whole", "padded"]
    assert table["n_fraction"].tolist() == [0.0, pytest.approx(160 / 400)]
    reasons = rejected_reasons(out)
    assert len(reasons) == 3
    assert "record 'gap' is 100% N" in reasons[0] and "record 'short' is 9" in reasons[1]
    assert "63% N" in reasons[2]  # 148 bp in 400: more than half N
    api = predictor.score_fasta(fasta)
    assert api["name"].tolist() == ["whole", "padded"] and len(api.attrs["rejected"]) == 3


def test_a_bed_region_in_an_assembly_gap_is_rejected_not_scored(predictor, gapped, tmp_path):
    bed = write(
        tmp_path / "r.bed",
        "chr20\t1000\t1200\tdna\nchr20\t4400\t4600\tin_gap\nchr20\t2900\t3000\tedge\n",
    )
    out = tmp_path / "s.tsv"
    assert (
        main(
            [
                "-q",
                "score",
                "--model",
                str(predictor.model_dir),
                "--bed",
                str(bed),
                "--reference",
                str(gapped),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    table = pd.read_csv(out, sep="\t")
    assert table["name"].tolist() == ["dna", "edge"]
    assert table["contains_N"].tolist() == [False, True]
    # edge: its window 2,751-3,150 reaches 150 bp into the gap
    assert table["n_fraction"].tolist() == [0.0, pytest.approx(150 / 400)]
    (reason,) = rejected_reasons(out)
    assert "the window around chr20:4,401-4,600 is 100% N" in reason


def test_tracks_write_nothing_over_a_gap_and_the_scores_of_score_elsewhere(
    predictor,
    gapped,
    tmp_path,
):
    out = tmp_path / "tracks"
    assert (
        main(
            [
                "-q",
                "tracks",
                "--model",
                str(predictor.model_dir),
                "--region",
                "chr20:1-9000",
                "--reference",
                str(gapped),
                "--out",
                str(out),
                "--features",
                predictor.feature_names[0],
            ]
        )
        == 0
    )
    (track,) = out.iterdir()
    rows = [line.split("\t") for line in track.read_text().splitlines()[1:]]
    starts = [int(row[1]) for row in rows]
    # a 200 bp bin is read as the 400 bp window around it: left out where that window
    # is more than half N (every bin in the gap), kept where it reaches 100 bp into it
    assert starts == [s for s in range(0, 9000, 200) if not GAP[0] <= s < GAP[1]]
    # the bins outside the gap hold what `score --bed` gives the same bins
    bed = write(tmp_path / "bins.bed", "".join(f"chr20\t{r[1]}\t{r[2]}\n" for r in rows))
    scores = predictor.score_bed(bed, gapped)
    np.testing.assert_allclose(
        [float(r[3]) for r in rows], scores[predictor.feature_names[0]], rtol=1e-5
    )


def test_tracks_bins_cover_every_base(predictor, gapped, tmp_path, capsys):
    command = [
        "tracks",
        "--model",
        str(predictor.model_dir),
        "--region",
        "chr20:1-2000",
        "--reference",
        str(gapped),
        "--out",
        str(tmp_path / "t"),
    ]
    assert main([*command, "--step-bp", "500"]) == 1
    error = capsys.readouterr().err.strip()
    assert "--step-bp 500 is wider than the model's 400 bp window: 100 bp of each bin" in error
    assert "\n" not in error and not (tmp_path / "t").exists()
    from genobird.scoring.tracks import step_for

    assert step_for(400) == 200 and step_for(101) == 101 and step_for(101, 50) == 50


def test_ism_and_embed_set_aside_a_record_mostly_n(predictor, tmp_path, capsys, caplog):
    fasta = write(tmp_path / "r.fa", ">gap\n" + "N" * 400 + "\n>dna\n" + "ACGT" * 100 + "\n")
    with caplog.at_level("WARNING"):
        assert (
            main(
                [
                    "-q",
                    "ism",
                    "--model",
                    str(predictor.model_dir),
                    "--fasta",
                    str(fasta),
                    "--window-bp",
                    "2",
                    "--out",
                    str(tmp_path / "ism.h5"),
                ]
            )
            == 0
        )
    assert "record 'gap' is 100% N" in caplog.text
    assert "1 records skipped" in capsys.readouterr().out
    assert (
        main(
            [
                "-q",
                "embed",
                "--model",
                str(predictor.model_dir),
                "--fasta",
                str(fasta),
                "--out",
                str(tmp_path / "e.h5"),
            ]
        )
        == 0
    )
    reasons = rejected_reasons(tmp_path / "e.h5")
    assert len(reasons) == 1 and "record 'gap' is 100% N" in reasons[0]  # as ism says
    half = write(tmp_path / "h.fa", ">mostly\n" + "A" * 10 + "N" * 30 + "\n")
    assert (
        main(
            [
                "-q",
                "embed",
                "--model",
                str(predictor.model_dir),
                "--fasta",
                str(half),
                "--out",
                str(tmp_path / "h.h5"),
            ]
        )
        == 1
    )
    assert "75% N" in rejected_reasons(tmp_path / "h.h5")[0]


# --------------------------------------------------------------------------- data sets
def classify_csv(path, rows) -> str:
    return write(path, "sequence,label\n" + "".join(f"{s},{y}\n" for s, y in rows))


def random_rows(count: int, seed: int = 0, width: int = 101):
    rng = np.random.default_rng(seed)
    return [("".join(rng.choice(list("ACGT"), width)), index % 2) for index in range(count)]


def test_classify_skips_records_mostly_n_and_says_why(tmp_path, capsys, caplog):
    # the last: 60 bp of bases and 41 bp of N as the 101 bp window reads it, kept
    rows = [*random_rows(60), ("N" * 101, 1), ("ACGTAC", 0), ("N" * 40 + "ACGT" * 15, 1)]
    table = classify_csv(tmp_path / "t.csv", rows)
    with caplog.at_level("WARNING"):
        assert (
            main(
                [
                    "dataset",
                    "classify",
                    "--input",
                    str(table),
                    "--out",
                    str(tmp_path / "d.h5"),
                    "--min-split-positives",
                    "0",
                ]
            )
            == 0
        )
    out = capsys.readouterr().out
    assert "61 sequences" in out and "2 records skipped" in out
    assert "row62 (101 bp) is 100% N in the 101 bp" in caplog.text
    assert "row63 (6 bp) is 94% N" in caplog.text and "give at least 51 bp" in caplog.text
    assert "row64" not in caplog.text


def test_a_validation_fraction_beside_a_test_file_is_honoured(tmp_path):
    from genobird.datasets.windows import read_metadata

    train = classify_csv(tmp_path / "train.csv", random_rows(400))
    test = classify_csv(tmp_path / "test.csv", random_rows(100, seed=1))
    data = tmp_path / "d.h5"
    assert (
        main(
            [
                "-q",
                "dataset",
                "classify",
                "--input",
                str(train),
                "--test",
                str(test),
                "--valid-fraction",
                "0.2",
                "--out",
                str(data),
            ]
        )
        == 0
    )
    counts = read_metadata(data)["counts"]
    assert counts["test"] == 100 and 60 <= counts["valid"] <= 100
    assert counts["train"] + counts["valid"] == 400


def test_a_split_of_one_class_is_refused_by_name_unless_asked(tmp_path, capsys, caplog):
    rows = random_rows(200)
    two = write(
        tmp_path / "two.csv",
        "sequence,a,b,split\n"
        + "".join(
            f"{s},{y},{1 - y},{'test' if i < 20 else 'train'}\n" if i >= 20 else f"{s},0,1,test\n"
            for i, (s, y) in enumerate(rows)
        ),
    )
    out = tmp_path / "d.h5"
    assert main(["dataset", "classify", "--input", str(two), "--out", str(out)]) == 1
    error = capsys.readouterr().err.strip()
    assert "the test split has 0 positive and 20 negative records of label 'a'" in error
    assert "--min-split-positives 0" in error and "\n" not in error and not out.exists()
    with caplog.at_level("WARNING"):
        assert (
            main(
                [
                    "-q",
                    "dataset",
                    "classify",
                    "--input",
                    str(two),
                    "--out",
                    str(out),
                    "--min-split-positives",
                    "0",
                ]
            )
            == 0
        )
    assert "labels 'a' and 'b' are each other's complement" in caplog.text
    # the k-mer LR on it: no AUROC on a test split of one class, and valid JSON that says so
    assert (
        main(["-q", "baseline", "kmer-lr", "--data", str(out), "--out", str(tmp_path / "k")]) == 0
    )
    assert "median_auroc undefined (not defined on this split" in capsys.readouterr().out
    text = (tmp_path / "k" / "report" / "metrics.json").read_text()
    assert "NaN" not in text
    report = json.loads(text)
    assert report["median_auroc"] is None and "median_auroc" in report["undefined"]


# --------------------------------------------------------------------------- VCF alleles
def test_vcf_alleles_follow_one_policy_in_score_likelihood_and_embed(
    predictor,
    demo_reference,
    pretraining_data,
    tmp_path,
):
    from genobird.genome import open_reference

    genome = open_reference(demo_reference / "genome.fa")
    base = genome.fetch("chr1", 20_000, 20_001)
    other, third = [b for b in "ACGT" if b != base][:2]
    vcf = write(
        tmp_path / "v.vcf",
        "##fileformat=VCFv4.2\n"
        f"1\t20001\tmulti\t{base}\t{other},{base}\n"
        f"1\t20001\twrong\t{third if third != base else other}\t{base}\n"
        "chrZ\t100\tnowhere\tA\tC\n"
        # the last base of chr1's telomere gap (its window is half DNA), and an
        # ALT of an IUPAC code: neither names a base to change or to change to
        "1\t10000\tgap\tN\tA\n"
        f"1\t20001\tiupac\t{base}\tR\n",
    )
    out = tmp_path / "s.tsv"
    assert (
        main(
            [
                "-q",
                "score",
                "--model",
                str(predictor.model_dir),
                "--vcf",
                str(vcf),
                "--reference",
                str(demo_reference / "genome.fa"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    table = pd.read_csv(out, sep="\t")
    # one row per ALT; the ALT that is REF is refused; the contig keeps the VCF's name
    assert table[["chrom", "id", "alt"]].values.tolist() == [[1, "multi", other]]
    reasons = rejected_reasons(out)
    assert any(f"ALT {base} is REF {base}: nothing changes" in r for r in reasons)
    wrong = next(r for r in reasons if "is not the reference's bases" in r)
    nowhere = next(r for r in reasons if r.startswith("chrZ:100: contig 'chrZ' is not in"))
    assert any("REF N of 1:10000 is not a known base" in r for r in reasons), reasons
    assert any("ALT R of 1:20001 is not a known base" in r for r in reasons), reasons
    # likelihood: the same variants scored and refused, for the same reasons
    from genobird.corpus.tokenizer import load_tokenizer
    from tests.conftest import saved_model_dir, tiny_language_model

    tokenizer = load_tokenizer(pretraining_data["tokenizer"])
    lm = saved_model_dir(tiny_language_model(tokenizer, 512), tokenizer, tmp_path / "lm")
    effects = tmp_path / "l.tsv"
    assert (
        main(
            [
                "-q",
                "likelihood",
                "--model",
                str(lm),
                "--vcf",
                str(vcf),
                "--reference",
                str(demo_reference / "genome.fa"),
                "--out",
                str(effects),
                "--window-bp",
                "200",
            ]
        )
        == 0
    )
    assert pd.read_csv(effects, sep="\t")["alt"].tolist() == [other]
    assert sorted(rejected_reasons(effects)) == sorted(reasons)
    assert wrong in rejected_reasons(effects)
    # embed: the same variants read (REF and ALT windows of each) and refused alike
    vectors = tmp_path / "e.h5"
    assert (
        main(
            [
                "-q",
                "embed",
                "--model",
                str(lm),
                "--vcf",
                str(vcf),
                "--reference",
                str(demo_reference / "genome.fa"),
                "--out",
                str(vectors),
                "--window-bp",
                "200",
            ]
        )
        == 0
    )
    assert sorted(rejected_reasons(vectors)) == sorted(reasons)
    assert nowhere in rejected_reasons(vectors)


# --------------------------------------------------------------------------- contig names
def test_rows_keep_the_inputs_contig_names(predictor, demo_reference, tmp_path):
    bed = write(tmp_path / "r.bed", "1\t20000\t20200\talias\nchr1\t30000\t30200\tnamed\n")
    out = tmp_path / "s.tsv"
    assert (
        main(
            [
                "-q",
                "score",
                "--model",
                str(predictor.model_dir),
                "--bed",
                str(bed),
                "--reference",
                str(demo_reference / "genome.fa"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert pd.read_csv(out, sep="\t", dtype={"chrom": str})["chrom"].tolist() == ["1", "chr1"]
    h5 = tmp_path / "s.h5"
    assert (
        main(
            [
                "-q",
                "score",
                "--model",
                str(predictor.model_dir),
                "--bed",
                str(bed),
                "--reference",
                str(demo_reference / "genome.fa"),
                "--out",
                str(h5),
            ]
        )
        == 0
    )
    import h5py

    with h5py.File(h5, "r") as handle:
        assert [c.decode() for c in handle["rows/chrom"][:]] == ["1", "chr1"]
    # the same windows whatever the spelling
    scores = pd.read_csv(out, sep="\t")
    assert scores.iloc[0, -1] == pytest.approx(
        predictor.score_bed(
            write(tmp_path / "c.bed", "chr1\t20000\t20200\n"), demo_reference / "genome.fa"
        ).iloc[0, -1],
        rel=1e-6,
    )


# --------------------------------------------------------------------------- streamed chunks
def test_records_set_aside_after_the_first_chunk_are_kept_by_every_scorer(
    model_dir, demo_reference, pretraining_data, tmp_path
):
    """A file longer than one chunk: the bad records the readers find after the first
    chunk (a duplicate FASTA name, an empty record, an unknown contig, a region past its
    contig, a malformed VCF line) reach OUT.rejected.tsv as the first chunk's do, for the
    predictor, the language model and the variant-effect scorer, one record a chunk."""
    from genobird import LikelihoodScorer, load_predictor
    from genobird.genome import open_reference
    from genobird.scoring.tables import write_scores
    from genobird.scoring.variant_effects import VariantEffectScorer
    from tests.conftest import saved_model_dir, tiny_language_model

    genome = demo_reference / "genome.fa"
    dna = open_reference(genome).fetch("chr1", 20_000, 20_400)
    fasta = write(tmp_path / "r.fa", f">a\n{dna}\n>b\n{dna}\n>a\n{dna}\n>c\n\n>d\n{dna}\n")
    bed = write(
        tmp_path / "r.bed",
        "chr1\t20000\t20400\nchr1\t30000\t30400\n"
        "chrZ\t1\t400\nchr1\t40000\t40400\nchr1\t1\t999999999\n",
    )
    lines = []
    for position in (40_001, 45_001, 47_001):
        ref = open_reference(genome).fetch("chr2", position - 1, position)
        alt = next(b for b in "ACGT" if b != ref)
        lines.append(f"chr2\t{position}\tv{position}\t{ref}\t{alt}\t.\t.\t.\n")
    vcf = write(
        tmp_path / "v.vcf",
        "##fileformat=VCFv4.2\n"
        + "".join(lines[:2])
        + "chrZ\t100\tnowhere\tA\tC\t.\t.\t.\nchr2\tx\tbad\tA\tC\t.\t.\t.\n"
        + lines[2],
    )
    tokenizer_path = pretraining_data["tokenizer"]
    from genobird.corpus.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(tokenizer_path)
    lm = saved_model_dir(tiny_language_model(tokenizer, 512), tokenizer, tmp_path / "lm")
    cases = [
        (load_predictor(model_dir, device="cpu", chunk_size=1), "fasta", fasta, (3, 2)),
        (load_predictor(model_dir, device="cpu", chunk_size=1), "bed", bed, (3, 2)),
        (load_predictor(model_dir, device="cpu", chunk_size=1), "vcf", vcf, (3, 2)),
        (LikelihoodScorer(lm, device="cpu", chunk_size=1), "fasta", fasta, (3, 2)),
        (LikelihoodScorer(lm, device="cpu", chunk_size=1), "bed", bed, (3, 2)),
        (VariantEffectScorer(lm, device="cpu", window_bp=200, chunk_size=1), "vcf", vcf, (3, 2)),
    ]
    for number, (scorer, kind, source, counts) in enumerate(cases):
        out = tmp_path / f"{number}.tsv"
        summary = write_scores(scorer, kind, source, out, None, None, genome)
        assert (summary.scored, summary.rejected) == counts, (type(scorer).__name__, kind)
        assert len(rejected_reasons(out)) == counts[1], (type(scorer).__name__, kind)
