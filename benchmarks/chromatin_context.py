"""The real chromatin task's targets, from a finished pipeline run (pipelines/chromatin-real.yaml):

    .venv/bin/python benchmarks/chromatin_context.py results/human-mini/chromatin_tasks/encode_hg19

prints, over the features with at least --min-positives test positives:
- genobird's test median AUROC and AUPRC by category at each context, and each context's
  gain over the narrowest with its 95% paired interval (does context help?);
- genobird at the context chosen on validation minus each baseline (DeepSEA's CNN at
  1 kb and 8 kb, the k-mer LR), per category, with intervals;
- the two targets: TF median AUROC at least the 1 kb DeepSEA CNN's, and a category
  where the widest context beats the narrowest with an interval above zero.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from genobird.tasks.compare import describe_difference
from genobird.tasks.context_ablation import summarise


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", type=Path, help="RESULTS/chromatin_tasks/NAME")
    parser.add_argument("--min-positives", type=int, default=20)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--out", type=Path, help="JSON of the whole summary")
    args = parser.parse_args(argv)
    summary = summarise(args.task, args.min_positives, args.resamples)
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2, default=str))
    print(f"{summary['task']}: features with >= {args.min_positives} test positives; "
          f"{args.resamples:,} paired resamples of the test bins")  # fmt: skip
    for bp, categories in summary["genobird"].items():
        chosen = "  (chosen on validation)" if bp == summary["chosen_context"] else ""
        cells = ", ".join(f"{c} {a:.3f} / {p:.3f} ({n})" for c, (a, p, n) in categories.items())
        print(f"  genobird {bp:>6,} bp: median AUROC / AUPRC {cells}{chosen}")
    for baseline in summary["baselines"]:
        cells = ", ".join(f"{c} {a:.3f} / {p:.3f}" for c, (a, p, _) in baseline["medians"].items())
        print(f"  {baseline['name']:>22}: {cells}")
    narrowest = min(summary["genobird"])
    for bp, categories in summary["gain_over_narrowest"].items():
        cells = ", ".join(f"{c} {describe_difference(row)}" for c, row in categories.items())
        print(f"  {bp:,} bp minus {narrowest:,} bp: {cells}")
    for row in summary["genobird_minus_baseline"]:
        cells = ", ".join(f"{c} {describe_difference(r)}" for c, r in row["categories"].items())
        print(f"  genobird {summary['chosen_context']:,} bp minus {row['name']}: {cells}")
    print_targets(summary)
    return 0


def print_targets(summary: dict) -> None:
    chosen = summary["chosen_context"]
    narrowest = min(summary["genobird"])
    cnn = [row for row in summary["genobird_minus_baseline"]
           if row["kind"] == "deepsea-cnn" and row["context"] == narrowest]  # fmt: skip
    if cnn and "TF" in cnn[0]["categories"]:
        row = cnn[0]["categories"]["TF"]
        verdict = "met" if row["difference"] >= 0 else "NOT met"
        print(f"target, TF median AUROC >= the {narrowest:,} bp DeepSEA CNN's: {verdict} "
              f"(genobird {chosen:,} bp {row['a']:.3f}, CNN {row['b']:.3f}, "
              f"{describe_difference(row)})")  # fmt: skip
    widest = max(summary["genobird"])
    gains = summary["gain_over_narrowest"].get(widest, {})
    helped = [c for c, row in gains.items() if c != "all" and row["low"] > 0]
    verdict = f"met ({', '.join(helped)})" if helped else "NOT met"
    print(f"target, {widest:,} bp above {narrowest:,} bp with the interval above zero in a "
          f"category: {verdict}")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
