"""Previews of the score tables, linked relative to the page."""

from __future__ import annotations

import html
import os
from pathlib import Path

from genobird.artifacts import ResultsFolder
from genobird.report.page import html_table


def scores_section(results: Path, out: Path, preview_rows: int = 5) -> str:
    tables = sorted(ResultsFolder(results).scores.glob("*.tsv"))
    tables = [t for t in tables if not t.name.endswith(".rejected.tsv")]
    if not tables:
        return ""
    text = "<h2>Score tables</h2>"
    for table in tables:
        lines = table.read_text().splitlines()
        link = html.escape(os.path.relpath(table.resolve(), out.parent.resolve()))
        text += f'<h3><a href="{link}">{html.escape(table.name)}</a> ({len(lines) - 1:,} rows)</h3>'
        header = lines[0].split("\t") if lines else []
        shown = header[:8]
        rows = [tuple(line.split("\t")[: len(shown)]) for line in lines[1 : 1 + preview_rows]]
        text += html_table(rows, tuple(shown))
    return text


ORDER = 80


def section(report) -> str:
    return scores_section(report.results, report.out)
