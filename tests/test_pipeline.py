"""The Snakemake workflow: config validation and the job graph (dry runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


def snakemake(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd)


def test_demo_dry_run_plans_every_stage(tmp_path):
    config = yaml.safe_load((REPO / "pipelines" / "demo.yaml").read_text())
    config["results"] = str(tmp_path / "results")
    (tmp_path / "demo.yaml").write_text(yaml.safe_dump(config))
    done = snakemake("-n", "--cores", "2", "--configfile", str(tmp_path / "demo.yaml"))
    assert done.returncode == 0, done.stderr[-2000:]
    for rule in ("demo_reference", "documents", "vocabulary", "instances", "pretrain",
                 "promoter_finetune", "chromatin_finetune", "score", "report"):  # fmt: skip
        assert rule in done.stdout
    assert "total                    20" in done.stdout  # 6 score jobs: 2 models x 3 inputs


def test_unknown_config_key_fails_before_any_rule_naming_it(tmp_path):
    config = yaml.safe_load((REPO / "pipelines" / "demo.yaml").read_text())
    config["corpus"]["pases"] = 2
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(config))
    done = snakemake("-n", "--cores", "1", "--configfile", str(tmp_path / "bad.yaml"))
    assert done.returncode != 0
    assert "'pases' was unexpected" in done.stderr + done.stdout


def test_out_of_range_value_fails_naming_the_key(tmp_path):
    config = yaml.safe_load((REPO / "pipelines" / "demo.yaml").read_text())
    config["corpus"]["passes"] = 0
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(config))
    done = snakemake("-n", "--cores", "1", "--configfile", str(tmp_path / "bad.yaml"))
    output = done.stderr + done.stdout
    assert done.returncode != 0 and "['corpus']['passes']" in output


@pytest.mark.slow
def test_ci_pipeline_runs_end_to_end_resumes_and_then_has_nothing_to_do(tmp_path):
    """A run stopped after the corpus stage completes when started again; a third run is
    a no-op. pipelines/ci.yaml: every stage on a 1 Mb genome, about 40 s on 2 cores."""
    config = yaml.safe_load((REPO / "pipelines" / "ci.yaml").read_text())
    config["results"] = str(tmp_path / "results")
    path = tmp_path / "ci.yaml"
    path.write_text(yaml.safe_dump(config))
    base = ["--cores", "2", "--configfile", str(path)]
    stopped = snakemake(*base, "--until", "instances")
    assert stopped.returncode == 0, stopped.stderr[-2000:]
    assert not (tmp_path / "results" / "pretrain").exists()
    finished = snakemake(*base)
    assert finished.returncode == 0, finished.stderr[-3000:]
    results = tmp_path / "results"
    for task in ("promoter", "chromatin"):
        assert (results / task / "report" / "metrics.json").is_file()
        scores = (results / "score" / f"{task}_heldout_tss.tsv").read_text()
        assert scores.splitlines()[0].startswith("index\tchrom\tstart\tend\tstrand\tcontains_N")
        assert len((results / "score" / f"{task}_samples.tsv").read_text().splitlines()) > 10
        assert (results / "score" / f"{task}_variants.tsv.log_odds_diff.tsv").is_file()
    page = (results / "report.html").read_text()
    for heading in ("Corpus", "Vocabulary", "Pretraining", "context length", "promoter",
                    "chromatin", "Score tables"):  # fmt: skip
        assert heading in page, heading
    assert page.count("data:image/png;base64,") >= 4  # curves, context, ROC/PR plots
    assert 'href="score/promoter_variants.tsv"' in page
    again = snakemake(*base, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_pretraining_on_gpus_launches_torchrun(tmp_path):
    config = yaml.safe_load((REPO / "pipelines" / "demo.yaml").read_text())
    config["results"] = str(tmp_path / "results")
    config["pretrain"]["gpus"] = 8
    (tmp_path / "gpu.yaml").write_text(yaml.safe_dump(config))
    done = snakemake("-n", "-p", "--cores", "2", "--configfile", str(tmp_path / "gpu.yaml"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "torchrun --standalone --nproc_per_node 8 -m genobird.cli -q pretrain" in done.stdout
