"""Shared fixtures. Real-data tests read ../shared/data (or $GENOBIRD_SHARED_DATA) and skip
with a reason when it is absent, as it is in a user's fresh clone."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The suite's oracles, reference numbers and bitwise checks are CPU ones: on a GPU machine
# every run that picks its own device ("auto") stays on the CPU, here and in the commands
# the tests start. The CUDA tests name their device and still run on the GPU.
os.environ["GENOBIRD_DEVICE"] = "cpu"
SHARED_DATA = Path(os.environ.get("GENOBIRD_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real test data not found at {SHARED_DATA} (set GENOBIRD_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def demo_reference(tmp_path_factory) -> Path:
    """A small demo reference (0.6 Mb), built once per test session."""
    from genobird.genome.demo import DemoSpec, generate_demo_reference

    outdir = tmp_path_factory.mktemp("demo") / "reference"
    generate_demo_reference(outdir, DemoSpec(seed=7, size_mb=0.6))
    return outdir


def write(path: Path, text: str, mode: str = "w") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, mode, newline="") as handle:
        handle.write(text)
    return path


@pytest.fixture(scope="session")
def pretraining_data(demo_reference, tmp_path_factory) -> dict:
    """Demo-genome instances of 256 tokens (train: chr1+chr2, eval: chr3), 500 pieces."""
    from genobird.corpus import (
        DocumentSpec,
        InstanceSpec,
        VocabSpec,
        train_vocabulary,
        write_documents,
        write_instances,
    )

    folder = tmp_path_factory.mktemp("pretraining")
    fasta = demo_reference / "genome.fa"
    spec = DocumentSpec(passes=1, seed=3)
    write_documents(fasta, folder / "train.txt", spec, ["chr1", "chr2"], progress=False)
    write_documents(fasta, folder / "eval.txt", spec, ["chr3"], progress=False)
    tokenizer = train_vocabulary(folder / "train.txt", folder / "tokenizer.model", VocabSpec(500))
    instances = InstanceSpec(max_seq_length=256, documents_per_chunk=50, seed=1)
    write_instances(
        folder / "train.txt", tokenizer.path, folder / "train", instances, progress=False
    )
    write_instances(folder / "eval.txt", tokenizer.path, folder / "eval", instances, progress=False)
    return {
        "folder": folder,
        "tokenizer": tokenizer.path,
        "train": folder / "train",
        "eval": folder / "eval",
    }


def tiny_language_model(tokenizer, max_position: int):
    """A fresh 2 x 32 BigBird language model over `tokenizer`'s pieces (seeded, eval mode):
    what the likelihood and copy-context tests score with."""
    import torch

    from genobird.model import BigBirdConfig, BigBirdForPretraining

    config = BigBirdConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position=max_position,
        block_size=8,
        num_random_blocks=1,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        pad_token_id=tokenizer.pad_id,
    )
    torch.manual_seed(0)
    return BigBirdForPretraining(config).eval()


def saved_model_dir(model, tokenizer, directory: Path) -> Path:
    """`model` and its tokenizer saved as a pretraining model directory."""
    from genobird.model import save_pretrained

    save_pretrained(model, directory)
    tokenizer.save(directory)
    return directory


def demo_promoter_run(pretraining_data, demo_reference, folder: Path) -> tuple[Path, Path]:
    """(model directory, data set) for a fine-tuning run on the demo genome: a fresh 2 x 32
    model of the demo's tokenizer with a base convolution (so that base readers can spell
    its tokens; seeded), and the demo's promoter windows (500 bp, oriented by their TSS
    strand; validation chr3, test chrX)."""
    import torch

    from genobird.cli import main
    from genobird.corpus.tokenizer import load_tokenizer
    from genobird.model import BigBirdConfig, BigBirdForPretraining

    tokenizer = load_tokenizer(pretraining_data["tokenizer"])
    config = BigBirdConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position=256,
        block_size=16,
        base_conv_channels=8,
        pad_token_id=tokenizer.pad_id,
    )
    torch.manual_seed(0)
    model = BigBirdForPretraining(config)
    model.encoder.embeddings.set_vocabulary(tokenizer.pieces)
    model_dir = saved_model_dir(model, tokenizer, folder / "model")
    data = folder / "promoter.h5"
    assert (
        main(
            [
                "-q",
                "dataset",
                "promoter",
                "--tss",
                str(demo_reference / "tss.bed"),
                "--reference",
                str(demo_reference / "genome.fa"),
                "--out",
                str(data),
                "--upstream-bp",
                "300",
                "--downstream-bp",
                "200",
                "--valid-chromosomes",
                "chr3",
                "--test-chromosomes",
                "chrX",
            ]
        )
        == 0
    )
    return model_dir, data


@pytest.fixture(scope="session")
def language_model_dir(pretraining_data, tmp_path_factory) -> Path:
    """A tiny random-weight language model (pretraining's heads) on the demo vocabulary."""
    from genobird.corpus.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(pretraining_data["tokenizer"])
    model = tiny_language_model(tokenizer, max_position=128)
    return saved_model_dir(model, tokenizer, tmp_path_factory.mktemp("lm") / "model")


@pytest.fixture(scope="session")
def model_dir(demo_reference, pretraining_data, tmp_path_factory):
    """A tiny chromatin model (400 bp windows) fine-tuned for 10 steps: plumbing, not skill."""
    from genobird.cli import main

    folder = tmp_path_factory.mktemp("predict")
    data = folder / "c.h5"
    assert (
        main(
            [
                "-q",
                "dataset",
                "chromatin",
                "--features",
                str(demo_reference / "features.tsv"),
                "--reference",
                str(demo_reference / "genome.fa"),
                "--out",
                str(data),
                "--context-bp",
                "400",
                "--max-bins",
                "120",
                "--valid-chromosomes",
                "chr3",
                "--test-chromosomes",
                "chrX",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "-q",
                "finetune",
                "chromatin",
                "--data",
                str(data),
                "--out",
                str(folder / "run"),
                "--from-scratch",
                "--tokenizer",
                str(pretraining_data["tokenizer"]),
                "--max-tokens",
                "128",
                "--max-steps",
                "10",
            ]
        )
        == 0
    )
    return folder / "run" / "model"


@pytest.fixture(scope="session")
def predictor(model_dir):
    """The tiny chromatin model (`model_dir`) as a CPU predictor."""
    from genobird import load_predictor

    return load_predictor(model_dir, device="cpu")


def drawn_report(results: Path, out: Path) -> Path:
    """The report of `results` as the pipeline writes it: its evaluations run first
    (`genobird evaluate all`; no context lengths: quick), then drawn."""
    from genobird.artifacts import pretrained_evaluation_settings
    from genobird.evaluation.artifacts import evaluate_results
    from genobird.report import build_report

    evaluate_results(results, pretrained_evaluation_settings((), 4000, (32, 128, 512, 1024), 300))
    check_artifacts(results)
    return build_report(results, out)


def check_artifacts(results: Path) -> None:
    """Every evaluation artifact of `results` holds to the JSON schema generated from its
    dataclass (genobird.artifacts.json_schema)."""
    import jsonschema

    from genobird.artifacts import ARTIFACTS, json_schema

    for artifact in ARTIFACTS:
        path = artifact.path(results)
        if path.is_file():
            jsonschema.validate(json.loads(path.read_text()), json_schema(artifact))
