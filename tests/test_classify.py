"""Your own labelled sequences as a data set: CSV, TSV and FASTA, splits, bad records."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from genobird.cli import main
from genobird.datasets.windows import WindowSet, read_metadata
from genobird.errors import InputError
from tests.conftest import write

# --------------------------------------------------------------------------- negatives


def test_classify_dataset_from_separate_split_files(tmp_path):
    rows = {"train": ["ACGTAC,1", "GGGCCC,0", "TTTTAA,1"], "dev": ["ACACAC,0"], "test": ["GTGT,1"]}
    paths = {
        k: write(tmp_path / f"{k}.csv", "sequence,label\n" + "\n".join(v) + "\n")
        for k, v in rows.items()
    }
    out = tmp_path / "gue.h5"
    # splits of one or two records: parsing, not a split a model is judged on
    assert (
        main(
            [
                "-q",
                "dataset",
                "classify",
                "--input",
                str(paths["train"]),
                "--valid",
                str(paths["dev"]),
                "--test",
                str(paths["test"]),
                "--out",
                str(out),
                "--min-split-positives",
                "0",
            ]
        )
        == 0
    )
    meta = read_metadata(out)
    assert meta["counts"] == {"train": 3, "valid": 1, "test": 1}
    assert meta["feature_names"] == ["label"] and meta["positives"] == [3]


# --------------------------------------------------------------------------- classify
def test_classify_dataset_from_csv_with_bad_records_reported(tmp_path, capsys):
    table = write(
        tmp_path / "data.csv",
        "name,sequence,enhancer,promoter,split\n"
        "a,ACGTACGTAA,1,0,train\n"
        "b,acgunnRRacgtac,0,1,test\n"
        "c,ACGT-ACGT,1,1,train\n"  # bad DNA
        "d,ACGTTT,,0,train\n"  # a missing label
        "e,GGGCCCGGGCCC,0,0,valid\n",
    )
    out = tmp_path / "c.h5"
    assert (
        main(
            [
                "-q",
                "dataset",
                "classify",
                "--input",
                str(table),
                "--out",
                str(out),
                "--min-split-positives",
                "0",
            ]
        )
        == 0
    )
    assert "3 sequences" in capsys.readouterr().out
    meta = read_metadata(out)
    assert meta["feature_names"] == ["enhancer", "promoter"] and meta["positives"] == [1, 1]
    with h5py.File(out, "r") as handle:
        assert handle["sequences"][1].decode() == "ACGTNNNNACGTAC"
        assert handle["split"][:].astype(str).tolist() == ["train", "test", "valid"]


def test_classify_dataset_from_fasta_with_class_names(tmp_path):
    from genobird.datasets.classify import build_classify_dataset

    fasta = write(
        tmp_path / "x.fa",
        ">s1 kind=enhancer\nACGT\n>s2 kind=promoter split=test\nGGCC\n"
        ">s3\nAAAA\n>s4 kind=silencer\nTTTT\n",
    )
    windows, problems = build_classify_dataset(
        fasta, tmp_path / "x.h5", seed=1, min_split_positives=0
    )
    assert windows.feature_names == ["enhancer", "promoter", "silencer"]
    assert [list(v) for v in windows.labels] == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    assert windows.splits[1] == "test"
    assert len(problems) == 1 and "missing label 'kind'" in problems[0].reason


def test_a_label_outside_the_columns_kind_is_an_error_naming_its_value_and_line(tmp_path, capsys):
    """A 0/1 column with a stray 'yes', '2' or '0.5' is not read as seven classes: the
    first such value is named with its file and line, nothing is written. ' 1' is 1, an
    empty or NA label skips its record (reported), words name classes, and integers
    0..K-1 are classes only where each holds a real share of the records."""
    rng = np.random.default_rng(0)
    rows = [f"{''.join(rng.choice(list('ACGT'), 40))},{i % 2}" for i in range(290)]
    body = "sequence,label\n" + "\n".join(rows)
    for bad in ("yes", "2", "0.5"):
        table = write(tmp_path / f"{bad}.csv", body + f"\n{'ACGT' * 10}, 1\nACGT,NA\nGGCC,{bad}\n")
        out = tmp_path / f"{bad}.h5"
        assert main(["-q", "dataset", "classify", "--input", str(table), "--out", str(out)]) == 1
        err = capsys.readouterr().err.strip()
        assert f"line 294 (row294): label 'label' is '{bad}'" in err, err
        assert len(err.splitlines()) == 1 and not out.exists()
    table = write(tmp_path / "ok.csv", body + f"\n{'ACGT' * 10}, 1\nACGT,NA\n")
    assert (
        main(["-q", "dataset", "classify", "--input", str(table), "--out", str(tmp_path / "ok.h5")])
        == 0
    )
    assert "291 sequences, 1 label" in capsys.readouterr().out
    assert read_metadata(tmp_path / "ok.h5")["feature_names"] == ["label"]
    words = write(tmp_path / "w.csv", "sequence,kind\nACGT,yes\nGGCC,no\nTTTT,yes\n")
    assert (
        main(
            [
                "-q",
                "dataset",
                "classify",
                "--input",
                str(words),
                "--out",
                str(tmp_path / "w.h5"),
                "--min-split-positives",
                "0",
            ]
        )
        == 0
    )
    assert read_metadata(tmp_path / "w.h5")["feature_names"] == ["no", "yes"]
    three = write(
        tmp_path / "3.csv", "sequence,c\n" + "\n".join(f"ACGT,{i % 3}" for i in range(30))
    )
    assert (
        main(
            [
                "-q",
                "dataset",
                "classify",
                "--input",
                str(three),
                "--out",
                str(tmp_path / "3.h5"),
                "--min-split-positives",
                "0",
            ]
        )
        == 0
    )
    assert read_metadata(tmp_path / "3.h5")["feature_names"] == ["0", "1", "2"]


# --------------------------------------------------------------------------- names
def test_duplicate_column_names_are_one_line_errors_not_merged_columns(tmp_path, capsys):
    table = write(tmp_path / "d.csv", "sequence,a|b|c,x,a|b|c\nACGT,1,0,1\nGGCC,0,1,0\n")
    out = tmp_path / "d.h5"
    assert main(["-q", "dataset", "classify", "--input", str(table), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "duplicate column names 'a|b|c'" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    fasta = write(tmp_path / "d.fa", ">s1 a=1 a=0\nACGT\n")
    assert main(["-q", "dataset", "classify", "--input", str(fasta), "--out", str(out)]) == 1
    assert "duplicate labels 'a'" in capsys.readouterr().err


def test_feature_names_are_unique_in_every_data_set(tmp_path):
    from genobird.datasets.chromatin import read_feature_table

    with pytest.raises(InputError, match="duplicate feature names 'x'"):
        WindowSet("chromatin", ["x", "y", "x"])
    peaks = write(tmp_path / "p.bed", "chr1\t0\t10\n")
    table = write(
        tmp_path / "f.tsv", f"name\tcategory\tpeak_file\nx\tTF\t{peaks.name}\nx\tTF\t{peaks.name}\n"
    )
    with pytest.raises(InputError, match="duplicate feature names 'x'"):
        read_feature_table(table)


def test_classify_summary_names_a_few_labels_not_all(tmp_path, capsys):
    header = "sequence," + ",".join(f"label{i}" for i in range(40))
    table = write(tmp_path / "m.csv", header + "\nACGT," + ",".join("01" * 20) + "\n")
    assert (
        main(["-q", "dataset", "classify", "--input", str(table), "--out", str(tmp_path / "m.h5")])
        == 0
    )
    out = capsys.readouterr().out
    assert "40 labels: label0, label1, label2, label3, label4, ... (35 more)" in out
    assert "label39" not in out
