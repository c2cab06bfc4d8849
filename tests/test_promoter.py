"""Promoter data sets: EPDnew windows oriented by strand, DeePromoter negatives, promoter
sequences, liftover."""

from __future__ import annotations

from collections import Counter

import h5py
import numpy as np

from genobird.cli import main
from genobird.datasets.promoter import (
    PromoterSpec,
    build_promoter_dataset,
    read_tss,
    shuffled_negative,
    tss_of,
)
from genobird.datasets.windows import chromosome_split, read_metadata
from genobird.genome import Reference
from genobird.genome.demo import MOTIFS
from genobird.genome.regions import BadRecord, Interval
from tests.conftest import write

# --------------------------------------------------------------------------- negatives


# --------------------------------------------------------------------------- negatives
def test_negatives_keep_exactly_8_of_20_segments_and_preserve_length():
    rng = np.random.default_rng(0)
    positive = "".join(np.random.default_rng(1).choice(list("ACGT"), 8000))
    patterns = set()
    for _ in range(30):
        negative = shuffled_negative(positive, rng)
        assert len(negative) == len(positive)
        pieces = np.array_split(np.arange(8000), 20)
        same = [negative[p[0] : p[-1] + 1] == positive[p[0] : p[-1] + 1] for p in pieces]
        assert sum(same) == 8  # 400-bp random pieces never equal the original by chance
        patterns.add(tuple(same))
    assert len(patterns) > 20  # a fresh choice for every negative


def test_epdnew_tss_is_thick_start_on_plus_and_thick_end_minus_1_on_minus():
    assert tss_of(Interval("chr1", 951, 1011, "a", "+", 1000, 1001)) == 1000
    assert tss_of(Interval("chr1", 990, 1050, "b", "-", 1000, 1001)) == 1000
    assert tss_of(Interval("chr1", 951, 1011, "a", "+")) == 1000  # from the -49..+10 span
    assert tss_of(Interval("chr1", 990, 1050, "b", "-")) == 1000


def test_promoter_windows_are_oriented_and_negatives_paired(demo_reference, tmp_path):
    out = tmp_path / "p.h5"
    spec = PromoterSpec(
        upstream=200, downstream=100, valid_chromosomes=("chr3",), test_chromosomes=("chrX",)
    )
    windows, problems = build_promoter_dataset(
        demo_reference / "tss.bed", demo_reference / "genome.fa", out, spec
    )
    meta = read_metadata(out)
    assert meta["window_bp"] == 300 and meta["positives"] == [len(windows) // 2]
    assert set(meta["counts"]) == {"train", "valid", "test"} and min(meta["counts"].values()) > 0
    with h5py.File(out, "r") as handle:
        sequences = handle["sequences"][:].astype(str)
        labels, strands = handle["labels"][:, 0], handle["strand"][:].astype(str)
        splits, chroms = handle["split"][:].astype(str), handle["chrom"][:].astype(str)
    positives = sequences[labels == 1]
    with_inr = sum(seq[198:206] == MOTIFS["INR"] for seq in positives)  # TSS at index 200
    assert with_inr > 0.7 * len(positives) and {"+", "-"} <= set(strands)
    assert all(
        chromosome_split(c, ("chr3",), ("chrX",)) == s for c, s in zip(chroms, splits, strict=True)
    )
    assert not problems


def test_several_fasta_files_give_the_promoter_windows_of_one(demo_reference, tmp_path):
    """`dataset promoter --reference` takes several files read as one genome, as every
    command's --reference does: the demo genome split in two gives the same data set."""
    genome = Reference(demo_reference / "genome.fa")
    parts = [tmp_path / "a.fa", tmp_path / "b.fa"]
    half = len(genome.contigs) // 2
    for path, contigs in zip(parts, (genome.contigs[:half], genome.contigs[half:]), strict=True):
        write(path, "".join(f">{c}\n{genome.fetch(c, 0, genome.length(c))}\n" for c in contigs))
    outputs = {}
    for name, references in (("one", [demo_reference / "genome.fa"]), ("two", parts)):
        outputs[name] = tmp_path / f"{name}.h5"
        assert (
            main(
                [
                    "-q",
                    "dataset",
                    "promoter",
                    "--tss",
                    str(demo_reference / "tss.bed"),
                    "--reference",
                    *map(str, references),
                    "--out",
                    str(outputs[name]),
                    "--upstream-bp",
                    "200",
                    "--downstream-bp",
                    "100",
                ]
            )
            == 0
        )
    with h5py.File(outputs["one"], "r") as one, h5py.File(outputs["two"], "r") as two:
        assert one["sequences"][:].tolist() == two["sequences"][:].tolist()
        assert np.array_equal(one["labels"][:], two["labels"][:])


def test_promoter_windows_get_extra_negatives_in_training_only(demo_reference, tmp_path):
    splits = {"valid_chromosomes": ("chr3",), "test_chromosomes": ("chrX",)}
    built = {}
    for negatives in (1, 3):
        spec = PromoterSpec(upstream=200, downstream=100, training_negatives=negatives, **splits)
        windows, _ = build_promoter_dataset(
            demo_reference / "tss.bed", demo_reference / "genome.fa", tmp_path / "p.h5", spec
        )
        labels = [int(label[0]) for label in windows.labels]
        built[negatives] = Counter(zip(windows.splits, labels, strict=True))
    one, three = built[1], built[3]
    assert three[("train", 1)] == one[("train", 1)] and three[("train", 0)] == 3 * one[("train", 0)]
    for split in ("valid", "test"):
        assert three[(split, 0)] == one[(split, 0)] == one[(split, 1)] > 0


def test_tss_bed_problems_are_reported_skipped_or_padded(demo_reference, tmp_path):
    bed = write(
        tmp_path / "t.bed",
        "chr1\t10\t70\tnear_start\t900\t+\t59\t60\n"
        "chrZ\t100\t160\tunknown\t900\t+\t149\t150\n"
        "chr1\t50000\t50060\tfine\t900\t-\t50009\t50010\n",
    )
    fasta = demo_reference / "genome.fa"
    spec = PromoterSpec(upstream=500, downstream=500)
    windows, problems = build_promoter_dataset(bed, fasta, tmp_path / "a.h5", spec)
    reasons = " ".join(p.reason for p in problems)
    assert len(windows) == 2 and "unknown contig 'chrZ'" in reasons and "runs off chr1" in reasons
    padded, problems = build_promoter_dataset(
        bed, fasta, tmp_path / "b.h5", PromoterSpec(upstream=500, downstream=500, off_end="pad")
    )
    assert len(padded) == 4 and padded.sequences[0].startswith("N" * 400)


def test_liftover_moves_tss_to_hg19(tmp_path):
    chain = tmp_path / "hg38ToHg19.over.chain"
    chain.write_text("chain 1000 chrA 5000 + 0 1000 chr1 5000 + 100 1100 1\n1000\n\n")
    bed = write(tmp_path / "hg38.bed", "chrA\t451\t511\tp\t900\t+\t500\t501\n")
    problems: list[BadRecord] = []
    rows = read_tss(bed, {"chr1": 5000}, problems, liftover_chain=chain)
    assert rows == [("chr1", 600, "+", "p")] and not problems


def test_promoter_sequences_get_paired_deepromoter_negatives_in_their_split(tmp_path, capsys):
    rng = np.random.default_rng(2)
    positives = ["".join(rng.choice(list("ACGT"), 300)) for _ in range(40)]
    source = write(tmp_path / "tata.txt", "\n".join([*positives[:39], "ACGT"]) + "\n")
    out = tmp_path / "p.h5"
    assert (
        main(["-q", "dataset", "promoter-sequences", "--positives", str(source), "--out", str(out)])
        == 0
    )
    assert "39 promoters and 39 DeePromoter negatives; 1 records skipped" in (
        capsys.readouterr().out
    )
    with h5py.File(out, "r") as handle:
        sequences = [s.decode() for s in handle["sequences"][:]]
        labels = handle["labels"][:, 0].tolist()
        splits = handle["split"][:].astype(str).tolist()
    assert labels == [1, 0] * 39
    for index in range(0, len(sequences), 2):
        positive, negative = sequences[index], sequences[index + 1]
        assert splits[index] == splits[index + 1]  # a negative never crosses splits
        kept = sum(
            positive[15 * k : 15 * (k + 1)] == negative[15 * k : 15 * (k + 1)] for k in range(20)
        )
        assert 8 <= kept < 20 and len(negative) == 300
    assert {"train", "valid", "test"} <= set(splits)


def read_promoter_rows(path):
    with h5py.File(path, "r") as handle:
        sequences = [s.decode() for s in handle["sequences"][:]]
        return sequences, handle["labels"][:, 0].tolist(), handle["split"][:].astype(str).tolist()


def test_extra_training_negatives_leave_splits_and_first_negatives_as_they_were(tmp_path):
    rng = np.random.default_rng(3)
    positives = ["".join(rng.choice(list("ACGT"), 200)) for _ in range(60)]
    source = write(tmp_path / "tata.txt", "\n".join(positives) + "\n")
    one, four = tmp_path / "one.h5", tmp_path / "four.h5"
    for out, extra in ((one, []), (four, ["--training-negatives", "4"])):
        command = ["-q", "dataset", "promoter-sequences", "--positives", str(source)]
        assert main([*command, "--out", str(out), *extra]) == 0
    single, more = read_promoter_rows(one), read_promoter_rows(four)
    rows_of = {}  # positive -> [(sequence, label, split)] in file order
    for rows, name in ((single, "one"), (more, "four")):
        current = None
        for sequence, label, split in zip(*rows, strict=True):
            if label == 1:
                current = sequence
            rows_of.setdefault((name, current), []).append((sequence, label, split))
    for positive in positives:
        before, after = rows_of[("one", positive)], rows_of[("four", positive)]
        split = before[0][2]
        assert {row[2] for row in after} == {split}  # negatives stay in their split
        assert after[:2] == before  # same split and same first negative
        assert len(after) == (5 if split == "train" else 2)
        assert len({row[0] for row in after}) == len(after)  # each negative drawn afresh
    assert {"train", "valid", "test"} <= set(single[2])


def test_training_negatives_below_one_is_a_one_line_error(tmp_path, capsys):
    source = write(tmp_path / "tata.txt", "ACGT" * 50 + "\n")
    out = tmp_path / "p.h5"
    assert (
        main(
            [
                "-q",
                "dataset",
                "promoter-sequences",
                "--positives",
                str(source),
                "--out",
                str(out),
                "--training-negatives",
                "0",
            ]
        )
        != 0
    )
    error = capsys.readouterr().err.strip()
    assert "training_negatives must be at least 1, got 0" in error and "\n" not in error
    assert not out.exists()


def test_hard_negatives_are_real_windows_far_from_any_tss(demo_reference, tmp_path):
    spec = PromoterSpec(upstream=300, downstream=200, hard_negatives=1, min_distance=5000)
    windows, _ = build_promoter_dataset(
        demo_reference / "tss.bed", demo_reference / "genome.fa", tmp_path / "h.h5", spec
    )
    tss = {}
    for line in (demo_reference / "tss.bed").read_text().splitlines():
        fields = line.split("\t")
        tss.setdefault(fields[0], []).append(int(fields[6]))
    reference = Reference(demo_reference / "genome.fa")
    positives = sum(len(sites) for sites in tss.values())  # each with its shuffled negative
    hard = range(2 * positives, len(windows))
    assert len(hard) > 0.9 * positives
    for row in hard:
        chrom, start, end = windows.chroms[row], windows.starts[row], windows.ends[row]
        assert windows.labels[row][0] == 0
        assert min(abs(start + 300 - t) for t in tss[chrom]) >= 5000
        genomic = reference.fetch(chrom, start, end, windows.strands[row])
        assert windows.sequences[row] == genomic  # real DNA, not shuffled
