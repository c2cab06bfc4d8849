"""benchmarks/demo.py prints a finished demo run's checks against the baselines (the
fresh-clone rerun itself is the 10-minute demo, run by hand); run as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_demo_benchmark_prints_each_check_met_or_not(tmp_path):
    results = tmp_path / "demo"
    results.mkdir()
    checks = {
        "checks": [
            {
                "check": "held-out bits per bp below the Markov model's",
                "genobird": 1.9,
                "baseline": 1.8,
                "difference": [0.1, None, None],
                "met": False,
            },
            {
                "check": "promoter MCC at least the k-mer LR's",
                "genobird": 0.92,
                "baseline": 0.9,
                "difference": [0.02, -0.01, 0.05],
                "met": True,
            },
        ],
        "met": 1,
        "of": 2,
    }
    (results / "report.checks.json").write_text(json.dumps(checks))
    printed = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "demo.py"),
            "--results",
            str(results),
            "--out",
            str(tmp_path / "out.json"),
        ],
        check=True,
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout
    lines = printed.splitlines()
    assert lines[0].startswith("NOT met  held-out bits per bp below the Markov model's")
    assert "difference +0.1000" in lines[0] and "[" not in lines[0]
    assert lines[1].startswith("met ") and "difference +0.0200 [-0.0100, +0.0500]" in lines[1]
    assert lines[2].startswith("1 of 2 checks met")
    assert json.loads((tmp_path / "out.json").read_text())["checks"] == checks
