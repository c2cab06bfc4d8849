"""What a pipeline's report checks against its baselines, each check met or not: the
figures that say whether genobird learnt more than the baselines on this genome.

- held-out bits per bp below the Markov model's (the pipeline's `baselines/markov.json`);
- context: bits per bp (or masked-token accuracy) better at each of at least three
  increasing context lengths, each paired 95% interval above zero;
- on a genome with long-range features (the demo's manifest lists them): the chromatin
  predictor's median test AUROC over them above the CNN's and the k-mer LR's;
- the promoter predictor's test MCC at least the k-mer LR's.

Each check is declared beside the section that draws its figures (a section's CHECKS);
this module runs them in their rank's order and holds what they share.

The figures are the pipeline's evaluations, read from their artifacts (the pretrained
model's pretrain/evaluation.json, the runs' comparisons.json: genobird.evaluation), so
nothing is scored twice and the report only draws; `checks` turns them into rows,
`demo_notes` says (on the demo genome) what kept an unmet one out of the run's reach, and
the report writes both beside itself as JSON (`checks_path`) for `benchmarks/demo.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

from genobird.artifacts import ResultsFolder
from genobird.fileio import atomic_write
from genobird.report.sources import pretrained_record

# the context check: this many increasing lengths, each gain's interval above zero
CONTEXT_LENGTHS_NEEDED = 3
# bits per bp within which a held-out figure counts as the bases' composition's level
COMPOSITION_MARGIN = 0.005


def checks_path(report: Path) -> Path:
    """Where the report's checks are written: report.html -> report.checks.json."""
    return report.with_suffix(".checks.json")


def held_out_pair(results: Path) -> dict | None:
    """The held-out bits per bp of the pretrained model and of the Markov model on the
    same DNA, with the Markov model's order, the best order-0 figure on its validation
    DNA (the bases' composition) and the pretraining steps; None without both."""
    held = (pretrained_record(results) or {}).get("held_out") or {}
    figures, markov_path = held.get("figures") or {}, ResultsFolder(results).markov
    if "bits_per_character" not in figures or not markov_path.is_file():
        return None
    markov = json.loads(markov_path.read_text())
    order0 = [
        bits
        for key, bits in markov.get("validation_bits_per_bp", {}).items()
        if key.split(",")[0] == "0"
    ]
    return {
        "genobird": figures["bits_per_character"],
        "markov": markov["bits_per_bp"],
        "order": markov["order"],
        "composition": min(order0) if order0 else None,
        "steps": held.get("steps"),
    }


def rising_lengths(rows: list[dict], gain: str) -> list[int]:
    """The longest run of increasing context lengths over which every step's `gain`
    ("bits_gain": bits per bp saved; "accuracy_gain") has its 95% interval above zero."""
    best = run = rows[:1]
    for row in rows[1:]:  # each row's gain is over the row before it
        run = [*run, row] if gain in row and row[gain + "_ci95"][0] > 0 else [row]
        if len(run) > len(best):
            best = run
    return [row["context_length"] for row in best]


def checks(results: Path, registered) -> list[dict]:
    """The rows of every check this results folder has the figures for: `registered` is
    the checks the report's sections declare beside themselves (each section's CHECKS:
    (rank, function of the results folder giving a row, rows or None)), run in rank order."""
    rows = []
    for _, check in sorted(registered, key=lambda entry: entry[0]):
        found = check(results)
        rows += found if isinstance(found, list) else [found] if found is not None else []
    return rows


def demo_notes(results: Path, rows: list[dict]) -> list[str]:
    """On the demo genome, what kept each unmet check out of this run's reach, from the
    run's files: a model still at the bases' composition, a
    chromatin context shorter than the long-range labels' arrangements. Nothing on a
    real genome."""
    unmet = {row["name"] for row in rows if not row["met"]}
    if demo_manifest(results) is None or not unmet:
        return []
    notes = []
    if "held_out" in unmet:
        notes += _held_out_note(held_out_pair(results) or {})
    if "long_range" in unmet:
        notes += _long_range_note(results)
    return notes


def demo_manifest(results: Path) -> dict | None:
    """The demo genome's manifest.json where `results` is a run on it, else None."""
    path = ResultsFolder(results).manifest
    if not path.is_file():
        return None
    manifest = json.loads(path.read_text())
    return manifest if manifest.get("name") == "genobird-demo" else None


def _held_out_note(held: dict) -> list[str]:
    """The held-out figure beside an order-0 Markov model's (the bases' composition)."""
    composition = held.get("composition")
    if composition is None:
        return []
    ours = held["genobird"]
    where = (
        "no better than the bases' composition alone"
        if ours >= composition - COMPOSITION_MARGIN
        else "between the bases' composition and the Markov model"
    )
    after = f"after {held['steps']} pretraining steps " if held.get("steps") else ""
    return [
        f"Held-out bits: {after}the model's {ours:.3f} bits per bp is {where} (an "
        f"order-0 Markov model: {composition:.3f} on its validation DNA; order "
        f"{held['order']}: {held['markov']:.3f}); "
        "it has not learnt the k-mer statistics the Markov model reads."
    ]


def _long_range_note(results: Path) -> list[str]:
    """The chromatin windows' width beside the reach of the demo's long-range labels."""
    import h5py

    from genobird.genome.demo_longrange import BOUNDARY_GAP, DISTAL_RANGE

    data = ResultsFolder(results).chromatin_data
    if not data.is_file():
        return []
    with h5py.File(data, "r") as handle:
        window = int(handle.attrs.get("window_bp", 0))
    if not window or window // 2 >= DISTAL_RANGE[1]:
        return []
    return [
        f"Long-range chromatin features: the predictor reads {window:,} bp around each "
        f"bin ({window // 2:,} bp each side), where these labels depend on elements "
        f"{DISTAL_RANGE[0] / 1000:g}-{DISTAL_RANGE[1] / 1000:g} kb from a promoter and "
        f"on boundary sites {BOUNDARY_GAP[0] / 1000:g}-{BOUNDARY_GAP[1] / 1000:g} kb "
        "apart: no model of this run sees the arrangement, only local correlates."
    ]


def write_checks(path: Path, rows: list[dict], notes: list[str] = ()) -> None:
    with atomic_write(path) as handle:
        json.dump(
            {
                "checks": rows,
                "met": sum(row["met"] for row in rows),
                "of": len(rows),
                "notes": list(notes),
            },
            handle,
            indent=2,
        )
