"""Fine-tuning tasks: promoter and chromatin data sets, DeepSEA readers, metrics, fine-tuning."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import h5py
import numpy as np
import pytest
import scipy.io
from sklearn import metrics as skm

from genobird.cli import main
from genobird.errors import InputError
from genobird.genome import Reference, one_hot, reverse_complement
from genobird.genome.alphabet import acgt_to_deepsea_order
from genobird.genome.demo import MOTIFS
from genobird.genome.regions import BadRecord, Interval
from genobird.tasks.chromatin import (
    ChromatinSpec,
    bin_labels,
    build_chromatin_dataset,
    check_label_width,
    deepsea_sequences,
    deepsea_split_of,
    read_deepsea_split,
)
from genobird.tasks.data import WindowSet, chromosome_split, read_metadata
from genobird.tasks.metrics import binary_metrics, multilabel_metrics
from genobird.tasks.promoter import (
    PromoterSpec,
    build_promoter_dataset,
    read_tss,
    shuffled_negative,
    tss_of,
)
from tests.conftest import write


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


# --------------------------------------------------------------------------- label builder
def test_label_builder_hand_example(tmp_path):
    bins = [("chr1", 0, 200), ("chr1", 200, 400), ("chr1", 400, 600), ("chr1", 600, 800)]
    first = write(
        tmp_path / "f1.bed",
        "chr1\t100\t200\n"  # covers exactly half of bin 0 -> positive
        "chr1\t200\t299\n"  # 99 bp of bin 1 -> negative
        "chr1\t400\t470\nchr1\t450\t520\n",  # overlapping peaks: 120 bp merged -> positive
    )
    second = write(tmp_path / "f2.bed", "chr1\t590\t800\n")  # all of bin 3, 10 bp of bin 2
    labels = bin_labels(bins, [first, second], min_overlap=0.5)
    assert labels.tolist() == [[1, 0], [0, 0], [1, 0], [0, 1]]


@pytest.mark.shared_data
def test_label_builder_on_real_peaks_matches_a_numpy_oracle(shared_data, tmp_path):
    region_start, region_end, chrom = 1_000_000, 3_000_000, "10"
    by_feature: dict[str, list[tuple[int, int]]] = {}
    with gzip.open(
        shared_data / "chromatin" / "deepsea_peaks_hg19_chr1_chr10_6features.bed.gz", "rt"
    ) as h:
        for line in h:
            c, s, e, feature = line.split()[:4]
            if c == chrom and int(e) > region_start and int(s) < region_end:
                by_feature.setdefault(feature, []).append((int(s), int(e)))
    names = sorted(by_feature)
    files = []
    for name in names:
        files.append(
            write(
                tmp_path / f"{name}.bed",
                "".join(f"{chrom}\t{s}\t{e}\n" for s, e in by_feature[name]),
            )
        )
    bins = [(chrom, s, s + 200) for s in range(region_start, region_end, 200)]
    labels = bin_labels(bins, files, min_overlap=0.5)
    covered = np.zeros((len(names), region_end - region_start + 2000), dtype=bool)
    for column, name in enumerate(names):
        for s, e in by_feature[name]:
            covered[column, max(0, s - region_start) : max(0, e - region_start)] = True
    fraction = covered[:, : region_end - region_start].reshape(len(names), -1, 200).mean(axis=2)
    assert np.array_equal(labels, (fraction >= 0.5).T.astype(np.uint8))
    assert labels.sum() > 100 and len(names) == 6


@pytest.mark.shared_data
def test_numpy_label_builder_equals_bedtools_on_real_peaks(shared_data, tmp_path):
    """20 Mb of hg19 chr10 (100,000 bins x 6 real DeepSEA-style features), at DeepSEA's
    rule and two others; the peak BED is split per feature, gzipped as published."""
    from genobird.tasks.peaks import bedtools_bin_labels

    by_feature: dict[str, list[str]] = {}
    with gzip.open(
        shared_data / "chromatin" / "deepsea_peaks_hg19_chr1_chr10_6features.bed.gz", "rt"
    ) as handle:
        for line in handle:
            fields = line.split()
            by_feature.setdefault(fields[3], []).append("\t".join(fields[:3]) + "\n")
    files = []
    for name, lines in sorted(by_feature.items()):
        files.append(tmp_path / f"{name}.bed.gz")
        with gzip.open(files[-1], "wt") as handle:
            handle.writelines(lines)
    bins = [("10", s, s + 200) for s in range(60_000_000, 80_000_000, 200)]
    bins += [("1", 1_000_000 + 37 * i, 1_000_000 + 37 * i + 150) for i in range(2000)]
    for min_overlap in (0.5, 0.01, 1.0):
        ours = bin_labels(bins, files, min_overlap)
        assert np.array_equal(ours, bedtools_bin_labels(bins, files, min_overlap)), min_overlap
    assert ours.shape == (102_000, 6) and bin_labels(bins, files, 0.5).sum() > 1000


def test_interval_arithmetic_against_a_base_by_base_oracle(tmp_path):
    """Overlapping, nested, book-ended and empty peaks; bins of mixed widths that
    overlap each other; chromosomes without peaks; header and track lines."""
    from genobird.tasks.peaks import merge_intervals

    rng = np.random.default_rng(11)
    starts = rng.integers(0, 5000, 300)
    ends = starts + rng.integers(0, 120, 300)
    starts[:3], ends[:3] = [100, 200, 300], [200, 300, 300]  # book-ended and empty
    rows = "".join(f"chr1\t{s}\t{e}\tp\n" for s, e in zip(starts, ends, strict=True))
    peaks = write(tmp_path / "p.bed", "track name=x\n#comment\n" + rows)
    covered = np.zeros(6000, dtype=bool)
    for s, e in zip(starts, ends, strict=True):
        covered[s:e] = True
    bins = [("chr1", int(s), int(s + w)) for s, w in
            zip(rng.integers(0, 5800, 500), rng.integers(1, 200, 500), strict=True)]  # fmt: skip
    bins.append(("chr2", 0, 100))
    for min_overlap in (0.5, 0.2, 1.0):
        expected = [covered[s:e].mean() >= min_overlap if c == "chr1" else False
                    for c, s, e in bins]  # fmt: skip
        assert bin_labels(bins, [peaks], min_overlap)[:, 0].tolist() == expected
    merged_starts, merged_ends = merge_intervals(starts, ends)
    assert (merged_starts[1:] > merged_ends[:-1]).all()  # disjoint, book-ended joined
    assert (merged_ends - merged_starts).sum() == covered.sum()


def test_chromatin_dataset_on_demo_peaks(demo_reference, tmp_path):
    out = tmp_path / "c.h5"
    spec = ChromatinSpec(
        context=1000, valid_chromosomes=("chr3",), test_chromosomes=("chrX",), max_bins=300
    )
    windows = build_chromatin_dataset(
        demo_reference / "features.tsv", demo_reference / "genome.fa", out, spec
    )
    meta = read_metadata(out)
    assert len(windows) <= 300 and meta["window_bp"] == 1000 and len(meta["feature_names"]) == 16
    assert meta["categories"][:3] == ["DNase"] * 3
    with h5py.File(out, "r") as handle:
        starts, ends = handle["start"][:], handle["end"][:]
        chroms = handle["chrom"][:].astype(str)
        labels = handle["labels"][:]
    reference = Reference(demo_reference / "genome.fa")
    ctcf = meta["feature_names"].index("CTCF")
    for row in np.nonzero(labels[:, ctcf])[0][:10]:  # a CTCF bin has the motif near its centre
        centre = (starts[row] + ends[row]) // 2
        near = reference.fetch(chroms[row], centre - 250, centre + 250)
        assert MOTIFS["CTCF"] in near or reverse_complement(MOTIFS["CTCF"]) in near
    assert (ends - starts == 1000).all()


# --------------------------------------------------------------------------- metrics
def test_binary_metrics_match_sklearn_and_hand_counts():
    labels = np.array([1, 1, 1, 0, 0, 0, 0, 1])
    probabilities = np.array([0.9, 0.8, 0.3, 0.6, 0.1, 0.2, 0.4, 0.7])
    result = binary_metrics(labels, probabilities)
    assert result["precision"] == pytest.approx(3 / 4) and result["recall"] == pytest.approx(3 / 4)
    assert result["f1"] == pytest.approx(0.75)
    assert result["auroc"] == pytest.approx(skm.roc_auc_score(labels, probabilities))


def test_multilabel_medians_by_category_and_skipped_features():
    labels = np.array([[1, 0, 1, 0], [0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]])
    probabilities = np.array(
        [[0.9, 0.2, 0.6, 0.1], [0.1, 0.8, 0.7, 0.1], [0.8, 0.7, 0.2, 0.2], [0.2, 0.1, 0.1, 0.3]]
    )
    result = multilabel_metrics(
        labels, probabilities, ["a", "b", "c", "d"], ["DNase", "TF", "TF", "TF"]
    )
    assert result["skipped_features"] == ["d"]  # no positive: AUROC undefined
    tf = np.median([skm.roc_auc_score(labels[:, i], probabilities[:, i]) for i in (1, 2)])
    assert result["median_auroc_by_category"]["TF"] == pytest.approx(tf)
    assert result["median_auroc_by_category"]["DNase"] == pytest.approx(1.0)


# --------------------------------------------------------------------------- fine-tuning
@pytest.mark.slow
def test_finetune_promoter_from_the_command_line_beats_chance(pretraining_data, tmp_path, capsys):
    from genobird.genome.demo import DemoSpec, generate_demo_reference

    genome = tmp_path / "genome"  # 2 Mb: about 200 promoters, 400 windows
    generate_demo_reference(genome, DemoSpec(seed=11, size_mb=2.0))
    data = tmp_path / "promoter.h5"
    assert main([
        "-q", "dataset", "promoter", "--tss", str(genome / "tss.bed"),
        "--reference", str(genome / "genome.fa"), "--out", str(data),
        "--upstream-bp", "300", "--downstream-bp", "200",
        "--valid-chromosomes", "chr3", "--test-chromosomes", "chrX",
    ]) == 0  # fmt: skip
    assert main([
        "-q", "finetune", "promoter", "--data", str(data), "--out", str(tmp_path / "run"),
        "--from-scratch", "--tokenizer", str(pretraining_data["tokenizer"]),
        "--max-tokens", "160", "--max-steps", "300", "--learning-rate", "5e-4",
    ]) == 0  # fmt: skip
    report = json.loads((tmp_path / "run" / "report" / "metrics.json").read_text())
    assert report["auroc"] >= 0.75, report  # measured 0.845
    assert report["f1"] >= 0.70, report  # measured 0.773
    assert report["rc_average"] is False  # promoter windows are oriented by strand
    assert (tmp_path / "run" / "report" / "roc_pr.png").read_bytes()[:4] == b"\x89PNG"
    description = json.loads((tmp_path / "run" / "model" / "config.json").read_text())
    assert description["task_info"]["feature_names"] == ["promoter"]
    assert "fine-tuned promoter; test f1" in capsys.readouterr().out


def test_collate_pads_each_batch_to_its_longest_window_in_whole_blocks(pretraining_data):
    from genobird.corpus import Tokenizer
    from genobird.inputs import collate_windows, window_ids

    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    rng = np.random.default_rng(0)
    sequences = ["".join(rng.choice(list("ACGT"), n)) for n in (50, 400)]
    items = [{"input_ids": window_ids(tokenizer, s, 1024), "labels": np.zeros(1, np.float32)}
             for s in sequences]  # fmt: skip
    longest = max(len(item["input_ids"]) for item in items)
    batch = collate_windows(items, block_size=64, pad_id=tokenizer.pad_id)
    assert batch["input_ids"].shape == (2, -(-longest // 64) * 64)
    assert batch["attention_mask"].sum(dim=1).tolist() == [len(i["input_ids"]) for i in items]
    assert batch["input_ids"][0, 0] == 2 and batch["labels"].shape == (2, 1)  # [CLS] first
    short = collate_windows(items[:1], block_size=64, pad_id=tokenizer.pad_id)
    assert short["input_ids"].shape[1] == -(-len(items[0]["input_ids"]) // 8) * 8  # one block


def test_batches_the_model_attends_densely_pad_to_a_multiple_of_8_not_whole_blocks():
    """Block padding buys nothing below the model's densely attended length (blocks of
    16, 3 random: 112 tokens): such a batch pads to a multiple of 8 and gets the same
    logits as padded to whole blocks; a longer batch still pads to whole blocks."""
    import torch

    from genobird.inputs import collate_windows, window_collate
    from genobird.model import BigBirdConfig, BigBirdForSequenceClassification

    config = BigBirdConfig(vocab_size=60, hidden_size=32, num_layers=2, num_heads=4,
                           intermediate_size=64, max_position=256, block_size=16)  # fmt: skip
    torch.manual_seed(0)
    model = BigBirdForSequenceClassification(config, 2, pooling="mean").eval()
    assert model.encoder.dense_input_length() == 112
    rng = np.random.default_rng(0)
    items = [{"input_ids": rng.integers(5, 60, n), "labels": np.zeros(1)} for n in (85, 60)]
    fitted = window_collate(model, pad_id=0)(items)
    blocks = collate_windows(items, block_size=16, pad_id=0)
    assert fitted["input_ids"].shape[1] == 88 and blocks["input_ids"].shape[1] == 96
    with torch.no_grad():
        logits = [model(b["input_ids"], None, b["attention_mask"]).logits for b in (fitted, blocks)]
    torch.testing.assert_close(logits[0], logits[1])
    longer = [{"input_ids": rng.integers(5, 60, 120), "labels": np.zeros(1)}]
    assert window_collate(model, pad_id=0)(longer)["input_ids"].shape[1] == 128


def test_windows_take_their_special_ids_from_the_tokenizer(pretraining_data):
    """GENA-LM's layout ([CLS] 1, [SEP] 2, [PAD] 3), not genobird's (2, 3, 0)."""
    from genobird.corpus import Tokenizer
    from genobird.corpus.tokenizer import SpecialIds
    from genobird.inputs import collate_windows, window_ids

    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    tokenizer.special = SpecialIds(unk=0, cls=1, sep=2, pad=3, mask=4)
    rows = [window_ids(tokenizer, "ACGT" * n, 1024) for n in (5, 60)]
    assert all(row[0] == 1 and row[-1] == 2 for row in rows)
    batch = collate_windows([{"input_ids": r, "labels": np.zeros(1)} for r in rows], 64, 3)
    padded = batch["input_ids"][0, len(rows[0]) :]
    assert (padded == 3).all() and not batch["attention_mask"][0, len(rows[0]) :].any()
    assert batch["attention_mask"][0, : len(rows[0])].all()


def test_max_tokens_defaults_to_what_the_windows_need(pretraining_data, tmp_path):
    from genobird.corpus import Tokenizer
    from genobird.tasks.data import default_max_tokens

    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    windows = WindowSet("classify", ["y"], ["label"])
    rng = np.random.default_rng(1)
    sequences = ["".join(rng.choice(list("ACGT"), n)) for n in (100, 450, 200)]
    for index, sequence in enumerate(sequences):
        windows.add(sequence, [index % 2], "s", 0, len(sequence), "+", "train")
    windows.write(tmp_path / "w.h5")
    need = max(len(tokenizer.encode(s)) for s in sequences) + 2
    assert need > 64
    assert default_max_tokens(tmp_path / "w.h5", tokenizer, 64, 4096) == -(-need // 64) * 64
    assert default_max_tokens(tmp_path / "w.h5", tokenizer, 64, 64) == 64  # model's limit


def test_promoter_sequences_get_paired_deepromoter_negatives_in_their_split(tmp_path, capsys):
    rng = np.random.default_rng(2)
    positives = ["".join(rng.choice(list("ACGT"), 300)) for _ in range(40)]
    source = write(tmp_path / "tata.txt", "\n".join([*positives[:39], "ACGT"]) + "\n")
    out = tmp_path / "p.h5"
    assert main(["-q", "dataset", "promoter-sequences", "--positives", str(source),
                 "--out", str(out)]) == 0  # fmt: skip
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
    assert main(["-q", "dataset", "promoter-sequences", "--positives", str(source),
                 "--out", str(out), "--training-negatives", "0"]) != 0  # fmt: skip
    error = capsys.readouterr().err.strip()
    assert "training_negatives must be at least 1, got 0" in error and "\n" not in error
    assert not out.exists()


def test_classify_dataset_from_separate_split_files(tmp_path):
    rows = {"train": ["ACGTAC,1", "GGGCCC,0", "TTTTAA,1"], "dev": ["ACACAC,0"], "test": ["GTGT,1"]}
    paths = {k: write(tmp_path / f"{k}.csv", "sequence,label\n" + "\n".join(v) + "\n")
             for k, v in rows.items()}  # fmt: skip
    out = tmp_path / "gue.h5"
    assert main(["-q", "dataset", "classify", "--input", str(paths["train"]),
                 "--valid", str(paths["dev"]), "--test", str(paths["test"]),
                 "--out", str(out)]) == 0  # fmt: skip
    meta = read_metadata(out)
    assert meta["counts"] == {"train": 3, "valid": 1, "test": 1}
    assert meta["feature_names"] == ["label"] and meta["positives"] == [3]


# --------------------------------------------------------------------------- classify
def test_classify_dataset_from_csv_with_bad_records_reported(tmp_path, capsys):
    table = write(
        tmp_path / "data.csv",
        "name,sequence,enhancer,promoter,split\n"
        "a,ACGTACGTAA,1,0,train\n"
        "b,acgunnRR,0,1,test\n"
        "c,ACGT-ACGT,1,1,train\n"  # bad DNA
        "d,ACGTTT,2,0,train\n"  # not binary
        "e,GGGCCC,0,0,valid\n",
    )
    out = tmp_path / "c.h5"
    assert main(["-q", "dataset", "classify", "--input", str(table), "--out", str(out)]) == 0
    assert "3 sequences" in capsys.readouterr().out
    meta = read_metadata(out)
    assert meta["feature_names"] == ["enhancer", "promoter"] and meta["positives"] == [1, 1]
    with h5py.File(out, "r") as handle:
        assert handle["sequences"][1].decode() == "ACGTNNNN"
        assert handle["split"][:].astype(str).tolist() == ["train", "test", "valid"]


def test_classify_dataset_from_fasta_with_class_names(tmp_path):
    from genobird.tasks.classify import build_classify_dataset

    fasta = write(
        tmp_path / "x.fa",
        ">s1 kind=enhancer\nACGT\n>s2 kind=promoter split=test\nGGCC\n"
        ">s3\nAAAA\n>s4 kind=silencer\nTTTT\n",
    )
    windows, problems = build_classify_dataset(fasta, tmp_path / "x.h5", seed=1)
    assert windows.feature_names == ["enhancer", "promoter", "silencer"]
    assert [list(v) for v in windows.labels] == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    assert windows.splits[1] == "test"
    assert len(problems) == 1 and "missing label 'kind'" in problems[0].reason


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
        "-q", "dataset", "deepsea", "--mat", str(tmp_path / "test.mat"), "--split", "test",
        "--coordinates", str(coordinates), "--reference", str(fasta),
        "--features", str(shared_data / "chromatin" / "deepsea_919_features.tsv"),
        "--out", str(out), "--context-bp", "8000",
    ]  # fmt: skip
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
    from genobird.tasks.chromatin import default_deepsea_features, read_deepsea_features

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
        "-q", "dataset", "deepsea",
        "--mat", str(tmp_path / "train.mat"), str(tmp_path / "test.mat"),
        "--split", "train", "test",
        "--coordinates", str(coordinates), "--reference", str(genome),
        "--out", str(out), "--context-bp", "1000",
    ]  # fmt: skip
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


def test_best_f1_threshold_matches_brute_force():
    from genobird.tasks.metrics import best_f1_threshold

    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 300)
    probabilities = np.clip(labels * 0.3 + rng.random(300) * 0.7, 0, 1)
    threshold = best_f1_threshold(labels, probabilities)
    brute = max(skm.f1_score(labels, probabilities >= t) for t in np.unique(probabilities))
    assert skm.f1_score(labels, probabilities >= threshold) == pytest.approx(brute)


@pytest.mark.slow
def test_finetune_chromatin_beats_chance(pretraining_data, tmp_path, capsys):
    from genobird.genome.demo import DemoSpec, generate_demo_reference

    genome = tmp_path / "genome"
    generate_demo_reference(genome, DemoSpec(seed=12, size_mb=2.0))
    data = tmp_path / "chromatin.h5"
    assert main([
        "-q", "dataset", "chromatin", "--features", str(genome / "features.tsv"),
        "--reference", str(genome / "genome.fa"), "--out", str(data), "--context-bp", "600",
        "--max-bins", "1200", "--valid-chromosomes", "chr3", "--test-chromosomes", "chrX",
    ]) == 0  # fmt: skip
    assert main([
        "-q", "finetune", "chromatin", "--data", str(data), "--out", str(tmp_path / "run"),
        "--from-scratch", "--tokenizer", str(pretraining_data["tokenizer"]),
        "--max-tokens", "160", "--max-steps", "300", "--learning-rate", "5e-4",
    ]) == 0  # fmt: skip
    report = json.loads((tmp_path / "run" / "report" / "metrics.json").read_text())
    assert report["median_auroc"] >= 0.70, report["median_auroc_by_category"]  # measured 0.787
    assert (tmp_path / "run" / "report" / "auroc_by_category.png").read_bytes()[:4] == b"\x89PNG"


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


def test_finetune_with_model_selection_mean_pooling_and_rc_augmentation(pretraining_data, tmp_path):
    from genobird import load_predictor
    from genobird.corpus import Tokenizer
    from genobird.tasks.data import WindowDataset

    rng = np.random.default_rng(4)
    windows = WindowSet("classify", ["bound"], ["label"])
    for index in range(120):
        label = index % 2
        bases = "".join(rng.choice(list("ACGT"), 90))
        sequence = bases[:40] + ("TGACGTCA" if label else bases[40:48]) + bases[48:]
        windows.add(sequence, [label], f"s{index}", 0, 90, "+",
                    ("train", "train", "train", "valid", "test")[index % 5])  # fmt: skip
    data = windows.write(tmp_path / "motif.h5")
    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    augmented = WindowDataset(data, "train", tokenizer, 64, rc_augment_seed=0)
    plain = WindowDataset(data, "train", tokenizer, 64)
    flips = [
        not np.array_equal(augmented[i]["input_ids"], plain[i]["input_ids"]) for i in range(72)
    ]
    assert 20 < sum(flips) < 52  # about half the windows read on the other strand
    assert np.array_equal(augmented[5]["input_ids"], augmented[5]["input_ids"])  # seeded
    assert main([
        "-q", "finetune", "classify", "--data", str(data), "--out", str(tmp_path / "run"),
        "--from-scratch", "--tokenizer", str(pretraining_data["tokenizer"]), "--max-steps", "40",
        "--eval-every", "10", "--patience", "2", "--pooling", "mean",
    ]) == 0  # fmt: skip
    report = json.loads((tmp_path / "run" / "report" / "metrics.json").read_text())
    assert report["pooling"] == "mean"
    assert report["training"]["best_step"] in (10, 20, 30, 40)
    assert report["training"]["real_tokens_per_second"] > 0
    predictor = load_predictor(tmp_path / "run" / "model", device="cpu")
    assert predictor.model.pooling == "mean"
    # trained on both strands, so evaluated and scored on both, unless told otherwise
    assert report["rc_average"] is True and predictor.rc_average is True
    single = load_predictor(tmp_path / "run" / "model", device="cpu", rc_average=False)
    sequence = windows.sequences[4]  # a test window
    reverse = sequence[::-1].translate(str.maketrans("ACGT", "TGCA"))
    both_strands = (single.predict([sequence]) + single.predict([reverse])) / 2
    assert np.allclose(predictor.predict([sequence]), both_strands, atol=1e-6)
    # model selection scored the validation split on both strands too, as the report does
    from genobird.tasks.finetune import FinetuneSpec, split_probabilities
    from genobird.tasks.metrics import mean_auroc

    checks = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    best = max(row["eval_auroc"] for row in checks if "eval_auroc" in row)
    kept = predictor.model
    spec = FinetuneSpec(max_tokens=predictor.max_tokens)
    valid = split_probabilities(kept, data, "valid", tokenizer, spec, "cpu", rc_average=True)
    assert mean_auroc(*valid) == pytest.approx(best, abs=1e-6)


def _random_classify_data(path, count: int, seed: int):
    """`count` random 60 bp windows, labels alternating, every fourth in the test split."""
    windows = WindowSet("classify", ["y"], ["label"])
    rng = np.random.default_rng(seed)
    for index in range(count):
        windows.add("".join(rng.choice(list("ACGT"), 60)), [index % 2], "s", 0, 60, "+",
                    "test" if index % 4 == 0 else "train")  # fmt: skip
    return windows.write(path)


def test_from_scratch_control_takes_the_shape_of_a_model_directory_and_dropout(
    pretraining_data, tmp_path, capsys
):
    from genobird import load_predictor
    from genobird.corpus import Tokenizer
    from genobird.model import BigBirdConfig, BigBirdForPretraining, save_pretrained

    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    vocab = tokenizer.vocab_size
    shape = dict(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64,
                 max_position=256, block_size=32, composed_token_embeddings=True,
                 position_init="sinusoidal")  # fmt: skip
    save_pretrained(BigBirdForPretraining(BigBirdConfig(vocab_size=vocab, **shape)),
                    tmp_path / "shaped")  # fmt: skip
    data = _random_classify_data(tmp_path / "d.h5", count=40, seed=5)
    command = ["-q", "finetune", "classify", "--data", str(data), "--out",
               str(tmp_path / "run"), "--tokenizer", str(pretraining_data["tokenizer"]),
               "--model", str(tmp_path / "shaped"), "--max-steps", "2"]  # fmt: skip
    assert main([*command, "--from-scratch", "--dropout", "1.5"]) == 1
    assert "hidden_dropout must be in [0, 1), got 1.5" in capsys.readouterr().err
    assert main([*command, "--from-scratch", "--dropout", "0.2"]) == 0
    config = json.loads((tmp_path / "run" / "model" / "config.json").read_text())["config"]
    assert {key: config[key] for key in shape} == shape
    # the former spellings still work for a release, each with a warning naming the new one
    capsys.readouterr()
    assert main(["-q", "finetune", "classify", "--data", str(data), "--output",
                 str(tmp_path / "old"), "--tokenizer", str(pretraining_data["tokenizer"]),
                 "--shape-of", str(tmp_path / "shaped"), "--from-scratch",
                 "--max-steps", "2"]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert "--output is now --out" in err and "--shape-of is now --model" in err
    assert (tmp_path / "old" / "model" / "config.json").is_file()
    assert config["hidden_dropout"] == 0.2  # fine-tuned with it (BigBirdConfig's own: 0.1)
    # the fresh model composed its token embeddings from the tokenizer's pieces
    tokens = load_predictor(tmp_path / "run" / "model", device="cpu").model.encoder.embeddings
    terms = tokens.tokens.piece_terms
    for index, piece in enumerate(tokenizer.pieces):
        used = int((terms[index] != tokens.tokens.padding_term).sum())
        if set(piece) <= set("ACGT"):
            assert used == 2 * min(len(piece), 16)
            assert int(terms[index, 0]) == "ACGT".index(piece[0])  # first base, offset 0
        else:  # [CLS], N runs...: the residual alone
            assert used == 0


def test_layer_decay_slows_each_encoder_layer_below_the_top(pretraining_data, tmp_path, capsys):
    """ELECTRA's layer-wise decay: the top layer (and the head) learn at the base rate,
    the layer below at `decay` times it, the embeddings at decay**layers."""
    import safetensors.torch
    import torch

    from genobird.corpus import Tokenizer
    from genobird.errors import ConfigError
    from genobird.model import BigBirdConfig, BigBirdForPretraining, save_pretrained
    from genobird.tasks.finetune import FinetuneSpec, layer_decay_scales

    assert layer_decay_scales(2, 1.0) == {}
    assert layer_decay_scales(2, 0.5) == {
        "encoder.": 0.25, "encoder.pooler.": 1.0, "encoder.layers.0.": 0.5, "encoder.layers.1.": 1.0
    }  # fmt: skip
    assert layer_decay_scales(2, 0.5, final_norm=True)["encoder.final_norm."] == 1.0
    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    shape = dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                 max_position=256, block_size=32)  # fmt: skip
    torch.manual_seed(0)
    pretrained = tmp_path / "pretrained"
    save_pretrained(BigBirdForPretraining(BigBirdConfig(vocab_size=tokenizer.vocab_size, **shape)),
                    pretrained)  # fmt: skip
    tokenizer.save(pretrained)
    start = safetensors.torch.load_file(str(pretrained / "model.safetensors"))
    data = _random_classify_data(tmp_path / "d.h5", count=64, seed=6)
    command = ["-q", "finetune", "classify", "--data", str(data), "--model", str(pretrained),
               "--max-steps", "5", "--learning-rate", "1e-2", "--warmup-steps", "0"]  # fmt: skip

    def largest_change(decay: float) -> dict[str, float]:
        output = tmp_path / f"run-{decay}"
        assert main([*command, "--out", str(output), "--layer-decay", str(decay)]) == 0
        report = json.loads((output / "report" / "metrics.json").read_text())
        assert report["layer_decay"] == decay  # the report names the recipe
        tuned = safetensors.torch.load_file(str(output / "model" / "model.safetensors"))
        parts = ("encoder.embeddings.", "encoder.layers.0.", "encoder.layers.1.")
        return {part: max(float((tuned[name] - start[name]).abs().max())
                          for name in start if name.startswith(part))
                for part in parts}  # fmt: skip

    one_rate, decayed = largest_change(1.0), largest_change(0.1)
    assert decayed["encoder.layers.1."] == pytest.approx(one_rate["encoder.layers.1."], rel=0.5)
    assert decayed["encoder.layers.0."] < 0.3 * one_rate["encoder.layers.0."]
    assert decayed["encoder.embeddings."] < 0.03 * one_rate["encoder.embeddings."]
    assert main([*command, "--out", str(tmp_path / "bad"), "--layer-decay", "0"]) == 1
    assert "layer_decay must be in (0, 1], got 0.0" in capsys.readouterr().err
    assert not (tmp_path / "bad" / "model").exists()
    with pytest.raises(ConfigError, match=r"layer_decay or training\.learning_rate_scales"):
        FinetuneSpec(layer_decay=0.5, training={"learning_rate_scales": {"head.": 2.0}})
    # a pre-LayerNorm encoder's final norm sits above the top layer: the base rate
    pre_norm = tmp_path / "pre-norm"
    pre_norm_config = BigBirdConfig(vocab_size=tokenizer.vocab_size, layer_norm="pre", **shape)
    save_pretrained(BigBirdForPretraining(pre_norm_config), pre_norm)
    tokenizer.save(pre_norm)
    before = safetensors.torch.load_file(str(pre_norm / "model.safetensors"))
    output = tmp_path / "pre-norm-run"
    pre_norm_command = [str(pre_norm) if part == str(pretrained) else part for part in command]
    assert main([*pre_norm_command, "--out", str(output), "--layer-decay", "0.1"]) == 0
    after = safetensors.torch.load_file(str(output / "model" / "model.safetensors"))
    moved = {
        name: float((after[name] - before[name]).abs().max()) for name in after if name in before
    }
    assert moved["encoder.final_norm.weight"] > 5 * moved["encoder.layers.0.output_norm.weight"]


def test_fine_tuning_keeps_the_averaged_weights_when_asked(pretraining_data, tmp_path, capsys):
    """--ema-decay: the saved model is the weight average, the last checkpoint the weights
    as trained (to resume from); the report names the decay; a decay outside [0, 1) is a
    one-line error that writes no model."""
    import safetensors.torch
    import torch

    data = _random_classify_data(tmp_path / "d.h5", count=40, seed=7)
    command = ["-q", "finetune", "classify", "--data", str(data), "--from-scratch",
               "--tokenizer", str(pretraining_data["tokenizer"]), "--max-steps", "4",
               "--batch-size", "4", "--learning-rate", "1e-2"]  # fmt: skip
    output = tmp_path / "run"
    assert main([*command, "--out", str(output), "--ema-decay", "0.9"]) == 0
    report = json.loads((output / "report" / "metrics.json").read_text())
    assert report["ema_decay"] == 0.9
    saved = safetensors.torch.load_file(str(output / "model" / "model.safetensors"))
    trained = safetensors.torch.load_file(
        str(output / "checkpoints" / "step-00000004" / "model.safetensors")
    )
    assert saved.keys() == trained.keys()
    assert any(not torch.equal(saved[name], trained[name]) for name in saved)
    assert main([*command, "--out", str(tmp_path / "bad"), "--ema-decay", "1"]) == 1
    assert "ema_decay must be in [0, 1) (0: no averaging), got 1.0" in capsys.readouterr().err
    assert not (tmp_path / "bad" / "model").exists()


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
    from genobird.tasks.chromatin import read_deepsea_features

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
    assert main(["dataset", "deepsea", "--csv", str(path), "--features", str(table), "--out",
                 str(out), "--valid-fraction", "0.2", "--test-fraction", "0.2"]) == 0  # fmt: skip
    captured = capsys.readouterr()
    for line, reason in ((4, "919 fields, expected 920"), (6, "label '2' is not 0 or 1"),
                         (8, "sequence: invalid DNA character 'X'")):  # fmt: skip
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
    assert main(["-q", "finetune", "chromatin", "--data", str(out), "--out", str(run),
                 "--from-scratch", "--tokenizer", str(pretraining_data["tokenizer"]),
                 "--max-tokens", "64", "--max-steps", "2"]) == 0  # fmt: skip
    report = json.loads((run / "report" / "metrics.json").read_text())
    assert set(report["median_auroc_by_category"]) == {"DNase", "TF", "Histone"}
    fasta = write(tmp_path / "s.fa", f">a\n{sequences[0]}\n>b\n{sequences[1]}\n")
    assert main(["-q", "score", "--model", str(run / "model"), "--fasta", str(fasta),
                 "--out", str(tmp_path / "s.tsv")]) == 0  # fmt: skip
    header = (tmp_path / "s.tsv").read_text().splitlines()[0].split("\t")
    assert header == ["index", "name", *names]


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
    assert main(["-q", "dataset", "deepsea", "--csv", str(path), "--split-column", "split",
                 "--out", str(out)]) == 0  # fmt: skip
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
    assert main(["-q", "dataset", "deepsea", "--csv", str(path), "--split-column", "split",
                 "--out", str(tmp_path / "p.h5")]) == 1  # fmt: skip
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
    assert main(["-q", "dataset", "deepsea", "--csv", str(path), "--out", str(out),
                 "--valid-fraction", "0", "--test-fraction", "0"]) == 0  # fmt: skip
    assert "b.csv:1: sequence: invalid DNA character 'X'" in caplog.text
    assert read_metadata(out)["counts"]["train"] == 2


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
    from genobird.tasks.chromatin import read_feature_table

    with pytest.raises(InputError, match="duplicate feature names 'x'"):
        WindowSet("chromatin", ["x", "y", "x"])
    peaks = write(tmp_path / "p.bed", "chr1\t0\t10\n")
    table = write(tmp_path / "f.tsv", f"name\tcategory\tpeak_file\nx\tTF\t{peaks.name}\n"
                  f"x\tTF\t{peaks.name}\n")  # fmt: skip
    with pytest.raises(InputError, match="duplicate feature names 'x'"):
        read_feature_table(table)


def test_classify_summary_names_a_few_labels_not_all(tmp_path, capsys):
    header = "sequence," + ",".join(f"label{i}" for i in range(40))
    table = write(tmp_path / "m.csv", header + "\nACGT," + ",".join("01" * 20) + "\n")
    assert main(["-q", "dataset", "classify", "--input", str(table),
                 "--out", str(tmp_path / "m.h5")]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "40 labels: label0, label1, label2, label3, label4, ... (35 more)" in out
    assert "label39" not in out


def test_peak_chromosomes_are_resolved_like_bed_regions(demo_reference, tmp_path, capsys):
    """Peaks named '1' label the reference's chr1 bins (as a BED scored against it is
    resolved); a peak file on none of the reference's chromosomes is a one-line error,
    not a feature labelled 0 everywhere."""
    from genobird.tasks.chromatin import peaks_on_reference
    from genobird.tasks.peaks import read_peaks

    reference = Reference(demo_reference / "genome.fa")
    peaks = read_peaks(write(tmp_path / "p.bed", "1\t100\t300\nchr1\t250\t400\nchrUn\t0\t9\n"))
    named = peaks_on_reference(peaks, reference, "p.bed")
    assert list(named) == ["chr1"] and named["chr1"][0].tolist() == [100]
    assert named["chr1"][1].tolist() == [400]  # '1' and 'chr1' merged
    write(tmp_path / "o.bed", "scaffold_7\t0\t500\n")
    table = write(tmp_path / "f.tsv", "name\tcategory\tpeak_file\nX\tTF\to.bed\n")
    fasta, out = demo_reference / "genome.fa", tmp_path / "c.h5"
    assert main(["-q", "dataset", "chromatin", "--features", str(table), "--reference",
                 str(fasta), "--out", str(out)]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "o.bed: none of its chromosomes (scaffold_7, ...) is in the reference" in err


def test_a_bad_peak_file_is_a_one_line_error_naming_it(tmp_path):
    from genobird.errors import FormatError
    from genobird.tasks.peaks import read_peaks

    bad = write(tmp_path / "bad.bed", "chr1\t10\t20\nchr1\tten\t30\n")
    with pytest.raises(FormatError, match=r"bad\.bed: not a BED file of integer starts and ends"):
        read_peaks(bad)
    reversed_ = write(tmp_path / "rev.bed", "chr1\t10\t20\nchr2\t50\t30\n")
    with pytest.raises(FormatError, match=r"rev\.bed: interval chr2:50-30 has start > end"):
        read_peaks(reversed_)
    assert read_peaks(write(tmp_path / "empty.bed", "")) == {}


def test_bpe_dropout_cuts_training_windows_many_ways_each_fixed_by_its_seed(
    pretraining_data, tmp_path, capsys
):
    """--bpe-dropout: training windows are cut into more, shorter pieces that still spell
    the window (or its reverse complement), drawn afresh each epoch and the same on a
    resumed run (in another process too: tests/test_bpe_dropout.py); training on them
    moves the weights elsewhere than the tokenizer's own pieces (same seed); the report
    names the rate."""
    import safetensors.torch
    import torch

    from genobird.corpus import Tokenizer
    from genobird.tasks.data import WindowDataset, read_split

    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    data = _random_classify_data(tmp_path / "d.h5", count=40, seed=3)
    sequences, _ = read_split(data, "train")

    def spelled(item) -> str:
        return tokenizer.decode(item["input_ids"][1:-1])

    plain = WindowDataset(data, "train", tokenizer, 512)
    sampled = WindowDataset(data, "train", tokenizer, 512, bpe_dropout=0.3, bpe_seed=5)
    both = WindowDataset(data, "train", tokenizer, 512, rc_augment_seed=1, bpe_dropout=0.3)
    for index, sequence in enumerate(sequences):
        assert spelled(plain[index]) == sequence
        assert spelled(sampled[index]) == sequence
        assert spelled(both[index]) in (sequence, reverse_complement(sequence))
    lengths = [[len(d[i]["input_ids"]) for i in range(len(d))] for d in (plain, sampled)]
    assert np.mean(lengths[1]) > 1.1 * np.mean(lengths[0])  # merges were skipped
    again = WindowDataset(data, "train", tokenizer, 512, bpe_dropout=0.3, bpe_seed=5)
    assert all(np.array_equal(sampled[i]["input_ids"], again[i]["input_ids"])
               for i in range(len(sampled)))  # fmt: skip
    again.set_epoch(1)
    assert any(not np.array_equal(sampled[i]["input_ids"], again[i]["input_ids"])
               for i in range(len(sampled)))  # fmt: skip
    off = WindowDataset(data, "train", tokenizer, 512, bpe_dropout=0.0, bpe_seed=5)
    assert all(np.array_equal(plain[i]["input_ids"], off[i]["input_ids"]) for i in range(30))

    command = ["-q", "finetune", "classify", "--data", str(data), "--from-scratch",
               "--tokenizer", str(pretraining_data["tokenizer"]), "--max-steps", "4",
               "--batch-size", "4"]  # fmt: skip
    assert main([*command, "--out", str(tmp_path / "run"), "--bpe-dropout", "0.1"]) == 0
    report = json.loads((tmp_path / "run" / "report" / "metrics.json").read_text())
    assert report["bpe_dropout"] == 0.1
    assert main([*command, "--out", str(tmp_path / "same-seed")]) == 0
    weights = [safetensors.torch.load_file(str(tmp_path / run / "model" / "model.safetensors"))
               for run in ("run", "same-seed")]  # fmt: skip
    assert any(not torch.equal(weights[0][name], weights[1][name]) for name in weights[0])
    assert main([*command, "--out", str(tmp_path / "bad"), "--bpe-dropout", "1"]) == 1
    assert "bpe_dropout must be in [0, 1), got 1.0" in capsys.readouterr().err
    assert not (tmp_path / "bad" / "model").exists()


def test_bpe_dropout_training_windows_may_use_every_position_of_the_model():
    from types import SimpleNamespace

    from genobird.tasks.finetune import FinetuneSpec, training_max_tokens

    model = SimpleNamespace(config=SimpleNamespace(max_position=512))
    assert training_max_tokens(FinetuneSpec(max_tokens=32), model) == 32
    assert training_max_tokens(FinetuneSpec(max_tokens=32, bpe_dropout=0.1), model) == 512


def test_segmentation_averaging_scores_each_window_as_the_mean_of_its_sampled_cuts(
    pretraining_data, tmp_path, capsys
):
    """--segmentations K: a window's cuts are the same wherever it is read (which data
    set, which row); the report's test probabilities and the saved predictor's scores are the
    mean of the model's probabilities over K cuts on each strand, each run alone (an
    oracle without batching or padding); the finished run re-evaluates with another K
    without training again; K needs BPE-dropout."""
    import safetensors.torch
    import torch

    from genobird import load_predictor
    from genobird.corpus import Tokenizer
    from genobird.errors import CheckpointError
    from genobird.inputs import sampled_cut
    from genobird.tasks.data import WindowDataset, read_split

    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    data = _random_classify_data(tmp_path / "d.h5", count=40, seed=8)
    sequences, _ = read_split(data, "test")
    # the same sequence at another row of another data set gets the same cuts
    moved = WindowSet("classify", ["y"], ["label"])
    for sequence in ["ACGT" * 15, *reversed(sequences)]:
        moved.add(sequence, [0], "s", 0, 60, "+", "test")
    moved = moved.write(tmp_path / "moved.h5")
    for cut in range(3):
        here = WindowDataset(data, "test", tokenizer, 512, bpe_dropout=0.3, cut=cut)
        there = WindowDataset(moved, "test", tokenizer, 512, bpe_dropout=0.3, cut=cut)
        assert np.array_equal(here[0]["input_ids"], there[len(sequences)]["input_ids"])
        assert tokenizer.decode(here[1]["input_ids"][1:-1]) == sequences[1]
    cuts = {tuple(sampled_cut(tokenizer, sequences[0], 0.3, cut)) for cut in range(6)}
    assert len(cuts) > 1  # several cuts, not one

    run = tmp_path / "run"
    command = ["-q", "finetune", "classify", "--data", str(data), "--from-scratch",
               "--tokenizer", str(pretraining_data["tokenizer"]), "--max-steps", "4",
               "--batch-size", "4", "--bpe-dropout", "0.1", "--out", str(run)]  # fmt: skip
    assert main([*command, "--segmentations", "3"]) == 0
    report = json.loads((run / "report" / "metrics.json").read_text())
    assert report["segmentations"] == 3 and report["rc_average"] is True
    stored = np.load(run / "report" / "test_predictions.npz")["probabilities"][:, 0]

    predictor = load_predictor(run / "model", device="cpu")
    assert (predictor.segmentations, predictor.bpe_dropout) == (3, 0.1)
    model = predictor.model

    @torch.no_grad()
    def alone(pieces: list[int]) -> float:
        ids = torch.tensor([[tokenizer.cls_id, *pieces, tokenizer.sep_id]])
        return torch.sigmoid(model(ids, None, torch.ones_like(ids, dtype=torch.bool)).logits)

    oracle = [
        np.mean([float(alone(sampled_cut(tokenizer, strand, 0.1, cut)))
                 for strand in (sequence, reverse_complement(sequence)) for cut in range(3)])
        for sequence in sequences
    ]  # fmt: skip
    assert np.allclose(stored, oracle, atol=1e-5)
    assert np.allclose(predictor.predict(sequences)[:, 0], oracle, atol=1e-5)
    own_cut = load_predictor(run / "model", device="cpu", segmentations=0)
    assert not np.allclose(own_cut.predict(sequences)[:, 0], oracle, atol=1e-4)
    fasta = write(tmp_path / "test.fa", "".join(f">t{i}\n{q}\n" for i, q in enumerate(sequences)))
    for option, expected in (([], oracle), (["--segmentations", "0"], own_cut.predict(sequences))):
        out = tmp_path / "scores.tsv"
        assert main(["-q", "score", "--model", str(run / "model"), "--fasta", str(fasta),
                     "--out", str(out), *option]) == 0  # fmt: skip
        scored = np.loadtxt(out, delimiter="\t", skiprows=1, usecols=2)
        assert np.allclose(scored, np.ravel(expected), atol=1e-5)

    # the finished run is evaluated again with another K: resumed, not refused or retrained
    weights = safetensors.torch.load_file(str(run / "model" / "model.safetensors"))
    assert main([*command, "--segmentations", "5"]) == 0
    assert json.loads((run / "report" / "metrics.json").read_text())["segmentations"] == 5
    kept = safetensors.torch.load_file(str(run / "model" / "model.safetensors"))
    assert all(torch.equal(weights[name], kept[name]) for name in weights)

    capsys.readouterr()
    plain = [arg for arg in command if arg not in ("--bpe-dropout", "0.1")]
    assert main([*plain[:-1], str(tmp_path / "bad"), "--segmentations", "2"]) == 1
    error = capsys.readouterr().err.strip()
    assert "segmentations averages BPE-dropout cuts: give bpe_dropout too" in error
    assert len(error.splitlines()) == 1 and not (tmp_path / "bad" / "model").exists()
    assert main([*plain[:-1], str(tmp_path / "own"), "--max-steps", "1"]) == 0
    with pytest.raises(CheckpointError, match="fine-tuned without BPE-dropout"):
        load_predictor(tmp_path / "own" / "model", device="cpu", segmentations=2)


def test_a_rerun_with_another_recipe_or_start_is_refused_not_resumed(
    tmp_path, pretraining_data, capsys
):
    """A fine-tuning folder's checkpoints belong to one recipe and one pretrained model: a
    rerun into it with either changed stops with one line instead of continuing them."""
    import safetensors.torch
    import torch

    from genobird.corpus import Tokenizer
    from genobird.model import BigBirdConfig, BigBirdForPretraining, save_pretrained

    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    shape = dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                 max_position=256, block_size=32)  # fmt: skip
    pretrained = tmp_path / "pretrained"

    def pretrain(seed: int) -> None:
        torch.manual_seed(seed)
        model = BigBirdForPretraining(BigBirdConfig(vocab_size=tokenizer.vocab_size, **shape))
        save_pretrained(model, pretrained)
        tokenizer.save(pretrained)

    pretrain(seed=0)
    data = _random_classify_data(tmp_path / "d.h5", count=64, seed=6)
    output = tmp_path / "run"
    command = ["-q", "finetune", "classify", "--data", str(data), "--model", str(pretrained),
               "--out", str(output), "--max-steps", "4", "--checkpoint-every", "2"]  # fmt: skip
    assert main(command) == 0
    tuned = safetensors.torch.load_file(str(output / "model" / "model.safetensors"))
    assert main(command) == 0  # the same run again: resumed from its last checkpoint

    assert main([*command, "--bpe-dropout", "0.1"]) == 1
    error = capsys.readouterr().err.strip()
    assert (
        "step-00000004 was written by a run with other settings (task.bpe_dropout: 0.0 -> 0.1)"
        in error
    )
    assert error.endswith(f"delete {output / 'checkpoints'} to start afresh")
    assert len(error.splitlines()) == 1
    assert main([*command, "--max-steps", "6"]) == 1
    assert "training.max_steps: 4 -> 6" in capsys.readouterr().err
    pretrain(seed=1)  # the pretrained model rebuilt in place: another start
    assert main(command) == 1
    assert "pretrained_weights: " in capsys.readouterr().err
    kept = safetensors.torch.load_file(str(output / "model" / "model.safetensors"))
    assert all(torch.equal(tuned[name], kept[name]) for name in tuned)  # nothing overwritten
