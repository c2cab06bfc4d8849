"""Baselines: order-k Markov bits per base, k-mer logistic regression, small CNN."""

from __future__ import annotations

import gzip
import itertools
import json
import math
from collections import Counter

import h5py
import numpy as np
import pytest
import torch

from genobird.baselines.kmer import kmer_matrix
from genobird.baselines.markov import (
    MarkovCounts,
    dna_codes,
    markov_baseline,
    parse_orders,
    read_dna,
    sequence_bits,
)
from genobird.cli import main
from genobird.datasets.windows import WindowSet
from genobird.errors import InputError
from genobird.genome.alphabet import reverse_complement
from tests.conftest import write

BASES = "ACGT"


def _markov_chain(rng, length: int, order: int, sharpness: float = 3.0) -> tuple[str, float]:
    """A sequence from a random order-`order` chain and the chain's entropy rate (bits)."""
    logits = rng.normal(size=(4**order, 4)) * sharpness
    table = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    codes = list(rng.integers(0, 4, size=order))
    for _ in range(length - order):
        context = 0
        for code in codes[len(codes) - order :]:
            context = context * 4 + code
        codes.append(rng.choice(4, p=table[context]))
    # stationary distribution over contexts, from the empirical context frequencies
    contexts = Counter(
        sum(c * 4 ** (order - 1 - j) for j, c in enumerate(codes[i : i + order]))
        for i in range(len(codes) - order)
    )
    total = sum(contexts.values())
    entropy = -sum(
        n / total * (table[ctx] * np.log2(table[ctx])).sum() for ctx, n in contexts.items()
    )
    return "".join(BASES[c] for c in codes), float(entropy)


def test_markov_counts_match_a_dictionary_count():
    sequence = "ACGTTGCANNACGGTACCAGTNACGTA"
    counts = MarkovCounts(3)
    counts.add(dna_codes(sequence))
    for order in range(4):
        expected = Counter()
        for run in sequence.split("N"):
            for i in range(order, len(run)):
                expected[(run[i - order : i], run[i])] += 1
        for context_bases in itertools.product(BASES, repeat=order):
            context = "".join(context_bases)
            index = sum(BASES.index(b) * 4 ** (order - 1 - j) for j, b in enumerate(context))
            for code, base in enumerate(BASES):
                assert counts.tables[order][index, code] == expected[(context, base)]


def test_markov_bits_by_hand_including_short_contexts_at_run_starts():
    counts = MarkovCounts(2)
    counts.add(dna_codes("AACAACAAC"))
    alpha = 0.5

    def p(order, context, base):
        table = counts.tables[order]
        index = sum(BASES.index(b) * 4 ** (order - 1 - j) for j, b in enumerate(context))
        return (table[index, BASES.index(base)] + alpha) / (table[index].sum() + 4 * alpha)

    # "ACA N CA": every base of each N-free run, with the context it has
    expected = -sum(
        math.log2(v)
        for v in (p(0, "", "A"), p(1, "A", "C"), p(2, "AC", "A"), p(0, "", "C"), p(1, "C", "A"))
    )
    assert sequence_bits(counts, dna_codes("ACANCA"), 2, alpha) == pytest.approx(expected)


def test_markov_baseline_finds_the_order_and_the_entropy_rate_of_a_chain():
    rng = np.random.default_rng(0)
    train, entropy = _markov_chain(rng, 200_000, order=2)
    heldout, _ = _markov_chain(np.random.default_rng(0), 200_000, order=2)  # same chain
    result = markov_baseline([dna_codes(train)], [dna_codes(heldout)], range(0, 6), False)
    assert result.order >= 2
    assert result.bits_per_bp == pytest.approx(entropy, abs=0.02)
    order0 = markov_baseline([dna_codes(train)], [dna_codes(heldout)], range(0, 1), False)
    assert order0.bits_per_bp > result.bits_per_bp + 0.2
    assert result.heldout_bp == 200_000


def test_markov_reads_documents_and_fasta_and_skips_n(tmp_path):
    write(tmp_path / "docs.txt", "ACGTACGT\nTTGCA\n\nGGGCCC\n")
    write(tmp_path / "seqs.fa", ">a\nACGTNNNNacgt\n>b\nGGCC\n")
    documents = read_dna(tmp_path / "docs.txt")
    assert ["".join(BASES[c] for c in d) for d in documents] == ["ACGTACGTTTGCA", "GGGCCC"]
    fasta = read_dna(tmp_path / "seqs.fa")
    assert [int((c < 4).sum()) for c in fasta] == [8, 4]  # soft-masked bases count


@pytest.mark.parametrize(
    "train, heldout, message",
    [
        (">a\nACGTACGTAC\n", ">b\nNNNN\n", "held-out DNA has no A/C/G/T"),
        (">a\nNNNN\n", ">b\nACGT\n", "training DNA has no A/C/G/T"),
    ],
)
def test_markov_command_rejects_dna_without_bases_in_one_line(
    tmp_path, capsys, train, heldout, message
):
    write(tmp_path / "train.fa", train)
    write(tmp_path / "held.fa", heldout)
    code = main(
        [
            "baseline",
            "markov",
            "--train",
            str(tmp_path / "train.fa"),
            "--heldout",
            str(tmp_path / "held.fa"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert message in err and len(err.strip().splitlines()) == 1


def test_markov_orders_argument():
    assert parse_orders("0-10") == range(0, 11)
    assert parse_orders("4") == range(4, 5)
    for bad in ("a-b", "5-2", "0-20"):
        with pytest.raises(InputError):
            parse_orders(bad)


def test_markov_command_writes_its_report(tmp_path, capsys):
    rng = np.random.default_rng(1)
    train, _ = _markov_chain(rng, 30_000, order=1)
    heldout, _ = _markov_chain(rng, 5_000, order=1)
    write(tmp_path / "train.fa.gz", "", "w")
    with gzip.open(tmp_path / "train.fa.gz", "wt") as handle:
        handle.write(f">t\n{train}\n")
    write(tmp_path / "held.fa", f">h\n{heldout}\n")
    code = main(
        [
            "-q",
            "baseline",
            "markov",
            "--train",
            str(tmp_path / "train.fa.gz"),
            "--heldout",
            str(tmp_path / "held.fa"),
            "--orders",
            "0-3",
            "--out",
            str(tmp_path / "markov.json"),
        ]
    )
    assert code == 0
    report = json.loads((tmp_path / "markov.json").read_text())
    assert report["heldout_bp"] == 5_000 and 0 <= report["order"] <= 3
    assert f"{report['bits_per_bp']:.4f} bits/bp" in capsys.readouterr().out


@pytest.mark.shared_data
def test_markov_on_unseen_real_human_dna(shared_data):
    genome = shared_data / "genome"
    train = read_dna(genome / "hg19_chr19_0-3119000_softmasked.fa")
    heldout = read_dna(genome / "grch37_22_20-21Mb.fa")
    result = markov_baseline(train, heldout, range(0, 7))
    # measured 1.8646 at order 6 (order 4 alone: about 1.93); uniform DNA is 2 bits
    assert result.order >= 3
    assert 1.75 < result.bits_per_bp < 1.95
    assert result.heldout_bp == 900_000


def test_kmer_matrix_matches_a_python_count():
    sequences = ["ACGTACGTNACG", "TTTT", "NNNN"]
    matrix = kmer_matrix(sequences, ks=(2, 3)).toarray()
    assert matrix.shape == (3, 16 + 64)
    for row, sequence in enumerate(sequences):
        for offset, k in ((0, 2), (16, 3)):
            expected = Counter(
                sequence[i : i + k]
                for i in range(len(sequence) - k + 1)
                if "N" not in sequence[i : i + k]
            )
            for index, kmer in enumerate(itertools.product(BASES, repeat=k)):
                assert matrix[row, offset + index] == expected["".join(kmer)]


def _motif_dataset(path, n=600, length=100, seed=0, task="classify", features=1, spread=None):
    """Random DNA; label 1 where a motif was planted (feature f: its own motif), anywhere
    or (`spread`) within `spread` bp of the centre, as a peak's summit."""
    rng = np.random.default_rng(seed)
    motifs = ["TGACGTCA", "GGGATTTCC", "CACGTGAC"][:features]
    windows = WindowSet(task, [f"f{i}" for i in range(features)], ["TF"] * features)
    for index in range(n):
        sequence = list("".join(rng.choice(list(BASES), size=length)))
        labels = rng.integers(0, 2, size=features)
        for feature, motif in enumerate(motifs):
            if labels[feature]:
                low, high = 0, length - len(motif)
                if spread is not None:
                    low, high = length // 2 - spread, length // 2 + spread
                at = int(rng.integers(low, high))
                sequence[at : at + len(motif)] = motif
        split = ("train", "train", "train", "valid", "test")[index % 5]
        windows.add("".join(sequence), labels, "seq", 0, length, "+", split)
    windows.write(path)
    return path


FINETUNE_BINARY_FIELDS = {
    "task",
    "split",
    "f1",
    "precision",
    "recall",
    "mcc",
    "accuracy",
    "examples",
    "positives",
    "auroc",
    "auprc",
    "threshold",
    "threshold_chosen_by",
    "at_0.5",
}


def test_kmer_lr_learns_a_planted_motif_and_reports_like_finetune(tmp_path, capsys):
    data = _motif_dataset(tmp_path / "motif.h5")
    code = main(["-q", "baseline", "kmer-lr", "--data", str(data), "--out", str(tmp_path / "kmer")])
    assert code == 0
    report = json.loads((tmp_path / "kmer" / "report" / "metrics.json").read_text())
    assert set(report) >= FINETUNE_BINARY_FIELDS
    assert report["auroc"] > 0.9
    assert report["baseline"]["model"] == "kmer_lr" and report["baseline"]["features"] == 5440
    assert (tmp_path / "kmer" / "report" / "roc_pr.png").is_file()
    assert f"mcc {report['mcc']:.3f}" in capsys.readouterr().out
    assert report["baseline"]["validation_auroc"] == max(
        report["baseline"]["validation_auroc_by_C"].values()
    )


def test_the_kept_kmer_lr_is_scikit_learns_fit_at_the_chosen_c(tmp_path):
    """The C search keeps each C's models and returns the chosen one's: the same model
    scikit-learn fits anew at that C, and the validation figures it was chosen by."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    from genobird.baselines import load_baseline_data
    from genobird.baselines.kmer import fit_kmer_lr

    data = load_baseline_data(_motif_dataset(tmp_path / "motif.h5"))
    fitted = fit_kmer_lr(data)
    best = fitted.details["C"]
    train = fitted.features(data.train.sequences)
    oracle = LogisticRegression(C=best, max_iter=2000, random_state=0)
    oracle.fit(train, data.train.labels[:, 0])
    np.testing.assert_allclose(fitted.models[0].coef_, oracle.coef_, rtol=1e-6, atol=1e-8)
    valid = oracle.predict_proba(fitted.features(data.valid.sequences))[:, 1]
    np.testing.assert_allclose(fitted.validation[:, 0], valid, rtol=1e-6)
    assert fitted.details["validation_auroc_by_C"][str(best)] == pytest.approx(
        roc_auc_score(data.valid.labels[:, 0], valid)
    )


def test_cnn_learns_planted_motifs_multilabel(tmp_path):
    from genobird.baselines import run_classifier_baseline

    data = _motif_dataset(tmp_path / "motif.h5", n=1000, task="chromatin", features=2)
    report = run_classifier_baseline("cnn", data, tmp_path / "cnn", max_epochs=6)
    assert report["median_auroc"] > 0.9
    assert set(report["median_auroc_by_category"]) == {"TF"}
    assert report["baseline"]["rc_average"] is True
    # every test window's predictions, for paired comparison of multi-feature runs
    with np.load(tmp_path / "cnn" / "report" / "test_predictions.npz") as saved:
        assert saved["probabilities"].shape == (report["examples"], 2)
        assert saved["categories"].tolist() == ["TF", "TF"]


def test_cnn_baseline_trains_on_the_device_asked_and_records_it(tmp_path, capsys):
    """`baseline cnn --device`: the CNN trains where it is asked (auto: the GPU where
    there is one) and metrics.json says where; a GPU this machine lacks is refused in one
    line before any training."""
    import torch

    data = _motif_dataset(tmp_path / "motif.h5", n=200, task="chromatin", features=1)
    command = ["baseline", "cnn", "--data", str(data), "--max-minutes", "0.1"]
    assert main([*command, "--out", str(tmp_path / "cpu"), "--device", "cpu"]) == 0
    metrics = json.loads((tmp_path / "cpu" / "report" / "metrics.json").read_text())
    assert metrics["baseline"]["device"] == "cpu"
    if not torch.cuda.is_available():
        assert main([*command, "--out", str(tmp_path / "gpu"), "--device", "cuda"]) == 1
        err = capsys.readouterr().err
        assert "no CUDA GPU" in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "gpu" / "report").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="training on a GPU needs CUDA")
def test_cnn_trained_on_cuda_comes_back_on_the_cpu_scoring_as_its_weights_say(tmp_path):
    from genobird.baselines import load_baseline_data
    from genobird.baselines.cnn import CNNSpec, encode, predict, train_cnn

    data = load_baseline_data(
        _motif_dataset(tmp_path / "m.h5", n=400, task="chromatin", features=2), 0
    )
    model, details = train_cnn(data, CNNSpec(channels=16, max_epochs=3), "cuda")
    assert details["device"].startswith("cuda")
    assert all(parameter.device.type == "cpu" for parameter in model.parameters())
    codes = encode(data.test.sequences)
    on_cpu = predict(model, codes, rc_average=True)
    on_gpu = predict(model.to("cuda"), codes, rc_average=True)
    np.testing.assert_allclose(on_gpu, on_cpu, atol=1e-4)


def test_a_base_cnn_trained_in_the_run_leaves_the_random_streams_as_it_found_them(tmp_path):
    """Fine-tuning draws the same whether its base CNN was trained in the run or read from
    a baseline run: the CNN trains on the device fine-tuning uses, its draws forked from
    the CPU's random stream and, on a GPU, the GPU's (its dropout)."""
    from genobird.baselines import load_baseline_data
    from genobird.device import default_device
    from genobird.finetuning import reader_baselines
    from genobird.finetuning.recipe import Recipe

    data = load_baseline_data(
        _motif_dataset(tmp_path / "m.h5", n=200, task="chromatin", features=1), 0
    )
    spec = Recipe.of(base_cnn_channels=16, base_cnn_minutes=0.05)
    on_gpu = torch.cuda.is_available()
    before = torch.get_rng_state(), torch.cuda.get_rng_state() if on_gpu else None
    details = reader_baselines.base_cnn(
        data, spec.head.base, None, 0, tmp_path / "cache", rc_average=True
    )[1]
    assert details["device"] == str(default_device()) and details["epochs"] >= 1
    assert torch.equal(torch.get_rng_state(), before[0])
    if on_gpu:
        assert torch.equal(torch.cuda.get_rng_state(), before[1])


def trained_looking_cnn(outputs: int = 3, channels: int = 8):
    """A SmallCNN in eval mode with batch-norm statistics that are not the identity."""
    import torch

    from genobird.baselines.cnn import SmallCNN

    torch.manual_seed(0)
    model = SmallCNN(outputs, channels)
    with torch.no_grad():
        for block in model.blocks:
            block[1].running_mean.normal_()
            block[1].running_var.uniform_(0.5, 2.0)
    return model.eval()


def test_cnn_reverse_complement_average_scores_both_strands_alike():
    import torch

    from genobird.baselines.cnn import encode

    model = trained_looking_cnn()
    sequences = ["ACGTTGCAAGGCTTNACGATCGATTAGC", "GGGCCCAAATTTACGTNNACGT"]
    rc = [reverse_complement(s) for s in sequences]
    with torch.no_grad():
        forward = model(encode(sequences), rc_average=True)
        backward = model(encode(rc), rc_average=True)
        single = model(encode(sequences), rc_average=False)
    assert torch.allclose(forward, backward, atol=1e-6)
    assert not torch.allclose(forward, single, atol=1e-4)


def test_cnn_logits_of_a_window_do_not_depend_on_its_batch():
    """Each window's logits, on either strand, are those of the window read alone, in a
    batch padded to a longer window's length: windows of 5, 28, 70 and 301 bp (a window
    shorter than 29 bp is pooled as often alone as padded), with N bases."""
    import torch

    from genobird.baselines.cnn import encode, reverse_complement_codes

    model = trained_looking_cnn()
    rng = np.random.default_rng(2)
    windows = [
        "".join(rng.choice(list("ACGTN"), size=n, p=[0.24] * 4 + [0.04])) for n in (5, 28, 70, 301)
    ]
    codes = encode(windows)
    assert torch.equal(
        reverse_complement_codes(codes), encode([reverse_complement(w) for w in windows])
    )
    with torch.no_grad():
        batch = model(codes, rc_average=True)
        for index, window in enumerate(windows):
            alone = model(encode([window]), rc_average=True)[0]
            torch.testing.assert_close(batch[index], alone, atol=1e-5, rtol=1e-5)


def test_baselines_reject_one_class_and_disjoint_kmers(tmp_path, capsys):
    one_class = WindowSet("classify", ["y"], ["label"])
    for index in range(20):
        one_class.add("ACGT" * 10, [0], "s", 0, 40, "+", "test" if index < 4 else "train")
    one_class.write(tmp_path / "one.h5")
    assert (
        main(
            [
                "baseline",
                "kmer-lr",
                "--data",
                str(tmp_path / "one.h5"),
                "--out",
                str(tmp_path / "o1"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "both classes" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o1" / "report" / "metrics.json").exists()

    disjoint = WindowSet("classify", ["y"], ["label"])
    for index in range(30):
        train = index >= 6
        sequence = ("AC" if train else "GT") * 20
        disjoint.add(sequence, [index % 2], "s", 0, 40, "+", "train" if train else "test")
    disjoint.write(tmp_path / "disjoint.h5")
    assert (
        main(
            [
                "baseline",
                "kmer-lr",
                "--data",
                str(tmp_path / "disjoint.h5"),
                "--out",
                str(tmp_path / "o2"),
            ]
        )
        == 1
    )
    assert "share no 3-6-mer" in capsys.readouterr().err


def test_baselines_reject_empty_inputs_in_one_line(tmp_path, capsys):
    write(tmp_path / "empty.fa", "")
    write(tmp_path / "held.fa", ">h\nACGTACGT\n")
    assert (
        main(
            [
                "baseline",
                "markov",
                "--train",
                str(tmp_path / "empty.fa"),
                "--heldout",
                str(tmp_path / "held.fa"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "no DNA sequence" in err and len(err.strip().splitlines()) == 1
    no_test = WindowSet("classify", ["y"], ["label"])
    for index in range(12):
        no_test.add("ACGTTGCA" * 5, [index % 2], "s", 0, 40, "+", "train")
    no_test.write(tmp_path / "no_test.h5")
    assert (
        main(
            [
                "baseline",
                "cnn",
                "--data",
                str(tmp_path / "no_test.h5"),
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "needs train and test rows" in err and len(err.strip().splitlines()) == 1


def test_a_validation_split_with_one_class_is_an_error_not_a_silent_choice(tmp_path, capsys):
    windows = WindowSet("classify", ["y"], ["label"])
    for index in range(30):
        split = "valid" if index < 5 else "test" if index < 10 else "train"
        label = 0 if split == "valid" else index % 2
        windows.add("ACGTTGCAAC" * 4, [label], "s", 0, 40, "+", split)
    windows.write(tmp_path / "valid_one_class.h5")
    assert (
        main(
            [
                "baseline",
                "kmer-lr",
                "--data",
                str(tmp_path / "valid_one_class.h5"),
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "no feature has both classes in the validation split" in err
    assert len(err.strip().splitlines()) == 1


def test_deepsea_cnn_shapes_at_one_and_eight_kb_and_learns_a_motif(tmp_path):
    """DeepSEA's layers read 1 kb as DeepSEA did (53 positions into the fully connected
    layer) and 8 kb pooled to the same 53, so one architecture serves both contexts."""
    from genobird.baselines import run_classifier_baseline
    from genobird.baselines.cnn import DeepSEACNN
    from genobird.model.base_readers import DEEPSEA_POSITIONS

    model = DeepSEACNN(3, channels=8)
    for length in (1000, 8000, 300):
        codes = torch.randint(0, 4, (2, length), dtype=torch.uint8)
        assert model(codes, rc_average=True).shape == (2, 3)
    assert model.tower.hidden.in_features == 8 * 3 * DEEPSEA_POSITIONS
    data = _motif_dataset(tmp_path / "m.h5", n=1000, task="chromatin", features=2, spread=10)
    report = run_classifier_baseline("deepsea-cnn", data, tmp_path / "d", channels=16, max_epochs=8)
    assert report["baseline"]["model"] == "deepsea-cnn" and report["median_auroc"] > 0.7


def test_baselines_read_the_central_window_and_skip_unknown_labels(tmp_path):
    from genobird.baselines import run_classifier_baseline
    from genobird.errors import ConfigError

    data = _motif_dataset(tmp_path / "m.h5", n=600, task="chromatin", features=2)
    with h5py.File(data, "r+") as handle:  # the second feature unknown on a third of rows
        labels = handle["labels"][:]
        labels[::3, 1] = 255
        handle["labels"][:] = labels
    report = run_classifier_baseline("kmer-lr", data, tmp_path / "k", window_bp=60)
    assert report["baseline"]["window_bp"] == 60
    known = report["per_feature"]["f1"]["examples"]
    assert known == int((labels[np.asarray(_splits(data)) == "test", 1] != 255).sum())
    with pytest.raises(ConfigError, match="wider than the windows"):
        run_classifier_baseline("cnn", data, tmp_path / "c", window_bp=1000)


def _splits(path):
    with h5py.File(path, "r") as handle:
        return handle["split"][:].astype(str)
