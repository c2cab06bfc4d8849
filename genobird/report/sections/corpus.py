"""The corpus and vocabulary statistics."""

from __future__ import annotations

import json
from pathlib import Path

from genobird.evaluation.results import ResultsFolder
from genobird.report.page import html_table

HELDOUT_SENTENCES = 2000  # held-out sentences for bp/token (enough for two decimals)


def corpus_section(results: Path) -> str:
    from genobird.corpus import Tokenizer, read_documents

    layout = ResultsFolder(results)
    if not layout.corpus.is_dir():
        return ""
    rows = []
    for part in ("train", "heldout"):
        index_path = layout.corpus_index(part)
        if not index_path.is_file():
            continue
        index = json.loads(index_path.read_text())
        documents = index["documents"]
        bp = sum(end - start for _, start, end, *_ in documents)
        sentences = sum(row[4] for row in documents)
        rows.append((part, ", ".join(index["chromosomes"]), len(documents), sentences, bp))
    text = "<h2>Corpus</h2>" + html_table(
        rows, ("part", "chromosomes", "documents", "sentences", "bp")
    )
    tokenizer_path, heldout = layout.tokenizer, layout.heldout_documents
    if tokenizer_path.is_file() and heldout.is_file():
        tokenizer = Tokenizer(tokenizer_path)
        sentences = [s for document in read_documents(heldout) for s in document]
        sample = sentences[:HELDOUT_SENTENCES]
        rows = [
            ("pieces", tokenizer.vocab_size),
            (f"bp per token on {len(sample):,} held-out sentences", tokenizer.bp_per_token(sample)),
            ("longest piece (bp)", int(tokenizer.piece_lengths.max())),
        ]
        text += "<h3>Vocabulary (sentencepiece BPE)</h3>" + html_table(rows)
    return text


ORDER = 20


def section(report) -> str:
    return corpus_section(report.results)
