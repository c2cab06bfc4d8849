"""A classifier with base readers starts as genobird's baselines, on real windows through
the path a user takes: its logits on every window, strand by strand, are the CNN
baseline's and the k-mer LR's (scikit-learn's own decision function) blended, for every
data-set kind, at 70 to 1,000 bp, with soft-masked and N bases; and `finetune`'s check
before the first step reports the blend's validation AUROC. The real-data tests skip
without ../shared."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from genobird.cli import main
from genobird.genome import reverse_complement
from tests.conftest import demo_promoter_run, write

# float rounding only: float32 CNN and counts against float64 scikit-learn
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def real_model(shared_data, tmp_path_factory) -> Path:
    """A language-model directory of human-mini's kind (composed embeddings, rotary
    positions, a base convolution that spells the tokens) over a 2,000-piece BPE
    vocabulary trained on real hg19 DNA. Its weights are fresh: a classifier's start
    reads none of the encoder's (the head's weights on it are zero)."""
    from genobird.corpus import DocumentSpec, VocabSpec, train_vocabulary, write_documents
    from genobird.model import BigBirdConfig, BigBirdForPretraining, save_pretrained

    folder = tmp_path_factory.mktemp("real_model")
    documents = folder / "documents.txt"
    genome = shared_data / "genome" / "hg19_chr20_0-2Mb.fa"
    write_documents(genome, documents, DocumentSpec(passes=1, seed=0), None, progress=False)
    tokenizer = train_vocabulary(documents, folder / "tokenizer.model", VocabSpec(2000))
    config = BigBirdConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position=512,
        block_size=64,
        num_random_blocks=3,
        composed_token_embeddings=True,
        position_encoding="rotary",
        base_conv_channels=16,
        base_conv_width=9,
        pad_token_id=tokenizer.pad_id,
    )
    torch.manual_seed(0)
    model = BigBirdForPretraining(config)
    model.encoder.embeddings.set_vocabulary(tokenizer.pieces)
    save_pretrained(model, folder / "model")
    tokenizer.save(folder / "model")
    return folder / "model"


def gue_subset(shared_data, folder: Path, rows: int = 400, with_n: bool = False) -> Path:
    """A `dataset classify` data set of rows drawn from GUE human TF 0 (101 bp; `with_n`:
    every fifth sequence given a run of N, as a user's sequences may hold)."""
    source = shared_data / "tasks" / "gue_human_tf" / "0"
    paths = []
    for name, count in (("train", rows), ("dev", rows // 2), ("test", rows // 2)):
        header, *rows_of = (source / f"{name}.csv").read_text().splitlines()
        chosen = np.random.default_rng(0).choice(len(rows_of), count, replace=False)
        lines = [rows_of[i] for i in sorted(chosen)]  # the files are sorted by label
        if with_n:
            lines = [
                line if i % 5 else f"{line[:30]}NNNNNNN{line[37:]}" for i, line in enumerate(lines)
            ]
        lines = [header, *lines]
        paths.append(write(folder / f"{name}.csv", "\n".join(lines) + "\n"))
    data = folder / "gue0.h5"
    assert (
        main(
            [
                "-q",
                "dataset",
                "classify",
                "--input",
                str(paths[0]),
                "--valid",
                str(paths[1]),
                "--test",
                str(paths[2]),
                "--out",
                str(data),
            ]
        )
        == 0
    )
    return data


def epdnew_subset(shared_data, folder: Path, promoters: int = 400) -> Path:
    """A `dataset promoter-sequences` data set of EPDnew TATA promoters (300 bp) and their
    DeePromoter negatives."""
    lines = (shared_data / "promoters" / "hs_TATA_promoters_300bp.txt").read_text().split()
    positives = write(folder / "tata.txt", "\n".join(lines[:promoters]) + "\n")
    data = folder / "tata.h5"
    assert (
        main(
            [
                "-q",
                "dataset",
                "promoter-sequences",
                "--positives",
                str(positives),
                "--out",
                str(data),
            ]
        )
        == 0
    )
    return data


def start_and_oracle(
    model_dir: Path,
    data: Path,
    folder: Path,
    window_bp: int | None,
    rc_average: bool,
    base_cnn_channels=16,
    base_kmers=5,
    pooling="mean",
    base_cnn_architecture="cnn",
    base_blend="one",
    base_strands=None,
):
    """A classifier built and started as `finetune` builds and starts it, its logits on
    the validation windows of each strand through the evaluation path (WindowDataset, the
    collate that pads batches), and the baselines' own logits on the same windows: the
    cached CNN run on each window's bases, and the k-mer LR refitted (seeded, so the same
    fit) and read through scikit-learn's decision function. With `base_strands` both (the
    default where the run reads both strands), the baselines read both strands of each
    window: the CNN's logits averaged over them, as `genobird baseline cnn` averages
    them, and the k-mer LR fitted and read on both strands' counts."""
    from torch.utils.data import DataLoader

    from genobird.baselines import load_baseline_data
    from genobird.baselines.cnn import encode
    from genobird.baselines.kmer import fit_kmer_lr, kmer_matrix
    from genobird.corpus.tokenizer import load_tokenizer
    from genobird.datasets.windows import WindowDataset
    from genobird.finetuning import base_start, reader_baselines
    from genobird.finetuning.build import build_model
    from genobird.finetuning.job import FinetuneJob
    from genobird.finetuning.recipe import Recipe
    from genobird.finetuning.resolve import resolve
    from genobird.inputs import central, window_collate
    from genobird.model.base_readers import base_kmer_lengths

    tokenizer = load_tokenizer(model_dir)
    base_strands = base_strands or ("both" if rc_average else "one")
    both = base_strands == "both"
    spec = Recipe.of(
        window_bp=window_bp,
        pooling=pooling,
        dropout=0.3,
        base_cnn_channels=base_cnn_channels,
        base_kmers=base_kmers,
        base_cnn_architecture=base_cnn_architecture,
        base_blend=base_blend,
        rc_average=rc_average,
        base_strands=base_strands,
    )
    job = FinetuneJob.open(data, folder, model_dir)
    spec, meta = resolve(spec, job).recipe, job.meta
    model = build_model(spec, job)
    record = base_start.start_from_baselines(
        model, spec, data, folder, folder / "cache", rc_average
    )
    model.eval()
    strands = (False, True) if rc_average else (False,)
    ours = []
    for reverse in strands:
        dataset = WindowDataset(
            data,
            "valid",
            tokenizer,
            spec.data.max_tokens,
            reverse_complement=reverse,
            window_bp=window_bp,
        )
        loader = DataLoader(
            dataset, batch_size=16, collate_fn=window_collate(model, tokenizer.pad_id)
        )
        with torch.no_grad():
            ours.append(
                torch.cat(
                    [model(b["input_ids"], None, b["attention_mask"]).logits for b in loader]
                ).numpy()
            )
    baseline_data = load_baseline_data(data, spec.optim.seed)
    windows = [central(s, window_bp) for s in baseline_data.valid.sequences]
    blend = record.get("base_blend", {})
    weight = blend.get("cnn_weight", 1.0 if base_cnn_channels else 0.0)
    if by_category := blend.get("cnn_weight_by_category"):  # one weight per output
        weight = np.array([by_category[category] for category in meta["categories"]])
    theirs = []
    if base_cnn_channels:
        cnn = reader_baselines.base_cnn(
            baseline_data, spec.head.base, window_bp, spec.optim.seed, folder / "cache", rc_average
        )[0]
    kmer_lr = None
    if base_kmers:
        kmer_lr = fit_kmer_lr(
            baseline_data,
            base_kmer_lengths(base_kmers),
            seed=spec.optim.seed,
            window_bp=window_bp,
            both_strands=both,
        )
    for reverse in strands:
        strand = [reverse_complement(w) for w in windows] if reverse else windows
        logits = np.zeros_like(ours[0], dtype=np.float64)
        if base_cnn_channels:
            with torch.no_grad():  # the CNN baseline's own forward: both strands averaged
                cnn_logits = torch.cat(
                    [
                        cnn(encode([w]), rc_average=both)
                        if both
                        else cnn.strand_logits(encode([w]))
                        for w in strand
                    ]
                )
            logits += weight * cnn_logits.double().numpy()
        if kmer_lr is not None:
            features = kmer_lr.scaler.transform(kmer_matrix(strand, kmer_lr.ks, both))
            # an output with one class in training: its rate's log-odds, kept finite
            rates = [
                min(max(m, 1e-4), 1 - 1e-4) if isinstance(m, float) else None
                for m in kmer_lr.models
            ]
            columns = [
                m.decision_function(features)
                if rate is None
                else np.full(len(strand), np.log(rate / (1 - rate)))
                for m, rate in zip(kmer_lr.models, rates, strict=True)
            ]
            logits += (1 - weight) * np.stack(columns, axis=1)
        # with positives weighted w (chromatin: 8), the weighted loss's optimum: + log w
        theirs.append(logits + np.log(spec.optim.pos_weight))
    return np.stack(ours), np.stack(theirs), record, spec, windows


def check_start(model_dir, data, folder, window_bp, rc_average, **readers):
    ours, theirs, record, spec, windows = start_and_oracle(
        model_dir, data, folder, window_bp, rc_average, **readers
    )
    assert ours.shape == theirs.shape and ours.shape[0] == (2 if rc_average else 1)
    assert np.abs(ours - theirs).max() < TOLERANCE, np.abs(ours - theirs).max()
    # the start's recorded validation AUROC is the blend's, scored as evaluation scores
    from genobird.baselines import load_baseline_data
    from genobird.datasets.metrics import mean_auroc

    labels = load_baseline_data(data, 0).valid.labels
    probabilities = (1 / (1 + np.exp(-theirs))).mean(axis=0)
    assert record["start_validation_auroc"] == pytest.approx(
        mean_auroc(labels, probabilities), abs=1e-5
    )
    return windows, spec


@pytest.mark.slow
def test_the_start_is_the_baselines_on_real_gue_and_epdnew_windows(
    real_model, shared_data, tmp_path
):
    """classify (GUE TF 0, 101 bp, with N runs) on both strands, and from the CNN alone or
    the k-mer LR alone; promoter (EPDnew TATA) at 300 bp and read as its central 70 bp,
    one strand: the windows whose token counts vary most (a 70 bp window is cut into 4
    to 25 pieces)."""
    gue = gue_subset(shared_data, tmp_path / "gue", with_n=True)
    windows, _ = check_start(real_model, gue, tmp_path / "g", None, rc_average=True)
    assert any("N" in w for w in windows) and {len(w) for w in windows} == {101}
    check_start(real_model, gue, tmp_path / "cnn", None, rc_average=False, base_kmers=0)
    check_start(real_model, gue, tmp_path / "kmers", None, rc_average=True, base_cnn_channels=0)
    # base readers that read each input's one strand under a run that averages both (the
    # chromatin-states pipeline's reading, as its k-mer LR arm fits one strand)
    check_start(real_model, gue, tmp_path / "one", None, rc_average=True, base_strands="one")
    tata = epdnew_subset(shared_data, tmp_path / "tata")
    for window_bp in (70, None):
        windows, _ = check_start(
            real_model, tata, tmp_path / f"t{window_bp}", window_bp, rc_average=False
        )
        assert {len(w) for w in windows} == {window_bp or 300}


def chr19_windows(shared_data, table: Path, out: Path, *options: str) -> Path:
    """A `dataset chromatin` data set of 300 1,000 bp bins of the soft-masked hg19 chr19
    piece labelled by `table` (validation chr19:2.0-2.5 Mb, test from 2.5 Mb)."""
    assert (
        main(
            [
                "-q",
                "dataset",
                "chromatin",
                "--features",
                str(table),
                "--reference",
                str(shared_data / "genome" / "hg19_chr19_0-3119000_softmasked.fa"),
                "--out",
                str(out),
                "--context-bp",
                "1000",
                "--max-bins",
                "300",
                "--chromosomes",
                "chr19",
                "--valid-chromosomes",
                "chr19:2000001-2500000",
                "--test-chromosomes",
                "chr19:2500001-3119000",
                *options,
            ]
        )
        == 0
    )
    return out


@pytest.mark.slow
def test_the_start_is_the_baselines_on_real_soft_masked_chromatin_windows(
    real_model, shared_data, tmp_path
):
    """chromatin: 1,000 bp windows of the soft-masked hg19 chr19 piece labelled by four
    Roadmap H3K4me3 tables (multi-label), both strands."""
    table = shared_data / "chromatin" / "encode_hg19" / "features_h3k4me3_chr19.tsv"
    data = chr19_windows(shared_data, table, tmp_path / "chromatin.h5")
    windows, _ = check_start(real_model, data, tmp_path / "both", None, rc_average=True)
    assert {len(w) for w in windows} == {1000}
    # a profile head (3 bins of the same data set's windows) starts as the same blend:
    # every bin reads the window's base features, the middle one is scored
    profiled = chr19_windows(shared_data, table, tmp_path / "profile.h5", "--profile-bins", "3")
    check_start(real_model, profiled, tmp_path / "both", None, rc_average=True, pooling="profile")
    # with DeepSEA's CNN as the base CNN (its fully connected layer reads positions)
    check_start(
        real_model,
        profiled,
        tmp_path / "deepsea",
        None,
        rc_average=True,
        pooling="profile",
        base_cnn_architecture="deepsea-cnn",
    )
    # Roadmap chromatin states of two epigenomes (8 state groups each), blended per
    # category: each output starts as its category's blend, as validation chose it
    states = shared_data / "chromatin" / "roadmap_chromhmm_hg19"
    header, *rows = (states / "features.tsv").read_text().splitlines()
    column = header.split("\t").index("peak_file")
    kept = [row.split("\t") for row in rows if row.split("\t")[1].split("|")[0] in ("E021", "E032")]
    for row in kept:
        row[column] = str(states / row[column])
    table = write(tmp_path / "states.tsv", "\n".join([header, *map("\t".join, kept)]) + "\n")
    by_category = chr19_windows(shared_data, table, tmp_path / "states.h5")
    check_start(
        real_model,
        by_category,
        tmp_path / "by-category",
        None,
        rc_average=True,
        base_blend="by-category",
    )
    blend = json.loads((tmp_path / "by-category" / "base-start.json").read_text())["base_blend"]
    assert len(kept) == 16 and len(blend["cnn_weight_by_category"]) == 8, blend
    # the groups chose different weights, so the oracle held outputs of different blends
    assert len(set(blend["cnn_weight_by_category"].values())) > 1, blend
    # windows soft-masked (lowercase, repeats) in the FASTA were among those checked
    import h5py
    import pyfaidx

    fasta = pyfaidx.Fasta(str(shared_data / "genome" / "hg19_chr19_0-3119000_softmasked.fa"))
    with h5py.File(data, "r") as handle:
        valid = handle["split"][:].astype(str) == "valid"
        starts, ends = handle["start"][:][valid], handle["end"][:][valid]
    masked = [str(fasta["chr19"][int(a) : int(b)]) for a, b in zip(starts, ends, strict=True)]
    assert sum(any(base.islower() for base in window) for window in masked) > len(masked) // 4


def test_the_start_is_the_baselines_on_the_demo_genome(pretraining_data, demo_reference, tmp_path):
    """The demo's promoter windows (500 bp, oriented by their TSS strand) from its
    tokenizer, with N padding at the contig ends."""
    model, data = demo_promoter_run(pretraining_data, demo_reference, tmp_path)
    for rc_average, base_strands in ((False, "one"), (True, "both"), (True, "one")):
        check_start(
            model,
            data,
            tmp_path / f"run{rc_average}{base_strands}",
            None,
            rc_average,
            base_cnn_channels=8,
            base_kmers=4,
            base_strands=base_strands,
        )


def test_a_finetuning_run_starts_from_the_baseline_runs_that_fitted_its_readers(
    pretraining_data, demo_reference, tmp_path, caplog
):
    """`genobird baseline deepsea-cnn` and `kmer-lr` runs, given to `genobird finetune
    --base-start-from`, are what it starts from: read, not fitted again (`read_from`; a
    base CNN trained anew would be the same model, the seed drawing everything), and its
    check before the first step is their blend's. A run whose base CNN's budget differs
    from the baseline run's fits its own and says why; a folder that holds no fitted
    baseline is refused."""
    model, data = demo_promoter_run(pretraining_data, demo_reference, tmp_path)
    runs = {}
    for kind, options in (
        ("deepsea-cnn", ["--channels", "8", "--max-minutes", "0.5"]),
        ("kmer-lr", []),
    ):
        runs[kind] = tmp_path / kind
        assert (
            main(["-q", "baseline", kind, "--data", str(data), "--out", str(runs[kind]), *options])
            == 0
        )
    readers = [
        "--base-cnn-channels",
        "8",
        "--base-cnn-architecture",
        "deepsea-cnn",
        "--base-kmers",
        "4",
        "--eval-every",
        "1",
        "--patience",
        "1",
        "--max-steps",
        "1",
    ]
    # the k-mer LR run fitted 3- to 6-mers: a run of 3- to 4-mers fits its own too
    out = tmp_path / "run"
    with caplog.at_level("INFO"):
        assert (
            main(
                [
                    "-q",
                    "finetune",
                    "promoter",
                    "--data",
                    str(data),
                    "--model",
                    str(model),
                    *readers,
                    "--base-cnn-minutes",
                    "0.5",
                    "--out",
                    str(out),
                    "--base-start-from",
                    str(runs["deepsea-cnn"]),
                    str(runs["kmer-lr"]),
                ]
            )
            == 0
        )
    start = json.loads((out / "base-start.json").read_text())
    assert start["base_cnn"]["read_from"].startswith(str(runs["deepsea-cnn"] / "fitted"))
    assert "read_from" not in start["base_kmer_lr"]
    assert "kmer-lr.json (k [3, 4, 5, 6], here [3, 4]) was fitted otherwise" in caplog.text
    metrics = json.loads((out / "report" / "metrics.json").read_text())
    assert metrics["training"]["start_check"]["agree"], metrics["training"]["start_check"]
    assert metrics["base_cnn_architecture"] == "deepsea-cnn"
    baseline = json.loads((runs["deepsea-cnn"] / "report" / "metrics.json").read_text())
    assert (
        start["base_cnn"]["validation_auroc_by_epoch"]
        == baseline["baseline"]["validation_auroc_by_epoch"]
    )
    caplog.clear()
    other = tmp_path / "other"
    with caplog.at_level("INFO"):
        assert (
            main(
                [
                    "-q",
                    "finetune",
                    "promoter",
                    "--data",
                    str(data),
                    "--model",
                    str(model),
                    *readers,
                    "--out",
                    str(other),
                    "--base-start-from",
                    str(runs["deepsea-cnn"]),
                ]
            )
            == 0
        )
    assert "max_minutes 0.5, here None" in caplog.text
    assert f"--base-start-from {runs['deepsea-cnn']}: no base reader of this run" in caplog.text
    assert "read_from" not in json.loads((other / "base-start.json").read_text())["base_cnn"]
    assert (
        main(
            [
                "-q",
                "finetune",
                "promoter",
                "--data",
                str(data),
                "--model",
                str(model),
                *readers,
                "--out",
                str(tmp_path / "x"),
                "--base-start-from",
                str(out),
            ]
        )
        == 2
    )  # a fine-tuning run's folder


def test_deepsea_base_cnn_refuses_windows_of_several_lengths(
    pretraining_data, demo_reference, tmp_path, capsys
):
    """DeepSEA's fully connected layer reads positions: a classify data set of 60-90 bp
    sequences is refused in one line naming the fix, before anything is trained."""
    model, _ = demo_promoter_run(pretraining_data, demo_reference, tmp_path)
    rng = np.random.default_rng(0)
    paths = []
    for name in ("train", "dev", "test"):
        rows = [
            "".join(rng.choice(list("ACGT"), 60 + 10 * (i % 4))) + f",{i % 2}" for i in range(40)
        ]
        paths.append(write(tmp_path / f"{name}.csv", "sequence,label\n" + "\n".join(rows) + "\n"))
    data = tmp_path / "varied.h5"
    assert (
        main(
            [
                "-q",
                "dataset",
                "classify",
                "--input",
                str(paths[0]),
                "--valid",
                str(paths[1]),
                "--test",
                str(paths[2]),
                "--out",
                str(data),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert (
        main(
            [
                "-q",
                "finetune",
                "classify",
                "--data",
                str(data),
                "--model",
                str(model),
                "--base-cnn-channels",
                "8",
                "--base-cnn-architecture",
                "deepsea-cnn",
                "--base-kmers",
                "0",
                "--probe-steps",
                "0",
                "--max-steps",
                "1",
                "--out",
                str(tmp_path / "run"),
            ]
        )
        != 0
    )
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "windows are 60-90 bp" in error[0] and "--window-bp" in error[0]
    assert not (tmp_path / "run" / "base-cnn").exists()


@pytest.mark.slow
@pytest.mark.parametrize("task", ["gue", "tata70"])
def test_finetune_checks_its_start_against_the_baselines(real_model, shared_data, tmp_path, task):
    """`genobird finetune` as a user runs it: the check before its first step gives the
    blend's validation AUROC to 4 digits, metrics.json and the report say so."""
    if task == "gue":
        data = gue_subset(shared_data, tmp_path)
        command = ["finetune", "classify", "--probe-steps", "0"]
    else:
        data = epdnew_subset(shared_data, tmp_path)
        command = [
            "finetune",
            "promoter",
            "--window-bp",
            "70",
            "--base-cnn-channels",
            "16",
            "--base-kmers",
            "5",
            "--eval-every",
            "1",
            "--patience",
            "1",
        ]
    out = tmp_path / "run"
    assert (
        main(
            [
                "-q",
                *command,
                "--data",
                str(data),
                "--model",
                str(real_model),
                "--max-steps",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    metrics = json.loads((out / "report" / "metrics.json").read_text())
    check = metrics["training"]["start_check"]
    assert check["agree"] and round(check["step_0"], 4) == round(check["baselines"], 4), check
    start = json.loads((out / "base-start.json").read_text())
    assert start["start_validation_auroc"] == check["baselines"]
    assert 0.5 < start["start_test_auroc"] <= 1
    history = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert history[0]["step"] == 0 and history[0]["eval_auroc"] == pytest.approx(
        check["step_0"], abs=1e-5
    )


def test_a_start_that_is_not_the_baselines_is_reported(caplog):
    from genobird.finetuning.evaluation import start_check

    history = [{"step": 0, "eval_auroc": 0.6847}, {"step": 10, "loss": 0.5}]
    assert start_check(history, {"start_validation_auroc": 0.68468}) == {
        "baselines": 0.68468,
        "step_0": 0.6847,
        "agree": True,
    }
    with caplog.at_level("WARNING"):
        check = start_check(history, {"start_validation_auroc": 0.9457})
    assert check["agree"] is False and "did not start as its baselines" in caplog.text
    assert start_check(history[1:], {"start_validation_auroc": 0.9457}) is None


def test_a_blend_by_category_chooses_each_categorys_weight_on_its_own_outputs():
    """Validation logits where the CNN knows category a's outputs and the k-mer LR knows
    b's: one weight for every output is a compromise; by category, a takes the CNN alone
    and b the k-mer LR alone, and the blend's validation AUROC rises. A category whose
    outputs have no positive in validation takes the weight chosen over all."""
    from genobird.datasets.metrics import mean_auroc
    from genobird.finetuning.base_start import blend_probabilities, choose_blend

    rng = np.random.default_rng(0)
    labels = (rng.random((400, 5)) < 0.3).astype(np.float32)
    labels[:, 4] = 0  # category c: no positive in validation
    signal, noise = 3 * (labels - 0.5), lambda: rng.normal(size=labels.shape)
    cnn = np.stack([np.where([1, 1, 0, 0, 0], signal, 0) + noise() for _ in range(2)])
    kmer_lr = np.stack([np.where([0, 0, 1, 1, 0], signal, 0) + noise() for _ in range(2)])
    categories = ["a", "a", "b", "b", "c"]
    one, record = choose_blend(cnn, kmer_lr, labels)
    assert np.ndim(one) == 0 and 0 < one < 1 and "cnn_weight_by_category" not in record
    weights, record = choose_blend(cnn, kmer_lr, labels, 0.0, categories)
    assert weights.tolist() == [1.0, 1.0, 0.0, 0.0, one]
    assert record["cnn_weight_by_category"] == {"a": 1.0, "b": 0.0, "c": one}
    assert set(record["validation_auroc_by_category"]["c"].values()) == {None}
    assert record["validation_auroc"] == pytest.approx(
        mean_auroc(labels, blend_probabilities(cnn, kmer_lr, weights)), abs=1e-5
    )
    assert record["validation_auroc"] > mean_auroc(labels, blend_probabilities(cnn, kmer_lr, one))


# sites that are not their own reverse complement, of several lengths (GATA's core, a
# longer GATA site, and 11 bp of no known factor)
NON_PALINDROMES = ("GATAAG", "AGATAAGG", "TTGACATGGCA")


def planted_task(
    reference: Path, folder: Path, motif: str, windows: int = 300, width: int = 200
) -> Path:
    """A newcomer's task (benchmarks/newcomer.py): windows of the genome without N, half
    given `motif` at a random place on the forward strand, split by `dataset classify`'s
    defaults."""
    from benchmarks.newcomer import motif_task

    rows = motif_task(reference, windows, width, seed=0, motif=motif)
    table = write(folder / "task.csv", "sequence,label\n" + "".join(f"{s},{y}\n" for s, y in rows))
    data = folder / "task.h5"
    assert main(["-q", "dataset", "classify", "--input", str(table), "--out", str(data)]) == 0
    return data


def validation_aurocs(
    data: Path, model: Path, folder: Path, *finetune: str, task: str = "classify"
) -> dict:
    """The validation AUROC of `genobird baseline kmer-lr`, of `baseline cnn` and of the
    model `finetune TASK` chose (its best validation check), on one data set."""
    found = {}
    for kind in ("kmer-lr", "cnn"):  # a short CNN: the guarantee holds for any budget
        options = ["--channels", "16", "--max-epochs", "4"] if kind == "cnn" else []
        assert (
            main(
                ["-q", "baseline", kind, "--data", str(data), "--out", str(folder / kind), *options]
            )
            == 0
        )
        report = json.loads((folder / kind / "report" / "metrics.json").read_text())
        found[kind] = report["baseline"]["validation_auroc"]
    assert (
        main(
            [
                "-q",
                "finetune",
                task,
                "--data",
                str(data),
                "--model",
                str(model),
                "--out",
                str(folder / "genobird"),
                "--base-cnn-channels",
                "16",
                "--base-cnn-epochs",
                "4",
                "--max-steps",
                "10",
                "--eval-every",
                "5",
                *finetune,
            ]
        )
        == 0
    )
    report = json.loads((folder / "genobird" / "report" / "metrics.json").read_text())
    found["genobird"] = report["training"]["best_validation_auroc"]
    found["strands"] = report["strands"]
    return found


def assert_never_below_its_baselines(found: dict) -> None:
    """float rounding only: the start's candidates include each baseline exactly"""
    assert found["genobird"] >= max(found["kmer-lr"], found["cnn"]) - 1e-6, found


@pytest.mark.slow
def test_the_default_is_never_below_its_baselines_on_validation_with_non_palindromic_sites(
    pretraining_data, demo_reference, tmp_path
):
    """A site planted on one strand, read by a k-mer LR fitted on one strand and then
    averaged over both, scored 0.04 below that same k-mer LR on validation: the default
    now fits its base readers as it reads them and chooses the strands with its start, so
    the model it keeps is at least the better baseline, probes on and off."""
    model, _ = demo_promoter_run(pretraining_data, demo_reference, tmp_path)
    for motif in NON_PALINDROMES:
        data = planted_task(demo_reference / "genome.fa", tmp_path / motif, motif)
        for probes in ("0", "3") if motif == NON_PALINDROMES[1] else ("0",):
            found = validation_aurocs(
                data, model, tmp_path / motif / probes, "--probe-steps", probes
            )
            assert_never_below_its_baselines(found)
            assert found["strands"]["chosen_by"] == "the start's validation AUROC"


@pytest.mark.slow
def test_the_default_is_never_below_its_baselines_on_real_gue_and_epdnew(
    real_model, shared_data, tmp_path
):
    gue = gue_subset(shared_data, tmp_path / "gue")
    assert_never_below_its_baselines(
        validation_aurocs(gue, real_model, tmp_path / "g", "--probe-steps", "0")
    )
    tata = epdnew_subset(shared_data, tmp_path / "tata")  # a promoter set: one strand
    found = validation_aurocs(
        tata, real_model, tmp_path / "t", "--base-kmers", "6", "--patience", "3", task="promoter"
    )
    assert_never_below_its_baselines(found)
    assert found["strands"]["rc_average"] is False
