"""What `genobird motifs` writes: DIR/motifs.tsv (one row per pattern, most seqlets
first, its best JASPAR matches), DIR/motifs.meme (the patterns, for MEME-suite tools),
DIR/motifs.json (what was read and asked: the model, windows, JASPAR release and taxon,
the factors named) and DIR/motifs.html (each pattern's logo beside its best match's, and
the factors named beside those of other runs, such as a model's baselines), each
written whole or not at all."""

from __future__ import annotations

import base64
import html
import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from genobird.errors import InputError
from genobird.fileio import atomic_write
from genobird.interpret.attributions import Attributions
from genobird.interpret.motifs import (
    BASES,
    MATCH_Q,
    TOP_MATCHES,
    Jaspar,
    KnownMotifs,
    Pattern,
    discover,
    information,
    match_known,
    name_patterns,
)


def write_motifs(
    attributions: Attributions,
    jaspar: Jaspar,
    out: Path,
    beside: tuple = (),
    known: KnownMotifs | None = None,
) -> str:
    """Discover, name and write the motifs of `attributions` into `out`, the factors
    named set beside those of `beside` (MotifRun: earlier runs), and which of `known`
    motifs were recovered; returns the summary the command prints."""
    patterns = discover(attributions)
    name_patterns(patterns, jaspar)
    recovered = None
    if known is not None:
        match_known(patterns, known, jaspar)
        recovered = recovered_motifs(patterns, known)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table = motif_table(patterns, attributions)
    this = MotifRun(out, attributions.model, attributions.feature, named_factors(table))
    with atomic_write(out / "motifs.tsv") as handle:
        table.to_csv(handle, sep="\t", index=False)
    with atomic_write(out / RUN_FILE) as handle:
        json.dump(run_record(attributions, jaspar, this, known, recovered), handle, indent=2)
    write_meme(patterns, out / "motifs.meme")
    write_page(patterns, attributions, jaspar, out / "motifs.html", [this, *beside], recovered)
    named = sum(pattern.named for pattern in patterns)
    summary = (
        f"{len(patterns)} patterns in {len(attributions.ids):,} windows, {named} matching "
        f"JASPAR {jaspar.release} {jaspar.taxon} at q < {MATCH_Q}; wrote {out}/motifs.tsv, "
        f"motifs.meme, motifs.json, motifs.html"
    )
    if recovered is not None:
        found = [name for name, hit in recovered.items() if hit]
        summary += (
            f"\nknown motifs recovered: {_listed(found)}; not: "
            f"{_listed([name for name, hit in recovered.items() if not hit])}"
        )
    for other in beside:
        shared = sorted(set(this.factors) & set(other.factors))
        summary += (
            f"\nbeside {other.model}: both read {_listed(shared)}; this model only "
            f"{_listed(sorted(set(this.factors) - set(other.factors)))}; it only "
            f"{_listed(sorted(set(other.factors) - set(this.factors)))}"
        )
    return summary


# what a run was read from and asked, and the factors it named
RUN_FILE = "motifs.json"


@dataclass
class MotifRun:
    """What one `genobird motifs` run named: {factor: (pattern, q)} of its patterns
    matched at q < MATCH_Q (a factor by its JASPAR name, upper case; its pattern of most
    seqlets), for the model in `model`."""

    folder: Path
    model: str
    feature: str
    factors: dict

    @classmethod
    def read(cls, folder) -> MotifRun:
        """An earlier run's DIR/motifs.json, refused in one line where it is not one."""
        path = Path(folder) / RUN_FILE
        try:
            record = json.loads(path.read_text())
            return cls(Path(folder), record["model"], record["feature"], record["factors"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(
                f"{folder}: not a folder written by genobird motifs ({path}: {exc}); "
                "run genobird motifs into it first"
            ) from exc


def named_factors(table: pd.DataFrame) -> dict:
    """{factor: [pattern, q]} of the table's patterns named at q < MATCH_Q, the first
    (most seqlets) of each factor."""
    factors: dict = {}
    for row in table.itertuples():
        if row.best_match_q < MATCH_Q:
            factors.setdefault(row.best_match_name.upper(), [row.pattern, row.best_match_q])
    return factors


def recovered_motifs(patterns: list[Pattern], known: KnownMotifs) -> dict:
    """{known motif name: [pattern, q] of the pattern of most seqlets whose best known
    match it is at q < MATCH_Q, or None}, in the known file's order."""
    recovered: dict = dict.fromkeys(known.names)
    for pattern in patterns:  # most seqlets first
        hit = pattern.known
        if hit is not None and hit.q < MATCH_Q and recovered.get(hit.name) is None:
            recovered[hit.name] = [pattern.name, hit.q]
    return recovered


def run_record(
    attributions: Attributions,
    jaspar: Jaspar,
    run: MotifRun,
    known: KnownMotifs | None = None,
    recovered: dict | None = None,
) -> dict:
    record = {
        "model": attributions.model,
        "feature": attributions.feature,
        "windows": len(attributions.ids),
        "window_bp": attributions.window_bp,
        "span": [attributions.start, attributions.start + attributions.span_bp],
        "method": attributions.method,
        "score": attributions.score,
        "jaspar_release": jaspar.release,
        "jaspar_taxon": jaspar.taxon,
        "match_q": MATCH_Q,
        "factors": run.factors,
    }
    if known is not None:
        record["known"] = {"file": known.path, "recovered": recovered}
    return record


def _listed(names: list[str]) -> str:
    return ", ".join(names) if names else "none"


# motifs.tsv's columns, in order (every one present, a table of no pattern included)
TABLE_COLUMNS = [
    "pattern",
    "sign",
    "seqlets",
    "consensus",
    "width",
    "centre_median_bp",
    "centre_iqr_bp",
    "window_bp",
    "best_match_id",
    "best_match_name",
    "best_match_q",
    "best_match_p",
    *(f"match_{rank}_{part}" for rank in range(2, TOP_MATCHES + 1) for part in ("id", "name", "q")),
    "known_match_id",
    "known_match_name",
    "known_match_q",
]


def motif_table(patterns: list[Pattern], attributions: Attributions) -> pd.DataFrame:
    """One row per pattern: its name, sign, seqlets, consensus, where its seqlets'
    centres sit in the windows (median and interquartile range, bp from the start), its
    best match (id, name, TOMTOM q-value and p-value) and the next ones."""
    rows = []
    for pattern in patterns:
        q1, median, q3 = np.percentile(pattern.centres, [25, 50, 75])
        row = {
            "pattern": pattern.name,
            "sign": pattern.sign,
            "seqlets": pattern.seqlets,
            "consensus": pattern.consensus,
            "width": pattern.ppm.shape[1],
            "centre_median_bp": float(median),
            "centre_iqr_bp": f"{q1:.0f}-{q3:.0f}",
            "window_bp": attributions.window_bp,
        }
        for rank in range(TOP_MATCHES):
            prefix = "best_match" if rank == 0 else f"match_{rank + 1}"
            match = pattern.matches[rank] if rank < len(pattern.matches) else None
            row[f"{prefix}_id"] = match.matrix_id if match else ""
            row[f"{prefix}_name"] = match.name if match else ""
            row[f"{prefix}_q"] = match.q if match else np.nan
            if rank == 0:
                row["best_match_p"] = match.p if match else np.nan
        known = pattern.known
        row["known_match_id"] = known.matrix_id if known else ""
        row["known_match_name"] = known.name if known else ""
        row["known_match_q"] = known.q if known else np.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def write_meme(patterns: list[Pattern], path: Path) -> None:
    """The patterns' probability matrices in MEME's motif format, each named by its best
    JASPAR match."""
    from genobird.genome.meme import write_meme as write_motifs_file

    write_motifs_file(
        path,
        ((p.name, p.matches[0].name if p.named else "unnamed", p.ppm, p.seqlets) for p in patterns),
    )


def write_page(
    patterns: list[Pattern],
    attributions,
    jaspar: Jaspar,
    path: Path,
    runs: list,
    recovered: dict | None = None,
) -> None:
    """Each pattern's contribution logo beside its best match's information logo, the
    known motifs recovered (`recovered_motifs`), and the factors named by each of `runs`
    (this one first) where there are several."""
    by_id = dict(zip(jaspar.ids, jaspar.ppms, strict=True))
    rows = []
    for pattern in patterns:
        best = pattern.matches[0] if pattern.matches else None
        match_cell = (
            "not matched: too little information "
            f"({pattern.bits_per_position:.2f} bits per position)"
        )
        if best is not None:
            verdict = "" if best.q < MATCH_Q else f" (not called: q &ge; {MATCH_Q})"
            match_cell = (
                f"{_logo(information(by_id[best.matrix_id]))}<br>{html.escape(best.name)} "
                f"{best.matrix_id}, q = {best.q:.2g}{verdict}"
            )
        rows.append(
            f"<tr><td>{html.escape(pattern.name)} ({pattern.sign}), {pattern.seqlets} seqlets"
            f"<br>{pattern.consensus}</td><td>{_logo(pattern.cwm)}</td><td>{match_cell}</td></tr>"
        )
    named = sum(pattern.named for pattern in patterns)
    if not patterns:
        verdict = "<p>No pattern was found: the model reads no motif in these windows.</p>"
    elif not named:
        verdict = (
            f"<p>No pattern matches a JASPAR matrix at q &lt; {MATCH_Q}: nothing the model "
            "reads is a known motif.</p>"
        )
    else:
        verdict = f"<p>{named} of {len(patterns)} patterns match JASPAR at q &lt; {MATCH_Q}.</p>"
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>Motifs</title>
<style>body{{font-family:sans-serif;margin:2em}}td{{padding:6px;vertical-align:middle}}
img{{height:90px}}</style></head><body>
<h1>Motifs of {html.escape(attributions.feature)}</h1>
<p>Model {html.escape(attributions.model)}; {len(attributions.ids):,} windows of
{attributions.window_bp} bp{attributions.span_words}; attributions by {attributions.method} on the
{attributions.score} scale; patterns by TF-MoDISco (modisco-lite), matched by TOMTOM
(memelite) against JASPAR {jaspar.release} CORE {html.escape(jaspar.taxon)}.</p>
{verdict}
<table><tr><th>pattern</th><th>its contributions</th><th>best JASPAR match</th></tr>
{"".join(rows)}</table>
{known_section(recovered)}{beside_section(runs)}</body></html>
"""
    with atomic_write(path) as handle:
        handle.write(page)


def known_section(recovered: dict | None) -> str:
    """Each known motif, and the pattern that recovers it (q) or that none does."""
    if recovered is None:
        return ""
    rows = "".join(
        f"<tr><td>{html.escape(name)}</td><td>"
        + (f"{hit[0]} (q = {hit[1]:.2g})" if hit else "not recovered")
        + "</td></tr>"
        for name, hit in recovered.items()
    )
    found = sum(bool(hit) for hit in recovered.values())
    return (
        f"<h2>Known motifs</h2><p>{found} of {len(recovered)} known motifs recovered: a "
        f"pattern whose best match among them it is, at q &lt; {MATCH_Q}.</p>"
        f"<table><tr><th>known motif</th><th>recovered by</th></tr>{rows}</table>"
    )


def beside_section(runs: list[MotifRun]) -> str:
    """A table of the factors named by any of `runs` (rows) in each run (columns: the
    pattern and its q-value, or a dash), and which factors only the first run reads."""
    if len(runs) < 2:
        return ""
    factors = sorted(set().union(*(run.factors for run in runs)))
    head = "".join(f"<th>{html.escape(run.model)}</th>" for run in runs)
    rows = []
    for factor in factors:
        cells = "".join(
            f"<td>{run.factors[factor][0]} (q = {run.factors[factor][1]:.2g})</td>"
            if factor in run.factors
            else "<td>&ndash;</td>"
            for run in runs
        )
        rows.append(f"<tr><td>{html.escape(factor)}</td>{cells}</tr>")
    this, others = runs[0], runs[1:]
    read_elsewhere = set().union(*(run.factors for run in others))
    only = sorted(set(this.factors) - read_elsewhere)
    missing = sorted(read_elsewhere - set(this.factors))
    verdict = (
        f"This model reads {_listed(only)} that the others do not, and misses "
        f"{_listed(missing)} that another reads."
    )
    if not factors:
        verdict = "No run names a factor."
    return (
        f"<h2>Beside other models</h2><p>The factors each run names (best match at q &lt; "
        f"{MATCH_Q}). {html.escape(verdict)}</p><table><tr><th>factor</th>{head}</tr>"
        f"{''.join(rows)}</table>"
    )


def _logo(heights: np.ndarray) -> str:
    """An <img> of a sequence logo of letter heights [4, W] (logomaker)."""
    import logomaker
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = pd.DataFrame(heights.T, columns=list(BASES))
    figure, axis = plt.subplots(figsize=(max(2.0, 0.3 * len(frame)), 1.2))
    logomaker.Logo(frame, ax=axis)
    axis.axis("off")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight", dpi=80)
    plt.close(figure)
    encoded = base64.b64encode(buffer.getvalue()).decode()
    return f'<img src="data:image/png;base64,{encoded}">'
