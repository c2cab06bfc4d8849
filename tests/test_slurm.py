"""The SLURM profile on a real SLURM cluster: scripts/slurm_cluster.sh starts one on this
machine (Debian's slurm-wlm, munge, slurmdbd over MariaDB), and the demo pipeline's first
rules run through `snakemake --profile pipelines/profiles/slurm` and the SLURM executor
plugin. Every job shows in sacct with the resources its rule and the profile declare,
and the outputs equal a local run's, byte for byte."""

from __future__ import annotations

import filecmp
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
CLUSTER = REPO / "scripts" / "slurm_cluster.sh"
PROFILE = REPO / "pipelines" / "profiles" / "slurm"
# the demo genome, then its training and held-out documents: three jobs of two rules
TARGETS = ("corpus/train.txt", "corpus/heldout.txt")
OUTPUTS = ("reference/genome.fa", *TARGETS)
ACCOUNT = "genobird"  # the account scripts/slurm_cluster.sh registers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.pipeline,
    pytest.mark.skipif(
        sys.platform != "linux" or os.geteuid() != 0,
        reason="starting a SLURM cluster needs root on Linux",
    ),
]


def snakemake(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    # jobs run `genobird` on the node: this environment's, as a cluster's module would give
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=900)


def demo_config(folder: Path) -> Path:
    config = yaml.safe_load((REPO / "pipelines" / "demo.yaml").read_text())
    config["results"] = str(folder / "results")
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return folder / "config.yaml"


def test_the_demo_pipelines_first_rules_run_on_slurm_as_they_run_locally(tmp_path):
    started = subprocess.run(
        ["bash", str(CLUSTER), "start"], capture_output=True, text=True, timeout=1200
    )
    assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
    profile = yaml.safe_load((PROFILE / "config.v8+.yaml").read_text())
    defaults = {**profile["default-resources"], "slurm_account": ACCOUNT}  # the one change
    on_slurm, local = tmp_path / "slurm", tmp_path / "local"
    for folder in (on_slurm, local):
        folder.mkdir()
    config = demo_config(on_slurm)
    done = snakemake(
        on_slurm,
        "--profile",
        str(PROFILE),
        "--configfile",
        str(config),
        "--default-resources",
        *(f"{k}={v}" for k, v in defaults.items()),
        "--slurm-init-seconds-before-status-checks",
        "5",
        "--seconds-between-status-checks",
        "5",
        *(str(on_slurm / "results" / target) for target in TARGETS),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = re.findall(
        r"Job \d+ has been submitted with SLURM jobid (\d+) \(log: \S*/rule_(\w+?)/",
        done.stderr + done.stdout,
    )
    assert sorted(rule for _, rule in jobs) == ["demo_reference", "documents", "documents"], jobs
    accounting = subprocess.run(
        [
            "sacct",
            "-X",
            "-P",
            "-n",
            "-j",
            ",".join(job for job, _ in jobs),
            "--format=JobID,State,ReqMem,ReqCPUS,Timelimit,Partition,Account,Comment",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = {row.split("|")[0]: row.split("|") for row in accounting.splitlines()}
    # memory and CPUs: workflows/reference.smk's mem_mb and threads; the profile's memory
    # for documents, and its rule's 16 threads
    documents_mb = profile["set-resources"]["documents"]["mem_mb"]
    declared = {"demo_reference": ("2000M", "1"), "documents": (f"{documents_mb}M", "16")}
    hours = f"{defaults['runtime'] // 60:02d}:{defaults['runtime'] % 60:02d}:00"
    for job, rule in jobs:
        _, state, memory, cpus, limit, partition, account, comment = rows[job]
        assert state == "COMPLETED" and comment.startswith(f"rule_{rule}"), rows[job]
        assert (memory, cpus) == declared[rule], rows[job]
        assert (limit, partition, account) == (hours, defaults["slurm_partition"], ACCOUNT)
    # the same targets on this machine, without SLURM: the same files
    local_done = snakemake(
        local,
        "--configfile",
        str(demo_config(local)),
        "--cores",
        "2",
        *(str(local / "results" / target) for target in TARGETS),
    )
    assert local_done.returncode == 0, local_done.stderr[-3000:]
    for output in OUTPUTS:
        assert filecmp.cmp(
            on_slurm / "results" / output, local / "results" / output, shallow=False
        ), output
