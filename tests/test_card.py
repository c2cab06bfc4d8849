"""Every fine-tuned model directory carries a model card (README.md): what it scores,
the data set and splits it was trained and tested on (and the command that built it),
how its recipe and threshold were chosen, its figures beside its baselines, and what it
does not know. `convert to-hf` carries it."""

from __future__ import annotations

import json

import h5py

from genobird.datasets.windows import read_metadata, split_sources
from genobird.finetuning.card import model_card


def test_a_fine_tuned_model_directory_carries_its_card(model_dir):
    """The tiny chromatin model of the suite (conftest.model_dir: `dataset chromatin`
    with chr3 for validation and chrX for test, then `finetune chromatin`)."""
    card = (model_dir / "README.md").read_text()
    run = model_dir.parent
    metrics = json.loads((run / "report" / "metrics.json").read_text())
    data = run.parent / "c.h5"
    meta = read_metadata(data)
    assert card.startswith("---\nlibrary_name: genobird\n")
    assert f"# genobird chromatin model: {len(meta['feature_names'])} outputs" in card
    # the data set's own record of how it was built, options and all
    assert "built by `genobird dataset chromatin --bin-size 200 --context-bp 400 " in card
    assert "--test-chromosomes chrX" in card and "--valid-chromosomes chr3" in card
    assert "the last step's weights kept (no validation checks)" in card
    sources = split_sources(data)
    assert set(sources["valid"]) == {"chr3"} and set(sources["test"]) == {"chrX"}
    for split in ("train", "valid", "test"):
        listed = ", ".join(f"{name} ({count:,})" for name, count in sources[split].items())
        assert f"- {split}: {meta['counts'][split]:,} windows; from {listed}." in card
    # the figures are the report's, to 4 digits
    assert f"| this model | {metrics['median_auroc']:.4f} | {metrics['median_auprc']:.4f} |" in card
    assert "Positives weighed 8 times a negative" in card  # chromatin's default pos_weight
    assert "bins without any" in card and "## Use" in card
    recipe = json.loads((model_dir / "finetune.json").read_text())
    assert f"max_steps {recipe['optim']['max_steps']}" in card


def test_a_data_set_records_the_command_that_built_it(model_dir):
    with h5py.File(model_dir.parent.parent / "c.h5") as handle:
        provenance = json.loads(handle.attrs["provenance"])
    assert provenance["command"] == "genobird dataset chromatin"
    assert provenance["options"]["context_bp"] == 400
    assert provenance["options"]["max_bins"] == 120 and "handler" not in provenance["options"]


def _meta(task: str, command: str | None, **options) -> dict:
    return {
        "task": task,
        "feature_names": ["promoter"],
        "categories": ["promoter"],
        "window_bp": 300,
        "counts": {"train": 80, "valid": 10, "test": 10},
        "positives_by_split": {"train": [40], "valid": [5], "test": [5]},
        "provenance": {"command": command, "options": options, "genobird": "0"} if command else {},
    }


REPORT = {
    "examples": 10,
    "auroc": 0.9,
    "auprc": 0.8,
    "mcc": 0.5,
    "f1": 0.7,
    "at_0.5": {"mcc": 0.4},
    "threshold": 0.31,
    "threshold_chosen_by": "the best MCC on validation",
    "window_bp": 300,
    "training": {
        "steps": 10,
        "best_step": 5,
        "best_validation_auroc": 0.88,
        "stopped_by": "patience",
        "start_test_auroc": 0.87,
    },
}
SOURCES = {"train": {"chr1": 80}, "valid": {"chr2": 10}, "test": {"chr3": 10}}


def test_the_card_says_what_a_promoter_model_does_not_know():
    """Scrambled negatives only: it has not seen random genomic DNA, so says the card;
    with hard negatives it says what they were; without a record it says so."""
    scrambled = model_card(
        _meta("promoter", "genobird dataset promoter", hard_negatives=0, reference="hg19.fa"),
        {},
        REPORT,
        SOURCES,
        {},
    )
    assert "scrambled copies of promoters" in scrambled
    assert "has not seen random genomic DNA" in scrambled and "DNA from hg19.fa" in scrambled
    assert "5'->3' on the strand of the transcript" in scrambled
    hard = model_card(
        _meta("promoter", "genobird dataset promoter", hard_negatives=2), {}, REPORT, SOURCES, {}
    )
    assert "and 2 genomic window(s) per promoter far from any TSS" in hard
    assert "has not seen random genomic DNA" not in hard
    unknown = model_card(_meta("classify", None), {}, REPORT, SOURCES, {})
    assert "how it was built is not recorded" in unknown
    assert "Its labels are the data set's own" in unknown


def test_the_card_sets_the_model_beside_its_baselines_and_its_threshold():
    baselines = {
        "kmer-lr": {"auroc": 0.85, "auprc": 0.75, "mcc": 0.45, "f1": 0.66, "at_0.5": {"mcc": 0.44}}
    }
    card = model_card(
        _meta("classify", "genobird dataset classify"), {}, REPORT, SOURCES, baselines
    )
    assert "| this model | 0.9000 | 0.8000 | 0.5000 | 0.7000 | 0.4000 |" in card
    assert "| its start (the blend of its baselines) | 0.8700 | - | - | - | - |" in card
    assert "| kmer-lr | 0.8500 | 0.7500 | 0.4500 | 0.6600 | 0.4400 |" in card
    assert "Threshold: 0.31, chosen by the best MCC on validation" in card
    assert "stopped by patience" in card and "Positives weighed" not in card
