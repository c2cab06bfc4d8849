"""Predictors users import, and `genobird score` for FASTA, BED and VCF."""

from __future__ import annotations

import itertools
import json
import re
import shutil

import h5py
import numpy as np
import pandas as pd
import pytest
import torch

from genobird import ChromatinPredictor, load_predictor
from genobird.cli import main
from genobird.device import default_device, resolve_device
from genobird.errors import CheckpointError, ConfigError, InputError
from genobird.genome import Reference, reverse_complement
from genobird.inputs import fit_window
from tests.conftest import write


def test_python_api(predictor):
    assert isinstance(predictor, ChromatinPredictor)
    assert len(predictor.feature_names) == 16 and predictor.input_length_bp == 400
    scores = predictor.predict(["ACGT" * 50, "acgtn" * 200])
    assert scores.shape == (2, 16) and ((scores > 0) & (scores < 1)).all()


def test_rc_averaging_is_the_mean_of_both_strands(model_dir):
    sequence = "".join(np.random.default_rng(0).choice(list("ACGT"), 400))
    both = load_predictor(model_dir, device="cpu", rc_average=True).predict([sequence])
    single = load_predictor(model_dir, device="cpu", rc_average=False)
    expected = (single.predict([sequence]) + single.predict([reverse_complement(sequence)])) / 2
    np.testing.assert_allclose(both, expected, rtol=1e-5)


def test_bf16_precision_scores_close_to_fp32_and_bad_precision_is_named(predictor, model_dir):
    sequences = ["".join(np.random.default_rng(i).choice(list("ACGT"), 400)) for i in range(4)]
    low = load_predictor(model_dir, device="cpu", precision="bf16")
    assert low.autocast_dtype == torch.bfloat16 and predictor.autocast_dtype is None
    np.testing.assert_allclose(low.predict(sequences), predictor.predict(sequences), atol=0.02)
    with pytest.raises(ConfigError, match="mixed precision must be one of"):
        load_predictor(model_dir, device="cpu", precision="fp8")


def test_windows_are_padded_or_centre_cropped():
    assert fit_window("ACGT", 8) == "NNACGTNN"
    assert fit_window("AACCGGTT", 4) == "CCGG"


def test_fasta_end_to_end_columns_and_padding(predictor, tmp_path, capsys):
    """Each row names its record and header line, the record's bases it read, whether its
    window was cropped or N-padded and how much of it is N; an empty or all-N record is
    rejected on its own header's line."""
    short = "".join(np.random.default_rng(2).choice(list("ACGT"), 250))
    long = "".join(np.random.default_rng(1).choice(list("ACGT"), 1000))
    fasta = write(
        tmp_path / "s.fa", f">short\n{short}\n>empty\n>long\n{long[:500]}\n{long[500:]}\n>n\nNNNN\n"
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
    assert list(table.columns) == [
        "index",
        "name",
        "line",
        "first_bp",
        "last_bp",
        "cropped",
        "padded",
        "n_fraction",
        *predictor.feature_names,
    ]
    assert table[["name", "line", "first_bp", "last_bp"]].values.tolist() == [
        ["short", 1, 0, 250],
        ["long", 4, 300, 700],
    ]
    assert table["cropped"].tolist() == [False, True] and table["padded"].tolist() == [True, False]
    assert table["n_fraction"].tolist() == [150 / 400, 0.0]
    rejected = pd.read_csv(f"{out}.rejected.tsv", sep="\t")
    assert rejected["line"].tolist() == [3, 7], rejected
    assert "record 'n' is 100% N" in rejected["reason"][1]
    expected = predictor.predict([fit_window(short, 400), long[300:700]])
    np.testing.assert_allclose(table[predictor.feature_names].to_numpy(), expected, rtol=1e-6)
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
                str(tmp_path / "t.tsv"),
                "--tiles",
            ]
        )
        == 0
    )
    tiles = pd.read_csv(tmp_path / "t.tsv", sep="\t")
    assert tiles["name"].tolist() == ["short", "long/0-400", "long/400-800", "long/800-1000"]
    assert tiles["first_bp"].tolist() == [0, 0, 400, 800]
    assert tiles["padded"].tolist() == [True, False, False, True]


def test_the_api_refuses_what_the_command_line_refuses(predictor, model_dir):
    """A bare string is not a list of 600 one-base sequences; an empty or all-N sequence
    has nothing to score: each refused with the reason and the fix."""
    with pytest.raises(TypeError, match=r"got one string: pass \[sequence\]"):
        predictor.predict("ACGT" * 150)
    for bad, why in (("", "sequence 1 is empty"), ("nnNN", "sequence 1 is all N")):
        with pytest.raises(ValueError, match=why):
            predictor.predict(["ACGT" * 10, bad])
    shape = predictor.predict(("ACGT" * 60, "acgtn" * 50)).shape  # a tuple; lowercase, N
    assert shape == (2, len(predictor.feature_names))


def test_worker_processes_fetch_and_tokenise_the_same_windows(model_dir, demo_reference, tmp_path):
    """BED windows cut and tokenised in 2 DataLoader workers, both strands averaged, in
    batches of 3 (a ragged last batch): the same table as in the main process."""
    rng = np.random.default_rng(4)
    starts = rng.integers(20_000, 90_000, 11)  # within the 0.6 Mb test genome
    lines = [
        f"chr{1 + i % 2}\t{s}\t{s + 200}\tr{i}\t0\t{'+-'[i % 2]}\n" for i, s in enumerate(starts)
    ]
    # a window N-padded past chr2's start, and one in its first 3,360 bp of N (not scored)
    bed = write(tmp_path / "w.bed", "".join(lines) + "chr2\t3500\t3510\nchr2\t0\t10\n")
    fasta = demo_reference / "genome.fa"
    tables = [
        load_predictor(
            model_dir, device="cpu", num_workers=workers, batch_size=3, rc_average=True
        ).score_bed(bed, fasta)
        for workers in (0, 2)
    ]
    assert tables[1]["contains_N"].iloc[-1] and tables[1]["n_fraction"].iloc[-1] > 0
    assert len(tables[1]) + len(tables[1].attrs["rejected"]) == 13
    assert "is 100% N" in tables[1].attrs["rejected"][-1]
    pd.testing.assert_frame_equal(tables[0], tables[1], rtol=1e-6)
    assert (
        main(
            [
                "-q",
                "score",
                "--model",
                str(model_dir),
                "--bed",
                str(bed),
                "--reference",
                str(fasta),
                "--out",
                str(tmp_path / "w.tsv"),
                "--workers",
                "1",
            ]
        )
        == 0
    )


def test_scoring_masks_the_tokenizers_own_pad_id(model_dir):
    from genobird.corpus.tokenizer import SpecialIds

    """With [PAD] at id 3 (GENA-LM's), a window scores the same alone and batched with a
    longer one: the attention mask comes from the tokenizer, not from a constant."""
    predictor = load_predictor(model_dir, device="cpu", rc_average=False, batch_size=2)
    predictor.tokenizer.special = SpecialIds(unk=0, cls=1, sep=2, pad=3, mask=4)
    rng = np.random.default_rng(9)
    short = "".join(rng.choice(list("ACGT"), 400))
    repeat = "A" * 400  # few, long tokens: a much shorter input than `short`
    alone = predictor.predict([repeat])
    batched = predictor.predict([repeat, short])
    np.testing.assert_allclose(batched[0], alone[0], atol=1e-5)


def test_bed_end_to_end_naming_padding_rejects_and_strict(
    predictor, demo_reference, tmp_path, capsys
):
    # b: its window reaches into chr1's first 4,320 bp of N; c: within them
    bed = write(
        tmp_path / "r.bed",
        "chr1\t100000\t100200\ta\t0\t+\n1\t4400\t4440\tb\t0\t-\nchrZ\t1\t5\n1\t5\t60\tc\n",
    )
    out = tmp_path / "r.tsv"
    argv = [
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
    assert main(["-q", *argv]) == 0
    table = pd.read_csv(out, sep="\t")
    assert list(table.columns[:11]) == [
        "index",
        "chrom",
        "start",
        "end",
        "name",
        "strand",
        "line",
        "window_start",
        "window_end",
        "contains_N",
        "n_fraction",
    ]
    assert table[["name", "line", "window_start", "window_end"]].values.tolist() == [
        ["a", 1, 100100 - 200, 100100 + 200],
        ["b", 2, 4420 - 200, 4420 + 200],
    ]
    # '1' read from the FASTA's chr1, written as the BED spells it
    assert table["chrom"].astype(str).tolist() == ["chr1", "1"]
    assert table["contains_N"].tolist() == [False, True]  # the second reaches into N
    assert table["n_fraction"].tolist() == [0.0, 100 / 400]
    reference = Reference(demo_reference / "genome.fa")
    window = reference.fetch("chr1", 100100 - 200, 100100 + 200)
    np.testing.assert_allclose(
        table.loc[0, predictor.feature_names].to_numpy(float),
        predictor.predict([window])[0],
        rtol=1e-6,
    )
    rejected = pd.read_csv(f"{out}.rejected.tsv", sep="\t")
    assert rejected["line"].tolist() == [3, 4] and "unknown contig 'chrZ'" in rejected["reason"][0]
    assert "the window around 1:6-60 is 100% N" in rejected["reason"][1]
    assert main(["-q", *argv, "--strict"]) == 1
    assert "--strict and 2 records rejected" in capsys.readouterr().err


def test_chromosomes_option_keeps_only_those_regions_and_variants(
    predictor, demo_reference, tmp_path, capsys
):
    bed = write(tmp_path / "r.bed", "chr1\t100000\t100200\nchr2\t5000\t5200\n2\t9000\t9100\n")
    fasta = str(demo_reference / "genome.fa")
    base = ["-q", "score", "--model", str(predictor.model_dir), "--reference", fasta]
    out = tmp_path / "r.tsv"
    assert main([*base, "--bed", str(bed), "--out", str(out), "--chromosomes", "chr2"]) == 0
    table = pd.read_csv(out, sep="\t", dtype={"chrom": str})
    assert table["chrom"].tolist() == ["chr2", "2"] and table["start"].tolist() == [5000, 9000]
    reference = Reference(demo_reference / "genome.fa")
    ref_1, ref_2 = (reference.fetch(c, 50_000, 50_001) for c in ("chr1", "chr2"))
    vcf = write(
        tmp_path / "v.vcf",
        "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\n"
        f"1\t50001\ta\t{ref_1}\t{'C' if ref_1 != 'C' else 'G'}\n"
        f"2\t50001\tb\t{ref_2}\t{'C' if ref_2 != 'C' else 'G'}\n",
    )
    effects = predictor.score_variants(vcf, fasta, chromosomes=["1"])  # alias of chr1
    assert effects["id"].tolist() == ["a"]
    assert main([*base, "--bed", str(bed), "--out", str(out), "--chromosomes", "chr9"]) == 1
    assert "contig 'chr9' is not in genome.fa" in capsys.readouterr().err


def test_vcf_effects_and_ref_match(predictor, demo_reference, tmp_path, capsys):
    reference = Reference(demo_reference / "genome.fa")
    base = reference.fetch("chr1", 50_000, 50_001)
    other = "A" if base != "A" else "C"
    vcf = write(
        tmp_path / "v.vcf",
        "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\n"
        f"chr1\t50001\tok\t{base}\t{other}\n"
        f"1\t50001\tbadref\t{other}\t{base}\n",
    )
    out = tmp_path / "v.tsv"
    fasta = str(demo_reference / "genome.fa")
    argv = ["score", "--model", str(predictor.model_dir), "--vcf", str(vcf), "--reference", fasta]
    assert main(["-q", *argv, "--out", str(out)]) == 0
    diff = pd.read_csv(out, sep="\t")
    assert list(diff.columns[:7]) == ["chrom", "pos", "id", "ref", "alt", "ref_match", "line"]
    assert diff["ref_match"].tolist() == [True] and diff["line"].tolist() == [3]
    # a REF that is not the reference's bases is not scored, as `likelihood` refuses it
    rejected = pd.read_csv(f"{out}.rejected.tsv", sep="\t")
    assert rejected["line"].tolist() == [4]
    assert f"REF {other} is not the reference's bases at 1:50,001" in rejected["reason"][0]
    ref_window = reference.fetch("chr1", 50_000 - 200, 50_000 + 200)
    assert "N" not in ref_window  # DNA, not one of the demo genome's gaps
    alt_window = ref_window[:200] + other + ref_window[201:]
    ref_p, alt_p = predictor.predict([ref_window, alt_window])
    np.testing.assert_allclose(
        diff.loc[0, predictor.feature_names].to_numpy(float), alt_p - ref_p, atol=1e-6
    )
    absolute = pd.read_csv(f"{out}.abs_diff.tsv", sep="\t")
    np.testing.assert_allclose(
        absolute[predictor.feature_names], diff[predictor.feature_names].abs(), atol=1e-8
    )
    log_odds = pd.read_csv(f"{out}.log_odds_diff.tsv", sep="\t")
    logit = lambda p: np.log(p) - np.log1p(-p)  # noqa: E731
    np.testing.assert_allclose(
        log_odds.loc[0, predictor.feature_names].to_numpy(float),
        logit(alt_p) - logit(ref_p),
        rtol=1e-4,
        atol=1e-5,
    )


def test_hdf5_output_and_feature_subset(predictor, demo_reference, tmp_path):
    bed = write(tmp_path / "r.bed", "chr2\t50000\t50100\nchr2\t70000\t70100\n")
    out = tmp_path / "r.h5"
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
                "--format",
                "h5",
                "--features",
                "CTCF",
                "H3K9me3",
            ]
        )
        == 0
    )
    with h5py.File(out, "r") as handle:
        assert handle["predictions"].dtype == np.float32 and handle["predictions"].shape == (2, 2)
        assert handle["feature_names"][:].astype(str).tolist() == ["CTCF", "H3K9me3"]
        assert handle["rows/start"][:].tolist() == [50000, 70000]


def test_the_default_device_is_genobird_device_else_the_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # as on a 2-GPU machine
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("GENOBIRD_DEVICE", "cpu")
    assert default_device() == resolve_device("auto") == torch.device("cpu")
    assert resolve_device("cuda:0") == torch.device("cuda", 0)  # a named device wins
    for unset in ("auto", ""):
        monkeypatch.setenv("GENOBIRD_DEVICE", unset)
        assert resolve_device("auto") == torch.device("cuda", 1)  # this process's GPU
    monkeypatch.delenv("GENOBIRD_DEVICE")
    assert default_device() == torch.device("cuda", 1)


def test_a_device_that_cannot_be_had_is_a_one_line_error(predictor, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("GENOBIRD_DEVICE", "gpu0")
    with pytest.raises(ConfigError, match=r"^\$GENOBIRD_DEVICE 'gpu0' is not a device: use"):
        default_device()
    monkeypatch.setenv("GENOBIRD_DEVICE", "cuda")
    with pytest.raises(ConfigError, match=r"^\$GENOBIRD_DEVICE is 'cuda' but this machine has no"):
        default_device()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # one GPU, cuda:0
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("cuda:0") == torch.device("cuda", 0)
    with pytest.raises(ConfigError, match=r"'cuda:1' but this machine has 1 CUDA GPU\(s\): use"):
        resolve_device("cuda:1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("GENOBIRD_DEVICE", "cpu")
    fasta = write(tmp_path / "s.fa", ">a\nACGTACGT\n")
    out = tmp_path / "o.tsv"
    base = ["score", "--model", str(predictor.model_dir), "--fasta", str(fasta), "--out", str(out)]
    assert main([*base, "--device", "cuda:1"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.endswith(
        "the device is 'cuda:1' but this machine has no CUDA GPU: use cpu (or auto)"
    )
    assert len(err.splitlines()) == 1 and not list(tmp_path.glob("o.tsv*"))


def test_unknown_feature_and_empty_input_fail_clearly(predictor, tmp_path, capsys):
    fasta = write(tmp_path / "s.fa", ">a\nACGT\n")
    base = ["score", "--model", str(predictor.model_dir), "--out", str(tmp_path / "o.tsv")]
    assert main([*base, "--fasta", str(fasta), "--features", "CTFC"]) == 1
    assert "unknown features ['CTFC']" in capsys.readouterr().err
    empty = write(tmp_path / "e.fa", "")
    assert main([*base, "--fasta", str(empty)]) == 1
    err = capsys.readouterr().err
    assert f"nothing could be scored: {empty} has no FASTA records" in err
    assert not list(tmp_path.glob("o.tsv*"))  # no table, and no rejected file to point to
    bad = write(tmp_path / "b.fa", ">a\nACGX\n")
    assert main([*base, "--fasta", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"all 1 records were rejected (reasons in {tmp_path / 'o.tsv'}.rejected.tsv)" in err
    assert (tmp_path / "o.tsv.rejected.tsv").is_file() and not (tmp_path / "o.tsv").exists()
    assert not (tmp_path / "o.tsv").exists()


def test_model_directory_without_or_with_a_wrong_tokenizer(model_dir, pretraining_data, tmp_path):
    broken = tmp_path / "m"
    shutil.copytree(model_dir, broken)
    (broken / "tokenizer.model").unlink()
    with pytest.raises(CheckpointError, match=r"no tokenizer\.model or tokenizer\.json"):
        load_predictor(broken)
    description = json.loads((broken / "config.json").read_text())
    description["config"]["vocab_size"] += 1
    (broken / "config.json").write_text(json.dumps(description))
    shutil.copyfile(pretraining_data["tokenizer"], broken / "tokenizer.model")
    with pytest.raises(CheckpointError, match="not the tokenizer this model was trained with"):
        load_predictor(broken)


def test_unwritable_output_is_a_one_line_error(predictor, tmp_path, capsys):
    fasta = write(tmp_path / "s.fa", ">a\nACGT\n")
    blocker = write(tmp_path / "file", "x")
    assert (
        main(
            [
                "score",
                "--model",
                str(predictor.model_dir),
                "--fasta",
                str(fasta),
                "--out",
                str(blocker / "out.tsv"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_interrupted_run_leaves_no_file_that_looks_complete(predictor, tmp_path, monkeypatch):
    from genobird.scoring.tables import write_scores

    fasta = write(tmp_path / "s.fa", "".join(f">r{i}\n{'ACGT' * 60}\n" for i in range(10)))
    predictor.chunk_size = 3
    calls = {"n": 0}
    original = predictor._probabilities

    def interrupted(windows):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return original(windows)

    monkeypatch.setattr(predictor, "_probabilities", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_scores(predictor, "fasta", fasta, tmp_path / "o.tsv", "tsv", None)
    predictor.chunk_size = 1024
    assert list(tmp_path.glob("o.tsv*")) == [] and not list(tmp_path.glob(".o.tsv*"))


def test_example_script_ranks_variants(predictor, demo_reference, tmp_path):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "rank_variants.py"
    spec = importlib.util.spec_from_file_location("rank_variants", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reference = Reference(demo_reference / "genome.fa")
    lines = ["##fileformat=VCFv4.2", "#CHROM\tPOS\tID\tREF\tALT"]
    for i, position in enumerate(range(100_001, 100_401, 40)):
        ref = reference.fetch("chr1", position - 1, position)
        lines.append(f"chr1\t{position}\tv{i}\t{ref}\t{'G' if ref != 'G' else 'T'}")
    vcf = write(tmp_path / "v.vcf", "\n".join(lines) + "\n")
    ranked = module.rank_variants(
        str(predictor.model_dir), str(vcf), str(demo_reference / "genome.fa"), top=5
    )
    assert len(ranked) == 5 and ranked["abs_effect"].is_monotonic_decreasing
    assert set(ranked["top_feature"]) <= set(predictor.feature_names)


def test_api_tables_carry_their_rejected_records(predictor, demo_reference, tmp_path):
    bed = write(tmp_path / "r.bed", "chr1\t10000\t10200\nchrQ\t1\t2\nchr1\t1000\t1200\n")
    table = predictor.score_bed(bed, reference=demo_reference / "genome.fa")
    assert len(table) == 1 and "unknown contig 'chrQ'" in table.attrs["rejected"][0]
    assert "around chr1:1,001-1,200 is 100% N" in table.attrs["rejected"][1]
    ref = Reference(demo_reference / "genome.fa").fetch("chr1", 19999, 20000)
    vcf = write(tmp_path / "v.vcf", f"#CHROM\tPOS\tID\tREF\tALT\nchr1\t20000\tx\t{ref}\tN\n")
    diff = predictor.score_variants(vcf, reference=demo_reference / "genome.fa")
    alt = predictor.score_variants(vcf, reference=demo_reference / "genome.fa", score="alt")
    ref_table = predictor.score_variants(vcf, reference=demo_reference / "genome.fa", score="ref")
    features = predictor.feature_names
    np.testing.assert_allclose(diff[features], alt[features] - ref_table[features], atol=1e-7)
    with pytest.raises(ConfigError, match="score must be one of"):
        predictor.score_variants(vcf, reference=demo_reference / "genome.fa", score="odds")


def test_hdf5_ids_are_not_truncated_across_chunks(predictor, tmp_path):
    from genobird.scoring.tables import write_scores

    names = ["a", "b", "a_much_longer_record_name_in_a_later_chunk"]
    fasta = write(tmp_path / "s.fa", "".join(f">{n}\n{'ACGT' * 60}\n" for n in names))
    predictor.chunk_size = 2
    try:
        write_scores(predictor, "fasta", fasta, tmp_path / "o.h5", "h5", None)
    finally:
        predictor.chunk_size = 1024
    with h5py.File(tmp_path / "o.h5", "r") as handle:
        stored = [n.decode() if isinstance(n, bytes) else n for n in handle["rows/name"][:]]
    assert stored == names


def test_a_window_scores_the_same_alone_and_beside_a_longer_one(predictor):
    """Batches are padded to their own longest window (in whole blocks): padding must
    not change a window's score."""
    rng = np.random.default_rng(3)
    short = "".join(rng.choice(list("ACGT"), 400))
    repeat = "A" * 400  # tokenises to few long pieces: a much shorter input
    alone = predictor.predict([repeat])
    together = predictor.predict([repeat, short])
    np.testing.assert_allclose(together[0], alone[0], rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- ISM
def _mutant_fasta(sequence: str, first: int, length: int) -> str:
    return "".join(
        f">m{offset}_{base}\n{sequence[: first + offset]}{base}{sequence[first + offset + 1 :]}\n"
        for offset in range(length)
        for base in "ACGT"
        if sequence[first + offset] != base
    )


def test_ism_equals_scoring_each_mutant_with_score(predictor, tmp_path):
    """Every single-base change of the central 12 bp, batched, against `genobird score`
    of the same 36 mutated sequences one FASTA record each (both strands averaged)."""
    long = "".join(np.random.default_rng(5).choice(list("ACGT"), 600))  # centre-cropped
    short = "ACGTTGCA" * 30  # N-padded to 400 bp
    fasta = write(tmp_path / "r.fa", f">long\n{long}\n>short\n{short}\n")
    out = tmp_path / "ism.h5"
    model = str(predictor.model_dir)
    assert (
        main(
            [
                "-q",
                "ism",
                "--model",
                model,
                "--fasta",
                str(fasta),
                "--window-bp",
                "12",
                "--out",
                str(out),
                "--batch-size",
                "5",
            ]
        )
        == 0
    )
    with h5py.File(out, "r") as handle:
        effects, reference = handle["effects"][:], handle["reference"][:]
        assert effects.shape == (2, 12, 4, 16) and handle.attrs["score"] == "diff"
        assert handle["name"][:].astype(str).tolist() == ["long", "short"]
        assert handle["start"][:].tolist() == [100 + 194, -80 + 194]  # record coordinates
        assert handle["positions"][1].tolist() == list(range(114, 126))
        assert handle["sequence"][0].decode() == long[294:306]
        assert handle["feature_names"][:].astype(str).tolist() == predictor.feature_names
    window = fit_window(long, 400)
    for offset, base in enumerate(window[194:206]):  # the reference base's own entry is 0
        assert (effects[0, offset, "ACGT".index(base)] == 0).all()
    mutants = write(tmp_path / "m.fa", _mutant_fasta(window, 194, 12))
    assert (
        main(
            [
                "-q",
                "score",
                "--model",
                model,
                "--fasta",
                str(mutants),
                "--out",
                str(tmp_path / "m.tsv"),
            ]
        )
        == 0
    )
    scored = pd.read_csv(tmp_path / "m.tsv", sep="\t")
    np.testing.assert_allclose(reference[0], predictor.predict([window])[0], atol=1e-6)
    for _, row in scored.iterrows():
        offset, base = row["name"][1:].split("_")
        expected = row[predictor.feature_names].to_numpy(float) - reference[0]
        np.testing.assert_allclose(effects[0, int(offset), "ACGT".index(base)], expected, atol=2e-6)
    assert np.abs(effects[0]).max() > 0  # the model reads the bases it is given


def test_ism_log_odds_bed_plot_and_errors(predictor, demo_reference, tmp_path, capsys):
    from genobird.scoring.predict import logit

    bed = write(tmp_path / "r.bed", "chr1\t50000\t50200\tpeak1\nchr1\t60000\t60010\n")
    out, png = tmp_path / "ism.h5", tmp_path / "ism.png"
    base = [
        "-q",
        "ism",
        "--model",
        str(predictor.model_dir),
        "--window-bp",
        "6",
        "--reference",
        str(demo_reference / "genome.fa"),
    ]
    feature = predictor.feature_names[3]
    assert (
        main(
            [
                *base,
                "--bed",
                str(bed),
                "--out",
                str(out),
                "--score",
                "log_odds",
                "--features",
                feature,
                "CTCF",
                "--plot",
                str(png),
                "--feature",
                "CTCF",
            ]
        )
        == 0
    )
    assert png.read_bytes()[:4] == b"\x89PNG"
    reference = Reference(demo_reference / "genome.fa")
    with h5py.File(out, "r") as handle:
        assert handle["effects"].shape == (2, 6, 4, 2) and handle.attrs["score"] == "log_odds"
        assert handle["name"][:].astype(str).tolist() == ["peak1", "chr1:60000-60010"]
        start = int(handle["start"][0])
        assert start == 50100 - 3  # the central 6 bp of the window centred on the interval
        assert handle["sequence"][0].decode() == reference.fetch("chr1", start, start + 6)
        effect, ref = handle["effects"][0, 0], handle["reference"][0]
    sequence = reference.fetch("chr1", 50100 - 200, 50100 + 200)
    other = next(b for b in "ACGT" if b != sequence[197])
    mutant = sequence[:197] + other + sequence[198:]
    columns = [predictor.feature_names.index(n) for n in (feature, "CTCF")]
    alt = predictor.predict([mutant])[0][columns]
    np.testing.assert_allclose(effect["ACGT".index(other)], logit(alt) - logit(ref), atol=1e-4)
    assert (
        main(
            [
                *base,
                "--bed",
                str(bed),
                "--out",
                str(out),
                "--plot",
                str(png),
                "--features",
                "CTCF",
                "--feature",
                "DNase",
            ]
        )
        == 1
    )
    assert "--feature 'DNase' is not among the features mutated" in capsys.readouterr().err
    empty = write(tmp_path / "e.fa", "")
    assert main([*base, "--fasta", str(empty), "--out", str(tmp_path / "e.h5")]) == 1
    assert "no record could be mutated" in capsys.readouterr().err
    assert not (tmp_path / "e.h5").exists()
    # formats follow names: HDF5 is never written into a .tsv, nor a PNG into a .txt
    for out_name, plot in (("x.tsv", None), ("x.h5", "x.txt")):
        extra = ["--plot", str(tmp_path / plot)] if plot else []
        assert main([*base, "--bed", str(bed), "--out", str(tmp_path / out_name), *extra]) == 1
        err = capsys.readouterr().err
        assert ("ism writes HDF5" if plot is None else "name the figure .png") in err
        assert len(err.strip().splitlines()) == 1 and not (tmp_path / out_name).exists()


@pytest.mark.parametrize("width", [6, 60, 400])
def test_ism_heatmap_positions_are_whole_and_do_not_overlap(width):
    """The position axis is labelled at whole bases (a 6 bp window once read 50,100.5),
    its labels side by side without overlapping, at 6 to 400 mutated bases."""
    from genobird.scoring.mutagenesis import IsmResult, Region, ism_figure

    rng = np.random.default_rng(0)
    region = Region("r", "chr1", 1_234_000, "A" * (width + 10))
    result = IsmResult(
        region, 5, np.zeros(2, np.float32), rng.normal(size=(width, 4, 2)).astype(np.float32)
    )
    figure = ism_figure(result, 0, "CTCF")
    figure.canvas.draw()
    heat = figure.axes[1]
    labels = [t for t in heat.get_xticklabels() if t.get_text()]
    low, high = result.start - 0.5, result.start + width - 0.5
    shown = [t for t in labels if low <= t.get_position()[0] <= high]
    assert len(shown) >= 2
    for label in shown:
        assert "." not in label.get_text() and float(label.get_position()[0]).is_integer()
    boxes = sorted((t.get_window_extent() for t in shown), key=lambda box: box.x0)
    assert all(left.x1 <= right.x0 for left, right in itertools.pairwise(boxes)), [
        t.get_text() for t in shown
    ]
    # the title fits inside the figure, even under a long record name (it was cut off)
    result.region.name = "a_record_named_as_long_as_the_ones_users_give_" + "x" * 30
    figure = ism_figure(result, 0, "CTCF/HepG2/ENCFF000XYZ")
    figure.canvas.draw()
    title, bounds = figure.axes[0].title.get_window_extent(), figure.bbox
    assert bounds.x0 <= title.x0 and title.x1 <= bounds.x1 and title.y1 <= bounds.y1


def test_a_model_with_repeated_feature_names_is_refused(model_dir, tmp_path):
    """Models written before names were made unique: one line naming the repeats."""
    copy = tmp_path / "model"
    shutil.copytree(model_dir, copy)
    config = json.loads((copy / "config.json").read_text())
    names = config["task_info"]["feature_names"]
    names[1] = names[0]
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match=f"duplicate feature names '{names[0]}'"):
        load_predictor(copy, device="cpu")


@pytest.mark.shared_data
def test_ism_and_h5_scores_keep_deepsea_feature_names_that_are_not_ascii(
    model_dir, shared_data, tmp_path
):
    """DeepSEA's own 919-feature table names cells with non-ASCII characters; ISM and
    HDF5 scores store every name as UTF-8 (they stopped with UnicodeEncodeError)."""
    from genobird.datasets.deepsea import read_deepsea_features

    names, _ = read_deepsea_features(shared_data / "chromatin" / "deepsea_919_features.tsv")
    unusual = [name for name in names if not name.isascii()][:4]
    assert unusual, "DeepSEA's table holds non-ASCII names"
    renamed = tmp_path / "model"
    shutil.copytree(model_dir, renamed)
    config = json.loads((renamed / "config.json").read_text())
    config["task_info"]["feature_names"][:4] = unusual
    (renamed / "config.json").write_text(json.dumps(config))
    fasta = write(tmp_path / "r.fa", ">r\n" + "ACGT" * 100 + "\n")
    assert (
        main(
            [
                "-q",
                "ism",
                "--model",
                str(renamed),
                "--fasta",
                str(fasta),
                "--window-bp",
                "4",
                "--out",
                str(tmp_path / "ism.h5"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "-q",
                "score",
                "--model",
                str(renamed),
                "--fasta",
                str(fasta),
                "--out",
                str(tmp_path / "s.h5"),
            ]
        )
        == 0
    )
    for path in (tmp_path / "ism.h5", tmp_path / "s.h5"):
        with h5py.File(path, "r") as handle:
            assert handle["feature_names"].asstr()[:4].tolist() == unusual
    size = (tmp_path / "ism.h5").stat().st_size
    assert size < 200_000, size  # one record per chunk, not h5py's 256


def test_score_output_format_follows_the_name_and_folders_are_refused(model_dir, tmp_path, capsys):
    fasta = write(tmp_path / "r.fa", ">a\n" + "ACGT" * 100 + "\n")
    base = ["-q", "score", "--model", str(model_dir), "--fasta", str(fasta)]
    assert main([*base, "--out", str(tmp_path / "x.h5")]) == 0
    assert h5py.is_hdf5(tmp_path / "x.h5")  # the name chose HDF5, not TSV
    assert main([*base, "--out", str(tmp_path / "x.tsv")]) == 0
    assert (tmp_path / "x.tsv").read_text().startswith("index\tname\t")
    capsys.readouterr()
    assert main([*base, "--out", str(tmp_path / "y.h5"), "--format", "tsv"]) == 1
    assert "names a H5 file but --format is tsv" in capsys.readouterr().err
    folder = tmp_path / "existing"
    folder.mkdir()
    assert main([*base, "--out", str(folder)]) == 1
    err = capsys.readouterr().err
    assert "is an existing folder; give a file name" in err and ".tmp" not in err
    assert list(folder.iterdir()) == []


def test_outputs_are_readable_as_the_umask_allows(model_dir, tmp_path):
    """Score tables, their side files and model files get the mode a new file gets under
    the user's umask (the atomic writes' temporary files were private, 0600)."""
    import os
    import stat

    fasta = write(tmp_path / "r.fa", ">a\n" + "ACGT" * 100 + "\n>b\nXXXX\n")
    previous = os.umask(0o022)
    try:
        assert (
            main(
                [
                    "-q",
                    "score",
                    "--model",
                    str(model_dir),
                    "--fasta",
                    str(fasta),
                    "--out",
                    str(tmp_path / "out" / "s.tsv"),
                ]
            )
            == 0
        )
    finally:
        os.umask(previous)
    for path in (tmp_path / "out" / "s.tsv", tmp_path / "out" / "s.tsv.rejected.tsv"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o755
    for path in model_dir.iterdir():  # written by the fine-tuning of the fixture
        assert stat.S_IMODE(path.stat().st_mode) & 0o044 == 0o044, path


def test_a_pretrained_model_points_at_likelihood_and_near_feature_names_are_suggested(
    model_dir, pretraining_data, tmp_path, capsys
):
    from genobird.corpus.tokenizer import load_tokenizer
    from genobird.model import BigBirdConfig, save_pretrained
    from genobird.model.bigbird import BigBirdForPretraining

    tokenizer = load_tokenizer(pretraining_data["tokenizer"])
    config = BigBirdConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        intermediate_size=64,
        max_position=128,
    )
    save_pretrained(BigBirdForPretraining(config), tmp_path / "lm")
    tokenizer.save(tmp_path / "lm")
    fasta = write(tmp_path / "r.fa", ">a\n" + "ACGT" * 100 + "\n")
    assert (
        main(
            [
                "score",
                "--model",
                str(tmp_path / "lm"),
                "--fasta",
                str(fasta),
                "--out",
                str(tmp_path / "s.tsv"),
            ]
        )
        == 1
    )
    assert "genobird likelihood" in capsys.readouterr().err
    assert (
        main(
            [
                "score",
                "--model",
                str(model_dir),
                "--fasta",
                str(fasta),
                "--out",
                str(tmp_path / "t.tsv"),
                "--features",
                "ctcf",
            ]
        )
        == 1
    )
    assert "did you mean 'ctcf' -> 'CTCF'" in capsys.readouterr().err


def test_tracks_are_bedgraphs_of_each_bin_scored_as_a_bed_region(
    predictor, model_dir, demo_reference, tmp_path, capsys, monkeypatch
):
    """`genobird tracks`: one bedGraph per feature (or those chosen), a track line naming
    it, every bin of the region (the last one shorter) with the score `score --bed` gives
    that bin; a region past its contig's end or longer than the limit, or an existing
    --out, refused by name with nothing written."""
    fasta = str(demo_reference / "genome.fa")
    out = tmp_path / "tracks"
    chosen = predictor.feature_names[:2]
    argv = ["-q", "tracks", "--model", str(model_dir), "--reference", fasta, "--features", *chosen]
    assert (
        main([*argv, "--region", "chr1:50,001-51,050", "chr2:5,001-5,200", "--out", str(out)]) == 0
    )
    files = sorted(out.iterdir())
    assert [f.name for f in files] == sorted(
        re.sub(r"[^A-Za-z0-9._-]+", "_", name) + ".bedGraph" for name in chosen
    )
    lines = files[0].read_text().splitlines()
    safe = {re.sub(r"[^A-Za-z0-9._-]+", "_", n) + ".bedGraph": n for n in chosen}
    feature = safe[files[0].name]
    assert lines[0].startswith(f'track type=bedGraph name="{feature}"')
    rows = [line.split("\t") for line in lines[1:]]
    assert [(r[0], int(r[1]), int(r[2])) for r in rows[:2]] == [
        ("chr1", 50000, 50200),
        ("chr1", 50200, 50400),
    ]
    assert rows[5][1:3] == ["51000", "51050"] and rows[6][:3] == ["chr2", "5000", "5200"]
    bed = write(tmp_path / "bins.bed", "".join(f"{c}\t{a}\t{b}\n" for c, a, b, _ in rows))
    expected = predictor.score_bed(bed, fasta)[feature].to_numpy()
    np.testing.assert_allclose([float(r[3]) for r in rows], expected, rtol=1e-5)
    monkeypatch.setattr("genobird.scoring.tracks.MAX_TRACK_BP", 1_000)  # the limit, within chr1
    for region, message in (
        ("chr1:215,001-216,001", "runs past the end of chr1"),
        ("chrZ:1-100", "contig 'chrZ' is not in"),
        ("chr1:1-1001", "1,001 bp, longer than the 1,000 bp"),
    ):
        assert main([*argv, "--region", region, "--out", str(tmp_path / "bad")]) == 1
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "bad").exists() and len(list(tmp_path.glob(".bad*"))) == 0
    assert main([*argv, "--region", "chr1:1-400", "--out", str(out)]) == 1
    assert "exists; give a new folder" in capsys.readouterr().err


def test_ism_logo_draws_each_reference_base_as_tall_as_its_importance():
    """The logo above the heatmap: one letter per mutated base, the reference's, upright,
    as tall as minus the mean effect of changing it (above the axis where that lowers
    the prediction, below where it raises it), none at an N. The planted effects are not
    symmetric in the bases, so a logo of the wrong base or sign would not pass."""
    from matplotlib.patches import PathPatch

    from genobird.scoring.mutagenesis import IsmResult, Region, ism_figure, reference_importance

    sequence = "GATTACANCG"
    rng = np.random.default_rng(1)
    effects = rng.normal(size=(len(sequence), 4, 2)).astype(np.float32)
    for position, base in enumerate(sequence):  # the reference base's own entry is 0
        if base != "N":
            effects[position, "ACGT".index(base)] = 0
    result = IsmResult(
        Region("r", "chr1", 100, "CC" + sequence + "CC"), 2, np.zeros(2, np.float32), effects
    )
    importance = reference_importance(result, 1)
    expected = [-effects[i, :, 1].sum() / 3 for i in range(len(sequence))]
    np.testing.assert_allclose(np.delete(importance, 7), np.delete(expected, 7), rtol=1e-6)
    assert np.isnan(importance[7])
    figure = ism_figure(result, 1, "CTCF")
    logo = figure.axes[0]
    letters = [patch for patch in logo.patches if isinstance(patch, PathPatch)]
    assert [patch.get_label() for patch in letters] == list(sequence.replace("N", ""))
    for patch, position in zip(
        letters, [i for i, b in enumerate(sequence) if b != "N"], strict=True
    ):
        box = patch.get_path().get_extents()
        height = importance[position]
        assert box.height == pytest.approx(abs(height), rel=1e-6)
        assert (
            (box.y0 == pytest.approx(0, abs=1e-9))
            if height > 0
            else (box.y1 == pytest.approx(0, abs=1e-9))
        )
        assert box.x0 >= result.start + position - 0.5 and box.x1 <= result.start + position + 0.5
