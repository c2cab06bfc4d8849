"""Chromatin data sets from your own peaks: genomes in several files, held-out regions
with no leak of test DNA into training, features assayed on part of the genome, and
real ENCODE peaks (skipped without ../shared/data)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch
from conftest import write

from genobird.cli import main
from genobird.datasets.chromatin import (
    AssayedMasks,
    ChromatinSpec,
    build_chromatin_dataset,
    label_genome_bins,
    profile_labels,
)
from genobird.datasets.metrics import mean_auroc, multilabel_metrics
from genobird.datasets.splits import GenomeSplit, HeldOutRegion, parse_held_out
from genobird.datasets.windows import MISSING_LABEL, WindowDataset, label_values, read_metadata
from genobird.errors import ConfigError, FormatError, InputError, RegionError
from genobird.genome import Reference, ReferenceSet, open_reference, reverse_complement
from genobird.genome.demo import MOTIFS
from genobird.inputs import central
from genobird.model.classifier import masked_bce


def _random_fasta(path, contigs: dict[str, int], seed: int = 0):
    rng = np.random.default_rng(seed)
    text = ""
    for name, length in contigs.items():
        bases = "".join(rng.choice(list("ACGT"), length))
        text += f">{name}\n" + "\n".join(bases[i : i + 60] for i in range(0, length, 60)) + "\n"
    return write(path, text)


# --------------------------------------------------------------------------- reference set
def test_several_fasta_files_read_as_one_genome(tmp_path):
    a = _random_fasta(tmp_path / "a.fa", {"chr1": 500, "chr2": 300}, seed=1)
    b = _random_fasta(tmp_path / "b.fa", {"chr3": 400}, seed=2)
    genome = open_reference([a, b])
    assert isinstance(genome, ReferenceSet)
    assert genome.lengths == {"chr1": 500, "chr2": 300, "chr3": 400}
    assert genome.fetch("3", 10, 20) == Reference(b).fetch("chr3", 10, 20)  # aliases resolve
    assert genome.fetch("chr1", -5, 5, pad=True) == "N" * 5 + Reference(a).fetch("chr1", 0, 5)
    assert "chr2" in genome and "chr4" not in genome
    with pytest.raises(KeyError, match=r"not in a.fa \+ b.fa"):
        genome.resolve("chr4")
    assert isinstance(open_reference([a]), Reference) and open_reference(genome) is genome


def test_a_contig_in_two_files_is_a_one_line_error(tmp_path):
    a = _random_fasta(tmp_path / "a.fa", {"chr1": 100})
    b = _random_fasta(tmp_path / "b.fa", {"chr1": 100})
    with pytest.raises(FormatError, match=r"'chr1' is in both a\.fa and b\.fa"):
        open_reference([a, b]).lengths  # noqa: B018


# --------------------------------------------------------------------------- splits
def test_held_out_entries_are_chromosomes_regions_or_contigs_with_colons():
    contigs = ["chr19", "22:20000001-21000000"]
    assert parse_held_out("chr22", contigs) == HeldOutRegion("chr22")
    assert parse_held_out("chr19:2,600,001-3,119,000", contigs) == HeldOutRegion(
        "chr19", 2_600_000, 3_119_000
    )
    assert parse_held_out("22:20000001-21000000", contigs) == HeldOutRegion("22:20000001-21000000")
    with pytest.raises(RegionError, match="neither a contig of the reference nor a region"):
        parse_held_out("chr19:abc", contigs)


def test_a_window_reaching_into_a_higher_split_is_left_out():
    split = GenomeSplit.parse(["chr2"], ["chr1:10,001-20,000"])
    # bins: by their own position, test before validation
    assert split.split_of("chr1", 10_000, 10_200) == "test"
    assert split.split_of("1", 15_000, 15_200) == "test"  # chr1 and 1 are one chromosome
    assert split.split_of("chr2", 0, 200) == "valid"
    assert split.split_of("chr1", 9_800, 10_000) == "train"
    # a training bin whose context reaches the test region is left out; one further is kept
    assert split.window_split("chr1", 9_800, 10_000, 5_900, 13_900) is None
    assert split.window_split("chr1", 5_000, 5_200, 1_100, 9_100) == "train"
    # a test bin may read context outside its region
    assert split.window_split("chr1", 10_000, 10_200, 6_100, 14_100) == "test"


def test_no_test_dna_is_read_in_training_or_validation(demo_reference, tmp_path):
    """Every training and validation window lies wholly outside every test region, and
    every training window outside the validation regions: the guard, on a data set."""
    out = tmp_path / "c.h5"
    spec = ChromatinSpec(
        context=2000,
        valid_chromosomes=("chr3", "chr1:50,001-90,000"),
        test_chromosomes=("chrX", "chr1:100,001-140,000"),
    )
    build_chromatin_dataset(
        demo_reference / "features.tsv", demo_reference / "genome.fa", out, spec
    )
    with h5py.File(out, "r") as handle:
        chroms = handle["chrom"][:].astype(str)
        starts, ends = handle["start"][:], handle["end"][:]
        splits = handle["split"][:].astype(str)
    test_regions = [("chrX", 0, 1 << 40), ("chr1", 100_000, 140_000)]
    valid_regions = [("chr3", 0, 1 << 40), ("chr1", 50_000, 90_000)]

    def reaches(regions, row):
        return any(c == chroms[row] and starts[row] < e and s < ends[row] for c, s, e in regions)

    for row in range(len(splits)):
        if splits[row] != "test":
            assert not reaches(test_regions, row), (chroms[row], starts[row], splits[row])
        if splits[row] == "train":
            assert not reaches(valid_regions, row), (chroms[row], starts[row])
    on_chr1 = chroms == "chr1"
    assert {"train", "valid", "test"} <= set(splits[on_chr1])  # the regions did split chr1
    # and the guard left a gap: no training window starts within a context of the test region
    train_chr1 = on_chr1 & (splits == "train")
    assert not ((ends[train_chr1] > 100_000) & (starts[train_chr1] < 140_000)).any()


# --------------------------------------------------------------------------- assayed
def _two_tables(tmp_path, demo_reference, assayed_column: str | None):
    """A table of two demo features, and one of a 'histone' feature measured on chr1 only."""
    features = (demo_reference / "features.tsv").read_text().splitlines()
    header, rows = features[0].split("\t"), [line.split("\t") for line in features[1:3]]
    peak = header.index("peak_file")
    lines = ["name\tcategory\tpeak_file"] + [
        f"{row[header.index('name')]}\t{row[header.index('category')]}\t"
        f"{demo_reference / row[peak]}"
        for row in rows
    ]
    tf = write(tmp_path / "tf.tsv", "\n".join(lines) + "\n")
    first_peaks = demo_reference / rows[0][peak]
    column = "\tassayed" if assayed_column is not None else ""
    value = f"\t{assayed_column}" if assayed_column is not None else ""
    histone = write(
        tmp_path / "histone.tsv",
        f"name\tcategory\tpeak_file{column}\nmark\tHistone\t{first_peaks}{value}\n",
    )
    return tf, histone


def test_labels_outside_where_a_feature_was_assayed_are_unknown(demo_reference, tmp_path):
    tf, histone = _two_tables(tmp_path, demo_reference, "chr1")
    out = tmp_path / "c.h5"
    spec = ChromatinSpec(context=1000, valid_chromosomes=("chr3",), test_chromosomes=("chrX",))
    windows = build_chromatin_dataset([tf, histone], demo_reference / "genome.fa", out, spec)
    assert windows.feature_names[-1] == "mark" and len(windows.feature_names) == 3
    with h5py.File(out, "r") as handle:
        labels, chroms = handle["labels"][:], handle["chrom"][:].astype(str)
    mark = labels[:, -1]
    assert (mark[chroms != "chr1"] == MISSING_LABEL).all()
    assert set(np.unique(mark[chroms == "chr1"])) == {0, 1}
    # the same peaks as the first TF feature, where the mark was measured
    assert np.array_equal(mark[chroms == "chr1"], labels[chroms == "chr1", 0])
    assert (labels[:, :2] != MISSING_LABEL).all()
    meta = read_metadata(out)
    assert meta["missing_labels"] == int((chroms != "chr1").sum())
    assert meta["positives"][-1] == int((mark == 1).sum())  # unknown is not counted


def test_assayed_given_for_a_whole_table_from_the_command_line(demo_reference, tmp_path, capsys):
    tf, histone = _two_tables(tmp_path, demo_reference, None)
    out = tmp_path / "c.h5"
    assert (
        main(
            [
                "-q",
                "dataset",
                "chromatin",
                "--features",
                str(tf),
                str(histone),
                "--assayed",
                f"{histone}=chr1,chr2",
                "--reference",
                str(demo_reference / "genome.fa"),
                "--context-bp",
                "1000",
                "--out",
                str(out),
                "--valid-chromosomes",
                "chr3",
                "--test-chromosomes",
                "chrX",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "train:" in printed and "test:" in printed and "positives per feature" in printed
    with h5py.File(out, "r") as handle:
        labels, chroms = handle["labels"][:], handle["chrom"][:].astype(str)
    outside = ~np.isin(chroms, ["chr1", "chr2"])
    assert (labels[outside, -1] == MISSING_LABEL).all()
    assert (labels[~outside, -1] != MISSING_LABEL).all()


def test_a_scale_column_is_kept_with_the_data_set(demo_reference, tmp_path):
    """A table's optional scale column (local, broad) travels with the data set, for the
    context ablation's medians per scale; a table without one gives empty scales."""
    tf, histone = _two_tables(tmp_path, demo_reference, None)
    lines = tf.read_text().splitlines()
    rows = [f"{line}\t{scale}" for line, scale in zip(lines[1:], ("local", "broad"), strict=True)]
    scaled = write(tmp_path / "scaled.tsv", "\n".join([lines[0] + "\tscale", *rows]) + "\n")
    spec = ChromatinSpec(context=600, valid_chromosomes=("chr3",), test_chromosomes=("chrX",))
    out = tmp_path / "c.h5"
    build_chromatin_dataset([scaled, histone], demo_reference / "genome.fa", out, spec)
    assert read_metadata(out)["scales"] == ["local", "broad", ""]
    build_chromatin_dataset([tf], demo_reference / "genome.fa", out, spec)
    assert read_metadata(out)["scales"] == []


@pytest.mark.parametrize(
    ("assayed", "message"),
    [
        ("chrQ", "assayed on 'chrQ', which is not a contig"),
        ("missing.bed", "assayed regions file missing.bed not found"),
    ],
)
def test_bad_assayed_values_are_one_line_errors(demo_reference, tmp_path, capsys, assayed, message):
    tf, histone = _two_tables(tmp_path, demo_reference, assayed)
    assert (
        main(
            [
                "-q",
                "dataset",
                "chromatin",
                "--features",
                str(tf),
                str(histone),
                "--reference",
                str(demo_reference / "genome.fa"),
                "--context-bp",
                "600",
                "--out",
                str(tmp_path / "c.h5"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c.h5").exists()


def test_a_missing_peak_file_is_a_one_line_error_naming_the_feature(tmp_path, capsys):
    fasta = _random_fasta(tmp_path / "g.fa", {"chr1": 2000})
    table = write(tmp_path / "f.tsv", "name\tcategory\tpeak_file\nX\tTF\tgone.bed\n")
    assert (
        main(
            [
                "-q",
                "dataset",
                "chromatin",
                "--features",
                str(table),
                "--reference",
                str(fasta),
                "--out",
                str(tmp_path / "c.h5"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "feature 'X': peak file gone.bed not found" in err and "Traceback" not in err


def test_a_feature_without_test_positives_is_a_warning_naming_it(demo_reference, tmp_path, caplog):
    tf, histone = _two_tables(tmp_path, demo_reference, "chr1")
    spec = ChromatinSpec(context=600, valid_chromosomes=("chr3",), test_chromosomes=("chrX",))
    build_chromatin_dataset([tf, histone], demo_reference / "genome.fa", tmp_path / "c.h5", spec)
    assert "no positive in the test split" in caplog.text and "mark" in caplog.text


# --------------------------------------------------------------------------- unknown labels
def test_unknown_labels_add_nothing_to_the_loss_or_its_gradient():
    torch.manual_seed(0)
    logits = torch.randn(6, 3, requires_grad=True)
    raw = [[1, 0, 255], [0, 255, 1], [1, 1, 0], [0, 0, 0], [255, 255, 255], [1, 0, 1]]
    labels = torch.tensor(label_values(np.array(raw, np.uint8)))
    weight = torch.tensor(2.0)
    loss = masked_bce(logits, labels, weight)
    loss.backward()
    known = ~torch.isnan(labels)
    expected = torch.nn.functional.binary_cross_entropy_with_logits(
        logits[known], labels[known], pos_weight=weight
    )
    assert torch.allclose(loss, expected)
    assert (logits.grad[~known] == 0).all() and (logits.grad[known] != 0).all()
    # all known: the plain mean, as before unknown labels existed
    full = torch.randint(0, 2, (6, 3)).float()
    assert torch.allclose(
        masked_bce(logits, full, weight),
        torch.nn.functional.binary_cross_entropy_with_logits(logits, full, pos_weight=weight),
    )


def test_metrics_count_each_feature_over_its_known_labels_only():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, (200, 2)).astype(np.uint8)
    labels[:120, 1] = MISSING_LABEL
    probabilities = rng.random((200, 2))
    result = multilabel_metrics(label_values(labels), probabilities, ["a", "b"], ["TF", "Histone"])
    assert result["per_feature"]["b"]["examples"] == 80
    assert result["per_feature"]["b"]["auroc"] == pytest.approx(
        roc_auc_score(labels[120:, 1], probabilities[120:, 1])
    )
    assert result["median_auprc_by_category"].keys() == {"TF", "Histone"}
    assert mean_auroc(labels, probabilities) == pytest.approx(
        (roc_auc_score(labels[:, 0], probabilities[:, 0]) + result["per_feature"]["b"]["auroc"]) / 2
    )


# --------------------------------------------------------------------------- contexts
def test_a_window_read_at_a_shorter_context_keeps_its_centre(demo_reference, tmp_path):
    out = tmp_path / "c.h5"
    spec = ChromatinSpec(
        context=2000, valid_chromosomes=("chr3",), test_chromosomes=("chrX",), max_bins=50
    )
    build_chromatin_dataset(
        demo_reference / "features.tsv", demo_reference / "genome.fa", out, spec
    )
    assert central("AACCGGTT", 4) == "CCGG" and central("ACGT", None) == "ACGT"
    with h5py.File(out, "r") as handle:
        chrom, start = handle["chrom"][0].decode(), int(handle["start"][0])
    reference = Reference(demo_reference / "genome.fa")
    # the bin's centre is the window's centre at both lengths: 1 kb cut from the middle
    assert central(reference.fetch(chrom, start, start + 2000, pad=True), 1000) == (
        reference.fetch(chrom, start + 500, start + 1500, pad=True)
    )

    class Pieces:  # a tokenizer of one piece per base
        cls_id, sep_id = 2, 3

        def encode(self, sequence, normalise=False):
            return [5] * len(sequence)

    dataset = WindowDataset(out, "train", Pieces(), max_tokens=10_000, window_bp=1000)
    assert len(dataset[0]["input_ids"]) == 1000 + 2


# --------------------------------------------------------------------------- real peaks
@pytest.mark.shared_data
def test_real_encode_peaks_with_histone_marks_measured_on_chr19_only(shared_data, tmp_path):
    encode = shared_data / "chromatin" / "encode_hg19"
    genome = shared_data / "genome"
    fasta = [
        genome / "hg19_chr19_0-3119000_softmasked.fa",
        genome / "hg19_chr20_0-2Mb.fa",
        genome / "hg19_chr22_0-21Mb.fa.gz",
    ]
    histone = encode / "features_h3k4me3_chr19.tsv"
    spec = ChromatinSpec(
        context=1000,
        valid_chromosomes=("chr20",),
        test_chromosomes=("chr22", "chr19:2,600,001-3,119,000"),
        assayed={str(histone): "chr19"},
    )
    out = tmp_path / "encode.h5"
    windows = build_chromatin_dataset([encode / "features_tf.tsv", histone], fasta, out, spec)
    meta = read_metadata(out)
    assert len(meta["feature_names"]) == 109 + 6
    categories = np.array(meta["categories"])
    with h5py.File(out, "r") as handle:
        labels, chroms = handle["labels"][:], handle["chrom"][:].astype(str)
        splits = handle["split"][:].astype(str)
    histones = categories == "Histone"
    # H3K4me3 is unknown off chr19 and known on it; the TF labels are known everywhere
    assert (labels[np.ix_(chroms != "chr19", histones)] == MISSING_LABEL).all()
    assert (labels[np.ix_(chroms == "chr19", histones)] != MISSING_LABEL).all()
    assert (labels[:, ~histones] != MISSING_LABEL).all()
    # every piece holds windows, the test split holds both chr22 and the end of chr19
    assert {"chr19", "chr20", "chr22"} == set(chroms)
    assert set(chroms[splits == "test"]) == {"chr19", "chr22"}
    test_histone = np.array(meta["positives_by_split"]["test"])[histones]
    assert (test_histone >= 20).all()  # the held-out part of chr19 can evaluate them
    assert len(windows) > 3000


def test_feature_table_errors_still_name_the_table(tmp_path):
    table = write(tmp_path / "f.tsv", "name\tpeak_file\nX\tx.bed\n")
    with pytest.raises(InputError, match="needs columns name, category, peak_file"):
        build_chromatin_dataset(
            table, _random_fasta(tmp_path / "g.fa", {"chr1": 100}), tmp_path / "c.h5"
        )


# --------------------------------------------------------------------------- fine-tuning
def _tiny_pretrained(pretraining_data, directory, position_encoding: str):
    from genobird.corpus.tokenizer import load_tokenizer
    from genobird.model import BigBirdConfig, save_pretrained
    from genobird.model.bigbird import BigBirdForPretraining

    tokenizer = load_tokenizer(pretraining_data["tokenizer"])
    config = BigBirdConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position=64,
        block_size=16,
        num_random_blocks=1,
        pad_token_id=tokenizer.pad_id,
        position_encoding=position_encoding,
    )
    torch.manual_seed(0)
    save_pretrained(BigBirdForPretraining(config), directory)
    tokenizer.save(directory)
    return directory


@pytest.mark.slow
def test_one_data_set_fine_tuned_at_two_contexts(
    demo_reference, pretraining_data, tmp_path, capsys
):
    """--window-bp reads the same bins at a shorter context; a rotary model reads windows
    longer than it was pretrained on (its max_position grows); the saved model scores
    regions at its own context; a wider context than the data's is a one-line error."""
    import json

    data = tmp_path / "c.h5"
    spec = ChromatinSpec(
        context=1200, valid_chromosomes=("chr3",), test_chromosomes=("chrX",), max_bins=200
    )
    build_chromatin_dataset(
        demo_reference / "features.tsv", demo_reference / "genome.fa", data, spec
    )
    pretrained = _tiny_pretrained(pretraining_data, tmp_path / "lm", "rotary")
    reports = {}
    for window in (300, 1200):
        out = tmp_path / f"context-{window}"
        assert (
            main(
                [
                    "-q",
                    "finetune",
                    "chromatin",
                    "--data",
                    str(data),
                    "--out",
                    str(out),
                    "--model",
                    str(pretrained),
                    "--window-bp",
                    str(window),
                    "--max-steps",
                    "4",
                    "--batch-size",
                    "4",
                ]
            )
            == 0
        )
        reports[window] = json.loads((out / "report" / "metrics.json").read_text())
        config = json.loads((out / "model" / "config.json").read_text())
        assert config["task_info"]["window_bp"] == window
        assert reports[window]["window_bp"] == window
    assert reports[300]["max_tokens"] < reports[1200]["max_tokens"]
    assert reports[1200]["max_tokens"] > 64  # beyond the pretrained max_position
    fingerprints = set()
    for window in (300, 1200):
        with np.load(tmp_path / f"context-{window}" / "report" / "test_predictions.npz") as saved:
            fingerprints.add(str(saved["fingerprint"]))
    assert len(fingerprints) == 1  # the same test bins at both contexts
    capsys.readouterr()
    assert (
        main(
            [
                "-q",
                "finetune",
                "chromatin",
                "--data",
                str(data),
                "--out",
                str(tmp_path / "wide"),
                "--model",
                str(pretrained),
                "--window-bp",
                "5000",
                "--max-steps",
                "2",
            ]
        )
        == 1
    )
    assert "--window-bp 5000 is wider than the windows" in capsys.readouterr().err
    absolute = _tiny_pretrained(pretraining_data, tmp_path / "lm-absolute", "absolute")
    assert (
        main(
            [
                "-q",
                "finetune",
                "chromatin",
                "--data",
                str(data),
                "--out",
                str(tmp_path / "abs"),
                "--model",
                str(absolute),
                "--max-tokens",
                "256",
                "--max-steps",
                "2",
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "exceeds the model's max_position 64" in err and "Traceback" not in err


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


# --------------------------------------------------------------------------- profile head
def test_profile_labels_are_the_neighbouring_bins_own(demo_reference, tmp_path):
    """Each window's profile labels are the labels its neighbouring bins get as windows of
    their own (assayed masks included), its own bin in the middle; bins off the
    chromosome are unknown."""
    tf, histone = _two_tables(tmp_path, demo_reference, "chr1")
    spec = ChromatinSpec(
        context=1200,
        valid_chromosomes=("chr3",),
        test_chromosomes=("chrX",),
        negative_ratio=1000,
        profile_bins=5,
    )
    out = tmp_path / "c.h5"
    build_chromatin_dataset([tf, histone], demo_reference / "genome.fa", out, spec)
    meta = read_metadata(out)
    assert (meta["profile_bins"], meta["profile_bin_bp"]) == (5, 200)
    with h5py.File(out, "r") as handle:
        labels, profiles = handle["labels"][:], handle["profile_labels"][:]
        chroms, starts = handle["chrom"][:].astype(str), handle["start"][:]
    assert profiles.shape == (len(labels), 5, 3)
    assert np.array_equal(profiles[:, 2], labels)  # the window's own bin in the middle
    row_of = {(c, int(s)): i for i, (c, s) in enumerate(zip(chroms, starts, strict=True))}
    compared = 0
    for row in range(len(labels)):
        for k in range(5):
            neighbour = row_of.get((chroms[row], int(starts[row]) + (k - 2) * 200))
            if neighbour is not None:
                assert np.array_equal(profiles[row, k], labels[neighbour])
                compared += 1
    assert compared > 4 * len(labels)  # (all bins are windows here, but those near N)
    assert (profiles[chroms != "chr1", :, 2] == MISSING_LABEL).all()  # the mark: chr1 only
    # bins off the chromosome (before its first bin, after its last) are unknown
    bins = label_genome_bins(
        {"c1": 1000, "c2": 600},
        ["c1", "c2"],
        200,
        [{"c1": (np.array([200]), np.array([400])), "c2": (np.array([0]), np.array([200]))}],
        0.5,
    )
    everywhere = AssayedMasks([], None)
    assert profile_labels(bins, 0, 3, everywhere)[:, 0].tolist() == [255, 0, 1]  # c1's first
    assert profile_labels(bins, 4, 3, everywhere)[:, 0].tolist() == [0, 0, 255]  # c1's last
    assert profile_labels(bins, 5, 3, everywhere)[:, 0].tolist() == [255, 1, 0]  # c2's first
    with pytest.raises(ConfigError, match="odd"):
        ChromatinSpec(profile_bins=4)
    with pytest.raises(ConfigError, match="do not fit"):
        ChromatinSpec(context=1000, profile_bins=7)


def test_a_profile_read_on_the_other_strand_reverses_its_bins(
    demo_reference, pretraining_data, tmp_path
):
    from genobird.corpus.tokenizer import load_tokenizer

    tf, _ = _two_tables(tmp_path, demo_reference, None)
    spec = ChromatinSpec(
        context=1000,
        valid_chromosomes=("chr3",),
        test_chromosomes=("chrX",),
        max_bins=50,
        profile_bins=3,
    )
    out = tmp_path / "c.h5"
    build_chromatin_dataset([tf], demo_reference / "genome.fa", out, spec)
    with h5py.File(out, "r") as handle:
        train = np.flatnonzero(handle["split"][:].astype(str) == "train")
        profiles = label_values(handle["profile_labels"][:][train])
    tokenizer = load_tokenizer(pretraining_data["tokenizer"])
    forward = WindowDataset(out, "train", tokenizer, 512, profile_bins=3)
    reverse = WindowDataset(out, "train", tokenizer, 512, profile_bins=3, reverse_complement=True)
    middle = WindowDataset(out, "train", tokenizer, 512, profile_bins=1)  # the central one
    for index in range(len(forward)):
        assert np.array_equal(forward[index]["labels"], profiles[index], equal_nan=True)
        assert np.array_equal(reverse[index]["labels"], profiles[index][::-1], equal_nan=True)
        assert np.array_equal(middle[index]["labels"], profiles[index][1:2], equal_nan=True)
    assert WindowDataset(out, "train", tokenizer, 512)[0]["labels"].shape == (2,)
    for wrong in (2, 5):  # even, or more than stored
        with pytest.raises(InputError, match="give an odd number up to 3"):
            WindowDataset(out, "train", tokenizer, 512, profile_bins=wrong)
    plain = tmp_path / "plain.h5"
    build_chromatin_dataset(
        [tf],
        demo_reference / "genome.fa",
        plain,
        ChromatinSpec(
            context=1000, valid_chromosomes=("chr3",), test_chromosomes=("chrX",), max_bins=50
        ),
    )
    with pytest.raises(InputError, match="--profile-bins"):
        WindowDataset(plain, "train", tokenizer, 512, profile_bins=1)


def test_a_profile_head_learns_the_central_bins_that_fit_its_context():
    """One 15-bin data set serves every context of an ablation: each head learns the
    central odd number of bins that fit in the bases it reads."""
    from genobird.finetuning.build import profile_bins_read

    meta = {"profile_bins": 15, "profile_bin_bp": 200}
    reads = {bp: profile_bins_read(meta, bp) for bp in (200, 400, 1000, 2000, 3000, 4000, 8000)}
    assert reads == {200: 1, 400: 1, 1000: 5, 2000: 9, 3000: 15, 4000: 15, 8000: 15}


@pytest.mark.slow
def test_a_profile_head_fine_tunes_saves_and_scores_from_the_command_line(
    demo_reference, pretraining_data, tmp_path, capsys
):
    """`dataset chromatin --profile-bins` and `finetune chromatin --pooling profile`: the
    run trains on every bin's labels, is evaluated and scored on the window's own bin;
    the saved model scores regions; a narrower context learns the central bins that fit in
    it; a data set without profile labels, or bins wider than the context read, are
    one-line errors."""
    import json

    data, plain = tmp_path / "profile.h5", tmp_path / "plain.h5"
    base = [
        "-q",
        "dataset",
        "chromatin",
        "--features",
        str(demo_reference / "features.tsv"),
        "--reference",
        str(demo_reference / "genome.fa"),
        "--context-bp",
        "1000",
        "--valid-chromosomes",
        "chr3",
        "--test-chromosomes",
        "chrX",
        "--max-bins",
        "120",
    ]
    assert main([*base, "--out", str(data), "--profile-bins", "3"]) == 0
    assert main([*base, "--out", str(plain)]) == 0
    pretrained = _tiny_pretrained(pretraining_data, tmp_path / "lm", "rotary")
    out = tmp_path / "run"
    assert (
        main(
            [
                "-q",
                "finetune",
                "chromatin",
                "--data",
                str(data),
                "--out",
                str(out),
                "--model",
                str(pretrained),
                "--pooling",
                "profile",
                "--max-steps",
                "3",
                "--batch-size",
                "4",
            ]
        )
        == 0
    )
    head = json.loads((out / "model" / "config.json").read_text())["head"]
    assert head["pooling"] == "profile" and head["profile_bins"] == 3
    assert head["centre_fraction"] == pytest.approx(0.2)
    with np.load(out / "report" / "test_predictions.npz") as saved:  # the windows' own bins
        assert saved["probabilities"].shape == (read_metadata(data)["counts"]["test"], 16)
    bed = write(tmp_path / "r.bed", "chr1\t10000\t11000\nchr2\t5000\t6000\n")
    scored = tmp_path / "s.tsv"
    assert (
        main(
            [
                "-q",
                "score",
                "--model",
                str(out / "model"),
                "--bed",
                str(bed),
                "--reference",
                str(demo_reference / "genome.fa"),
                "--out",
                str(scored),
            ]
        )
        == 0
    )
    assert len(scored.read_text().splitlines()) == 3
    capsys.readouterr()
    assert (
        main(
            [
                "-q",
                "finetune",
                "chromatin",
                "--data",
                str(plain),
                "--out",
                str(tmp_path / "x"),
                "--model",
                str(pretrained),
                "--pooling",
                "profile",
                "--max-steps",
                "1",
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "needs profile labels" in err and "--profile-bins" in err and "Traceback" not in err
    narrow = tmp_path / "narrow"  # 400 bp hold 2 of the 3 bins: the central one is learnt
    assert (
        main(
            [
                "-q",
                "finetune",
                "chromatin",
                "--data",
                str(data),
                "--out",
                str(narrow),
                "--model",
                str(pretrained),
                "--pooling",
                "profile",
                "--window-bp",
                "400",
                "--max-steps",
                "1",
            ]
        )
        == 0
    )
    head = json.loads((narrow / "model" / "config.json").read_text())["head"]
    assert head["profile_bins"] == 1 and head["centre_fraction"] == pytest.approx(0.5)
    assert (
        main(
            [
                "-q",
                "finetune",
                "chromatin",
                "--data",
                str(data),
                "--out",
                str(tmp_path / "y"),
                "--model",
                str(pretrained),
                "--pooling",
                "profile",
                "--window-bp",
                "150",
                "--max-steps",
                "1",
            ]
        )
        == 1
    )
    assert "profile bins are 200 bp, wider than the 150 bp read" in capsys.readouterr().err
