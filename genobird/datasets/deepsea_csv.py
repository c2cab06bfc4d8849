"""DeepSEA's chromatin-profile task as people pass it around: CSV (`dataset deepsea --csv`).

The published layout (GENA-LM's and others'): no header, one sample per row, the 8,000 bp
sequence and then the 919 labels (0/1) in DeepSEA's output order. The same with a
header row is read too (a `sequence` column, or the first one, and the label columns in
file order; `split`, `name` and `id` are not labels). The labels keep DeepSEA's order,
named and categorised by the 919-feature table (DNase / TF / Histone), so fine-tuning
reports the paper's per-category medians as the .mat route does.

Rows that cannot be used (a wrong number of labels, a label other than 0 or 1, a
character that is not DNA, an unknown split) are reported with their line and skipped.
The file is read twice (check, then write) so that a training CSV of millions of 8 kb
rows is never held in memory.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from genobird.datasets.classify import draw_split
from genobird.datasets.deepsea import default_deepsea_features, read_deepsea_features
from genobird.datasets.windows import SPLITS, window_writer
from genobird.errors import GenobirdError, InputError
from genobird.fileio import open_text, require_unique_columns
from genobird.genome import normalise_dna
from genobird.genome.regions import BadRecord

DEEPSEA_WINDOW_BP = 8000
NOT_LABELS = {"sequence", "split", "name", "id"}
WRITE_CHUNK = 1024


@dataclass(frozen=True)
class CsvLayout:
    """Where a CSV keeps the sequence, the labels and the split (column indices)."""

    sequence: int
    labels: list[int]
    split: int | None
    has_header: bool


@dataclass
class CsvSummary:
    """What an import read: kept rows per split, rows of another length, skipped rows."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SPLITS, 0))
    other_length: int = 0
    problems: list[BadRecord] = field(default_factory=list)

    @property
    def kept(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class _Row:
    line: int
    sequence: str
    labels: np.ndarray
    split: str


def _looks_like_header(fields: list[str]) -> bool:
    """A header names its label columns; a data row has only 0/1 after the sequence. The
    sequence is not looked at, so a first data row with bad DNA is reported as a bad
    row, not taken for a header and lost."""
    return not all(value.strip() in ("0", "1") for value in fields[1:])


def detect_layout(fields: list[str], path: Path, split_column: str | None) -> CsvLayout:
    if not _looks_like_header(fields):
        if split_column:
            raise InputError(
                f"{path}: --split-column {split_column!r} needs a header row; this file has "
                "none (the published layout): use --valid-fraction/--test-fraction or "
                "--valid/--test files"
            )
        return CsvLayout(0, list(range(1, len(fields))), None, has_header=False)
    header = [name.strip() for name in fields]
    require_unique_columns(header, path)
    if split_column and split_column not in header:
        raise InputError(f"{path}: no column {split_column!r} for the split; has {header[:8]}")
    sequence = header.index("sequence") if "sequence" in header else 0
    split = header.index(split_column) if split_column else None
    labels = [
        i for i, name in enumerate(header) if i not in (sequence, split) and name not in NOT_LABELS
    ]
    return CsvLayout(sequence, labels, split, has_header=True)


def _parse_row(
    fields: list[str], layout: CsvLayout, features: int
) -> tuple[str, np.ndarray, str | None]:
    width = len(layout.labels) + 1 + (layout.split is not None)
    if len(fields) != width:
        raise InputError(
            f"{len(fields)} fields, expected {width} (a sequence and {features} labels)"
        )
    values = [fields[i].strip() for i in layout.labels]
    bad = next((v for v in values if v not in ("0", "1")), None)
    if bad is not None:
        raise InputError(f"label {bad!r} is not 0 or 1")
    sequence = normalise_dna(fields[layout.sequence].strip(), record="sequence")
    if not sequence:
        raise InputError("empty sequence")
    split = fields[layout.split].strip() if layout.split is not None else None
    if split is not None and split not in SPLITS:
        raise InputError(f"split must be one of {SPLITS}, got {split!r}")
    return sequence, (np.asarray(values) == "1").astype(np.uint8), split


def _rows(
    path: Path, features: int, split_column, fixed_split, fractions, seed, problems: list[BadRecord]
) -> Iterator[_Row]:
    """The usable rows of one CSV, in file order; the others go to `problems`. Random
    splits are drawn per data row from `seed`, so both passes draw the same."""
    rng = np.random.default_rng(seed)
    csv.field_size_limit(sys.maxsize)  # 8 kb sequences exceed the csv module's default
    with open_text(path) as handle:
        reader = csv.reader(handle)
        first = next(reader, None)
        if first is None:
            raise InputError(f"{path}: empty file")
        layout = detect_layout(first, path, split_column)
        if len(layout.labels) != features:
            raise InputError(
                f"{path}: {len(layout.labels)} label columns, but the feature table has "
                f"{features}; DeepSEA's layout is a sequence then 919 labels"
            )
        data = reader if layout.has_header else _prepend(first, reader)
        for line, fields in enumerate(data, 2 if layout.has_header else 1):
            drawn = draw_split(rng, *fractions)
            try:
                sequence, labels, split = _parse_row(fields, layout, features)
            except GenobirdError as exc:
                problems.append(BadRecord(str(path), line, str(exc), ",".join(fields)[:60]))
                continue
            yield _Row(line, sequence, labels, fixed_split or split or drawn)


def _prepend(first, rest):
    yield first
    yield from rest


def import_deepsea_csv(
    path,
    out_path,
    features_table=None,
    split_column=None,
    valid_fraction=0.05,
    test_fraction=0.05,
    seed=0,
    valid_path=None,
    test_path=None,
) -> CsvSummary:
    """A chromatin data set from DeepSEA-layout CSV files. With `valid_path` /
    `test_path` those files are the validation and test splits and `path` is all
    training; otherwise the split comes from `split_column` or a seeded random draw."""
    if features_table is None:
        names, categories = default_deepsea_features()
    else:
        names, categories = read_deepsea_features(features_table)
    sources = [(Path(path), None)] + [
        (Path(p), split) for p, split in ((valid_path, "valid"), (test_path, "test")) if p
    ]
    default = "train" if len(sources) > 1 else None
    fractions = (valid_fraction, test_fraction)

    def rows(problems):
        for source, fixed in sources:
            yield (
                source,
                _rows(
                    source, len(names), split_column, fixed or default, fractions, seed, problems
                ),
            )

    summary = CsvSummary()
    width = name_width = 0
    for source, source_rows in rows(summary.problems):
        for row in source_rows:
            summary.counts[row.split] += 1
            summary.other_length += len(row.sequence) != DEEPSEA_WINDOW_BP
            width = max(width, len(row.sequence))
            name_width = max(name_width, len(_name(source, row.line)))
    if not summary.kept:
        raise InputError(f"{path}: no usable row ({len(summary.problems)} rejected)")
    with window_writer(
        out_path, "chromatin", names, categories, summary.kept, width, name_width
    ) as writer:
        for source, source_rows in rows([]):
            _write_rows(writer, source, source_rows)
    return summary


def _name(source: Path, line: int) -> str:
    return f"{source.name}:{line}"


def _write_rows(writer, source: Path, rows: Iterator[_Row]) -> None:
    chunk: list[_Row] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == WRITE_CHUNK:
            _write_chunk(writer, source, chunk)
            chunk = []
    if chunk:
        _write_chunk(writer, source, chunk)


def _write_chunk(writer, source: Path, rows: list[_Row]) -> None:
    writer.write(
        [row.sequence for row in rows],
        np.stack([row.labels for row in rows]),
        [_name(source, row.line) for row in rows],
        [0] * len(rows),
        [len(row.sequence) for row in rows],
        ["+"] * len(rows),
        [row.split for row in rows],
    )
