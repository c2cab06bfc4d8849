"""The pipeline's report: one self-contained HTML page over a results folder (a single
`finetune` or `baseline` run folder gets its own page: genobird.report.run_page).

It shows the corpus and vocabulary statistics, the pretraining curves, masked-token
accuracy against context length (the pretrained model evaluated on held-out instances
cut to each length), the fine-tuning metrics with their ROC/PR plots, and links to the
score tables. It draws the pipeline's files and computes nothing: the evaluations are
pipeline rules (`genobird evaluate`) with their own artifacts (genobird.artifacts); where
one the page needs is missing, the report refuses and names the command that writes it.
Plots are embedded (base64 PNG), so the page can be mailed or archived alone; score
tables are linked relative to the page. Each section is a module of
genobird.report.sections, found there and placed by its ORDER; the checks against the
baselines (genobird.report.checks) follow the first section.
"""

from __future__ import annotations

import html
import importlib
import pkgutil
from pathlib import Path

from genobird.errors import InputError
from genobird.fileio import atomic_write
from genobird.report.checks import checks, checks_path, demo_notes, write_checks
from genobird.report.page import STYLE, ReportContext, html_table
from genobird.report.run_page import build_run_page, is_run_folder
from genobird.report.sources import pretrained_evaluation


def registered_sections() -> list:
    """The section modules of genobird.report.sections, in page order."""
    from genobird.report import sections

    modules = [
        importlib.import_module(f"{sections.__name__}.{info.name}")
        for info in pkgutil.iter_modules(sections.__path__)
    ]
    return sorted(modules, key=lambda module: module.ORDER)


def registered_checks() -> list:
    """The checks the sections declare beside themselves: (rank, function) pairs."""
    return [entry for module in registered_sections() for entry in getattr(module, "CHECKS", ())]


def build_report(results, out, title=None, settings: dict | None = None) -> Path:
    """Write the HTML report of the pipeline results in `results` to `out`, drawn from its
    files and its evaluations' artifacts (the pretrained model's evaluated with `settings`
    where given: artifacts.pretrained_evaluation_settings)."""
    results, out = Path(results), Path(out)
    if not results.is_dir():
        raise InputError(f"{results}: no such results folder; run the pipeline first")
    if is_run_folder(results):  # one finetune or baseline run: its own page
        return build_run_page(results, out)
    pretrained_evaluation(results, settings)  # refused before anything is drawn
    report = ReportContext(results, out)
    sections = [module.section(report) for module in registered_sections()]
    rows = checks(results, registered_checks())
    if not any(sections) and not rows:
        raise InputError(
            f"{results}: nothing to report (no reference, corpus, pretrain, tasks or "
            "chromatin results in it); give the folder a pipeline wrote, e.g. results/demo"
        )
    notes = demo_notes(results, rows)
    sections.insert(1, checks_section(rows, notes))
    title = html.escape(title or f"genobird report: {results}")
    page = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{STYLE}</style></head><body><h1>{title}</h1>{''.join(sections)}</body></html>\n"
    )
    with atomic_write(out) as handle:
        handle.write(page)
    write_checks(checks_path(out), rows, notes)
    return out


def checks_section(rows: list[dict], notes: list[str] = ()) -> str:
    """The checks against the baselines (`genobird.report.checks`), each met or not, and
    `notes` on what kept the unmet ones out of the run's reach."""
    if not rows:
        return ""

    def figure(value):
        return "-" if value is None else value

    def difference(value):
        if value is None:
            return "-"
        point, low, high = value
        return f"{point:+.4f}" if low is None else f"{point:+.4f} [{low:+.4f}, {high:+.4f}]"

    table = [
        (
            row["check"],
            figure(row["genobird"]),
            figure(row["baseline"]),
            difference(row["difference"]),
            "met" if row["met"] else "not met",
        )
        for row in rows
    ]
    met = sum(row["met"] for row in rows)
    return (
        f"<h2>Checks against the baselines: {met} of {len(rows)} met</h2><p>Each check "
        "compares genobird with a baseline run on the same data in this pipeline; "
        "differences are genobird minus the baseline, with paired 95% intervals where "
        "resampling gives one. The sections below hold the figures.</p>"
        + html_table(table, ("check", "genobird", "baseline", "difference [95%]", "result"))
        + notes_html(notes)
    )


def notes_html(notes: list[str]) -> str:
    if not notes:
        return ""
    items = "".join(f"<li>{html.escape(note)}</li>" for note in notes)
    return (
        f"<p>Why on this run:</p><ul>{items}</ul><p>What each check needs on the demo "
        "genome, and what was tried: benchmarks/README.md (the demo pipeline).</p>"
    )
