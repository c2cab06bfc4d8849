"""Users' own labelled sequences as a fine-tuning data set (`genobird dataset classify`).

CSV or TSV: a `sequence` column, optional `name` and `split` (train/valid/test)
columns, and label columns: several 0/1 columns (multi-label), or one column of class
names (one output per class). FASTA: labels as key=value pairs in the header, e.g.
`>seq7 enhancer=1 promoter=0 split=test`. Records that cannot be used (bad DNA, a
missing or non-binary label, an unknown split) are reported and skipped. Without a
split column, a seeded split of `valid_fraction` / `test_fraction` is drawn.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from genobird.datasets.windows import SPLITS, WindowSet
from genobird.errors import GenobirdError, InputError
from genobird.fileio import open_text, require_unique_columns, require_unique_names
from genobird.genome import normalise_dna, read_fasta
from genobird.genome.regions import BadRecord

RESERVED = {"sequence", "name", "split", "id"}


def _records_from_table(path: Path, label_columns, problems):
    with open_text(path) as handle:
        sample = handle.readline()
        delimiter = "\t" if "\t" in sample else ","
        handle.seek(0)
        reader = csv.DictReader(handle, delimiter=delimiter)
        if not reader.fieldnames or "sequence" not in reader.fieldnames:
            raise InputError(f"{path}: needs a 'sequence' column; has {reader.fieldnames}")
        require_unique_columns(reader.fieldnames, path)
        columns = label_columns or [c for c in reader.fieldnames if c not in RESERVED]
        if not columns:
            raise InputError(f"{path}: no label columns (all of {reader.fieldnames} are reserved)")
        for line, row in enumerate(reader, 2):
            name = row.get("name") or row.get("id") or f"row{line}"
            yield (
                line,
                name,
                row.get("sequence", ""),
                {c: row.get(c) for c in columns},
                row.get("split"),
            )


def _records_from_fasta(path: Path, label_columns, problems):
    for number, record in enumerate(read_fasta(path, problems=problems), 1):
        items = [item.split("=", 1) for item in record.description.split() if "=" in item]
        require_unique_names([key for key, _ in items], "labels", f"{path} record {record.name}",
                             "give each label once per header")  # fmt: skip
        pairs = dict(items)
        split = pairs.pop("split", None)
        columns = label_columns or sorted(pairs)
        yield number, record.name, record.sequence, {c: pairs.get(c) for c in columns}, split


def _reader(path: Path):
    fasta = path.name.endswith((".fa", ".fasta", ".fa.gz", ".fasta.gz"))
    return _records_from_fasta if fasta else _records_from_table


def build_classify_dataset(
    path, out_path, label_columns=None, valid_fraction=0.1, test_fraction=0.1, seed=0,
    valid_path=None, test_path=None,
) -> tuple[WindowSet, list[BadRecord]]:  # fmt: skip
    """A data set from labelled sequences. With `valid_path` / `test_path` (data sets
    published as separate files, e.g. GUE's train/dev/test), their records form those
    splits and the records of `path` without a split column are all training records."""
    if label_columns:
        require_unique_names(label_columns, "label columns", "--label-columns", "name each once")
    sources = [(Path(path), None)] + [
        (Path(p), split) for p, split in ((valid_path, "valid"), (test_path, "test")) if p
    ]
    default_split = "train" if len(sources) > 1 else None
    problems: list[BadRecord] = []
    records = []
    for source, fixed_split in sources:
        found = [
            (source, line, name, raw, labels, fixed_split or split or default_split)
            for line, name, raw, labels, split in _reader(source)(source, label_columns, problems)
        ]
        if not found:
            raise InputError(f"{source}: no records")
        records += found
    names, encode = _label_encoding(records)
    rng = np.random.default_rng(seed)
    windows = WindowSet("classify", names, ["label"] * len(names))
    for source, line, name, raw, labels, split in records:
        try:
            sequence = normalise_dna(raw.strip(), record=name)
            if not sequence:
                raise InputError("empty sequence")
            vector = encode(labels)
            split = split or draw_split(rng, valid_fraction, test_fraction)
            if split not in SPLITS:
                raise InputError(f"split must be one of {SPLITS}, got {split!r}")
        except GenobirdError as exc:
            problems.append(BadRecord(str(source), line, f"{name}: {exc}"))
            continue
        windows.add(sequence, vector, name, 0, len(sequence), "+", split)
    if not len(windows):
        raise InputError(f"{path}: no usable record ({len(problems)} rejected)")
    windows.write(out_path)
    return windows, problems


def read_plain_sequences(path, problems: list[BadRecord]):
    """(name, normalised DNA) of a FASTA file or of a text file with one sequence per
    line; bad lines are reported in `problems` and skipped."""
    path = Path(path)
    with open_text(path) as handle:
        first = next((line for line in handle if line.strip()), "")
    if first.startswith(">"):
        yield from ((record.name, record.sequence) for record in read_fasta(path, problems))
        return
    with open_text(path) as handle:
        for line_number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            name = f"line{line_number}"
            try:
                yield name, normalise_dna(line.strip(), record=name)
            except GenobirdError as exc:
                problems.append(BadRecord(str(path), line_number, str(exc)))


def draw_split(rng, valid_fraction: float, test_fraction: float) -> str:
    roll = rng.random()
    return (
        "test"
        if roll < test_fraction
        else "valid"
        if roll < test_fraction + valid_fraction
        else "train"
    )


# a label left empty: the record is reported and skipped
MISSING_VALUES = {"", "na", "n/a", "nan", "none", "null"}
# integer class labels (0, 1, 2, ...) are classes only when each holds this share of the
# records: a lone 2 among 0s and 1s is a typo in a binary column, not a third class
MIN_CLASS_SHARE = 0.05


def _is_missing(value) -> bool:
    return value is None or str(value).strip().lower() in MISSING_VALUES


def _label_encoding(records):
    """How labels become a vector, from every record (source, line, name, raw, labels,
    split): 0/1 columns as they are; a single column of class names (words, or integers
    0..K-1 with K >= 3 each holding MIN_CLASS_SHARE of the records) as one output per
    class. Anything else in a 0/1 column is an InputError naming the value, its file and
    line; a missing label leaves its record to be reported and skipped."""
    columns = list(records[0][4])
    present = [(r, str(r[4].get(c)).strip()) for r in records for c in columns
               if not _is_missing(r[4].get(c))]  # fmt: skip
    values = {value for _, value in present}
    if len(columns) == 1 and not values <= {"0", "1"} and _are_classes(values, present):
        classes = sorted(values, key=lambda v: (len(v), v) if v.isdigit() else (0, v))

        def one_hot(labels):
            if _is_missing(labels.get(columns[0])):
                raise InputError(f"missing label {columns[0]!r}")
            value = str(labels[columns[0]]).strip()
            return [int(value == c) for c in classes]

        return classes, one_hot
    for column in columns:
        wrong = [(r, str(r[4][column]).strip()) for r in records
                 if not _is_missing(r[4].get(column))
                 and str(r[4][column]).strip() not in ("0", "1")]  # fmt: skip
        if wrong:
            (source, line, name, *_), value = wrong[0]
            more = f" ({len(wrong) - 1} more such rows)" if len(wrong) > 1 else ""
            raise InputError(
                f"{source} line {line} ({name}): label {column!r} is {value!r}, but the column "
                f"holds 0/1 labels{more}; give 0 or 1, leave it empty to skip the record, or "
                "name classes in words (one column of class names: one output per class)"
            )

    def binary(labels):
        vector = []
        for column in columns:
            if _is_missing(labels.get(column)):
                raise InputError(f"missing label {column!r}")
            vector.append(int(str(labels[column]).strip()))
        return vector

    return columns, binary


def _are_classes(values: set[str], present: list) -> bool:
    """Whether a single column's values name classes: words (no value a number), or the
    integers 0..K-1 (K >= 3), each class MIN_CLASS_SHARE of the records or more."""
    numbers = {v for v in values if _is_number(v)}
    if not numbers:
        return True
    if numbers != values or values != {str(k) for k in range(len(values))} or len(values) < 3:
        return False
    counts = {v: sum(value == v for _, value in present) for v in values}
    return min(counts.values()) >= MIN_CLASS_SHARE * len(present)


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True
