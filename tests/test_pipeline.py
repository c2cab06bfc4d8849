"""The Snakemake workflow: config validation and the job graph (dry runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
                 "promoter_finetune", "chromatin_finetune", "score"):  # fmt: skip
        assert rule in done.stdout
    assert "total                    15" in done.stdout


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
