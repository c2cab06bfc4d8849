"""A chromatin task's context ablation and its targets, from a finished pipeline run:

    python benchmarks/chromatin_context.py results/human-mini/chromatin_tasks/encode_hg19
    python benchmarks/chromatin_context.py results/human-mini/chromatin_tasks/roadmap_states_hg19

prints, over the features with at least --min-positives test positives, by category and
(where the feature tables give one) by scale:
- every arm's test median AUROC and AUPRC at each context, its validation AUROC (which
  chooses its best context), its wall time and what ended it (validation, its schedule's
  end, or its budget while validation was still rising);
- each arm's gain at each context over its narrowest, with its 95% paired interval;
- genobird minus each baseline at the same context, and each at its best context;
- the targets: on peak tasks (TF, DNase, histone categories), TF median AUROC at least
  the narrowest DeepSEA CNN's and a category where the widest context beats the
  narrowest; on tasks with scales (chromatin states), genobird's best context of 4 kb or
  more above its 1 kb on every broad group, and genobird at its best context at least the
  best baseline at its best (interval's lower end above -0.02) in every group, above it
  on polycomb and enhancer; the whole ablation's time against 90 minutes;
- the runs their budget cut short.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from genobird.artifacts import describe_difference
from genobird.evaluation.context_ablation import cut_short, feature_scales, summarise, targets


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", type=Path, help="RESULTS/chromatin_tasks/NAME")
    parser.add_argument("--min-positives", type=int, default=20)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--out", type=Path, help="JSON of the whole summary")
    args = parser.parse_args(argv)
    summary = summarise(args.task, args.min_positives, args.resamples)
    summaries = {"category": summary}
    scales = feature_scales(args.task)
    if any(scales.values()):
        summaries["scale"] = summarise(args.task, args.min_positives, args.resamples, by="scale")
    if args.out:
        args.out.write_text(json.dumps(summaries, indent=2, default=str))
    print(
        f"{summary['task']}: features with >= {args.min_positives} test positives; "
        f"{args.resamples:,} paired resamples of the test bins"
    )
    for grouped in summaries.values():
        print_tables(grouped)
    print()
    for target in targets(args.task, summary):
        print(f"target, {target.claim}: {'met' if target.met else 'NOT met'} ({target.detail})")
    cut = cut_short(summary)
    print(f"cut short by their budget, validation still rising: {', '.join(cut) or 'none'}")
    return 0


def print_tables(summary: dict) -> None:
    print(f"\nby {summary['by']}: median AUROC / AUPRC (features)")
    for arm in summary["arms"].values():
        for bp, row in arm["contexts"].items():
            best = "  (best on validation)" if bp == arm["best_context"] else ""
            cells = ", ".join(
                f"{g} {a:.3f} / {p:.3f} ({n})" for g, (a, p, n) in row["medians"].items()
            )
            print(f"  {arm['name']:>12} {bp:>6,} bp: {cells}{best}")
            valid = row["validation_auroc"]
            run = [f"validation {valid:.4f}"] if valid is not None else []
            run += [f"{row['seconds'] / 60:.1f} min"] if row["seconds"] is not None else []
            run += [row["stop"]["detail"]] if row["stop"] else []
            if row.get("started_from"):
                run += [
                    f"started from the runs {', '.join(row['started_from'])} (their "
                    "minutes counted there)"
                ]
            if run:
                print(f"  {'':>12} {'':>9}  {'; '.join(run)}")
    for arm, runs in summary["gain_over_narrowest"].items():
        narrowest = min(summary["arms"][arm]["contexts"])
        for bp, row in runs.items():
            cells = ", ".join(f"{g} {describe_difference(r)}" for g, r in row.items())
            print(f"  {summary['arms'][arm]['name']} {bp:,} bp minus {narrowest:,} bp: {cells}")
    for row in summary["same_context"]:
        cells = ", ".join(f"{g} {describe_difference(r)}" for g, r in row["categories"].items())
        print(f"  genobird minus {row['name']}, both at {row['context']:,} bp: {cells}")
    for row in summary["best_against_best"]:
        cells = ", ".join(f"{g} {describe_difference(r)}" for g, r in row["categories"].items())
        print(
            f"  genobird {row['genobird_context']:,} bp minus {row['name']} "
            f"{row['context']:,} bp (each at its best): {cells}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
