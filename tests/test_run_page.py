"""`genobird report --results RUN` on one finetune or baseline run: a self-contained page
drawn from the run's own files (its plan, choices, start check, figures at the chosen
threshold and at 0.5, the model beside the baselines it was paired with, curves and
calibration), checked in a real headless browser where one is installed."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from genobird.cli import main
from genobird.datasets.windows import WindowSet

MOTIF = "TGACGCA"  # not a palindrome


def planted(path, count: int = 240, length: int = 80, seed: int = 0):
    rng = np.random.default_rng(seed)
    windows = WindowSet("classify", ["bound"], ["label"])
    for index in range(count):
        dna = "".join(rng.choice(list("ACGT"), length))
        label = index % 2
        if label and rng.random() < 0.85:
            at = int(rng.integers(0, length - len(MOTIF)))
            dna = dna[:at] + MOTIF + dna[at + len(MOTIF) :]
        windows.add(
            dna,
            [label],
            f"w{index}",
            0,
            length,
            "+",
            ("train", "train", "train", "valid", "test")[index % 5],
        )
    return windows.write(path)


@pytest.fixture(scope="module")
def runs(pretraining_data, tmp_path_factory):
    """A default-shaped classify run (base CNN and k-mer LR under the encoder, trained
    from scratch on a planted non-palindromic motif) and a k-mer LR baseline run."""
    folder = tmp_path_factory.mktemp("run-page")
    data = planted(folder / "planted.h5")
    run = folder / "run"
    assert (
        main(
            [
                "-q",
                "finetune",
                "classify",
                "--data",
                str(data),
                "--from-scratch",
                "--tokenizer",
                str(pretraining_data["tokenizer"]),
                "--out",
                str(run),
                "--max-steps",
                "4",
                "--eval-every",
                "2",
                "--base-cnn-channels",
                "8",
                "--base-cnn-epochs",
                "2",
                "--base-kmers",
                "4",
            ]
        )
        == 0
    )
    baseline = folder / "kmer"
    assert main(["-q", "baseline", "kmer-lr", "--data", str(data), "--out", str(baseline)]) == 0
    for results in (run, baseline):
        assert (results / "report.html").is_file()  # each run writes its page as it ends
        assert main(["-q", "report", "--results", str(results)]) == 0  # and the command
    return run, baseline


def test_a_finetune_run_has_a_page_of_its_plan_choices_and_figures(runs):
    run, _ = runs
    page = (run / "report.html").read_text()
    metrics = json.loads((run / "report" / "metrics.json").read_text())
    training = metrics["training"]
    assert "<title>genobird finetune classify:" in page
    assert training["plan"] in page.replace("&#x27;", "'")  # the plan the run logged
    for heading in (
        "Test figures",
        "What the run did",
        "Base readers, strands and probes",
        "Beside its baselines",
        "Curves",
        "Files",
    ):
        assert f"<h2>{heading}" in page, heading
    assert f"{metrics['auroc']:.4f}" in page and f"{metrics['at_0.5']['mcc']:.4f}" in page
    assert f"at {metrics['threshold']:.4g}, chosen by the best MCC on validation" in page
    assert "start check" in page and f"stopped by</td><td>{training['stopped_by']}" in page
    # validation by step, calibration and ROC/PR, embedded
    images = re.findall(r"<img alt=\"([^\"]+)\" src=\"data:image/png;base64,", page)
    assert {"validation AUROC by step", "calibration", "roc_pr"} <= set(images)
    assert "href='model/README.md'" in page  # the model card, relative to the page


def test_the_run_is_paired_with_its_own_base_readers_and_start(runs):
    """Each base reader's test predictions are written as its baseline run writes them,
    and the model is paired with each on the same windows; the start's own figure is the
    one the run logged for it."""
    run, _ = runs
    comparisons = json.loads((run / "report" / "compare.json").read_text())
    assert set(comparisons) == {"base cnn", "base kmer-lr", "start"}
    metrics = json.loads((run / "report" / "metrics.json").read_text())
    for result in comparisons.values():
        auroc = result["metrics"]["auroc"]
        assert auroc["a"] == pytest.approx(metrics["auroc"], abs=1e-9)
        assert auroc["low"] <= auroc["difference"] <= auroc["high"]
    start = comparisons["start"]["metrics"]["auroc"]["b"]
    assert start == pytest.approx(metrics["training"]["start_test_auroc"], abs=1e-5)
    # the model card sets the same base readers' test figures beside the model's
    card = (run / "model" / "README.md").read_text()
    for reader in ("cnn", "kmer-lr"):
        auroc = comparisons[f"base {reader}"]["metrics"]["auroc"]["b"]
        assert f"| base {reader} | {auroc:.4f} |" in card
    page = (run / "report.html").read_text()
    difference = comparisons["base kmer-lr"]["metrics"]["mcc"]
    assert (
        f"{difference['difference']:+.4f} [{difference['low']:+.4f}, {difference['high']:+.4f}]"
    ) in page


def test_a_baseline_run_has_a_page_too(runs):
    _, baseline = runs
    page = (baseline / "report.html").read_text()
    metrics = json.loads((baseline / "report" / "metrics.json").read_text())
    assert "<title>genobird baseline kmer_lr (classify):" in page
    assert f"C chosen on validation</td><td>{metrics['baseline']['C']}" in page
    assert "No baseline was paired with this run" in page


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium here (Debian: apt-get install chromium)")
def test_the_page_renders_with_its_images_in_a_headless_browser(runs, tmp_path):
    """Chromium loads the page alone (no network, no other file): every image decodes,
    and its screenshot is drawn."""
    run, _ = runs
    page = (run / "report.html").read_text()
    probe = page.replace(
        "</body>",
        "<script>window.onload = () => { document.title = "
        "'decoded ' + [...document.images].filter(i => i.complete && "
        "i.naturalWidth > 0).length + ' of ' + document.images.length; };"
        "</script></body>",
    )
    copy = tmp_path / "page.html"
    copy.write_text(probe)
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000"]
    dom = subprocess.run(
        [*flags, "--dump-dom", copy.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    count = page.count("<img ")
    assert f"<title>decoded {count} of {count}</title>" in dom, dom[:300]
    shot = tmp_path / "page.png"
    subprocess.run(
        [*flags, f"--screenshot={shot}", "--window-size=1000,2400", (run / "report.html").as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert base64.b64encode(shot.read_bytes()[:8]) == base64.b64encode(b"\x89PNG\r\n\x1a\n")
    assert shot.stat().st_size > 20_000  # drawn, not blank


def test_a_run_of_many_features_is_paired_within_a_budget(tmp_path, monkeypatch, caplog):
    """Every feature's AUROC is recomputed on each resample, so a large multi-feature run
    is paired with fewer resamples as it ends, and one too large is left to `baseline
    compare`, said in the log: a run never spends hours on its own comparison."""
    from genobird.datasets.metrics import write_test_predictions
    from genobird.evaluation import compare

    rng = np.random.default_rng(0)
    labels = (rng.random((400, 6)) < 0.3).astype(np.uint8)
    meta = {"feature_names": [f"f{i}" for i in range(6)], "categories": ["a", "b"] * 3}
    for name in ("run", "base"):
        write_test_predictions(
            tmp_path / name / "report", meta, (labels, rng.random(labels.shape)), "split"
        )
    monkeypatch.setattr(compare, "FEATURE_CELLS_BUDGET", 400 * 6 * 150)
    path = compare.compare_run(tmp_path / "run", {"base": tmp_path / "base"})
    assert json.loads(path.read_text())["base"]["resamples"] == 150
    monkeypatch.setattr(compare, "FEATURE_CELLS_BUDGET", 400 * 6 * 99)
    path.unlink()
    with caplog.at_level("INFO"):
        assert compare.compare_run(tmp_path / "run", {"base": tmp_path / "base"}) is None
    assert "too many to pair" in caplog.text and not path.exists()
