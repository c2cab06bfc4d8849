"""The reference genome the pipeline ran on (and, for the demo, what it holds)."""

from __future__ import annotations

from pathlib import Path

from genobird.report.checks import demo_manifest
from genobird.report.page import html_table

# --------------------------------------------------------------------------- sections
# What each long-range structure of the demo genome is, by its manifest count's name.
DEMO_STRUCTURES = {
    "copies_segmental": "segmental duplications: a segment copied 0.2-4 kb downstream",
    "copies_inverted": "inverted repeats: the same, reverse-complemented",
    "copies_tandem": "tandem array units: 200-500 bp, side by side",
    "distal_engaged": "distal elements upstream of a promoter on its strand: H3K27ac",
    "distal_downstream": "decoys: the same element downstream (no mark)",
    "distal_reversed": "decoys: the same element upstream on the other strand (no mark)",
    "boundaries_convergent": "boundary sites facing each other: an H3K27me3 domain between",
    "boundaries_divergent": "decoys: the same sites facing away (no domain)",
}


def genome_section(results: Path) -> str:
    """For a run on the demo genome: what it is, what it holds, and where the figures on
    real DNA are. Nothing for a run on a real genome."""
    manifest = demo_manifest(results)
    if manifest is None:
        return ""
    counts = manifest.get("long_range", {})
    size = sum(manifest["chromosomes"].values())
    rows = [(DEMO_STRUCTURES[name], counts[name]) for name in DEMO_STRUCTURES if name in counts]
    if "copied_bp" in counts:
        rows.append(
            (
                "bases written as a copy",
                f"{counts['copied_bp']:,} ({counts['copied_bp'] / size:.1%})",
            )
        )
    return (
        "<h2>The demo genome</h2><p>This genome is <b>synthetic</b> "
        f"(<code>genobird demo-reference</code>, seed {manifest['seed']}, {size:,} bp): a "
        "miniature built to carry the long-range structure real genomes have and that "
        "attention over kilobases exists to read: copies of segments a few hundred to a few "
        "thousand bp apart, a mark set by where a distal element lies relative to a promoter, "
        "and domains closed by boundary sites facing each other, each beside decoys of the "
        "same motifs. The figures below show whether genobird found these structures; what it "
        "does on real genomes is in docs/results.md (human-mini pretraining, the GUE and "
        "EPDnew tasks, the real chromatin peaks).</p>"
        + (html_table(rows, ("structure", "count")) if rows else "")
    )


ORDER = 10


def section(report) -> str:
    return genome_section(report.results)
