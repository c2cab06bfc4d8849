"""The report page's pieces: HTML tables, cells, embedded images, the style sheet,
and what every section is given (`ReportContext`)."""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass
from pathlib import Path


# --------------------------------------------------------------------------- html helpers
def format_cell(value) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape(str(value))


def html_table(rows: list[tuple], header: tuple | None = None) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header or ())
    body = "".join(
        "<tr>" + "".join(f"<td>{format_cell(v)}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table>{f'<tr>{head}</tr>' if head else ''}{body}</table>"


def html_image(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def figure_png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def median_cell(value) -> str:
    if value is None:
        return "-"
    auroc, auprc, features = value
    return f"{auroc:.3f} / {auprc:.3f} ({features})"


def difference_cell(row) -> str:
    from genobird.artifacts import describe_difference

    return describe_difference(row) if row else "-"


STYLE = """body{font-family:sans-serif;max-width:960px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:2px 8px;
font-size:90%;text-align:right}th{background:#f3f3f3}img{max-width:100%;margin:.5em 0}"""


@dataclass
class ReportContext:
    """What a section reads: the results folder and the page being written (score tables
    are linked relative to it). Sections draw the results' files; they compute nothing."""

    results: Path
    out: Path
