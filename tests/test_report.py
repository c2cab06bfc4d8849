"""The pipeline's HTML report: genobird beside its baselines, and prediction spread."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from genobird.training.mlm import HELDOUT_SCORING
from tests.conftest import drawn_report


def _write_json(path: Path, value: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))


def _write_held_out(results: Path, bits: float, markov_bits: float) -> None:
    """A pretraining summary scored the fair way (MLM accuracy 0.061) and an order-9
    Markov baseline of the same DNA."""
    _write_json(
        results / "pretrain" / "model" / "training_summary.json",
        {
            "eval": {"bits_per_character": bits, "mlm_accuracy": 0.061},
            "heldout_scoring": HELDOUT_SCORING,
        },
    )
    _write_json(
        results / "baselines" / "markov.json",
        {"order": 9, "alpha": 2.0, "bits_per_bp": markov_bits},
    )


def test_report_sets_genobird_beside_markov_and_classifier_baselines(tmp_path):
    results = tmp_path / "results"
    _write_held_out(results, bits=1.7712, markov_bits=1.8123)
    binary = {
        "split": "test",
        "f1": 0.8,
        "mcc": 0.6123,
        "auroc": 0.9,
        "auprc": 0.88,
        "examples": 100,
        "positives": 50,
        "prediction_spread": {
            "min_std": 0.21,
            "median_std": 0.21,
            "max_std": 0.21,
            "std_by_feature": {"label": 0.21},
        },
    }
    _write_json(results / "tasks" / "tf0" / "report" / "metrics.json", binary)
    _write_json(
        results / "tasks" / "tf0" / "baselines" / "kmer-lr" / "report" / "metrics.json",
        {**binary, "mcc": 0.6512},
    )
    _write_json(
        results / "chromatin" / "report" / "metrics.json",
        {
            "split": "test",
            "examples": 60,
            "median_auroc": 0.81,
            "median_auprc": 0.4,
            "median_auroc_by_category": {"TF": 0.8},
            "prediction_spread": {
                "min_std": 5e-5,
                "median_std": 0.02,
                "max_std": 0.1,
                "std_by_feature": {"CTCF": 5e-5, "DNase_a": 0.1},
            },
        },
    )
    page = drawn_report(results, tmp_path / "report.html").read_text()
    assert "Bits per base on the held-out chromosomes" in page
    assert "<td>1.771</td>" in page and "<td>1.812</td>" in page
    assert "order-9 Markov (alpha 2" in page
    assert "Fine-tuning: tf0" in page and "k-mer (3-6) logistic regression" in page
    assert "<td>0.6123</td>" in page and "<td>0.6512</td>" in page
    assert "prediction std, CTCF</td><td>5e-05" in page  # a collapsed feature shows
    assert "Fine-tuning: chromatin" in page
    assert "What this model knows" not in page  # said of promoter models only
    _write_json(results / "promoter" / "report" / "metrics.json", {**binary, "task": "promoter"})
    page = drawn_report(results, tmp_path / "report.html").read_text()
    promoter = page[page.index("Fine-tuning: promoter") :]
    assert "not a promoter from the rest of the genome" in promoter


def test_report_withholds_held_out_figures_scored_with_the_answers_visible(tmp_path):
    """A training summary without `heldout_scoring` was written when scoring left BERT's
    unchanged tenth of the masked tokens visible: its bits are not comparable with the
    Markov baseline. With no held-out instances to score the model again, the report
    says so and shows neither figure."""
    results = tmp_path / "results"
    _write_json(
        results / "pretrain" / "model" / "training_summary.json",
        {"eval": {"bits_per_character": 1.7469, "mlm_accuracy": 0.086}},
    )
    _write_json(
        results / "baselines" / "markov.json", {"order": 10, "alpha": 4.0, "bits_per_bp": 1.7697}
    )
    page = drawn_report(results, tmp_path / "report.html").read_text()
    assert "Held-out evaluation" in page and "Not shown" in page
    assert "1.747" not in page and "Bits per base on the held-out chromosomes" not in page


def test_report_sets_zero_shot_genobird_beside_the_markov_models(tmp_path):
    results = tmp_path / "results"
    _write_json(
        results / "pretrain" / "model" / "training_summary.json",
        {
            "eval": {"bits_per_character": 1.77, "mlm_accuracy": 0.06},
            "heldout_scoring": HELDOUT_SCORING,
        },
    )
    binary = {
        "split": "test",
        "f1": 0.9,
        "mcc": 0.8,
        "auroc": 0.95,
        "auprc": 0.9,
        "examples": 10,
        "positives": 5,
    }
    task = results / "tasks" / "tata"
    _write_json(task / "report" / "metrics.json", binary)
    page = drawn_report(results, tmp_path / "report.html").read_text()
    assert "Zero-shot" not in page  # not run: no section
    _write_json(
        task / "zero-shot" / "genobird" / "report" / "metrics.json", {**binary, "auroc": 0.9721}
    )
    _write_json(
        task / "zero-shot" / "markov" / "report" / "metrics.json",
        {**binary, "auroc": 0.9464, "order": 8},
    )
    page = drawn_report(results, tmp_path / "report.html").read_text()
    assert "Zero-shot, by likelihood alone" in page and "(order 8 chosen" in page
    zero_shot = page[page.index("Zero-shot, by likelihood alone") :]
    assert zero_shot.index("genobird zero-shot") < zero_shot.index("<td>0.9721</td>")
    assert zero_shot.index("Markov model zero-shot") < zero_shot.index("<td>0.9464</td>")


def _write_run(folder: Path, labels, probabilities, mcc: float) -> None:
    from genobird.datasets.metrics import write_test_predictions

    report = {
        "split": "test",
        "f1": 0.8,
        "mcc": mcc,
        "auroc": 0.9,
        "auprc": 0.88,
        "examples": len(labels),
        "positives": int(sum(labels)),
    }
    _write_json(folder / "report" / "metrics.json", report)
    write_test_predictions(
        folder / "report",
        {"feature_names": ["label"]},
        (np.asarray(labels)[:, None], np.asarray(probabilities)[:, None]),
        "split-1",
    )


def test_report_sets_the_mean_of_fine_tuning_seeds_beside_the_baselines(tmp_path):
    """A sequence task fine-tuned with `seeds: 3`: each seed's row, their mean, and the
    seeds' mean paired against each baseline on the same test sequences."""
    from sklearn.metrics import matthews_corrcoef

    results = tmp_path / "results"
    _write_json(
        results / "pretrain" / "model" / "training_summary.json",
        {
            "eval": {"bits_per_character": 1.77, "mlm_accuracy": 0.06},
            "heldout_scoring": HELDOUT_SCORING,
        },
    )
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 400)
    task = results / "tasks" / "tf2"
    runs = {
        task: 0.6,
        task / "seeds" / "1": 0.5,
        task / "seeds" / "2": 0.8,
        task / "baselines" / "kmer-lr": 0.4,
    }
    scored = {}
    for folder, mcc in runs.items():  # noisier predictions for a lower figure
        scored[folder] = np.clip(labels + rng.normal(0, 1 - mcc, labels.size), 0, 1)
        _write_run(folder, labels, scored[folder], mcc)
    page = drawn_report(results, tmp_path / "report.html").read_text()
    table = page[page.index("Fine-tuning: tf2") :]
    for name in (
        "genobird, seed 0",
        "genobird, seed 1",
        "genobird, seed 2",
        "genobird (fine-tuned BigBird), mean of 3 seeds</td><td>0.6333</td>",
    ):
        assert name in table
    assert table.index("seed 2") < table.index("mean of 3 seeds") < table.index("k-mer")
    assert "The mean of genobird's 3 seeds minus each baseline on the same 400" in table
    seed_mcc = [matthews_corrcoef(labels, scored[f] >= 0.5) for f in list(runs)[:3]]
    kmer_mcc = matthews_corrcoef(labels, scored[task / "baselines" / "kmer-lr"] >= 0.5)
    difference = np.mean(seed_mcc) - kmer_mcc
    row = table[table.index("genobird minus") :]
    assert f"<td>{difference:+.3f} [" in row[row.index("k-mer") :]


def test_report_says_how_each_fine_tuned_model_was_trained_and_tested(tmp_path):
    """The recipe and what each test prediction averages, from metrics.json; a report
    from before these fields existed gets no such line rather than a wrong one."""
    results = tmp_path / "results"
    _write_json(
        results / "pretrain" / "model" / "training_summary.json",
        {
            "eval": {"bits_per_character": 1.77, "mlm_accuracy": 0.06},
            "heldout_scoring": HELDOUT_SCORING,
        },
    )
    binary = {"split": "test", "f1": 0.8, "mcc": 0.6, "auroc": 0.9, "examples": 100}
    sampled = {
        **binary,
        "rc_average": True,
        "pooling": "mean",
        "bpe_dropout": 0.1,
        "segmentations": 16,
        "base_cnn_channels": 128,
        "base_kmers": 6,
        "training": {
            "steps": 6000,
            "best_step": 5000,
            "base_blend": {"cnn_weight": 0.25},
            "start_validation_auroc": 0.81234,
            "start_check": {"baselines": 0.81234, "step_0": 0.81236, "agree": True},
        },
    }
    _write_json(results / "tasks" / "tf1" / "report" / "metrics.json", sampled)
    probed = {
        "probe_steps": 500,
        "asked": ["strands", "learning_rate"],
        "strands": {
            "chosen": "one strand",
            "validation_auroc": {"both strands": 0.71, "one strand": 0.8},
        },
        "learning_rate": {"chosen": "0.0001", "validation_auroc": {"0.0003": 0.8, "0.0001": 0.82}},
    }
    one_strand = {
        **binary,
        "rc_average": False,
        "pooling": "cls",
        "bpe_dropout": 0.0,
        "segmentations": None,
        "training": {"steps": 400, "best_step": 400},
        "learning_rate": 1e-4,
        "recipe_choice": probed,
    }
    _write_json(results / "tasks" / "tf2" / "report" / "metrics.json", one_strand)
    not_probed = "not probed: the best probe so far was best at its start"
    started = {
        **probed,
        "asked": ["strands", "pooling"],
        "pooling": {"chosen": "mean", "settings": {"pooling": "mean"}, "not_probed": not_probed},
    }
    _write_json(results / "tasks" / "tf3" / "report" / "metrics.json", binary)
    page = drawn_report(results, tmp_path / "report.html").read_text()
    tf1, tf2 = page[page.index("Fine-tuning: tf1") :], page[page.index("Fine-tuning: tf2") :]
    assert tf1.index(
        "<p>genobird: 6,000 fine-tuning steps, the best validation check&#x27;s "
        "weights kept; mean pooling; a 128-filter CNN on the bases beside the "
        "encoder; the counts of its 3- to 6-mers beside the encoder; started "
        "from 0.25 x the base CNN + 0.75 x the k-mer LR (chosen on validation); "
        "the start checked: validation AUROC 0.8124 at step 0, the baselines&#x27; "
        "0.8123; BPE-dropout 0.1 on the training windows; each "
        "test prediction is the mean over both strands and 16 sampled cuts per "
        "strand.</p>"
    ) < tf1.index("Fine-tuning: tf2")
    line = (
        "<p>genobird: 400 fine-tuning steps; learning rate 0.0001; cls pooling; chosen on "
        "validation with probes of at most 500 steps, a default changed only for a lead "
        "beyond one standard error: trained on one strand (AUROC 0.800 "
        "vs both strands 0.710); learning rate 0.0001 (AUROC 0.820 vs 0.0003 0.800); each "
        "test prediction reads one strand (the tokenizer&#x27;s cut).</p>"
    )
    assert tf2.index(line) < tf2.index("Fine-tuning: tf3")
    assert "<p>genobird:" not in page[page.index("Fine-tuning: tf3") :]
    from genobird.report.evaluated import recipe_parts

    kept_start = {"base_kmers": 6, "training": {"steps": 57, "best_step": 0}}
    assert recipe_parts(kept_start)[-1] == (
        "the start kept: the encoder added nothing on validation"
    )
    answers = recipe_parts({"recipe_choice": started})[-1]
    assert answers.endswith(
        f"trained on one strand (AUROC 0.800 vs both strands 0.710); pooling mean ({not_probed})"
    )
    assert "the start kept" not in " ".join(recipe_parts({"training": kept_start["training"]}))
    # a model fine-tuned before the start was checked, and a start that was not the baselines
    assert "fine-tuned before genobird checked it" in recipe_parts(kept_start)[-2]
    wrong = {
        "base_kmers": 6,
        "training": {"start_check": {"baselines": 0.9457, "step_0": 0.6847, "agree": False}},
    }
    assert recipe_parts(wrong)[-1] == (
        "WARNING: the start was not the baselines "
        "(validation AUROC 0.6847 at step 0, the baselines' "
        "0.9457)"
    )


def test_report_on_the_demo_genome_says_it_is_synthetic_and_what_it_holds(tmp_path):
    from genobird.genome.demo import DemoSpec, generate_demo_reference

    results = tmp_path / "results"
    generate_demo_reference(results / "reference", DemoSpec(seed=1, size_mb=0.3))
    manifest = json.loads((results / "reference" / "manifest.json").read_text())
    page = drawn_report(results, tmp_path / "report.html").read_text()
    assert "The demo genome" in page and "<b>synthetic</b>" in page
    assert page.index("<h2>The demo genome") == page.index("<h2>")  # the first section
    counts = manifest["long_range"]
    assert f"<td>{counts['boundaries_convergent']}</td>" in page
    assert "segmental duplications" in page and "docs/results.md" in page


def test_report_on_a_real_genome_has_no_demo_section(tmp_path):
    results = tmp_path / "results"
    _write_json(results / "reference" / "manifest.json", {"name": "GRCh37"})
    (results / "pretrain").mkdir()  # something to report
    page = drawn_report(results, tmp_path / "report.html").read_text()
    assert "The demo genome" not in page


def _feature_predictions(path: Path, labels, probabilities, names) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    categories = np.array(["Histone"] * len(names))
    np.savez(
        path,
        labels=labels,
        probabilities=probabilities,
        feature_names=np.array(names),
        categories=categories,
        fingerprint=np.array("same"),
    )


def test_report_sets_long_range_features_apart_from_local_ones_beside_each_baseline(tmp_path):
    """Median AUROC over the manifest's long-range features and over the rest: genobird
    ranks the long-range ones perfectly and the local ones backwards, the CNN the other
    way round; the differences carry paired intervals."""
    results = tmp_path / "results"
    _write_json(
        results / "reference" / "manifest.json",
        {
            "name": "genobird-demo",
            "seed": 0,
            "chromosomes": {"chr1": 1000},
            "long_range_features": ["far_a", "far_b"],
        },
    )
    rng = np.random.default_rng(0)
    labels = (rng.random((200, 4)) < 0.4).astype(np.uint8)
    names = ["far_a", "near_a", "far_b", "near_b"]
    far = np.array([True, False, True, False])
    ours = np.where(far, labels, 1 - labels).astype(float)
    _feature_predictions(
        results / "chromatin" / "report" / "test_predictions.npz", labels, ours, names
    )
    _feature_predictions(
        results / "chromatin" / "baselines" / "cnn" / "report" / "test_predictions.npz",
        labels,
        1 - ours,
        names,
    )
    # a predictor of several features beside its baseline: figures per feature, no paired
    # table of F1 and MCC (its comparison is the long-range one)
    figures = {"split": "test", "examples": 200, "median_auroc": 0.5, "median_auprc": 0.4}
    for run in ("chromatin", "chromatin/baselines/cnn"):
        _write_json(results / run / "report" / "metrics.json", figures)
    page = drawn_report(results, tmp_path / "report.html").read_text()
    assert json.loads((results / "comparisons.json").read_text())["tables"] == {"chromatin": None}
    section = page[page.index("Chromatin features by the context their labels need") :]
    rows = [row for row in section.split("<tr>") if "3-layer CNN" in row]
    assert len(rows) == 2
    assert "<td>long-range</td><td>2</td>" in rows[0] and "+1.000 [+1.000, +1.000]" in rows[0]
    assert "<td>local</td><td>2</td>" in rows[1] and "-1.000 [-1.000, -1.000]" in rows[1]
    assert "far_a, far_b" in section


def test_report_checks_genobird_against_each_baseline_and_writes_the_checks(tmp_path):
    """Held-out bits below Markov (met), long-range features above the CNN (met), the
    promoter's MCC below the k-mer LR's (not met): a table near the top of the report
    and report.checks.json beside it, with the paired intervals."""
    from sklearn.metrics import matthews_corrcoef

    results = tmp_path / "results"
    _write_held_out(results, bits=1.7712, markov_bits=1.8123)
    _write_json(
        results / "reference" / "manifest.json",
        {
            "name": "genobird-demo",
            "seed": 0,
            "chromosomes": {"chr1": 1000},
            "long_range_features": ["far_a"],
        },
    )
    rng = np.random.default_rng(1)
    labels = (rng.random((200, 2)) < 0.4).astype(np.uint8)
    ours = labels.astype(float)
    _feature_predictions(
        results / "chromatin" / "report" / "test_predictions.npz", labels, ours, ["far_a", "near_a"]
    )
    _feature_predictions(
        results / "chromatin" / "baselines" / "cnn" / "report" / "test_predictions.npz",
        labels,
        1 - ours,
        ["far_a", "near_a"],
    )
    promoter = rng.integers(0, 2, 300)
    scored = {}
    for folder, noise in (("promoter", 0.6), ("promoter/baselines/kmer-lr", 0.2)):
        scored[folder] = np.clip(promoter + rng.normal(0, noise, promoter.size), 0, 1)
        _write_run(results / folder, promoter, scored[folder], 0.0)
    out = drawn_report(results, tmp_path / "report.html")
    page = out.read_text()
    assert page.index("Checks against the baselines: 2 of 3 met") < page.index("Held-out")
    assert "Why on this run" not in page  # the unmet promoter check has no note
    checks = json.loads((tmp_path / "report.checks.json").read_text())
    assert (checks["met"], checks["of"], checks["notes"]) == (2, 3, [])
    held, far, promoter_row = checks["checks"]
    assert held["met"] and held["genobird"] == 1.7712 and held["baseline"] == 1.8123
    assert far["met"] and far["check"].endswith("above the CNN's")
    assert far["difference"] == [1.0, 1.0, 1.0]
    ours_mcc = matthews_corrcoef(promoter, scored["promoter"] >= 0.5)
    theirs_mcc = matthews_corrcoef(promoter, scored["promoter/baselines/kmer-lr"] >= 0.5)
    assert not promoter_row["met"] and ours_mcc < theirs_mcc
    point, low, high = promoter_row["difference"]
    assert abs(point - (ours_mcc - theirs_mcc)) < 1e-9 and low <= point <= high


def _context_row(length, bits_gain=None, accuracy_gain=None):
    row = {"context_length": length}
    for name, gain in (("bits_gain", bits_gain), ("accuracy_gain", accuracy_gain)):
        if gain is not None:
            row[name], row[name + "_ci95"] = gain[0], gain[1:]
    return row


def test_the_context_check_needs_three_lengths_each_gain_above_zero(tmp_path):
    from genobird.report.checks import rising_lengths
    from genobird.report.sections.pretraining import context_check

    def context_check_of(rows):  # as the pretrained model's evaluation artifact holds them
        _pretrained_evaluation(tmp_path, context=rows)
        return context_check(tmp_path)

    rows = [
        _context_row(8),
        _context_row(16, (0.01, 0.004, 0.02), (0.002, -0.001, 0.005)),
        _context_row(32, (0.005, 0.001, 0.009), (0.001, -0.002, 0.004)),
        _context_row(64, (0.001, -0.002, 0.004), (0.001, -0.002, 0.004)),
    ]
    assert rising_lengths(rows, "bits_gain") == [8, 16, 32]
    assert rising_lengths(rows, "accuracy_gain") == [8]
    check = context_check_of(rows)
    assert check["met"] and check["genobird"] == "bits per bp: 8 < 16 < 32 tokens"
    rows[2] = _context_row(32, (0.005, -0.001, 0.009))  # the second gain's interval holds 0
    rows[3] = _context_row(64, (0.004, 0.001, 0.007))
    assert rising_lengths(rows, "bits_gain") == [8, 16]  # the first run of two, kept
    assert not context_check_of(rows)["met"]


def _pretrained_evaluation(results: Path, held_out=None, context=None) -> None:
    """The pretrained model's evaluation artifact, as `genobird evaluate pretrained` writes it."""
    from genobird.artifacts import PretrainedEvaluation

    PretrainedEvaluation(settings={}, held_out=held_out, context=context, copy_context=None).write(
        results
    )


def _unmet(*names):
    return [{"name": name, "met": False} for name in names]


def test_demo_notes_say_what_kept_each_unmet_check_out_of_reach(tmp_path):
    """On the demo genome: a held-out figure at the order-0 level is named as such, one
    below it is not; a chromatin window narrower than the distal elements' distance is
    named, a wide one is not; a real genome or met checks get no notes."""
    import h5py

    from genobird.report.checks import demo_notes

    results = tmp_path / "results"
    _write_json(results / "reference" / "manifest.json", {"name": "genobird-demo"})
    _write_json(
        results / "baselines" / "markov.json",
        {
            "order": 10,
            "alpha": 2.0,
            "bits_per_bp": 1.869,
            "validation_bits_per_bp": {"0,1": 1.991, "0,4": 1.995, "10,2": 1.87},
        },
    )

    def held_out(bits: float) -> None:  # the pretrained model's evaluation artifact
        figures = {"bits_per_character": bits}
        _pretrained_evaluation(
            results, held_out={"source": "summary", "steps": 600, "figures": figures}
        )

    held_out(1.989)
    (held,) = demo_notes(results, _unmet("held_out"))
    assert "after 600 pretraining steps" in held and "no better than the bases' composition" in held
    assert "1.991" in held and "1.869" in held
    held_out(1.93)
    (held,) = demo_notes(results, _unmet("held_out"))
    assert "between the bases' composition and the Markov model" in held

    data = results / "chromatin" / "data.h5"
    data.parent.mkdir()
    for window, expected in ((8000, 0), (600, 1)):
        with h5py.File(data, "w") as handle:
            handle.attrs["window_bp"] = window
        notes = demo_notes(results, _unmet("long_range", "promoter"))
        assert len(notes) == expected
    assert "600 bp around each bin (300 bp each side)" in notes[0] and "1-3 kb" in notes[0]

    assert demo_notes(results, [{"name": "held_out", "met": True}]) == []
    _write_json(results / "reference" / "manifest.json", {"name": "my-genome"})
    assert demo_notes(results, _unmet("held_out", "long_range")) == []


def test_checks_section_lists_the_notes_under_the_table():
    from genobird.report import checks_section

    rows = [
        {
            "name": "held_out",
            "check": "held-out bits",
            "genobird": 2.0,
            "baseline": 1.9,
            "difference": [0.1, None, None],
            "met": False,
        }
    ]
    page = checks_section(rows, ["bits <at> the composition level"])
    assert page.index("</table>") < page.index("Why on this run")
    assert "<li>bits &lt;at&gt; the composition level</li>" in page
    assert "Why on this run" not in checks_section(rows, [])


def test_a_folder_with_nothing_to_report_is_an_error_not_an_empty_page(tmp_path, capsys):
    from genobird.cli import main

    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("not a pipeline's results\n")
    out = tmp_path / "r.html"
    assert main(["-q", "report", "--results", str(tmp_path / "empty"), "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert "nothing to report" in err and len(err.splitlines()) == 1 and not out.exists()
    # no evaluation's artifact left there
    assert [p.name for p in (tmp_path / "empty").iterdir()] == ["notes.txt"]


def test_a_start_blended_by_category_is_named_with_each_categorys_weight():
    from genobird.report.evaluated import how_evaluated

    blend = {"cnn_weight": 0.5, "cnn_weight_by_category": {"polycomb": 0.5, "znf_repeats": 0.0}}
    metrics = {
        "base_cnn_channels": 128,
        "base_kmers": 6,
        "training": {"steps": 300, "base_blend": blend},
    }
    text = how_evaluated(metrics)
    assert (
        "blended per feature category, the CNN&#x27;s weight chosen on validation: "
        "polycomb 0.5, znf_repeats 0"
    ) in text, text
    assert "0.5 x the base CNN" not in text


def test_the_report_draws_its_evaluations_and_computes_nothing(tmp_path, monkeypatch, capsys):
    """The report draws the evaluations' artifacts and scores no model itself: with every
    evaluation function broken it still draws what the artifacts hold. Where an artifact
    it needs is missing, or was made with other settings than asked, `genobird report`
    refuses in one line naming the command that writes it, and writes no page.
    `genobird evaluate all` runs an evaluation whose artifact is missing or older than
    the files it reads, and leaves a current one as it is."""
    import os

    from genobird.cli import main
    from genobird.evaluation import corpus_statistics, pretrained, run_comparisons
    from genobird.training import context

    results = tmp_path / "results"
    _write_held_out(results, bits=1.7712, markov_bits=1.8123)
    page = tmp_path / "r.html"
    report = ["-q", "report", "--results", str(results), "--out", str(page)]
    settings = ["--context-tokens", "64"]
    assert main([*report, *settings]) == 1
    refusal = capsys.readouterr().err
    assert f"run `genobird evaluate pretrained --results {results}`" in refusal
    assert "evaluate_pretrained rule" in refusal and len(refusal.strip().splitlines()) == 1
    assert not page.exists()
    evaluate = ["-q", "evaluate", "all", "--results", str(results), *settings]
    assert main(evaluate) == 0
    artifact = results / "pretrain" / "evaluation.json"
    record = json.loads(artifact.read_text())
    assert record["held_out"]["figures"]["bits_per_character"] == 1.7712
    assert record["settings"]["context_tokens"] == [64] and record["context"] is None
    assert not (results / "comparisons.json").exists()  # no fine-tuned run to compare

    def broken(*args, **kwargs):
        raise AssertionError("the report scored a model")

    for module, name in (
        (context, "mlm_accuracy_by_context"),
        (context, "evaluate_saved_model"),
        (pretrained, "evaluate_pretrained"),
        (run_comparisons, "compare_runs"),
        (corpus_statistics, "corpus_statistics"),
    ):
        monkeypatch.setattr(module, name, broken)
    assert main([*report, *settings]) == 0
    text = page.read_text()
    assert "<td>1.771</td>" in text and "Checks against the baselines: 1 of 1 met" in text
    capsys.readouterr()
    assert main([*report, "--context-tokens", "128"]) == 1  # evaluated at 64 tokens
    assert "--context-tokens 128" in capsys.readouterr().err
    assert main(evaluate) == 0  # current artifacts of the same settings: not evaluated again
    monkeypatch.undo()
    before = artifact.stat().st_mtime
    markov = results / "baselines" / "markov.json"
    os.utime(markov, (before + 10, before + 10))  # a Markov model fitted again since
    assert main(evaluate) == 0
    assert artifact.stat().st_mtime > before


def test_the_report_package_imports_no_evaluation_code():
    """What the report draws is computed by `genobird evaluate`: no module of the report
    imports genobird.evaluation, and none resamples."""
    from tests.test_architecture import imports

    reaching = sorted(
        (module, target)
        for module, targets in imports().items()
        if module.startswith("genobird.report")
        for target in targets
        if target.startswith("genobird.evaluation")
    )
    assert reaching == []
    package = Path(__file__).resolve().parents[1] / "genobird" / "report"
    calls = {
        node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        for path in package.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
    }
    assert sorted(c for c in calls if "bootstrap" in c or "resample" in c or "summarise" in c) == []


def test_the_corpus_statistics_are_an_artifact_the_report_draws(pretraining_data, tmp_path, capsys):
    """`genobird evaluate corpus` counts each part's documents and reads the vocabulary's bp
    per token on held-out sentences (sentencepiece's own encoding as the oracle); the
    report draws those figures, and refuses a corpus whose statistics were never written."""
    import shutil

    import sentencepiece as spm

    from genobird.cli import main
    from genobird.corpus import read_documents
    from tests.conftest import check_artifacts

    results = tmp_path / "results"
    corpus = results / "corpus"
    corpus.mkdir(parents=True)
    for source, part in (("train", "train"), ("eval", "heldout")):
        shutil.copy(pretraining_data["folder"] / f"{source}.txt", corpus / f"{part}.txt")
        shutil.copy(
            pretraining_data["folder"] / f"{source}.txt.index.json",
            corpus / f"{part}.txt.index.json",
        )
    shutil.copy(pretraining_data["tokenizer"], corpus / "tokenizer.model")
    page = tmp_path / "r.html"
    assert main(["-q", "report", "--results", str(results), "--out", str(page)]) == 1
    assert "run `genobird evaluate corpus" in capsys.readouterr().err and not page.exists()
    assert main(["-q", "evaluate", "corpus", "--results", str(results)]) == 0
    check_artifacts(results)
    record = json.loads((corpus / "statistics.json").read_text())
    heldout = [s for document in read_documents(corpus / "heldout.txt") for s in document]
    assert [part["part"] for part in record["parts"]] == ["train", "heldout"]
    assert record["parts"][1]["sentences"] == len(heldout)
    assert record["parts"][1]["documents"] == sum(1 for _ in read_documents(corpus / "heldout.txt"))
    sample = heldout[:2000]
    oracle = spm.SentencePieceProcessor(model_file=str(corpus / "tokenizer.model"))
    pieces = sum(len(oracle.encode(sentence)) for sentence in sample)
    vocabulary = record["vocabulary"]
    assert vocabulary["heldout_sentences"] == len(sample) and vocabulary["pieces"] == 500
    assert vocabulary["bp_per_token"] == pytest.approx(sum(map(len, sample)) / pieces, rel=1e-9)
    assert main(["-q", "report", "--results", str(results), "--out", str(page)]) == 0
    text = page.read_text()
    assert f"bp per token on {len(sample):,} held-out sentences" in text
    assert f"<td>{vocabulary['bp_per_token']:,.4g}</td>" in text
