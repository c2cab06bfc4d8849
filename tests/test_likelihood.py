"""Zero-shot scoring with a pretrained language model (genobird.scoring.likelihood, `genobird
likelihood`): checked against scoring each piece on its own, one sequence at a time."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from genobird.cli import main
from genobird.corpus.tokenizer import load_tokenizer
from genobird.errors import CheckpointError
from genobird.genome.alphabet import reverse_complement
from genobird.model import BigBirdConfig, save_pretrained
from genobird.scoring.likelihood import DEFAULT_STRIDE, LikelihoodScorer, masked_batch, piece_bits
from tests.conftest import saved_model_dir, tiny_language_model, write

MAX_POSITION = 64  # windows of 62 pieces: the long test sequences need several


def random_dna(rng, length: int) -> str:
    return "".join(rng.choice(list("ACGT"), length))


@pytest.fixture(scope="module")
def tokenizer(pretraining_data):
    return load_tokenizer(pretraining_data["tokenizer"])


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_language_model(tokenizer, MAX_POSITION)


@pytest.fixture(scope="module")
def model_dir(model, tokenizer, tmp_path_factory):
    return saved_model_dir(model, tokenizer, tmp_path_factory.mktemp("lm") / "model")


@torch.no_grad()
def one_piece_bits(model, tokenizer, ids: list[int], index: int, stride: int) -> float:
    """The oracle: piece `index` of one unpadded sequence, with [MASK] on it and on every
    piece `stride` apart from it, scored by the model alone."""
    masked = list(ids)
    for j in range(index % stride, len(ids), stride):
        masked[j] = tokenizer.mask_id
    input_ids = torch.tensor([[tokenizer.cls_id, *masked, tokenizer.sep_id]])
    out = model(input_ids, None, None, torch.tensor([[index + 1]]), torch.tensor([[ids[index]]]))
    return -torch.log_softmax(out.mlm_logits[0].double(), -1)[ids[index]].item() / math.log(2)


def test_masked_batch_scores_every_piece_once_with_mask_in_its_place():
    special = SimpleNamespace(pad_id=0, cls_id=1, sep_id=2, mask_id=3)
    windows = [list(range(10, 30)), list(range(40, 53))]
    seen = []
    for offset in range(DEFAULT_STRIDE):
        batch, scored = masked_batch(
            windows, offset, DEFAULT_STRIDE, special, {"block_size": 8, "dense_length": 0}
        )
        used = batch["masked_labels"] != -100
        at = batch["input_ids"].gather(1, batch["masked_positions"])
        assert (at[used] == special.mask_id).all()  # the answer is hidden
        labels = batch["masked_labels"][used].tolist()
        assert labels == [windows[r][i] for r, picked in enumerate(scored) for i in picked]
        seen += labels
        assert batch["input_ids"].shape[1] % 8 == 0  # padded to whole blocks
        assert (batch["input_ids"] == special.mask_id).sum() == len(labels)  # nothing else
    assert sorted(seen) == windows[0] + windows[1]


@pytest.mark.parametrize("stride", [DEFAULT_STRIDE, 3, 1000])
def test_piece_bits_equal_each_piece_scored_alone(model, tokenizer, stride):
    rng = np.random.default_rng(1)
    windows = [tokenizer.encode(random_dna(rng, n)) for n in (40, 200, 90, 7)]
    windows = [ids[: MAX_POSITION - 2] for ids in windows]
    bits = piece_bits(model, tokenizer, windows, stride, batch_size=3)  # padded batches
    for ids, got in zip(windows, bits, strict=True):
        expected = [one_piece_bits(model, tokenizer, ids, i, stride) for i in range(len(ids))]
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_scorer_sums_windows_and_runs_and_averages_the_strands(model, tokenizer, model_dir):
    rng = np.random.default_rng(2)
    left, right = random_dna(rng, 700), random_dna(rng, 60)  # left needs several windows
    one_strand = LikelihoodScorer(model_dir, device="cpu", rc_average=False, batch_size=4)
    table = one_strand.score([left + "NNNNN" + right, left, right])
    # runs between Ns are scored apart; a long run in windows of max_position - 2 pieces
    ids = tokenizer.encode(left)
    windows = [ids[i : i + MAX_POSITION - 2] for i in range(0, len(ids), MAX_POSITION - 2)]
    assert len(windows) > 1
    expected_left = sum(b.sum() for b in piece_bits(model, tokenizer, windows))
    assert table["bits"][1] == pytest.approx(expected_left, rel=1e-5)
    assert table["bits"][0] == pytest.approx(table["bits"][1] + table["bits"][2], rel=1e-5)
    assert table["bp"].tolist()[:3] == [760, 700, 60]
    assert table["bits_per_bp"][2] == pytest.approx(table["bits"][2] / 60)
    # a bare string, an empty or an all-N sequence is refused, as the command line does
    with pytest.raises(TypeError, match="got one string"):
        one_strand.score(right)
    with pytest.raises(ValueError, match="sequence 1 is all N"):
        one_strand.score([right, "NNNN"])
    both = LikelihoodScorer(model_dir, device="cpu", batch_size=4).score([right])
    reverse = one_strand.score([reverse_complement(right)])
    assert both["bits"][0] == pytest.approx((table["bits"][2] + reverse["bits"][0]) / 2, rel=1e-5)


def test_a_fine_tuned_model_is_refused_in_one_line(tokenizer, tmp_path):
    from genobird.model import BigBirdForSequenceClassification

    config = BigBirdConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
        max_position=64,
        block_size=8,
    )
    save_pretrained(BigBirdForSequenceClassification(config, num_labels=1), tmp_path / "clf")
    tokenizer.save(tmp_path / "clf")
    with pytest.raises(CheckpointError, match="no language-model head; give a pretraining"):
        LikelihoodScorer(tmp_path / "clf")


def test_cli_scores_fasta_and_bed_and_sets_empty_records_aside(model_dir, tmp_path, capsys):
    rng = np.random.default_rng(3)
    chrom = random_dna(rng, 400)
    reference = write(tmp_path / "genome.fa", f">chr1\n{chrom}\n")
    fasta = write(tmp_path / "seqs.fa", f">a\n{chrom[100:220]}\n>gap\nNNNN\n>b\n{chrom[:50]}\n")
    out = tmp_path / "fasta.tsv"
    args = ["-q", "likelihood", "--model", str(model_dir), "--device", "cpu"]
    assert main([*args, "--fasta", str(fasta), "--out", str(out), "--no-rc-average"]) == 0
    import pandas as pd

    table = pd.read_csv(out, sep="\t")
    assert table["name"].tolist() == ["a", "b"]
    assert table.columns.tolist() == [
        "index",
        "name",
        "line",
        "bp",
        "pieces",
        "bits",
        "bits_per_bp",
    ]
    assert table["line"].tolist() == [1, 5]
    rejected = pd.read_csv(f"{out}.rejected.tsv", sep="\t")
    # set aside as every command sets aside a record without A/C/G/T bases
    assert rejected["record"].tolist() == ["gap"]
    assert "record 'gap' is 100% N" in rejected["reason"][0]
    assert rejected["line"].tolist() == [3]
    # a BED region on '-' read on its own strand scores as its reverse complement
    bed = write(tmp_path / "r.bed", "chr1\t100\t220\tr\t0\t-\n")
    write(tmp_path / "rc.fa", f">rc\n{reverse_complement(chrom[100:220])}\n")
    for source, path in (("--bed", bed), ("--fasta", tmp_path / "rc.fa")):
        extra = ["--reference", str(reference)] if source == "--bed" else []
        target = tmp_path / f"{source[2:]}-minus.tsv"
        assert (
            main([*args, source, str(path), *extra, "--out", str(target), "--no-rc-average"]) == 0
        )
    minus = pd.read_csv(tmp_path / "bed-minus.tsv", sep="\t")
    assert minus["bits"][0] == pytest.approx(
        pd.read_csv(tmp_path / "fasta-minus.tsv", sep="\t")["bits"][0], rel=1e-6
    )
    assert minus["bits"][0] != pytest.approx(table["bits"][0], rel=1e-3)  # not the + strand
    capsys.readouterr()
    # nothing scorable: exit 1, one line, no main output left behind
    only_gaps = write(tmp_path / "gaps.fa", ">g\nNNNN\n")
    assert main([*args, "--fasta", str(only_gaps), "--out", str(tmp_path / "none.tsv")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing could be scored" in err
    assert not (tmp_path / "none.tsv").exists()


def test_the_scorer_is_importable_from_the_package_root():
    import genobird

    assert genobird.LikelihoodScorer is LikelihoodScorer


# ------------------------------------------------------------------ genobird zero-shot


def markov_chain_dna(rng, transitions: np.ndarray, length: int) -> str:
    """DNA from an order-k chain: `transitions` [4^k, 4], each row a distribution."""
    order = round(math.log(len(transitions), 4))
    codes = list(rng.integers(0, 4, order))
    cumulative = transitions.cumsum(axis=1)
    for draw in rng.random(length - order):
        context = 0
        for code in codes[len(codes) - order :]:
            context = context * 4 + code
        codes.append(int(np.searchsorted(cumulative[context], draw)))
    return "".join("ACGT"[c] for c in codes)


@pytest.fixture(scope="module")
def structured_task(tmp_path_factory):
    """Promoter-like sequences of a skewed order-3 chain with DeePromoter negatives, and
    training DNA from the same chain for the Markov models."""
    from genobird.datasets.promoter import PromoterSpec, build_promoter_sequence_dataset

    folder = tmp_path_factory.mktemp("zero-shot")
    rng = np.random.default_rng(4)
    transitions = rng.dirichlet([0.15] * 4, size=4**3)
    positives = [markov_chain_dna(rng, transitions, 200) for _ in range(160)]
    write(folder / "positives.txt", "\n".join(positives) + "\n")
    build_promoter_sequence_dataset(
        folder / "positives.txt",
        folder / "data.h5",
        PromoterSpec(),
        valid_fraction=0.2,
        test_fraction=0.25,
    )
    write(folder / "train.fa", f">chain\n{markov_chain_dna(rng, transitions, 60_000)}\n")
    return folder


def test_markov_zero_shot_finds_the_chain_and_tells_its_dna_from_random(structured_task):
    from genobird.evaluation.zero_shot import zero_shot

    report = zero_shot(
        structured_task / "data.h5",
        structured_task / "markov",
        markov_dna=structured_task / "train.fa",
        orders=range(0, 6),
    )
    assert report["model"] == "markov zero-shot"
    aurocs = report["order_selection"]["auroc_by_order"]
    assert report["order_selection"]["split"] == "valid"
    assert aurocs[report["order"]] == max(aurocs.values())  # chosen on validation AUROC
    assert report["order"] >= 2 and aurocs[3] > aurocs[0] + 0.1  # context matters
    assert report["auroc"] > 0.95 and report["f1"] > 0.85
    means = report["bits_per_bp_mean"]
    assert means["negatives"] - means["positives"] > 0.3, means  # random segments cost bits
    assert (structured_task / "markov" / "report" / "test_predictions.npz").is_file()


def test_genobird_zero_shot_writes_a_run_that_pairs_with_the_markov_one(
    structured_task, model_dir, capsys
):
    from genobird.evaluation.zero_shot import zero_shot

    zero_shot(
        structured_task / "data.h5",
        structured_task / "markov-cli",
        markov_dna=structured_task / "train.fa",
        orders=range(2, 4),
    )
    out = structured_task / "genobird"
    args = ["-q", "zero-shot", "--data", str(structured_task / "data.h5"), "--out", str(out)]
    assert main([*args, "--model", str(model_dir), "--device", "cpu"]) == 0
    assert "genobird zero-shot: test AUROC" in capsys.readouterr().out
    import json

    report = json.loads((out / "report" / "metrics.json").read_text())
    assert report["model"] == "genobird zero-shot" and 0 <= report["auroc"] <= 1
    assert report["stride"] == DEFAULT_STRIDE
    assert main(["baseline", "compare", str(out), str(structured_task / "markov-cli")]) == 0


def test_zero_shot_refuses_a_one_class_training_split_and_asks_for_one_scorer(
    structured_task, tmp_path, capsys
):
    from genobird.datasets.windows import WindowSet
    from genobird.errors import ConfigError
    from genobird.evaluation.zero_shot import zero_shot

    with pytest.raises(ConfigError, match="not both"):
        zero_shot(structured_task / "data.h5", tmp_path / "x", model_dir="m", markov_dna="d")
    windows = WindowSet("promoter", ["promoter"], ["promoter"])
    for split in ("train", "train", "test", "test"):
        windows.add("ACGT" * 20, [1], "seq", 0, 80, "+", split)
    windows.write(tmp_path / "one-class.h5")
    args = ["--data", str(tmp_path / "one-class.h5"), "--out", str(tmp_path / "out")]
    assert main(["zero-shot", *args, "--markov", str(structured_task / "train.fa")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "one class only" in err
    assert not (tmp_path / "out").exists()
    assert main(["zero-shot", *args, "--markov", "train.fa", "--stride", "3"]) == 1
    assert "--stride is for --model" in capsys.readouterr().err
    # a window with no base to score is named, not given a made-up score
    windows = WindowSet("promoter", ["promoter"], ["promoter"])
    for sequence, label, split in (
        ("ACGT" * 20, 1, "train"),
        ("AAAT" * 20, 0, "train"),
        ("ACGT" * 20, 1, "test"),
        ("N" * 80, 0, "test"),
    ):
        windows.add(sequence, [label], "seq", 0, 80, "+", split)
    windows.write(tmp_path / "gap.h5")
    gap = ["--data", str(tmp_path / "gap.h5"), "--out", str(tmp_path / "gap")]
    assert main(["zero-shot", *gap, "--markov", str(structured_task / "train.fa")]) == 1
    err = capsys.readouterr().err
    assert "1 test windows have no A/C/G/T base (the first is row 1" in err
    assert not (tmp_path / "gap").exists()


def test_soft_masked_and_rna_input_is_scored_as_its_dna(model_dir):
    """LikelihoodScorer.score normalises as every scorer does: lowercase (soft-masked)
    bases and U count (they were dropped: 9 of 33 bases scored)."""
    scorer = LikelihoodScorer(model_dir, device="cpu", stride=3)
    dna = "ACGTTGACAGGATTACAGGCATGAGCCACCGCG"
    mixed = dna[:24].lower() + dna[24:]
    table = scorer.score([dna, mixed, dna.replace("T", "U"), dna.lower()])
    assert table["bp"].tolist() == [len(dna)] * 4
    np.testing.assert_allclose(table["bits"], table["bits"][0])
