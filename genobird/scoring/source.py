"""The one record source of scoring: FASTA records and BED regions read into windows for
score, likelihood, embed and ism alike, governed by the window policy each command
declares (`WindowPolicy`), and VCF variants read into their REF and ALT windows for
score, likelihood and embed alike (`variant_records`).

What every policy shares: a BED region on a contig the reference lacks, or past its end,
is set aside with its line (`windows.reference_regions`); a window past a contig's end
is N-padded there; a window more than half N (`inputs.MAX_N_FRACTION`, a record without
any A/C/G/T base among them) is set aside with its share, named as the record it came
from. What a policy declares: the window's length (or each record as it is), tiles of a
longer FASTA record, the strand a BED region is read on, and the longest record read.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd

from genobird.genome import centered_window, open_reference, read_fasta
from genobird.genome.regions import BadRecord, Interval, Variant
from genobird.inputs import MAX_N_FRACTION, fit_window, mostly_n, mostly_n_reason, n_fraction
from genobird.scoring.windows import (
    chunked,
    reference_regions,
    reference_variants,
    variant_problem,
    variant_windows,
)

STRANDS = ("region", "genome")
# the id columns of a FASTA record's scores (`genobird score`)
FASTA_IDS = ("name", "line", "first_bp", "last_bp", "cropped", "padded", "n_fraction")
# of a BED region's: the region as given, its input line, and the window scored around it
BED_IDS = ("chrom", "start", "end", "name", "strand", "line", "window_start", "window_end")


@dataclass(frozen=True)
class WindowPolicy:
    """How a command reads records into windows. `length`: the bp of every window (a
    FASTA record centre-cropped or N-padded to it, a BED region's window centred on it),
    or None to read each record as it is. `tiles`: with a length, a longer FASTA record is
    read as its tiles of that length. `strand`: a BED region is read on its own strand
    (+ without one: "region") or on the genome's + strand ("genome": positions and bases
    as the reference spells them). `max_record_bp`: a longer record is set aside."""

    length: int | None = None
    tiles: bool = False
    strand: str = "region"
    max_record_bp: int | None = None

    def __post_init__(self):
        if self.strand not in STRANDS:
            raise ValueError(f"strand must be one of {STRANDS}, got {self.strand!r}")

    @property
    def min_bases_bp(self) -> int | None:
        """The fewest A/C/G/T bases a record needs for its window to be read (a window of
        a fixed length only)."""
        return None if self.length is None else math.ceil(self.length * (1 - MAX_N_FRACTION))


@dataclass(frozen=True)
class Record:
    """A window to score and where it came from. FASTA: `name` (a tile's with its
    span), the record's bases read [first_bp, last_bp) of the `span_bp` it was cut from
    and `offset`, the record coordinate of the window's first base (negative where N
    pads it). BED: `region` as given and `window`, the interval read (`name` the
    region's, or "."). The window's bases are `sequence`."""

    name: str
    line: int
    sequence: str
    region: Interval | None = None
    window: Interval | None = None
    first_bp: int = 0
    last_bp: int = 0
    span_bp: int = 0
    offset: int = 0

    @functools.cached_property
    def n_fraction(self) -> float:  # read by the N check and two id columns
        return n_fraction(self.sequence)

    @property
    def contains_N(self) -> bool:
        return self.n_fraction > 0

    @property
    def cropped(self) -> bool:
        return self.last_bp - self.first_bp < self.span_bp

    @property
    def padded(self) -> bool:
        return self.last_bp - self.first_bp < len(self.sequence)

    @property
    def read_strand(self) -> str:
        return self.window.strand

    def value(self, field: str):
        """A column of the record: `field` is an attribute of it, or of its region
        (chrom, start, end, strand) or window (window_start, window_end)."""
        if field in ("chrom", "start", "end", "strand"):
            return getattr(self.region, field)
        if field in ("window_start", "window_end"):
            return getattr(self.window, field.removeprefix("window_"))
        return getattr(self, field)


def records(
    kind: str, path, policy: WindowPolicy, rejected: list, reference=None, chromosomes=None
) -> Iterator[Record]:
    """The windows of a FASTA's records or a BED's regions (`kind`) as `policy` reads
    them; what is not read goes to `rejected` with its line and reason."""
    if kind == "fasta":
        yield from _fasta_records(path, policy, rejected)
    else:
        yield from _bed_records(path, policy, rejected, open_reference(reference), chromosomes)


def _fasta_records(path, policy: WindowPolicy, rejected: list) -> Iterator[Record]:
    for record in read_fasta(path, problems=rejected):
        size = len(record.sequence)
        length = policy.length or size
        spans = [(0, size)]
        if policy.tiles and size > length:
            spans = [(start, min(start + length, size)) for start in range(0, size, length)]
        for start, end in spans:
            name = record.name if len(spans) == 1 else f"{record.name}/{start}-{end}"
            fit = _fit_offset(end - start, length)
            first = start + max(0, fit)
            window = Record(
                name,
                record.line,
                fit_window(record.sequence[start:end], length),
                first_bp=first,
                last_bp=min(end, first + length),
                span_bp=end - start,
                offset=start + fit,
            )
            what = f"record {name!r}"
            if _readable(window, policy, what, record.name, path, rejected, hint=True):
                yield window


def _fit_offset(record_bp: int, length: int) -> int:
    """The record coordinate of `fit_window`'s first base (negative: N padding)."""
    if record_bp >= length:
        return (record_bp - length) // 2
    return -((length - record_bp) // 2)


def _bed_records(path, policy: WindowPolicy, rejected: list, reference, chromosomes):
    for region in reference_regions(path, reference, rejected, chromosomes):
        read = centered_window(region, policy.length) if policy.length else region
        strand = "-" if policy.strand == "region" and region.strand == "-" else "+"
        window = Interval(read.chrom, read.start, read.end, read.name, strand)
        sequence = reference.fetch(window.chrom, window.start, window.end, strand, pad=True)
        place = f"{region.chrom}:{region.start + 1:,}-{region.end:,}"
        what = f"the window around {place}" if policy.length else f"region {place}"
        record = Record(region.name or ".", region.line, sequence, region, window)
        if _readable(record, policy, what, region.name or place, path, rejected):
            yield record


def _readable(
    record: Record, policy: WindowPolicy, what: str, named: str, path, rejected, hint=False
) -> bool:
    """Whether `record`'s window is read; if not, it is set aside in `rejected` (`hint`:
    with the bases a record of its own, not a genome's window, needs)."""
    reason, size = None, len(record.sequence)
    if policy.max_record_bp is not None and size > policy.max_record_bp:
        reason = (
            f"{size:,} bp, over the {policy.max_record_bp:,} bp a record may have; "
            "tile it (bedtools makewindows)"
        )
    elif not record.sequence.strip("N") or mostly_n(record.sequence):
        reason = mostly_n_reason(record.n_fraction if size else 1.0, size, what)
        if hint and policy.min_bases_bp is not None:
            reason += f"; give at least {policy.min_bases_bp:,} bp of A/C/G/T"
    if reason is not None:
        rejected.append(BadRecord(str(path), record.line, reason, named))
    return reason is None


@dataclass(frozen=True)
class VariantRecord:
    """A variant's REF and ALT windows of `length` bp centred on it, whether REF is the
    reference's bases there, and where the REF window lies (0-based; past a contig's
    ends where it is N-padded)."""

    variant: Variant
    ref: str
    alt: str
    ref_match: bool
    start: int
    end: int


def variant_records(
    path,
    reference,
    length: int,
    rejected: list,
    chromosomes=None,
    max_allele_bp: int | None = None,
) -> Iterator[VariantRecord]:
    """A VCF's variants (one per ALT) as every scorer reads them: their windows
    (`windows.variant_windows`), N-padded past a contig's ends; what
    `windows.variant_problem` refuses, and an allele longer than `max_allele_bp` where
    given, goes to `rejected` with its line and reason."""
    reference = open_reference(reference)
    limits = {} if max_allele_bp is None else {"max_allele_length": 10**9}
    for variant in reference_variants(path, reference, rejected, chromosomes, **limits):
        if max_allele_bp is not None and max(len(variant.ref), len(variant.alt)) > max_allele_bp:
            reason = f"an allele longer than {max_allele_bp} bp: SNVs and short indels only"
            rejected.append(BadRecord(str(path), variant.line, reason, variant.label))
            continue
        ref, alt, ref_match = variant_windows(variant, reference, length)
        if problem := variant_problem(variant, ref, alt, ref_match):
            rejected.append(BadRecord(str(path), variant.line, problem, variant.label))
            continue
        start = variant.start + len(variant.ref) // 2 - length // 2
        yield VariantRecord(variant, ref, alt, ref_match, start, start + length)


@dataclass
class ScoreResult:
    """A chunk of scores: the table (id columns, then the scorer's columns) and the
    records that could not be scored."""

    table: pd.DataFrame
    rejected: list[BadRecord]


def scored_records(
    scorer, kind: str, path, tiles: bool = False, reference=None, chromosomes=None
) -> Iterator[ScoreResult]:
    """The one loop from the record source to a scorer (score and likelihood): the
    records of `path` read as the scorer's policy asks (`scorer.policy(tiles)`), in
    chunks of `scorer.chunk_size`, each scored (`scorer.score_table(sequences)`) beside
    its id columns (`scorer.COLUMNS[kind]`: (column, the record's field) pairs)."""
    rejected: list[BadRecord] = []
    source = records(kind, path, scorer.policy(tiles), rejected, reference, chromosomes)
    for chunk, set_aside in chunked(source, scorer.chunk_size, rejected):
        ids = {column: [r.value(field) for r in chunk] for column, field in scorer.COLUMNS[kind]}
        scores = scorer.score_table([record.sequence for record in chunk])
        yield ScoreResult(pd.concat([pd.DataFrame(ids), scores], axis=1), set_aside)
