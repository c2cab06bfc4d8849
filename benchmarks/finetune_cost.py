"""What the default `genobird finetune classify` costs, against what its plan said.

    python benchmarks/finetune_cost.py --model results/demo/pretrain/model \\
        --out results/finetune-cost [--shared ../shared/data]

Two tasks of the sizes a scientist brings: 1,000 windows of 101 bp and 5,000 of 70 bp,
drawn from the GUE human TF tasks (0 and 1; the 70 bp windows are the central 70 bp of
each), split 80/10/10 (the files are sorted by label: rows are drawn at random). Without
../shared, windows of the demo genome with a planted site stand in. For each: the
default recipe, timed, with the minutes its plan estimated (the likely figure, from a
timing of its first steps) and their ratio; `genobird baseline cnn` and `kmer-lr` on
the same data, timed, with the three models' validation and test AUROC and test MCC (at
each run's threshold chosen on validation). Targets (2 cores, the demo's model): the
default within 5 minutes on the first task and 10 on the second; the estimate within 2x
of the time taken; the default's validation AUROC at least each baseline's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# (name, GUE task, windows, bp, minutes allowed)
TASKS = (("1,000 x 101 bp", 0, 1000, 101, 5.0), ("5,000 x 70 bp", 1, 5000, 70, 10.0))


def genobird(*args, log: Path | None = None) -> float:
    """Run a genobird command; returns its seconds."""
    command = [sys.executable, "-m", "genobird.cli", *map(str, args)]
    started = time.perf_counter()
    with open(log or "/dev/null", "w") as handle:
        subprocess.run(command, check=True, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT)
    return time.perf_counter() - started


def gue_rows(shared: Path, task: int, count: int, width: int, seed: int = 0) -> list[str]:
    """`count` 'sequence,label' rows drawn from GUE human TF `task` (every split), each
    sequence its central `width` bases."""
    folder = shared / "tasks" / "gue_human_tf" / str(task)
    rows = [
        line
        for name in ("train", "dev", "test")
        for line in (folder / f"{name}.csv").read_text().splitlines()[1:]
    ]
    chosen = np.random.default_rng(seed).choice(len(rows), count, replace=False)
    out = []
    for index in chosen:
        sequence, label = rows[index].split(",")
        first = (len(sequence) - width) // 2
        out.append(f"{sequence[first : first + width]},{label}")
    return out


def planted_rows(count: int, width: int) -> list[str]:
    from benchmarks.newcomer import motif_task

    reference = REPO / "results" / "demo" / "reference" / "genome.fa"
    return [f"{s},{y}" for s, y in motif_task(reference, count, width, 0, "AGATAAGG")]


def run_task(name: str, rows: list[str], model: Path, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    table = out / "task.csv"
    table.write_text("sequence,label\n" + "\n".join(rows) + "\n")
    data = out / "task.h5"
    genobird(
        "-q",
        "dataset",
        "classify",
        "--input",
        table,
        "--out",
        data,
        "--valid-fraction",
        "0.1",
        "--test-fraction",
        "0.1",
    )
    found = {"name": name}
    found["seconds"] = genobird(
        "finetune",
        "classify",
        "--data",
        data,
        "--model",
        model,
        "--out",
        out / "default",
        log=out / "default.log",
    )
    for kind in ("cnn", "kmer-lr"):
        found[f"{kind} seconds"] = genobird(
            "-q", "baseline", kind, "--data", data, "--out", out / kind
        )
    report = json.loads((out / "default" / "report" / "metrics.json").read_text())
    found["estimate"] = report["training"]["estimated_cost"]
    found["figures"] = {
        "default": (report["training"]["best_validation_auroc"], report["auroc"], report["mcc"])
    }
    for kind in ("cnn", "kmer-lr"):
        baseline = json.loads((out / kind / "report" / "metrics.json").read_text())
        found["figures"][kind] = (
            baseline["baseline"]["validation_auroc"],
            baseline["auroc"],
            baseline["mcc"],
        )
    found["strands"] = report["strands"].get("chosen")
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=REPO / "results/demo/pretrain/model")
    parser.add_argument("--out", type=Path, default=REPO / "results/finetune-cost")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args(argv)
    met = True
    for name, task, count, width, allowed in TASKS:
        rows = (
            gue_rows(args.shared, task, count, width)
            if args.shared.is_dir()
            else planted_rows(count, width)
        )
        found = run_task(name, rows, args.model, args.out / name.split()[0].replace(",", ""))
        minutes, likely = found["seconds"] / 60, found["estimate"]["likely_minutes"]
        ratio = likely / minutes
        print(
            f"{name}: default {minutes:.2f} min (target {allowed:g}); plan estimated "
            f"{likely:.2f} (at most {found['estimate']['at_most_minutes']:.2f}), "
            f"{ratio:.2f}x the time taken; CNN baseline {found['cnn seconds'] / 60:.2f} min "
            f"(default / CNN {found['seconds'] / found['cnn seconds']:.1f}x), k-mer LR "
            f"{found['kmer-lr seconds'] / 60:.2f} min; strands: {found['strands']}"
        )
        for arm, (valid, auroc, mcc) in found["figures"].items():
            print(f"  {arm:<8} validation AUROC {valid:.4f}, test AUROC {auroc:.4f}, MCC {mcc:.3f}")
        best = max(found["figures"][k][0] for k in ("cnn", "kmer-lr"))
        checks = {
            "time": minutes <= allowed,
            "estimate within 2x": 0.5 <= ratio <= 2,
            "validation at least the baselines'": found["figures"]["default"][0] >= best - 1e-6,
        }
        print(
            "  targets: " + ", ".join(f"{k} {'met' if v else 'NOT met'}" for k, v in checks.items())
        )
        met &= all(checks.values())
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
