"""What a pipeline's report checks against its baselines, each check met or not: the
figures that say whether genobird learnt more than the baselines on this genome.

- held-out bits per bp below the Markov model's (the pipeline's `baselines/markov.json`);
- context: bits per bp (or masked-token accuracy) better at each of at least three
  increasing context lengths, each paired 95% interval above zero;
- on a genome with long-range features (the demo's manifest lists them): the chromatin
  predictor's median test AUROC over them above the CNN's and the k-mer LR's;
- the promoter predictor's test MCC at least the k-mer LR's.

The report's sections collect the figures as they compute them (`findings`), so nothing
is scored twice; `checks` turns them into rows, and the report writes them beside itself
as JSON (`checks_path`) for `benchmarks/demo.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

from genobird.fileio import atomic_write

# the context check: this many increasing lengths, each gain's interval above zero
CONTEXT_LENGTHS_NEEDED = 3


def checks_path(report: Path) -> Path:
    """Where the report's checks are written: report.html -> report.checks.json."""
    return report.with_suffix(".checks.json")


def held_out_check(findings: dict) -> dict | None:
    held = findings.get("held_out")
    if not held:
        return None
    ours, markov = held["genobird"], held["markov"]
    return {"check": "held-out bits per bp below the Markov model's", "genobird": ours,
            "baseline": markov, "difference": [ours - markov, None, None],
            "met": ours < markov}  # fmt: skip


def rising_lengths(rows: list[dict], gain: str) -> list[int]:
    """The longest run of increasing context lengths over which every step's `gain`
    ("bits_gain": bits per bp saved; "accuracy_gain") has its 95% interval above zero."""
    best = run = rows[:1]
    for row in rows[1:]:  # each row's gain is over the row before it
        run = [*run, row] if gain in row and row[gain + "_ci95"][0] > 0 else [row]
        if len(run) > len(best):
            best = run
    return [row["context_length"] for row in best]


def context_check(findings: dict) -> dict | None:
    rows = findings.get("context")
    if not rows:
        return None
    by_gain = {gain: rising_lengths(rows, gain) for gain in ("bits_gain", "accuracy_gain")}
    gain = max(by_gain, key=lambda name: len(by_gain[name]))
    lengths = by_gain[gain]
    measure = "bits per bp" if gain == "bits_gain" else "masked-token accuracy"
    return {"check": f"better with more context at >= {CONTEXT_LENGTHS_NEEDED} increasing "
                     "lengths, each paired interval above zero",
            "genobird": f"{measure}: {' < '.join(map(str, lengths))} tokens",
            "baseline": None, "difference": None,
            "met": len(lengths) >= CONTEXT_LENGTHS_NEEDED}  # fmt: skip


def long_range_checks(findings: dict) -> list[dict]:
    rows = []
    for baseline, row in findings.get("long_range", {}).items():
        rows.append({"check": f"long-range chromatin features: median AUROC above the "
                              f"{baseline}'s",
                     "genobird": row["a"], "baseline": row["b"],
                     "difference": [row["difference"], row["low"], row["high"]],
                     "met": row["difference"] > 0})  # fmt: skip
    return rows


def promoter_check(results: Path, resamples: int = 2000) -> dict | None:
    """The promoter predictor's test MCC against the k-mer LR's on the same windows."""
    from genobird.tasks.compare import paired_bootstrap, read_predictions
    from genobird.tasks.metrics import PREDICTIONS

    ours = results / "promoter" / "report"
    theirs = results / "promoter" / "baselines" / "kmer-lr" / "report"
    if not ((ours / PREDICTIONS).is_file() and (theirs / PREDICTIONS).is_file()):
        return None
    row = paired_bootstrap(read_predictions(ours), read_predictions(theirs), resamples,
                           metrics=("mcc",))["metrics"]["mcc"]  # fmt: skip
    return {"check": "promoter MCC at least the k-mer LR's", "genobird": row["a"],
            "baseline": row["b"], "difference": [row["difference"], row["low"], row["high"]],
            "met": row["a"] >= row["b"]}  # fmt: skip


def checks(results: Path, findings: dict) -> list[dict]:
    """Every check this results folder has the figures for, in a fixed order."""
    found = [held_out_check(findings), context_check(findings), *long_range_checks(findings),
             promoter_check(results)]  # fmt: skip
    return [row for row in found if row is not None]


def write_checks(path: Path, rows: list[dict]) -> None:
    with atomic_write(path) as handle:
        json.dump({"checks": rows, "met": sum(row["met"] for row in rows),
                   "of": len(rows)}, handle, indent=2)  # fmt: skip
