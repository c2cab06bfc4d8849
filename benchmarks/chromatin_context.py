"""A chromatin task's context ablation and its targets, from a finished pipeline run:

    python benchmarks/chromatin_context.py results/human-mini/chromatin_tasks/encode_hg19
    python benchmarks/chromatin_context.py results/human-mini/chromatin_tasks/roadmap_states_hg19

prints, over the features with at least --min-positives test positives, by category and
(where the feature tables give one) by scale:
- every arm's test median AUROC and AUPRC at each context, its validation AUROC (which
  chooses its best context) and its wall time;
- each arm's gain at each context over its narrowest, with its 95% paired interval;
- genobird minus each baseline at the same context, and each at its best context;
- the targets: on peak tasks (TF, DNase, histone categories), TF median AUROC at least
  the narrowest DeepSEA CNN's and a category where the widest context beats the
  narrowest; on tasks with scales (chromatin states), genobird's best context of 4 kb or
  more above its 1 kb on every broad group, and genobird at its best context at least the
  best baseline at its best (interval's lower end above -0.02) in every group, above it
  on polycomb and enhancer; the whole ablation's time against 90 minutes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from genobird.tasks.compare import describe_difference
from genobird.tasks.context_ablation import best_baseline, feature_scales, summarise
from genobird.tasks.data import read_metadata

ABLATION_BUDGET_MINUTES = 90
# the state groups where genobird must beat the best baseline, not only match it
MUST_LEAD = ("polycomb", "enhancer")
LEAD_MARGIN = -0.02


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
    print(f"{summary['task']}: features with >= {args.min_positives} test positives; "
          f"{args.resamples:,} paired resamples of the test bins")  # fmt: skip
    for grouped in summaries.values():
        print_tables(grouped)
    print_costs(summary)
    if any(scales.values()):
        print_state_targets(summary, broad_groups(args.task))
    else:
        print_peak_targets(summary)
    return 0


def print_tables(summary: dict) -> None:
    print(f"\nby {summary['by']}: median AUROC / AUPRC (features)")
    for arm in summary["arms"].values():
        for bp, row in arm["contexts"].items():
            best = "  (best on validation)" if bp == arm["best_context"] else ""
            cells = ", ".join(f"{g} {a:.3f} / {p:.3f} ({n})" for g, (a, p, n) in
                              row["medians"].items())  # fmt: skip
            print(f"  {arm['name']:>12} {bp:>6,} bp: {cells}{best}")
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
        print(f"  genobird {row['genobird_context']:,} bp minus {row['name']} "
              f"{row['context']:,} bp (each at its best): {cells}")  # fmt: skip


def print_costs(summary: dict) -> None:
    total, unknown = 0.0, 0
    cells = []
    for arm in summary["arms"].values():
        for bp, row in arm["contexts"].items():
            if row["seconds"] is None:
                unknown += 1
                continue
            total += row["seconds"]
            cells.append(f"{arm['name']} {bp:,} bp {row['seconds'] / 60:.1f}")
    print("\nwall time, minutes: " + (", ".join(cells) or "not recorded"))
    if cells:
        verdict = "met" if total / 60 <= ABLATION_BUDGET_MINUTES and not unknown else "NOT met"
        missing = f"; {unknown} runs without a benchmark file" if unknown else ""
        print(f"target, the whole ablation within {ABLATION_BUDGET_MINUTES} minutes: {verdict} "
              f"({total / 60:.1f} minutes of runs{missing})")  # fmt: skip


def print_state_targets(summary: dict, broad: list[str]) -> None:
    """The chromatin-state targets: long context pays on broad groups, and genobird at its
    best context is at least the best baseline at its best in every group."""
    contexts = summary["arms"]["genobird"]["contexts"]
    long = {bp: row for bp, row in contexts.items() if bp >= 4000}
    if long and 1000 in contexts:
        best_long = max(long, key=lambda bp: (long[bp]["validation_auroc"] or float("-inf"), bp))
        gains = summary["gain_over_narrowest"]["genobird"].get(best_long, {})
        rows = {group: gains[group] for group in broad if group in gains}
        met = bool(rows) and all(row["low"] > 0 for row in rows.values())
        cells = ", ".join(f"{g} {describe_difference(r)}" for g, r in rows.items())
        print(f"target, genobird {best_long:,} bp (its best of 4 kb or more) above 1,000 bp on "
              f"every broad group: {'met' if met else 'NOT met'} "
              f"({cells or 'no broad group counted'})")  # fmt: skip
    row = best_baseline(summary)
    if row is None:
        return
    groups = {g: d for g, d in row["categories"].items() if g != "all"}
    met = all(d["low"] > (0.0 if g in MUST_LEAD else LEAD_MARGIN) for g, d in groups.items())
    cells = ", ".join(f"{g} {describe_difference(d)}" for g, d in groups.items())
    print(f"target, genobird {row['genobird_context']:,} bp at least the best baseline "
          f"({row['name']} {row['context']:,} bp, chosen on validation) in every group, above "
          f"it on {' and '.join(MUST_LEAD)}: {'met' if met else 'NOT met'} ({cells})")  # fmt: skip


def broad_groups(task: Path) -> list[str]:
    """The categories whose features are all of broad scale."""
    meta = read_metadata(task / "data.h5")
    scales: dict[str, set] = {}
    for category, scale in zip(meta["categories"], meta["scales"], strict=False):
        scales.setdefault(category, set()).add(scale)
    return sorted(c for c, found in scales.items() if found == {"broad"})


def print_peak_targets(summary: dict) -> None:
    """The peak-task targets: TF median AUROC at least the narrowest DeepSEA CNN's, and a
    category where the widest context beats the narrowest."""
    contexts = summary["arms"]["genobird"]["contexts"]
    narrowest, widest = min(contexts), max(contexts)
    cnn = [row for row in summary["same_context"]
           if row["kind"] == "deepsea-cnn" and row["context"] == narrowest]  # fmt: skip
    if cnn and "TF" in cnn[0]["categories"]:
        row = cnn[0]["categories"]["TF"]
        verdict = "met" if row["difference"] >= 0 else "NOT met"
        print(f"target, TF median AUROC >= the {narrowest:,} bp DeepSEA CNN's: {verdict} "
              f"(genobird {narrowest:,} bp {row['a']:.3f}, CNN {row['b']:.3f}, "
              f"{describe_difference(row)})")  # fmt: skip
    gains = summary["gain_over_narrowest"]["genobird"].get(widest, {})
    helped = [c for c, row in gains.items() if c != "all" and row["low"] > 0]
    verdict = f"met ({', '.join(helped)})" if helped else "NOT met"
    print(f"target, {widest:,} bp above {narrowest:,} bp with the interval above zero in a "
          f"category: {verdict}")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
