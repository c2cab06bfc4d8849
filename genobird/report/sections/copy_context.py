"""On a genome with copies: bits per bp on held-out bases in copies and elsewhere
at each context length, beside the Markov model."""

from __future__ import annotations

from pathlib import Path

from genobird.report.page import html_table
from genobird.report.sources import pretrained_record


def copy_context_section(results: Path) -> str:
    """On a genome with copies (results/reference/copies.bed): bits per bp of the
    pretrained model on held-out bases in copies and on the others, by context length,
    beside the pipeline's Markov model on the same bases (the pipeline's
    pretrain/evaluation.json: genobird.evaluation.pretrained)."""
    entry = (pretrained_record(results) or {}).get("copy_context")
    if not entry:
        return ""
    chromosomes, markov, rows = entry["chromosomes"], entry["markov"], entry["rows"]

    def saved(entry):
        if "saved_over_previous" not in entry:
            return ""
        value, low, high = entry["saved_over_previous"]
        return f"{value:+.4f} [{low:+.4f}, {high:+.4f}]"

    table = [
        (
            r["context_length"],
            r["copy"]["bits_per_bp"],
            saved(r["copy"]),
            r["other"]["bits_per_bp"],
            saved(r["other"]),
            *((r["markov"]["copy"], r["markov"]["other"]) if markov else ()),
        )
        for r in rows
    ]
    header = (
        "tokens",
        "genobird, in copies",
        "saved over the previous length [95%]",
        "genobird, elsewhere",
        "saved over the previous length [95%]",
        *(("Markov, in copies", "Markov, elsewhere") if markov else ()),
    )
    first = rows[0]
    return (
        "<h3>Reading copies from context</h3><p>Bits per bp of held-out bases "
        f"({', '.join(chromosomes)}) that lie in a copy or its source (copies.bed: "
        f"{first['copy']['bp']:,} bp scored) and of the others ({first['other']['bp']:,} bp), "
        f"the same {first['stretches']:,} stretches at every context length; a model that "
        "reads a masked piece from its copy gains more from context in copies than "
        "elsewhere, where a Markov model of the training chromosomes cannot.</p>"
        + html_table(table, header)
    )


ORDER = 40


def section(report) -> str:
    return copy_context_section(report.results)
