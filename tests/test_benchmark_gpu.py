"""benchmarks/gpu.py, the one script a GPU run executes, dry-run on the CPU so that it
cannot rot between GPU runs: every step runs at tiny sizes and writes its figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_gpu_script_dry_runs_every_step_and_writes_its_tables(
    tmp_path, pretraining_data, demo_reference
):
    inputs = tmp_path / "inputs"
    subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "long_context.py"),
            "prepare",
            "--out",
            str(inputs),
            "--corpus",
            str(pretraining_data["folder"]),
            "--heldout",
            str(demo_reference / "genome.fa"),
            "--lengths",
            "256",
            "64",
        ],
        check=True,
        cwd=REPO,
    )
    out = tmp_path / "out"
    script = str(REPO / "benchmarks" / "gpu.py")
    subprocess.run(
        [
            sys.executable,
            script,
            "--out",
            str(out),
            "--dry-run",
            "--long-context-inputs",
            str(inputs),
        ],
        check=True,
        cwd=REPO,
    )
    results = json.loads((out / "gpu.json").read_text())
    assert results["dry_run"] is True
    assert list(results["steps"]) == [
        "attention",
        "attention_graphed",
        "pretraining",
        "pretraining_graphed",
        "hf_model",
        "scoring",
        "cuda_tests",
        "pretraining_compiled",
        "long_context",
    ]
    steps = {name: step["result"] for name, step in results["steps"].items()}
    assert steps["cuda_tests"]["returncode"] == 0 and steps["cuda_tests"]["tests collected"] > 0
    assert [row["tokens"] for row in steps["attention"]["rows"]] == [256, 512]
    assert steps["attention"]["rows"][0]["genobird_over_sdpa"] > 0
    assert set(steps["attention"]["rows"][0]["seconds"]["fwd_bwd_queued"]) >= {"genobird", "sdpa"}
    assert steps["pretraining_compiled"]["tokens_per_s"] > 0
    assert steps["pretraining"]["tokens_per_s"] > 0
    assert steps["pretraining_graphed"]["tokens_per_s"] > 0
    profile = steps["pretraining"]["profile"]
    assert profile["wall_s_per_step"] > 0 and "aten::mm" in profile["top"]
    graphed = steps["attention_graphed"]["rows"]
    assert [row["tokens"] for row in graphed] == [256, 512] and graphed[0]["genobird_over_sdpa"] > 0
    assert all(rate > 0 for rate in steps["scoring"]["regions_per_s"].values())
    parts = steps["scoring"]["parts_regions_per_s"]["tiny"]
    assert parts["inputs"] > 0 and parts["model"] > 0
    assert steps["scoring"]["encoder"] in ("fast_bpe", "sentencepiece")
    assert steps["hf_model"]["largest_difference_fp32"] < 1e-4
    assert steps["hf_model"]["training_genobird_over_transformers"] > 0
    study = steps["long_context"]
    training = study["training"]
    # the kernel check from scratch, then one start continued at each length
    assert list(training) == [
        "scratch-256-block_sparse",
        "start-64",
        "continued-256",
        "continued-64",
    ]
    assert [training[name]["train_length"] for name in training] == [256, 64, 256, 64]
    assert [training[name]["continued"] for name in training] == [False, False, True, True]
    assert all(row["steps"] == 2 and row["mlm_loss_by_step"] for row in training.values())
    assert study["scores"]["trained_as"] == {"long": "continued-256", "short": "continued-64"}
    # both arms scored on the same pieces at every length, every piece once per length
    pieces = np.load(out / "long_context" / "pieces.npz")
    assert len(pieces["piece_id"]) == study["scores"]["pieces"] > 0
    for arm in ("long", "short"):
        assert set(study["scores"]["arms"][arm]["bits_per_bp"]) == {"64", "128", "256"}
        for length in (64, 128, 256):
            bits = pieces[f"bits_{arm}_{length}"]
            assert bits.shape == pieces["bp"].shape and np.all(np.isfinite(bits) & (bits > 0))
    assert sorted(p.name for p in (out / "long_context").iterdir()) == [
        "long_context.json",
        "pieces.npz",
        *(f"train-{name}.jsonl" for name in sorted(training)),
    ]
    # the CPU's summary: every scored arm and length beside the Markov model, with gains
    summary = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "long_context.py"),
            "summarise",
            str(out / "long_context"),
            "--heldout",
            str(demo_reference / "genome.fa"),
            "--train-fastas",
            str(demo_reference / "genome.fa"),
        ],
        check=True,
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout
    assert "| continued at 256, read at 128 |" in summary and "| Markov order 10" in summary
    assert "| continued at 256 over continued at 64, read at 256 |" in summary
    assert (out / "long_context" / "long_context.md").read_text().strip() == summary.strip()
    table = (out / "gpu.md").read_text()
    assert "| pretraining | tokens_per_s |" in table and "| hf_model |" in table


def test_the_dry_run_names_the_long_context_inputs_it_lacks_and_how_to_prepare_them(tmp_path):
    out, inputs = tmp_path / "out", tmp_path / "nowhere"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "gpu.py"),
            "--out",
            str(out),
            "--dry-run",
            "--steps",
            "long_context",
            "--long-context-inputs",
            str(inputs),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    error = json.loads((out / "gpu.json").read_text())["steps"]["long_context"]["error"]
    assert error.startswith(
        f"FileNotFoundError: the long-context study's inputs are not in "
        f"{inputs}: no tokenizer.model, heldout.fa, train-LENGTH/"
    )
    assert f"python benchmarks/long_context.py prepare --out {inputs}" in error
