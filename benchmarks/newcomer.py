"""A new user's first fine-tuning: their own small labelled task, `genobird finetune
classify` with no recipe option, against their own k-mer LR.

    python benchmarks/newcomer.py --model results/demo/pretrain/model \\
        --reference results/demo/reference/genome.fa --out results/newcomer

The task is what a newcomer brings: `--windows` (300) sequences of `--window-bp` (200)
drawn from the reference (no N), half of them given a motif (`--motif`, CREB's TGACGTCA
by default, at a random place), labelled by whether the motif is present, in one CSV split by
`genobird dataset classify`'s defaults (10% validation, 10% test). Then, as the user
would run them: the default recipe (base CNN and k-mer LR under the encoder, the start
their blend, probes, early stop), timed; `genobird baseline kmer-lr` and `cnn`; and
`genobird baseline compare` of the default against each, paired over the test windows.
Prints the plan the run logged, its time against the 5-minute target, the start's and
the fine-tuned test figures, and the targets (the default's test MCC at least the k-mer
LR's; within 5 minutes on 2 cores).
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
MOTIF = "TGACGTCA"  # CREB's site, its own reverse complement
BUDGET_S = 300


def genobird(*args, log: Path | None = None) -> None:
    command = [sys.executable, "-m", "genobird.cli", *map(str, args)]
    with open(log, "w") if log else open("/dev/null", "w") as handle:
        subprocess.run(command, check=True, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT)


def motif_task(reference: Path, count: int, width: int, seed: int,
               motif: str = MOTIF) -> list[tuple[str, int]]:  # fmt: skip
    """(sequence, label) pairs: windows of the reference without N; the positives carry
    `motif` at a random place, the negatives hold it nowhere (on either strand)."""
    from genobird.genome import open_reference, reverse_complement

    genome = open_reference([reference])
    rng = np.random.default_rng(seed)
    contigs = [name for name, length in genome.lengths.items() if length > 10 * width]
    rows = []
    while len(rows) < count:
        contig = contigs[int(rng.integers(len(contigs)))]
        start = int(rng.integers(0, genome.lengths[contig] - width))
        window = genome.fetch(contig, start, start + width)
        if "N" in window or motif in window or reverse_complement(motif) in window:
            continue
        label = len(rows) % 2
        if label:
            place = int(rng.integers(0, width - len(motif)))
            window = window[:place] + motif + window[place + len(motif) :]
        rows.append((window, label))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=REPO / "results/demo/pretrain/model")
    parser.add_argument("--reference", type=Path,
                        default=REPO / "results/demo/reference/genome.fa")  # fmt: skip
    parser.add_argument("--out", type=Path, default=REPO / "results/newcomer")
    parser.add_argument("--windows", type=int, default=300)
    parser.add_argument("--window-bp", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--motif", default=MOTIF, help="planted in the positives")
    args = parser.parse_args(argv)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    rows = motif_task(args.reference, args.windows, args.window_bp, args.seed, args.motif)
    table = out / "task.csv"
    table.write_text("sequence,label\n" + "".join(f"{s},{y}\n" for s, y in rows))
    data = out / "task.h5"
    genobird("-q", "dataset", "classify", "--input", table, "--out", data)
    started = time.perf_counter()
    genobird("finetune", "classify", "--data", data, "--model", args.model, "--out",
             out / "default", log=out / "default.log")  # fmt: skip
    seconds = time.perf_counter() - started
    for kind in ("kmer-lr", "cnn"):
        genobird("-q", "baseline", kind, "--data", data, "--out", out / kind)
    metrics = json.loads((out / "default" / "report" / "metrics.json").read_text())
    logged = (out / "default.log").read_text().splitlines()
    plan = next((line.split("plan: ", 1)[1] for line in logged if "plan: " in line), "?")
    print(f"plan: {plan}")
    start = metrics["training"]
    print(f"default recipe: {seconds:.0f} s (target {BUDGET_S} s); start test AUROC "
          f"{start.get('start_test_auroc')}, check {start.get('start_check')}")  # fmt: skip
    print(f"  test MCC {metrics['mcc']:.3f}, AUROC {metrics['auroc']:.3f}, "
          f"best step {start.get('best_step')} of {start.get('steps')}")  # fmt: skip
    figures = {}
    for kind in ("kmer-lr", "cnn"):
        baseline = json.loads((out / kind / "report" / "metrics.json").read_text())
        figures[kind] = baseline["mcc"]
        comparison = out / f"compare-{kind}.json"
        genobird("-q", "baseline", "compare", out / "default", out / kind, "--out", comparison)
        paired = json.loads(comparison.read_text())
        print(f"  {kind}: test MCC {baseline['mcc']:.3f}, AUROC {baseline['auroc']:.3f}; "
              f"default - {kind}: {paired_text(paired)}")  # fmt: skip
    met = metrics["mcc"] >= figures["kmer-lr"]
    print(f"target: default MCC >= k-mer LR's: {'met' if met else 'NOT met'}; within "
          f"{BUDGET_S} s: {'met' if seconds <= BUDGET_S else 'NOT met'}")  # fmt: skip
    return 0


def paired_text(paired: dict) -> str:
    """'MCC +0.012 [-0.050, +0.080], AUROC ...' from `baseline compare`'s JSON."""
    return ", ".join(
        f"{metric.upper()} {row['difference']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]"
        for metric, row in paired["metrics"].items() if metric in ("mcc", "auroc")
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
