"""Users' own labelled sequences as a fine-tuning data set (`genobird dataset classify`).

CSV or TSV: a `sequence` column, optional `name` and `split` (train/valid/test)
columns, and label columns: several 0/1 columns (multi-label), or one column of class
names (one output per class). FASTA: labels as key=value pairs in the header, e.g.
`>seq7 enhancer=1 promoter=0 split=test`. Records that cannot be used (bad DNA, a
missing or non-binary label, an unknown split, a window mostly N) are reported and
skipped. Without a split column or file, a seeded split of `valid_fraction` /
`test_fraction` is drawn. A split too thin to score a model on is refused.
"""

from __future__ import annotations

import csv
import logging
import math
from pathlib import Path

import numpy as np

from genobird.datasets.windows import SPLITS, WindowSet
from genobird.errors import GenobirdError, InputError
from genobird.fileio import open_text, require_unique_columns, require_unique_names
from genobird.genome import normalise_dna, read_fasta
from genobird.genome.regions import BadRecord
from genobird.inputs import fit_window, mostly_n, mostly_n_reason, n_fraction

log = logging.getLogger(__name__)

RESERVED = {"sequence", "name", "split", "id"}

# a validation or test split needs at least this many positives of each label (and a
# negative): an AUROC over fewer is noise, and over none undefined
MIN_SPLIT_POSITIVES = 5


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
        require_unique_names(
            [key for key, _ in items],
            "labels",
            f"{path} record {record.name}",
            "give each label once per header",
        )
        pairs = dict(items)
        split = pairs.pop("split", None)
        columns = label_columns or sorted(pairs)
        yield number, record.name, record.sequence, {c: pairs.get(c) for c in columns}, split


def _reader(path: Path):
    fasta = path.name.endswith((".fa", ".fasta", ".fa.gz", ".fasta.gz"))
    return _records_from_fasta if fasta else _records_from_table


def build_classify_dataset(
    path,
    out_path,
    label_columns=None,
    valid_fraction=0.1,
    test_fraction=0.1,
    seed=0,
    valid_path=None,
    test_path=None,
    min_split_positives: int | None = None,
) -> tuple[WindowSet, list[BadRecord]]:
    """A data set from labelled sequences. With `valid_path` / `test_path` (data sets
    published as separate files, e.g. GUE's train/dev/test), their records form those
    splits; the records of `path` without a split column are drawn to the splits no file
    gives, at their fractions (`--test T` alone: `valid_fraction` of them validate), and
    are training records otherwise. A record whose window is more than half N, padded to
    the data set's longest (`inputs.mostly_n`: all N, or much shorter than the rest), is
    skipped, as `score` would reject it. A validation or test split that lacks a class of
    a label, or has fewer than `min_split_positives` (MIN_SPLIT_POSITIVES) of its
    positives, is refused, naming both (0: allowed); label columns that repeat or
    complement each other are warned of."""
    if min_split_positives is None:
        min_split_positives = MIN_SPLIT_POSITIVES
    if label_columns:
        require_unique_names(label_columns, "label columns", "--label-columns", "name each once")
    sources = [(Path(path), None)] + [
        (Path(p), split) for p, split in ((valid_path, "valid"), (test_path, "test")) if p
    ]
    # the fractions of the splits no file gives, drawn from the records of `path`
    drawn = {
        "valid": 0.0 if valid_path else valid_fraction,
        "test": 0.0 if test_path else test_fraction,
    }
    problems: list[BadRecord] = []
    records = []
    for source, fixed_split in sources:
        found = [
            (source, line, name, raw, labels, fixed_split or split)
            for line, name, raw, labels, split in _reader(source)(source, label_columns, problems)
        ]
        if not found:
            raise InputError(f"{source}: no records")
        records += found
    names, encode = _label_encoding(records)
    rng = np.random.default_rng(seed)
    usable = []
    for source, line, name, raw, labels, split in records:
        try:
            sequence = normalise_dna(raw.strip(), record=name)
            if not sequence:
                raise InputError("empty sequence")
            vector = encode(labels)
            split = split or draw_split(rng, drawn["valid"], drawn["test"])
            if split not in SPLITS:
                raise InputError(f"split must be one of {SPLITS}, got {split!r}")
        except GenobirdError as exc:
            problems.append(BadRecord(str(source), line, f"{name}: {exc}"))
            continue
        usable.append((source, line, name, sequence, vector, split))
    window_bp = max((len(record[3]) for record in usable), default=0)
    windows = WindowSet("classify", names, ["label"] * len(names))
    for source, line, name, sequence, vector, split in usable:
        read = fit_window(sequence, window_bp)  # as a model of this data set reads it
        if mostly_n(read):
            reason = mostly_n_reason(n_fraction(read), window_bp, f"{name} ({len(sequence)} bp)")
            problems.append(
                BadRecord(
                    str(source),
                    line,
                    f"{reason}; give at least {math.ceil(window_bp / 2):,} bp of A/C/G/T",
                )
            )
            continue
        windows.add(sequence, vector, name, 0, len(sequence), "+", split)
    if not len(windows):
        raise InputError(f"{path}: no usable record ({len(problems)} rejected)")
    check_splits(windows, min_split_positives)
    warn_related_columns(windows)
    windows.write(out_path)
    return windows, problems


def check_splits(windows: WindowSet, min_positives: int) -> None:
    """Refuse a validation or test split that lacks a class of a label, or has fewer than
    `min_positives` of its positives (0: any split is allowed), naming both."""
    if not min_positives:
        return
    labels, splits = np.asarray(windows.labels), np.asarray(windows.splits)
    for split in ("valid", "test"):
        rows = labels[splits == split]
        if not len(rows):
            continue
        for column, name in enumerate(windows.feature_names):
            positives = int((rows[:, column] == 1).sum())
            negatives = int((rows[:, column] == 0).sum())
            if positives < min_positives or not negatives:
                raise InputError(
                    f"the {split} split has {positives} positive and {negatives} negative "
                    f"records of label {name!r}: too few to score a model on (at least "
                    f"{min_positives} positives and a negative); give more {split} records, "
                    "or --min-split-positives 0 to write it anyway"
                )


def warn_related_columns(windows: WindowSet) -> None:
    """Warn of label columns that repeat another or are its complement (1 - it): a model
    learns each twice, and a mean AUROC over them counts one task twice."""
    labels = np.asarray(windows.labels)
    names = windows.feature_names
    for first in range(len(names)):
        for second in range(first + 1, len(names)):
            a, b = labels[:, first], labels[:, second]
            if np.array_equal(a, b):
                log.warning(
                    "labels %r and %r are the same in every record", names[first], names[second]
                )
            elif np.array_equal(a, 1 - b):
                log.warning(
                    "labels %r and %r are each other's complement in every record "
                    "(a class and its absence): keep one",
                    names[first],
                    names[second],
                )


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
    present = [
        (r, str(r[4].get(c)).strip())
        for r in records
        for c in columns
        if not _is_missing(r[4].get(c))
    ]
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
        wrong = [
            (r, str(r[4][column]).strip())
            for r in records
            if not _is_missing(r[4].get(column)) and str(r[4][column]).strip() not in ("0", "1")
        ]
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
