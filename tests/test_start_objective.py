"""Where a start from baselines sits in fine-tuning's objective. With positives weighted
(chromatin: 8), the start is the baselines' logits + log(pos_weight), near the weighted
loss's optimum, so the first steps do not raise every logit through the k-mer weights.
`--base-kmer-pull` holds the head's weights on the base k-mers near the k-mer LR they
start from; its strength is stated in the LR's own units (multiple 1: the penalty the LR
was fitted under, C chosen on validation), which scikit-learn's fit is the oracle of;
through `genobird finetune`, a pulled run's k-mer weights stay nearer their start than a
free run's, and each step logs the pull."""

from __future__ import annotations

import json

import numpy as np
import pytest
import safetensors.torch
import torch

from genobird.cli import main
from genobird.finetuning.base_start import pull_strength
from tests.conftest import demo_promoter_run


def test_multiple_one_is_the_lrs_own_penalty_in_fine_tunings_units():
    """At scikit-learn's fitted weights, fine-tuning's loss (BCE averaged over windows and
    outputs) plus the pull of multiple 1 towards zero has zero gradient: the same
    objective as the LR's, per output, divided by C x n x F."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    n, k, outputs, c = 300, 12, 3, 0.05
    features = rng.random((n, k))
    truth = rng.normal(size=(outputs, k))
    labels = (features @ truth.T + rng.normal(size=(n, outputs)) > truth.sum(1) / 2) * 1.0
    fits = [
        LogisticRegression(C=c, tol=1e-10, max_iter=10_000).fit(features, labels[:, f])
        for f in range(outputs)
    ]
    weights = torch.tensor(np.stack([m.coef_[0] for m in fits]), requires_grad=True)
    biases = torch.tensor([m.intercept_[0] for m in fits], requires_grad=True)
    logits = torch.from_numpy(features) @ weights.T + biases
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.from_numpy(labels))
    strength = pull_strength(1.0, c, n, outputs)
    (loss + 0.5 * strength * weights.pow(2).sum()).backward()
    assert weights.grad.abs().max() < 1e-6 and biases.grad.abs().max() < 1e-6
    # and another multiple is not that optimum
    weights.grad = None
    logits = torch.from_numpy(features) @ weights.T + biases
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.from_numpy(labels))
    (loss + 0.5 * pull_strength(10.0, c, n, outputs) * weights.pow(2).sum()).backward()
    assert weights.grad.abs().max() > 1e-3
    # a start that holds the LR's weights at a share of a blend is held as the LR is
    squares = float(weights.detach().pow(2).sum())
    held = pull_strength(1.0, c, n, outputs, share=0.25) * 0.25**2 * squares
    assert held == pytest.approx(pull_strength(1.0, c, n, outputs) * squares)


def test_a_start_blended_per_output_is_held_row_by_row():
    """A blend of one CNN weight per output (base_blend by-category) gives each output's
    k-mer row its own strength: held as the LR is at that row's share, and a row the
    k-mer LR has no share of held at zero by the LR's own penalty (left free, it would
    refit to the training windows' composition). StartPull sums the rows' pulls."""
    from genobird.finetuning.base_start import StartPull
    from genobird.model import BigBirdConfig
    from genobird.model.classifier import BigBirdForSequenceClassification

    c, n, outputs = 0.05, 300, 3
    strengths = pull_strength(1.0, c, n, outputs, share=[0.25, 1.0, 0.0])
    one = pull_strength(1.0, c, n, outputs)
    assert strengths == pytest.approx([one / 0.25**2, one, one])
    config = BigBirdConfig(
        vocab_size=16,
        hidden_size=8,
        num_layers=1,
        num_heads=2,
        intermediate_size=16,
        max_position=64,
        block_size=4,
        num_random_blocks=1,
    )
    model = BigBirdForSequenceClassification(
        config, num_labels=outputs, base_kmers=3, problem="multi_label"
    )
    pull = StartPull(model, strengths)
    first, last = model.base_reader_columns()[model.base_kmer_counts]
    moves = torch.tensor([[0.1], [0.2], [0.3]])
    with torch.no_grad():
        model.head.linear.weight[:, first:last] += moves
    expected = 0.5 * sum(
        s * (last - first) * m**2 for s, m in zip(strengths, [0.1, 0.2, 0.3], strict=True)
    )
    assert float(pull()) == pytest.approx(expected, rel=1e-5)


@pytest.fixture(scope="module")
def promoter_run_inputs(pretraining_data, demo_reference, tmp_path_factory):
    """A fresh model of the demo's tokenizer and the demo's promoter windows (500 bp)."""
    model, data = demo_promoter_run(
        pretraining_data, demo_reference, tmp_path_factory.mktemp("pull")
    )
    return model, data, json.loads((model / "config.json").read_text())["config"]["hidden_size"]


def kmer_weights_moved(run, hidden_size: int) -> float:
    """The root mean square distance of the saved head's k-mer weights from the fitted
    k-mer LR's (the run's start; no base CNN, so the LR's weights whole)."""
    start = safetensors.torch.load_file(str(run / "base-cnn" / "kmer-lr.safetensors"))["weights"]
    saved = safetensors.torch.load_file(str(run / "model" / "model.safetensors"))
    head = saved["head.linear.weight"][:, hidden_size : hidden_size + start.shape[1]]
    return float((head - start).pow(2).mean().sqrt())


@pytest.mark.slow
def test_a_pulled_run_keeps_its_kmer_weights_nearer_their_start(promoter_run_inputs, tmp_path):
    model, data, hidden_size = promoter_run_inputs
    moved = {}
    for pull in ("0", "1e4"):
        run = tmp_path / f"pull-{pull}"
        command = [
            "-q",
            "finetune",
            "promoter",
            "--data",
            str(data),
            "--model",
            str(model),
            "--out",
            str(run),
            "--base-kmers",
            "4",
            "--base-kmer-pull",
            pull,
            "--max-steps",
            "30",
            "--head-lr-scale",
            "10",
            "--dropout",
            "0",
        ]
        assert main(command) == 0
        moved[pull] = kmer_weights_moved(run, hidden_size)
        start = json.loads((run / "base-start.json").read_text())
        history = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        logged = [row["kmer_pull"] for row in history if "kmer_pull" in row]
        if pull == "0":
            assert "base_kmer_pull_strength" not in start and not logged
        else:
            assert start["base_kmer_pull_strength"] == pytest.approx(
                pull_strength(1e4, start["base_kmer_lr"]["C"], start_windows(data), outputs=1)
            )
            assert logged and max(logged) > 0
            recipe = json.loads((run / "model" / "finetune.json").read_text())
            assert recipe["head"]["base"]["kmer_pull"] == 1e4
    assert moved["0"] > 0.001  # the free run refits the k-mer weights
    assert moved["1e4"] < moved["0"] / 3, moved


def start_windows(data) -> int:
    import h5py

    with h5py.File(data, "r") as handle:
        return int((handle["split"][:].astype(str) == "train").sum())


def test_a_pull_without_base_kmers_is_refused_in_one_line(promoter_run_inputs, tmp_path, capsys):
    model, data, _ = promoter_run_inputs
    assert (
        main(
            [
                "finetune",
                "promoter",
                "--data",
                str(data),
                "--model",
                str(model),
                "--out",
                str(tmp_path / "run"),
                "--base-kmer-pull",
                "1",
            ]
        )
        != 0
    )
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "base_kmer_pull needs base_kmers" in error[0], error


def test_a_weighted_start_sits_near_the_weighted_losss_optimum(promoter_run_inputs, tmp_path):
    """The gradient of the weighted loss (positives x 8) on the output's bias over the
    training windows, at the start: with the shift, a small fraction of what it is at the
    baselines' own logits."""
    from torch.utils.data import DataLoader

    from genobird.corpus.tokenizer import load_tokenizer
    from genobird.datasets.windows import WindowDataset
    from genobird.finetuning.base_start import start_from_baselines
    from genobird.finetuning.build import build_model
    from genobird.finetuning.job import FinetuneJob
    from genobird.finetuning.recipe import Recipe
    from genobird.finetuning.resolve import resolve
    from genobird.inputs import window_collate

    model_dir, data, _ = promoter_run_inputs
    tokenizer = load_tokenizer(model_dir)
    job = FinetuneJob.open(data, tmp_path, model_dir)
    spec = resolve(Recipe.of(base_kmers=4, pos_weight=8.0), job).recipe
    model = build_model(spec, job)
    start_from_baselines(model, spec, data, tmp_path, tmp_path / "cache", rc_average=False)
    assert model.start_logit_shift() == pytest.approx(np.log(8.0))
    model.eval()
    train = WindowDataset(data, "train", tokenizer, spec.data.max_tokens)
    batch = next(
        iter(
            DataLoader(
                train, batch_size=len(train), collate_fn=window_collate(model, tokenizer.pad_id)
            )
        )
    )

    def bias_gradient() -> float:
        model.zero_grad()
        model(batch["input_ids"], None, batch["attention_mask"], batch["labels"]).loss.backward()
        return float(model.head.linear.bias.grad.abs().max())

    shifted = bias_gradient()
    with torch.no_grad():
        model.head.linear.bias.sub_(model.start_logit_shift())  # the baselines' own logits
    unshifted = bias_gradient()
    assert unshifted > 0.1 and shifted < unshifted / 5, (shifted, unshifted)


@pytest.mark.slow
def test_a_resumed_pulled_run_pulls_towards_the_same_start(promoter_run_inputs, tmp_path):
    """Interrupted after its step-20 checkpoint and run again, a pulled run resumes and
    logs at step 40 the pull the uninterrupted run logged there: its start is the fitted
    LR's, not the checkpoint's weights (which would pull towards themselves)."""
    import shutil

    model, data, _ = promoter_run_inputs
    run = tmp_path / "run"
    command = [
        "-q",
        "finetune",
        "promoter",
        "--data",
        str(data),
        "--model",
        str(model),
        "--out",
        str(run),
        "--base-kmers",
        "4",
        "--base-kmer-pull",
        "1",
        "--max-steps",
        "40",
        "--checkpoint-every",
        "20",
        "--head-lr-scale",
        "10",
        "--dropout",
        "0",
    ]

    def pulls() -> list[tuple[int, float]]:
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        return [(row["step"], row["kmer_pull"]) for row in rows if "kmer_pull" in row]

    assert main(command) == 0
    whole = pulls()
    assert [step for step, _ in whole] == [20, 40] and whole[1][1] > 1e-6
    shutil.rmtree(run / "checkpoints" / "step-00000040")
    shutil.rmtree(run / "model")
    assert main(command) == 0
    resumed = pulls()  # the log kept to the checkpoint's step, then steps 21-40 again
    assert [step for step, _ in resumed] == [20, 40]
    assert resumed[1][1] == pytest.approx(whole[1][1], rel=1e-4)
