"""The pipeline's report: one self-contained HTML page over a results folder (a single
`finetune` or `baseline` run folder gets its own page: genobird.report.run_page).

It shows the corpus and vocabulary statistics, the pretraining curves, masked-token
accuracy against context length (the pretrained model evaluated on held-out instances
cut to each length), the fine-tuning metrics with their ROC/PR plots, and links to the
score tables. Plots are embedded (base64 PNG), so the page can be mailed or archived
alone; score tables are linked relative to the page. Each section is a module of
genobird.report.sections, found there and placed by its ORDER; the checks against the
baselines (genobird.report.checks) follow the first section.
"""

from __future__ import annotations

import html
import importlib
import pkgutil
from pathlib import Path

from genobird.errors import ConfigError, InputError
from genobird.fileio import atomic_write
from genobird.report.checks import checks, checks_path, demo_notes, write_checks
from genobird.report.page import STYLE, ReportContext, html_table
from genobird.report.run_page import build_run_page, is_run_folder


def registered_sections() -> list:
    """The section modules of genobird.report.sections, in page order."""
    from genobird.report import sections

    modules = [importlib.import_module(f"{sections.__name__}.{info.name}")
               for info in pkgutil.iter_modules(sections.__path__)]  # fmt: skip
    return sorted(modules, key=lambda module: module.ORDER)


def build_report(
    results,
    out,
    context_lengths=(128, 256, 512, 1024),
    title=None,
    context_windows=4000,
    copy_context=((32, 128, 512, 1024), 300),
) -> Path:
    """Write the HTML report of the pipeline results in `results` to `out`; the context
    ablation scores at most `context_windows` held-out windows per length; on a genome
    with copies.bed, `copy_context` = (lengths, stretches) of the copy section."""
    results, out = Path(results), Path(out)
    if not results.is_dir():
        raise InputError(f"{results}: no such results folder; run the pipeline first")
    if is_run_folder(results):  # one finetune or baseline run: its own page
        return build_run_page(results, out)
    if context_windows < 1:
        raise ConfigError(f"context windows must be at least 1, got {context_windows}")
    report = ReportContext(results, out, list(context_lengths), context_windows, copy_context)
    sections = [module.section(report) for module in registered_sections()]
    findings = report.findings
    rows = checks(results, findings)
    if not any(sections) and not rows:
        raise InputError(
            f"{results}: nothing to report (no reference, corpus, pretrain, tasks or "
            "chromatin results in it); give the folder a pipeline wrote, e.g. results/demo"
        )
    notes = demo_notes(results, rows, findings)
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

    table = [(row["check"], figure(row["genobird"]), figure(row["baseline"]),
              difference(row["difference"]), "met" if row["met"] else "not met")
             for row in rows]  # fmt: skip
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
