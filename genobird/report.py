"""The pipeline's report: one self-contained HTML page over a results folder.

It shows the corpus and vocabulary statistics, the pretraining curves, masked-token
accuracy against context length (the pretrained model evaluated on held-out instances
cut to each length), the fine-tuning metrics with their ROC/PR plots, and links to the
score tables. Plots are embedded (base64 PNG), so the page can be mailed or archived
alone; score tables are linked relative to the page.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from pathlib import Path

from genobird.errors import InputError
from genobird.fileio import atomic_write

TASKS = ("promoter", "chromatin")
PROMOTER_KEYS = ("examples", "positives", "auroc", "auprc", "f1", "mcc", "f1_at_valid_threshold")
HELDOUT_SENTENCES = 2000  # held-out sentences for bp/token (enough for two decimals)


# --------------------------------------------------------------------------- html helpers
def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape(str(value))


def _table(rows: list[tuple], header: tuple | None = None) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header or ())
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table>{f'<tr>{head}</tr>' if head else ''}{body}</table>"


def _image(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _figure_png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


# --------------------------------------------------------------------------- sections
def corpus_section(results: Path) -> str:
    from genobird.corpus import Tokenizer, read_documents

    rows = []
    for part in ("train", "heldout"):
        index_path = results / "corpus" / f"{part}.txt.index.json"
        if not index_path.is_file():
            continue
        index = json.loads(index_path.read_text())
        documents = index["documents"]
        bp = sum(end - start for _, start, end, *_ in documents)
        sentences = sum(row[4] for row in documents)
        rows.append((part, ", ".join(index["chromosomes"]), len(documents), sentences, bp))
    text = "<h2>Corpus</h2>" + _table(rows, ("part", "chromosomes", "documents", "sentences", "bp"))
    tokenizer_path = results / "corpus" / "tokenizer.model"
    heldout = results / "corpus" / "heldout.txt"
    if tokenizer_path.is_file() and heldout.is_file():
        tokenizer = Tokenizer(tokenizer_path)
        sentences = [s for document in read_documents(heldout) for s in document]
        sample = sentences[:HELDOUT_SENTENCES]
        rows = [
            ("pieces", tokenizer.vocab_size),
            (f"bp per token on {len(sample):,} held-out sentences", tokenizer.bp_per_token(sample)),
            ("longest piece (bp)", int(tokenizer.piece_lengths.max())),
        ]
        text += "<h3>Vocabulary (sentencepiece BPE)</h3>" + _table(rows)
    return text


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def pretraining_section(results: Path, context_lengths: list[int]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from genobird.training.pretraining import mlm_accuracy_by_context

    folder = results / "pretrain"
    text = "<h2>Pretraining (MLM + NSP)</h2>"
    history = _read_jsonl(folder / "metrics.jsonl") if (folder / "metrics.jsonl").is_file() else []
    steps = [row for row in history if "mlm_loss" in row]
    if steps:
        figure, axis = plt.subplots(figsize=(6, 3.5))
        for key in ("loss", "mlm_loss", "nsp_loss"):
            points = [(row["step"], row[key]) for row in steps if key in row]
            axis.plot(*zip(*points, strict=True), label=key)
        axis.set_xlabel("step")
        axis.set_ylabel("training loss (nats)")
        axis.legend()
        text += _image(_figure_png(figure), "pretraining curves")
        plt.close(figure)
    summary_path = folder / "model" / "training_summary.json"
    if summary_path.is_file():
        final = json.loads(summary_path.read_text()).get("eval") or {}
        text += "<h3>Held-out evaluation</h3>" + _table(sorted(final.items()))
    instances = results / "corpus" / "instances-heldout"
    if context_lengths and (folder / "model").is_dir() and instances.is_dir():
        rows = mlm_accuracy_by_context(folder / "model", instances, context_lengths)
        figure, axis = plt.subplots(figsize=(5, 3.5))
        axis.plot([r["context_length"] for r in rows], [r["mlm_accuracy"] for r in rows], "o-")
        axis.set_xscale("log", base=2)
        axis.set_xlabel("context length (tokens)")
        axis.set_ylabel("masked-token accuracy")
        text += "<h3>Masked-token accuracy against context length</h3>"
        text += _image(_figure_png(figure), "MLM accuracy against context length")
        plt.close(figure)
        text += _table(
            [(r["context_length"], r["mlm_accuracy"], r["bits_per_character"]) for r in rows],
            ("tokens", "MLM accuracy", "bits per character"),
        )
    return text


def finetune_section(results: Path, task: str) -> str:
    folder = results / task / "report"
    metrics_path = folder / "metrics.json"
    if not metrics_path.is_file():
        return ""
    metrics = json.loads(metrics_path.read_text())
    text = f"<h2>Fine-tuning: {task} (split: {html.escape(metrics.get('split', '?'))})</h2>"
    if task == "promoter":
        text += _table([(key, metrics[key]) for key in PROMOTER_KEYS if key in metrics])
    else:
        rows = [("examples", metrics["examples"]), ("median AUROC", metrics["median_auroc"]),
                ("median AUPRC", metrics["median_auprc"])]  # fmt: skip
        rows += [
            (f"median AUROC, {category}", value)
            for category, value in sorted(metrics.get("median_auroc_by_category", {}).items())
        ]
        text += _table(rows)
    for png in sorted(folder.glob("*.png")):
        text += _image(png.read_bytes(), f"{task} {png.stem}")
    return text


def scores_section(results: Path, out: Path, preview_rows: int = 5) -> str:
    tables = sorted((results / "score").glob("*.tsv"))
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
        text += _table(rows, tuple(shown))
    return text


STYLE = """body{font-family:sans-serif;max-width:960px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:2px 8px;
font-size:90%;text-align:right}th{background:#f3f3f3}img{max-width:100%;margin:.5em 0}"""


def build_report(results, out, context_lengths=(128, 256, 512, 1024), title=None) -> Path:
    """Write the HTML report of the pipeline results in `results` to `out`."""
    results, out = Path(results), Path(out)
    if not results.is_dir():
        raise InputError(f"{results}: no such results folder; run the pipeline first")
    sections = [
        corpus_section(results),
        pretraining_section(results, list(context_lengths)),
        *(finetune_section(results, task) for task in TASKS),
        scores_section(results, out),
    ]
    title = html.escape(title or f"genobird report: {results}")
    page = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{STYLE}</style></head><body><h1>{title}</h1>{''.join(sections)}</body></html>\n"
    )
    with atomic_write(out) as handle:
        handle.write(page)
    return out
