"""The corpus and vocabulary statistics (the corpus's artifact, `genobird evaluate corpus`)."""

from __future__ import annotations

from pathlib import Path

from genobird.report.page import html_table
from genobird.report.sources import corpus_statistics


def corpus_section(results: Path) -> str:
    statistics = corpus_statistics(results)
    if statistics is None:
        return ""
    rows = [
        (
            part["part"],
            ", ".join(part["chromosomes"]),
            part["documents"],
            part["sentences"],
            part["bp"],
        )
        for part in statistics.parts
    ]
    text = "<h2>Corpus</h2>" + html_table(
        rows, ("part", "chromosomes", "documents", "sentences", "bp")
    )
    if vocabulary := statistics.vocabulary:
        rows = [
            ("pieces", vocabulary["pieces"]),
            (
                f"bp per token on {vocabulary['heldout_sentences']:,} held-out sentences",
                vocabulary["bp_per_token"],
            ),
            ("longest piece (bp)", vocabulary["longest_piece_bp"]),
        ]
        text += "<h3>Vocabulary (sentencepiece BPE)</h3>" + html_table(rows)
    return text


ORDER = 20


def section(report) -> str:
    return corpus_section(report.results)
