"""DeepSEA's data: its .mat readers and split, the 8 kb import, and its CSV layout."""

from __future__ import annotations

import gzip
import json

import h5py
import numpy as np
import pytest
import scipy.io

from genobird.cli import main
from genobird.datasets.deepsea import (
    check_label_width,
    deepsea_sequences,
    deepsea_split_of,
    read_deepsea_split,
)
from genobird.datasets.windows import WindowSet, read_metadata
from genobird.errors import InputError
from genobird.genome import Reference, one_hot, reverse_complement
from genobird.genome.alphabet import acgt_to_deepsea_order
from tests.conftest import write

# --------------------------------------------------------------------------- negatives


# --------------------------------------------------------------------------- DeepSEA
def _deepsea_arrays(sequences, features=919):
    forward = np.stack([acgt_to_deepsea_order(one_hot(s, np.uint8)).T for s in sequences])
    backward = np.stack(
        [acgt_to_deepsea_order(one_hot(reverse_complement(s), np.uint8)).T for s in sequences]
    )
    x = np.concatenate([forward, backward])  # (N, 4, L): forward half, then reverse complements
    y = np.random.default_rng(0).integers(0, 2, (len(x), features)).astype(np.uint8)
    return x, y


def test_deepsea_readers_both_layouts_channel_order_and_rc_halves(tmp_path):
    sequences = ["ACGTN" * 200, "GGGCCCAATT" * 100]
    x, y = _deepsea_arrays(sequences)
    with h5py.File(tmp_path / "train.mat", "w") as handle:  # MATLAB v7.3: transposed
        handle["trainxdata"] = np.transpose(x, (2, 1, 0))
        handle["traindata"] = y.T
    scipy.io.savemat(tmp_path / "valid.mat", {"validxdata": x, "validdata": y})
    for name, split in (("train.mat", "train"), ("valid.mat", "valid")):
        got_x, got_y = read_deepsea_split(tmp_path / name, split)
        assert np.array_equal(got_x, x) and np.array_equal(got_y, y)
        assert deepsea_sequences(got_x) == sequences
        backward = deepsea_sequences(got_x, forward_only=False)[2:]
        assert backward == [reverse_complement(s) for s in sequences]
    with pytest.raises(InputError, match="missing"):
        read_deepsea_split(tmp_path / "valid.mat", "test")


def test_deepsea_split_rules():
    assert deepsea_split_of("chr8", 0, 200) == deepsea_split_of("9", 5, 205) == "test"
    assert deepsea_split_of("chr7", 30_508_750, 30_508_950) == "valid"  # 30,508,751 (1-based)
    assert deepsea_split_of("chr7", 30_508_550, 30_508_750) == "train"  # ends just before
    assert deepsea_split_of("chr7", 35_296_849, 35_297_049) == "valid"
    assert deepsea_split_of("chr7", 35_296_850, 35_297_050) == "train"
    assert deepsea_split_of("chr1", 0, 200) == "train"
    assert deepsea_split_of("chrX", 0, 200) is None


def test_label_width_must_match_the_feature_list():
    with pytest.raises(InputError, match="919 columns but the feature list has 3 names"):
        check_label_width(np.zeros((2, 919)), ["a", "b", "c"], "labels.mat")
    with pytest.raises(InputError, match="one column per feature name"):
        WindowSet("chromatin", ["a", "b"]).add("ACGT", [1, 0, 1], "chr1", 0, 4, "+", "train")


def test_deepsea_import_takes_labels_with_an_8kb_context(shared_data, tmp_path, capsys):
    """Three real hg19 bins in chr20:1-2 Mb with DeepSEA-layout labels; 919 real names."""
    fasta = shared_data / "genome" / "hg19_chr20_0-2Mb.fa"
    bins = [(1_100_000, 1_100_200), (1_500_000, 1_500_200), (1_996_000, 1_996_200)]
    coordinates = write(tmp_path / "bins.bed", "".join(f"chr20\t{s}\t{e}\n" for s, e in bins))
    reference = Reference(fasta)
    sequences = [reference.fetch("chr20", s - 400, e + 400) for s, e in bins]
    x, y = _deepsea_arrays(sequences)
    scipy.io.savemat(tmp_path / "test.mat", {"testxdata": x, "testdata": y})
    out = tmp_path / "d.h5"
    argv = [
        "-q",
        "dataset",
        "deepsea",
        "--mat",
        str(tmp_path / "test.mat"),
        "--split",
        "test",
        "--coordinates",
        str(coordinates),
        "--reference",
        str(fasta),
        "--features",
        str(shared_data / "chromatin" / "deepsea_919_features.tsv"),
        "--out",
        str(out),
        "--context-bp",
        "8000",
    ]
    assert main(argv) == 0
    meta = read_metadata(out)
    assert len(meta["feature_names"]) == 919 and meta["categories"][0] == "DNase"
    assert meta["counts"]["train"] == 3  # chr20 is a training chromosome in the paper's split
    with h5py.File(out, "r") as handle:
        assert np.array_equal(handle["labels"][:], y[:3])
        window = handle["sequences"][2].decode()
    # window [1,992,100, 2,000,100): its last 100 bp lie past the end of the 2 Mb piece
    assert len(window) == 8000 and window.endswith("N" * 100) and window[-101] != "N"
    assert window[3500:4500] == sequences[2]  # bin centre +/- 500 sits at the window centre
    write(coordinates, "chr20\t1100000\t1100200\n")
    assert main(argv) == 1
    assert "has 1 bins (0 in the paper's test region)" in capsys.readouterr().err


def test_deepsea_import_of_several_splits_from_a_genome_wide_bin_list(
    shared_data, tmp_path, capsys
):
    """train.mat and test.mat in one HDF5: each split takes its bins from one genome-wide
    BED by the paper's split; without a feature table, DeepSEA's category layout."""
    from genobird.datasets.deepsea import default_deepsea_features, read_deepsea_features

    fasta = shared_data / "genome" / "hg19_chr20_0-2Mb.fa"
    lengths = Reference(fasta).lengths
    genome = write(  # chr20 of hg19 plus a short chr8 (a test chromosome in the paper)
        tmp_path / "g.fa",
        f">chr20\n{Reference(fasta).fetch('chr20', 0, lengths['chr20'])}\n>chr8\n{'ACGT' * 5000}\n",
    )
    bins = [("chr20", 1_100_000), ("chr8", 10_000), ("chr20", 1_500_000)]
    coordinates = write(tmp_path / "all.bed", "".join(f"{c}\t{s}\t{s + 200}\n" for c, s in bins))
    reference = Reference(genome)
    sequences = [reference.fetch(c, s - 400, s + 600) for c, s in bins]
    train_x, train_y = _deepsea_arrays([sequences[0], sequences[2]])
    with h5py.File(tmp_path / "train.mat", "w") as handle:  # MATLAB v7.3: transposed
        handle["trainxdata"] = np.transpose(train_x, (2, 1, 0))
        handle["traindata"] = train_y.T
    test_x, test_y = _deepsea_arrays([sequences[1]])
    scipy.io.savemat(tmp_path / "test.mat", {"testxdata": test_x, "testdata": test_y})
    out = tmp_path / "d.h5"
    argv = [
        "-q",
        "dataset",
        "deepsea",
        "--mat",
        str(tmp_path / "train.mat"),
        str(tmp_path / "test.mat"),
        "--split",
        "train",
        "test",
        "--coordinates",
        str(coordinates),
        "--reference",
        str(genome),
        "--out",
        str(out),
        "--context-bp",
        "1000",
    ]
    assert main(argv) == 0
    meta = read_metadata(out)
    assert meta["counts"] == {"train": 2, "valid": 0, "test": 1}
    with h5py.File(out, "r") as handle:
        assert handle["split"][:].astype(str).tolist() == ["train", "train", "test"]
        assert np.array_equal(handle["labels"][:], np.concatenate([train_y[:2], test_y[:1]]))
        assert handle["sequences"][2].decode() == sequences[1]
    names, categories = default_deepsea_features()
    real = read_deepsea_features(shared_data / "chromatin" / "deepsea_919_features.tsv")[1]
    assert meta["feature_names"] == names and categories == real  # 125 DNase, 690 TF, 104 Histone
    one_split_for_two_files = [*argv[:7], "train", *argv[9:]]
    assert main(one_split_for_two_files) == 1
    assert "one --split name per --mat file" in capsys.readouterr().err


# --------------------------------------------------------------------------- DeepSEA CSV
def _deepsea_csv_rows(count: int, length: int, seed: int) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    sequences = ["".join(rng.choice(list("ACGT"), length)) for _ in range(count)]
    return sequences, rng.integers(0, 2, size=(count, 919)).astype(np.uint8)


def _csv_line(sequence: str, labels) -> str:
    return ",".join([sequence, *map(str, labels)]) + "\n"


@pytest.mark.shared_data
def test_deepsea_csv_keeps_deepsea_order_and_reports_bad_rows_by_line(
    shared_data, pretraining_data, tmp_path, capsys, caplog
):
    """The published layout (no header, sequence then 919 labels; gzipped), with real
    feature names: 55 repeated cell|target|treatment triples become unique by index."""
    from genobird.datasets.deepsea import read_deepsea_features

    table = shared_data / "chromatin" / "deepsea_919_features.tsv"
    sequences, labels = _deepsea_csv_rows(40, 120, seed=0)
    lines = [_csv_line(s, y) for s, y in zip(sequences, labels, strict=True)]
    lines[3] = _csv_line(sequences[3], labels[3][:-1])  # 918 labels
    lines[5] = _csv_line(sequences[5], [2, *labels[5][1:]])  # a label that is not 0/1
    lines[7] = _csv_line("ACGX" + sequences[7][4:], labels[7])  # not DNA
    lines[9] = _csv_line("A" * 8000, labels[9])  # DeepSEA's own length
    path = tmp_path / "deepsea.csv.gz"
    with gzip.open(path, "wt") as handle:
        handle.writelines(lines)
    out = tmp_path / "d.h5"
    assert (
        main(
            [
                "dataset",
                "deepsea",
                "--csv",
                str(path),
                "--features",
                str(table),
                "--out",
                str(out),
                "--valid-fraction",
                "0.2",
                "--test-fraction",
                "0.2",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    for line, reason in (
        (4, "919 fields, expected 920"),
        (6, "label '2' is not 0 or 1"),
        (8, "sequence: invalid DNA character 'X'"),
    ):
        assert f"deepsea.csv.gz:{line}: {reason}" in caplog.text
    assert "36 sequences are not 8000 bp long (kept)" in caplog.text
    assert "3 rows skipped" in captured.out and len(captured.out.splitlines()) == 1
    meta = read_metadata(out)
    names, categories = read_deepsea_features(table)
    assert meta["feature_names"] == names and meta["categories"] == categories
    assert len(set(names)) == 919 and "GM12878|CTCF|None#127" in names
    assert names[0] == "8988T|DNase|None"  # row 0 of the table: order kept
    kept = [i for i in range(40) if i not in (3, 5, 7)]
    assert sum(meta["counts"].values()) == 37 and min(meta["counts"].values()) > 0
    with h5py.File(out, "r") as handle:
        assert np.array_equal(handle["labels"][:], labels[kept])
        assert [s.decode() for s in handle["sequences"][:]] == [
            ("A" * 8000 if i == 9 else sequences[i]) for i in kept
        ]
        assert handle["chrom"][0].decode() == "deepsea.csv.gz:1"
    # fine-tuning reports the paper's per-category medians; scores come in DeepSEA's order
    run = tmp_path / "run"
    assert (
        main(
            [
                "-q",
                "finetune",
                "chromatin",
                "--data",
                str(out),
                "--out",
                str(run),
                "--from-scratch",
                "--tokenizer",
                str(pretraining_data["tokenizer"]),
                "--max-tokens",
                "64",
                "--max-steps",
                "2",
            ]
        )
        == 0
    )
    report = json.loads((run / "report" / "metrics.json").read_text())
    assert set(report["median_auroc_by_category"]) == {"DNase", "TF", "Histone"}
    # records that fill most of the 8 kb window (shorter ones are mostly N padding: refused)
    fasta = write(tmp_path / "s.fa", f">a\n{sequences[0] * 100}\n>b\n{sequences[1] * 100}\n")
    assert (
        main(
            [
                "-q",
                "score",
                "--model",
                str(run / "model"),
                "--fasta",
                str(fasta),
                "--out",
                str(tmp_path / "s.tsv"),
            ]
        )
        == 0
    )
    header = (tmp_path / "s.tsv").read_text().splitlines()[0].split("\t")
    assert header == [
        "index",
        "name",
        "line",
        "first_bp",
        "last_bp",
        "cropped",
        "padded",
        "n_fraction",
        *names,
    ]


def test_deepsea_csv_with_a_header_and_a_split_column(tmp_path, capsys, caplog):
    """A header row names the columns; without a feature table the names are DeepSEA's
    placeholders with its category layout (125 DNase, 690 TF, 104 Histone)."""
    sequences, labels = _deepsea_csv_rows(6, 50, seed=1)
    header = ",".join(["sequence", "split", *(f"f{i}" for i in range(919))]) + "\n"
    splits = ["train", "train", "valid", "test", "dev", "train"]
    body = "".join(
        ",".join([s, split, *map(str, y)]) + "\n"
        for s, split, y in zip(sequences, splits, labels, strict=True)
    )
    path = write(tmp_path / "h.csv", header + body)
    out = tmp_path / "h.h5"
    assert (
        main(
            [
                "-q",
                "dataset",
                "deepsea",
                "--csv",
                str(path),
                "--split-column",
                "split",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert "h.csv:6: split must be one of" in caplog.text  # 'dev'
    assert "1 row skipped" in capsys.readouterr().out
    meta = read_metadata(out)
    assert meta["counts"] == {"train": 3, "valid": 1, "test": 1}
    assert meta["categories"].count("DNase") == 125 and meta["categories"][-1] == "Histone"
    write(path, header.replace("f5,", "f4,") + body)
    assert main(["-q", "dataset", "deepsea", "--csv", str(path), "--out", str(out)]) == 1
    assert "duplicate column names 'f4'" in capsys.readouterr().err


def test_a_published_csv_without_a_header_has_no_split_column(tmp_path, capsys):
    sequences, labels = _deepsea_csv_rows(2, 30, seed=2)
    path = write(tmp_path / "p.csv", "".join(map(_csv_line, sequences, labels)))
    assert (
        main(
            [
                "-q",
                "dataset",
                "deepsea",
                "--csv",
                str(path),
                "--split-column",
                "split",
                "--out",
                str(tmp_path / "p.h5"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "needs a header row" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p.h5").exists()


def test_a_bad_first_row_is_a_bad_row_not_a_header(tmp_path, caplog):
    """Without a header, a first row whose DNA is bad is skipped and reported by line,
    never read as the column names."""
    sequences, labels = _deepsea_csv_rows(3, 30, seed=3)
    sequences[0] = "ACGX" + sequences[0][4:]
    path = write(tmp_path / "b.csv", "".join(map(_csv_line, sequences, labels)))
    out = tmp_path / "b.h5"
    assert (
        main(
            [
                "-q",
                "dataset",
                "deepsea",
                "--csv",
                str(path),
                "--out",
                str(out),
                "--valid-fraction",
                "0",
                "--test-fraction",
                "0",
            ]
        )
        == 0
    )
    assert "b.csv:1: sequence: invalid DNA character 'X'" in caplog.text
    assert read_metadata(out)["counts"]["train"] == 2
