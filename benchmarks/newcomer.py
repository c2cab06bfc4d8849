"""A new user's first fine-tuning: their own small labelled task, `genobird finetune
classify` with no recipe option, against their own k-mer LR and CNN.

    python benchmarks/newcomer.py --model results/demo/pretrain/model \\
        --reference results/demo/reference/genome.fa --out results/newcomer

The task is what a newcomer brings: `--windows` (300) sequences of `--window-bp` (200)
drawn from the reference (no N), half of them given a site at a random place on the
forward strand, labelled by whether the site is present, in one CSV split by `genobird
dataset classify`'s defaults (10% validation, 10% test). One task per site in
`--motifs`: CREB's TGACGTCA and the E-box CACGTG, their own reverse complements, and
three that are not (GATA's GATAAG and AGATAAGG, and TTGACATGGCA), since a k-mer model
fitted on one strand and read on both reads those two ways. Then, as the user would run
them: the default recipe, timed; `genobird baseline kmer-lr` and `cnn`; and `genobird
baseline compare` of the default against each, paired over the test windows. Prints
the plan's estimate, the strands chosen, each model's validation AUROC and test figures
(MCC at each run's threshold chosen on validation), and the targets: the default's
validation AUROC at least each baseline's; its test AUROC within the paired interval of
the better baseline's or above; within 5 minutes on 2 cores.
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
MOTIFS = (MOTIF, "CACGTG", "GATAAG", "AGATAAGG", "TTGACATGGCA")
BUDGET_S = 300


def genobird(*args, log: Path | None = None) -> None:
    command = [sys.executable, "-m", "genobird.cli", *map(str, args)]
    with open(log, "w") if log else open("/dev/null", "w") as handle:
        subprocess.run(command, check=True, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT)


def motif_task(
    reference: Path, count: int, width: int, seed: int, motif: str = MOTIF
) -> list[tuple[str, int]]:
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
    parser.add_argument("--reference", type=Path, default=REPO / "results/demo/reference/genome.fa")
    parser.add_argument("--out", type=Path, default=REPO / "results/newcomer")
    parser.add_argument("--windows", type=int, default=300)
    parser.add_argument("--window-bp", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--motifs",
        nargs="+",
        default=list(MOTIFS),
        help="one task per site, planted in its positives",
    )
    args = parser.parse_args(argv)
    met = True
    for motif in args.motifs:
        met &= newcomer_task(args, motif, args.out / motif)
    return 0 if met else 1


def newcomer_task(args, motif: str, out: Path) -> bool:
    """One task of a planted `motif`: the default beside both baselines; True when its
    targets are met."""
    from genobird.genome import reverse_complement

    out.mkdir(parents=True, exist_ok=True)
    rows = motif_task(args.reference, args.windows, args.window_bp, args.seed, motif)
    table = out / "task.csv"
    table.write_text("sequence,label\n" + "".join(f"{s},{y}\n" for s, y in rows))
    data = out / "task.h5"
    genobird("-q", "dataset", "classify", "--input", table, "--out", data)
    started = time.perf_counter()
    genobird(
        "finetune",
        "classify",
        "--data",
        data,
        "--model",
        args.model,
        "--out",
        out / "default",
        log=out / "default.log",
    )
    seconds = time.perf_counter() - started
    for kind in ("kmer-lr", "cnn"):
        genobird("-q", "baseline", kind, "--data", data, "--out", out / kind)
    metrics = json.loads((out / "default" / "report" / "metrics.json").read_text())
    training = metrics["training"]
    palindrome = "a palindrome" if reverse_complement(motif) == motif else "not a palindrome"
    print(
        f"{motif} ({palindrome}): default {seconds:.0f} s (target {BUDGET_S} s; plan "
        f"estimated {training['estimated_cost']['likely_minutes'] * 60:.0f} s); strands "
        f"{metrics['strands'].get('chosen')} "
        f"{metrics['strands'].get('start_validation_auroc')}"
    )
    print(
        f"  default: validation AUROC {training['best_validation_auroc']:.4f} (start "
        f"{training.get('start_validation_auroc')}, best step {training['best_step']} of "
        f"{training['steps']}); test MCC {metrics['mcc']:.3f} (at {metrics['threshold']:.3g}; "
        f"{metrics['at_0.5']['mcc']:.3f} at 0.5), AUROC {metrics['auroc']:.3f}"
    )
    validation, intervals = {}, {}
    for kind in ("kmer-lr", "cnn"):
        baseline = json.loads((out / kind / "report" / "metrics.json").read_text())
        validation[kind] = baseline["baseline"]["validation_auroc"]
        comparison = out / f"compare-{kind}.json"
        genobird("-q", "baseline", "compare", out / "default", out / kind, "--out", comparison)
        paired = json.loads(comparison.read_text())
        intervals[kind] = paired["metrics"]["auroc"]
        print(
            f"  {kind}: validation AUROC {validation[kind]:.4f}; test MCC "
            f"{baseline['mcc']:.3f}, AUROC {baseline['auroc']:.3f}; default - {kind}: "
            f"{paired_text(paired)}"
        )
    best = max(validation, key=validation.get)
    checks = {
        "validation at least both baselines'": training["best_validation_auroc"]
        >= max(validation.values()) - 1e-6,
        f"test AUROC within the interval of the better baseline ({best}) or above": intervals[best][
            "high"
        ]
        >= 0,
        f"within {BUDGET_S} s": seconds <= BUDGET_S,
    }
    print("  targets: " + ", ".join(f"{k}: {'met' if v else 'NOT met'}" for k, v in checks.items()))
    return all(checks.values())


def paired_text(paired: dict) -> str:
    """'MCC +0.012 [-0.050, +0.080], AUROC ...' from `baseline compare`'s JSON."""
    return ", ".join(
        f"{metric.upper()} {row['difference']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]"
        for metric, row in paired["metrics"].items()
        if metric in ("mcc", "auroc")
    )


if __name__ == "__main__":
    sys.exit(main())
