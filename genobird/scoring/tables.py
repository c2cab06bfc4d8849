"""`genobird score` and `genobird likelihood`: stream a scorer's tables to TSV or HDF5,
atomically.

Rows are written chunk by chunk to a temporary file beside the output and renamed into
place at the end, so memory stays bounded for huge inputs and an interrupted run leaves
no file that looks complete. Records that cannot be scored go to `<out>.rejected.tsv`.
For VCF input a scorer names its tables (`VariantScorer.variant_tables`): a predictor's
main table holds alt - ref per feature, `<out>.abs_diff.tsv` and `<out>.log_odds_diff.tsv`
the other scores; the language model's one table its variant effects (HDF5: one dataset
each).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import h5py
import numpy as np
import pandas as pd
from tqdm import tqdm

from genobird.errors import ConfigError
from genobird.fileio import atomic_path, atomic_write, utf8_names

FLOAT_FORMAT = "%.9g"  # float32 round-trips with 9 significant digits


@dataclass
class ScoreSummary:
    scored: int = 0
    rejected: int = 0
    outputs: list[Path] = field(default_factory=list)


class TsvSink:
    """Tables appended to a TSV; `numbered`: each row's index first."""

    def __init__(self, path: Path, numbered: bool = True):
        self.path, self.numbered = path, numbered
        self._context = atomic_write(path)
        self._handle = self._context.__enter__()
        self._header_written = False
        self.rows = 0

    def write(self, table: pd.DataFrame) -> None:
        table = table.copy()
        if self.numbered and "index" not in table:
            table.insert(0, "index", range(self.rows, self.rows + len(table)))
        table.to_csv(
            self._handle,
            sep="\t",
            index=False,
            header=not self._header_written,
            float_format=FLOAT_FORMAT,
        )
        self._header_written = True
        self.rows += len(table)

    def close(self, ok: bool) -> None:
        _finish(self._context, ok)


class H5Output:
    """The one place scoring opens an HDF5 file for writing (score, likelihood, embed and
    ism write through it): a temporary file beside `path`, its datasets grown chunk by
    chunk (`append`), renamed into place by close(ok=True) and deleted otherwise, so an
    interrupted run leaves no file that looks complete. As a context manager it keeps the
    file when the block ends without an exception."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._context = atomic_path(self.path)
        self._file = h5py.File(self._context.__enter__(), "w")

    @property
    def attrs(self):
        return self._file.attrs

    def put(self, name: str, data) -> None:
        """A dataset written whole."""
        self._file.create_dataset(name, data=data)

    def append(self, name: str, values: np.ndarray, dtype=None, rows_per_chunk=None) -> None:
        """Append `values` along the first axis of dataset `name`, made resizable on first
        use (text as variable-length strings unless `dtype` says otherwise; HDF5 chunks of
        `rows_per_chunk` rows where given, else h5py's choice)."""
        if not len(values):
            return
        if name not in self._file:
            if dtype is None:
                dtype = h5py.string_dtype() if values.dtype == object else values.dtype
            rest = values.shape[1:]
            chunks = (rows_per_chunk, *rest) if rows_per_chunk else True
            self._file.create_dataset(
                name, shape=(0, *rest), maxshape=(None, *rest), dtype=dtype, chunks=chunks
            )
        dataset = self._file[name]
        dataset.resize(dataset.shape[0] + len(values), axis=0)
        dataset[-len(values) :] = values

    def close(self, ok: bool) -> None:
        self._file.close()
        _finish(self._context, ok)

    def __enter__(self) -> H5Output:
        return self

    def __exit__(self, kind, error, trace) -> None:
        self.close(ok=kind is None)


class H5Sink:
    """predictions float32 [N, F] (or one dataset per variant score), feature_names, and
    the id columns as datasets under `rows/`."""

    def __init__(self, path: Path, feature_names: list[str], score_names: list[str]):
        self.path, self.features, self.scores = path, feature_names, score_names
        self._output = H5Output(path)
        self._output.put("feature_names", utf8_names(feature_names))
        self.rows = 0

    def write(self, tables: dict[str, pd.DataFrame]) -> None:
        first = next(iter(tables.values()))
        ids = first.drop(columns=self.features)
        for name in self.scores:
            self._output.append(name, tables[name][self.features].to_numpy(np.float32))
        for column in ids.columns:
            values = ids[column].to_numpy()
            if values.dtype == object:  # text: variable-length, so no chunk truncates another
                values = values.astype(str).astype(object)
            self._output.append(f"rows/{column}", values)
        self.rows += len(first)

    def close(self, ok: bool) -> None:
        self._output.close(ok)


def write_rejected(out: Path, rejected: list) -> Path:
    """OUT.rejected.tsv: each record that could not be scored, where it was and why."""
    path = Path(f"{out}.rejected.tsv")
    with atomic_write(path) as handle:
        handle.write("source\tline\treason\trecord\n")
        for bad in rejected:
            record = bad.record.replace("\t", " ")  # keep the side file's columns
            handle.write(f"{bad.source}\t{bad.line}\t{bad.reason}\t{record}\n")
    return path


def _finish(context, ok: bool) -> None:
    """Leave an atomic_write/atomic_path context: keep the file when `ok`; otherwise hand
    it an exception, which makes it delete the temporary file (nothing half-written)."""
    if ok:
        context.__exit__(None, None, None)
    else:
        failure = RuntimeError("scoring did not complete")
        context.__exit__(type(failure), failure, None)


def select_features(predictor, names: list[str] | None) -> list[str]:
    if not names:
        return predictor.feature_names
    known = set(predictor.feature_names)
    unknown = [n for n in names if n not in known]
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        hint = _suggestions(unknown, predictor.feature_names)
        raise ConfigError(
            f"unknown features {unknown[:5]}{more}{hint}; "
            f"this model has {len(predictor.feature_names)}, e.g. "
            f"{', '.join(predictor.feature_names[:5])}"
        )
    return names


def _suggestions(unknown: list[str], names: list[str]) -> str:
    """'; did you mean ...' for names that differ from a feature's in case or in a few
    characters ('k562|ctcf' for 'K562|CTCF')."""
    import difflib

    by_case = {name.lower(): name for name in names}
    close = []
    for name in unknown[:5]:
        match = by_case.get(name.lower()) or next(
            iter(difflib.get_close_matches(name, names, n=1, cutoff=0.8)), None
        )
        if match:
            close.append(f"{name!r} -> {match!r}")
    return f" (did you mean {', '.join(close)}?)" if close else ""


H5_SUFFIXES = (".h5", ".hdf5")
TSV_SUFFIXES = (".tsv", ".txt")


def output_format(out: Path, fmt: str | None) -> str:
    """The format a score file is written in: `fmt`, or its name's (.h5/.hdf5: HDF5;
    anything else: TSV). A name that says one format and `fmt` the other is refused, as
    is an existing folder: both before any record is scored."""
    out = Path(out)
    if out.is_dir():
        raise ConfigError(
            f"--out {out} is an existing folder; give a file name, e.g. {out / 'scores.tsv'}"
        )
    named = (
        "h5"
        if out.suffix.lower() in H5_SUFFIXES
        else ("tsv" if out.suffix.lower() in TSV_SUFFIXES else None)
    )
    if fmt is None:
        return named or "tsv"
    if named is not None and named != fmt:
        raise ConfigError(
            f"--out {out} names a {named.upper()} file but --format is {fmt}; "
            "let the name decide (leave --format out) or rename it"
        )
    return fmt


@runtime_checkable
class RecordScorer(Protocol):
    """What `write_scores` (and so `genobird score` and `genobird likelihood`) scores
    FASTA records and BED regions with: the record source (scoring.source) reads them as
    its `policy(tiles)` declares, in chunks of `chunk_size`; the scorer only scores a
    chunk's sequences (`score_table`: one column per name in `feature_names`), beside
    the id columns it names for each kind (`COLUMNS`)."""

    feature_names: list[str]
    chunk_size: int
    COLUMNS: dict

    def policy(self, tiles: bool = False): ...

    def score_table(self, sequences: list[str]): ...


@runtime_checkable
class VariantScorer(Protocol):
    """What `write_scores` scores VCF variants with (a predictor's ref and alt windows,
    the language model's allele windows). Each chunk it yields is ({table name: ids
    and one column per name in `feature_names`}, the variants set aside with a
    reason); `variant_tables` names the tables written, per format: the first is OUT
    in TSV, each other OUT.NAME.tsv; in HDF5 each is a dataset. `variant_rows_numbered`:
    whether a TSV row starts with its index, as a record's does (a predictor's variant
    rows are named by their own fields alone)."""

    feature_names: list[str]
    variant_tables: dict[str, tuple[str, ...]]
    variant_rows_numbered: bool

    def iter_variants(self, path, reference, chromosomes=None) -> Iterator: ...


def write_scores(
    predictor: RecordScorer | VariantScorer,
    kind: str,
    source,
    out: Path,
    fmt: str | None,
    features,
    reference=None,
    tiles: bool = False,
    progress: bool = False,
    chromosomes=None,
) -> ScoreSummary:
    """Score `source` (kind: fasta, bed, vcf) into `out` (`output_format`); returns counts
    and paths. `chromosomes` keeps only the BED regions or variants on them."""
    fmt = output_format(out, fmt)
    from genobird.scoring.windows import check_source

    check_source(kind, reference, chromosomes)
    summary = ScoreSummary()
    chosen = select_features(predictor, features)
    rejected_rows: list = []
    _check_scores(predictor, kind)
    sinks = _open_sinks(predictor, kind, out, fmt, chosen)
    ok = False
    bar = tqdm(unit="records", desc="score", disable=not progress)
    try:
        for tables, rejected in _chunks(predictor, kind, source, reference, tiles, chromosomes):
            bar.update(len(next(iter(tables.values()))) + len(rejected))
            rejected_rows.extend(rejected)
            summary.rejected += len(rejected)
            first = next(iter(tables.values()))
            if not len(first):
                continue
            ids = [c for c in first.columns if c not in predictor.feature_names]
            trimmed = {name: t[ids + chosen] for name, t in tables.items()}
            _write(sinks, trimmed, fmt)
            summary.scored += len(first)
        ok = summary.scored > 0
    finally:
        bar.close()
        for sink in _unique(sinks):
            sink.close(ok)
    if rejected_rows:
        summary.outputs.append(write_rejected(out, rejected_rows))
    if ok:
        summary.outputs[:0] = [sink.path for sink in _unique(sinks)]
    return summary


def _unique(sinks: dict) -> list:
    seen, unique = set(), []
    for sink in sinks.values():
        if id(sink) not in seen:
            seen.add(id(sink))
            unique.append(sink)
    return unique


def _open_sinks(predictor, kind, out: Path, fmt: str, features) -> dict:
    names = predictor.variant_tables[fmt] if kind == "vcf" else ("predictions",)
    if fmt == "h5":
        sink = H5Sink(out, features, list(names))
        return {name: sink for name in names}
    numbered = kind != "vcf" or predictor.variant_rows_numbered
    first, *others = names
    return {
        first: TsvSink(out, numbered),
        **{name: TsvSink(Path(f"{out}.{name}.tsv"), numbered) for name in others},
    }


def _write(sinks: dict, tables: dict, fmt: str) -> None:
    if fmt == "h5":
        next(iter(sinks.values())).write(tables)
        return
    for name, sink in sinks.items():
        sink.write(tables[name])


def _check_scores(predictor, kind: str) -> None:
    """Refuse a kind of input the scorer has no reader for, before any file is opened."""
    wanted = VariantScorer if kind == "vcf" else RecordScorer
    if not isinstance(predictor, wanted):
        reads = "VCF variants" if isinstance(predictor, VariantScorer) else "FASTA and BED records"
        asked = "VCF variants" if kind == "vcf" else f"{kind.upper()} records"
        raise ConfigError(f"a {type(predictor).__name__} scores {reads}, not {asked}")


def _chunks(predictor, kind, source, reference, tiles, chromosomes):
    from genobird.scoring.source import scored_records  # torch: not for --help

    if kind == "vcf":
        yield from predictor.iter_variants(source, reference, chromosomes)
        return
    for result in scored_records(predictor, kind, source, tiles, reference, chromosomes):
        yield {"predictions": result.table}, result.rejected
