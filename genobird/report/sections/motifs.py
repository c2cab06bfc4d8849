"""The motifs each fine-tuned model reads (`genobird motifs`, written into the task's
motifs folder by the pipeline where its config asks): the known motifs it recovers (the
demo's: those its genome plants in promoters), the JASPAR factors it names, and a link
to the motif page. Drawn from motifs.json alone."""

from __future__ import annotations

import html
import json
import os

from genobird.artifacts import ResultsFolder
from genobird.report.page import html_table


def motifs_section(results, out) -> str:
    folder = ResultsFolder(results)
    parts = []
    for task in folder.task_folders():
        path = folder.task_motifs(task)
        if not path.is_file():
            continue
        record = json.loads(path.read_text())
        link = html.escape(os.path.relpath(path.with_name("motifs.html"), out.parent))
        span = record.get("span")
        where = (
            f", bases {span[0]}-{span[1]}"
            if span and span[1] - span[0] < record["window_bp"]
            else ""
        )
        text = (
            f"<h3>{html.escape(task)}</h3><p>{record['windows']:,} windows of "
            f"{record['window_bp']:,} bp{where}, attributed to {html.escape(record['feature'])} "
            f"({html.escape(record['method'])}); <a href='{link}'>the patterns and their "
            "logos</a>.</p>"
        )
        known = record.get("known")
        if known is not None:
            recovered = known["recovered"]
            rows = [
                (name, f"{hit[0]} (q = {hit[1]:.2g})" if hit else "not recovered")
                for name, hit in recovered.items()
            ]
            found = sum(bool(hit) for hit in recovered.values())
            text += (
                f"<p>{found} of {len(recovered)} known motifs recovered "
                f"({html.escape(os.path.basename(known['file']))}; a pattern whose best "
                f"match among them it is, at q &lt; {record['match_q']}):</p>"
            )
            text += html_table(rows, ("known motif", "recovered by"))
        factors = record["factors"]
        named = ", ".join(f"{name} ({hit[0]}, q = {hit[1]:.2g})" for name, hit in factors.items())
        text += (
            f"<p>JASPAR {record['jaspar_release']} {html.escape(record['jaspar_taxon'])} "
            f"factors named at q &lt; {record['match_q']}: {html.escape(named or 'none')}.</p>"
        )
        parts.append(text)
    if not parts:
        return ""
    return "<h2>Motifs the models read</h2>" + "".join(parts)


ORDER = 55


def section(report) -> str:
    return motifs_section(report.results, report.out)
