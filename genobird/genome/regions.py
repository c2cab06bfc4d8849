"""Genomic regions: intervals, variants, the readers for BED, FASTA and VCF, and windows.

Coordinates inside genobird are 0-based, half-open. BED is already so; VCF positions and
"chr:start-end" strings are 1-based and are converted here, at the edge.

Every reader takes `problems`: pass a list and each bad record is appended to it as a
`BadRecord` (file, line, reason) while reading goes on; pass nothing and the first bad
record raises. The caller decides whether bad records are fatal.

BED lines are parsed here rather than by pybedtools' iterator because that iterator
stops at the first malformed line and reports no line number; pybedtools does the
interval arithmetic instead (see `to_bedtool`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace

from genobird.errors import ContigError, FormatError, GenobirdError, RegionError
from genobird.fileio import open_text
from genobird.genome.alphabet import normalise_dna

_HEADER_PREFIXES = ("#", "track", "browser")
_STRANDS = ("+", "-", ".")


@dataclass(frozen=True)
class Interval:
    """A 0-based, half-open genomic interval."""

    chrom: str
    start: int
    end: int
    name: str = ""
    strand: str = "."
    thick_start: int | None = None  # BED columns 7-8, when present (EPDnew: the TSS)
    thick_end: int | None = None
    # the 1-based line of the file it was read from (0: not read from a file), so output
    # rows and rejections name the input line; not part of the interval's identity
    line: int = field(default=0, compare=False)

    @property
    def width(self) -> int:
        return self.end - self.start

    @property
    def midpoint(self) -> int:
        """start + width // 2: the centre base (the right one of two for even widths), so
        that `point_window(midpoint, width)` gives back the interval itself."""
        return self.start + self.width // 2

    def __str__(self) -> str:
        return f"{self.chrom}:{self.start}-{self.end}({self.strand})"


@dataclass(frozen=True)
class Variant:
    """A VCF record with one ALT allele. `pos` is VCF's 1-based position; `start` and `end`
    are the 0-based half-open span of REF on the reference."""

    chrom: str
    pos: int
    id: str
    ref: str
    alt: str
    line: int = field(default=0, compare=False)  # the VCF line it was read from

    @property
    def start(self) -> int:
        return self.pos - 1

    @property
    def end(self) -> int:
        return self.start + len(self.ref)

    @property
    def is_snv(self) -> bool:
        return len(self.ref) == 1 and len(self.alt) == 1

    @property
    def label(self) -> str:
        """chrom:pos REF>ALT, as a rejection names it."""
        return f"{self.chrom}:{self.pos} {self.ref}>{self.alt}"


@dataclass(frozen=True)
class SequenceRecord:
    """A FASTA record with its sequence normalised (uppercase ACGTN)."""

    name: str
    description: str
    sequence: str
    line: int = field(default=0, compare=False)  # the line of its header


@dataclass(frozen=True)
class BadRecord:
    """A record a reader skipped: where it was and why."""

    source: str
    line: int
    reason: str
    record: str = ""

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.reason}"


def _report(problems: list[BadRecord] | None, bad: BadRecord, error=FormatError) -> None:
    if problems is None:
        raise error(str(bad))
    problems.append(bad)


# --------------------------------------------------------------------------- BED
def read_bed(
    path: str | os.PathLike,
    contigs: Mapping[str, int] | None = None,
    problems: list[BadRecord] | None = None,
    keep_spelling: bool = False,
) -> Iterator[Interval]:
    """Stream intervals from a BED3/BED6+ file (plain or gzipped).

    Header, `track` and `browser` lines are skipped. With `contigs` (name -> length, or a
    Reference's `lengths`), unknown contigs and ends past the contig are bad records;
    names are aliased (chr1 <-> 1) and the interval keeps the name used in `contigs`, or,
    with `keep_spelling` (what scorers write back), the name as the BED spells it (a
    Reference resolves the alias when it fetches).
    """
    source = str(path)
    with open_text(path) as handle:
        for line_number, line in enumerate(handle, 1):
            text = line.rstrip("\n")
            if not text.strip() or text.startswith(_HEADER_PREFIXES):
                continue
            try:
                interval = _parse_bed_line(text, contigs, line_number)
                if keep_spelling:
                    interval = replace(interval, chrom=text.split()[0])
                yield interval
            except (RegionError, ContigError, FormatError) as exc:
                _report(problems, BadRecord(source, line_number, str(exc), text), RegionError)


def _parse_bed_line(text: str, contigs: Mapping[str, int] | None, line: int = 0) -> Interval:
    fields = text.split("\t") if "\t" in text else text.split()
    if len(fields) < 3:
        raise FormatError(f"expected at least 3 columns (chrom, start, end), got {len(fields)}")
    chrom = fields[0]
    try:
        start, end = int(fields[1]), int(fields[2])
    except ValueError:
        raise FormatError(
            f"start and end must be integers, got {fields[1]!r}, {fields[2]!r}"
        ) from None
    if start < 0:
        raise RegionError(f"negative start {start}")
    if start > end:
        raise RegionError(f"start {start} is greater than end {end}")
    name = fields[3] if len(fields) > 3 else ""
    strand = fields[5] if len(fields) > 5 else "."
    if strand not in _STRANDS:
        raise FormatError(f"strand must be +, - or ., got {strand!r}")
    thick = (None, None)
    if len(fields) > 7:
        try:
            thick = (int(fields[6]), int(fields[7]))
        except ValueError:
            raise FormatError(
                f"thickStart and thickEnd must be integers, got {fields[6]!r}, {fields[7]!r}"
            ) from None
    if contigs is not None:
        chrom = resolve_contig(chrom, contigs)
        if end > contigs[chrom]:
            raise RegionError(f"end {end} is past the end of {chrom} (length {contigs[chrom]})")
    return Interval(chrom, start, end, name, strand, *thick, line=line)


def resolve_contig(chrom: str, contigs: Mapping[str, int]) -> str:
    """`chrom` as spelled in `contigs`, trying chr1 <-> 1 and chrM <-> MT."""
    from genobird.genome.reference import contig_aliases

    if chrom in contigs:
        return chrom
    for alias in contig_aliases(chrom):
        if alias in contigs:
            return alias
    raise ContigError(f"unknown contig {chrom!r}")


def write_bed(path: str | os.PathLike, intervals, extra_columns=None) -> None:
    """Write BED6 atomically (name '.' and score 0 where absent)."""
    from genobird.fileio import atomic_write

    with atomic_write(path) as handle:
        for interval in intervals:
            name = interval.name or "."
            handle.write(
                f"{interval.chrom}\t{interval.start}\t{interval.end}\t{name}\t0\t{interval.strand}\n"
            )


def to_bedtool(intervals):
    """A pybedtools.BedTool over the intervals (BED6), for intersect/merge/sort."""
    import pybedtools

    return pybedtools.BedTool(
        [(iv.chrom, iv.start, iv.end, iv.name or ".", 0, iv.strand) for iv in intervals]
    )


# --------------------------------------------------------------------------- FASTA
def read_fasta(
    path: str | os.PathLike, problems: list[BadRecord] | None = None
) -> Iterator[SequenceRecord]:
    """Stream normalised records from a FASTA file (plain or gzipped; CRLF accepted).

    Lowercase (soft-masked) bases are uppercased and IUPAC codes become N. Empty records,
    duplicate names and invalid characters are bad records; `line` (in a record and in a
    BadRecord) is the 1-based line of the record's header.
    """
    source = str(path)
    seen: set[str] = set()
    with open_text(path) as handle:
        for line, title, raw in _fasta_entries(handle, source):
            record = _fasta_record(title, raw, seen)
            if isinstance(record, BadRecord):
                _report(problems, BadRecord(source, line, record.reason, title))
            else:
                yield SequenceRecord(record.name, record.description, record.sequence, line)


def _fasta_entries(handle, source: str) -> Iterator[tuple[int, str, str]]:
    """(header line, title, sequence text) of each record, as Biopython's
    SimpleFastaParser reads them (lines joined, whitespace dropped), with the line
    numbers it does not keep. Text before the first '>' is an error, not skipped."""
    header, title, parts = 0, None, []
    for line_number, line in enumerate(handle, 1):
        if line.startswith(">"):
            if title is not None:
                yield header, title, "".join(parts)
            header, title, parts = line_number, line[1:].rstrip(), []
        elif title is None:
            if line.strip():
                raise FormatError(
                    f"{source}:{line_number}: not a FASTA file (expected '>' to start a record, "
                    f"got {line.strip()[:30]!r})"
                )
        else:
            parts.append("".join(line.split()))
    if title is not None:
        yield header, title, "".join(parts)


def _fasta_record(title: str, raw: str, seen: set[str]):
    name = title.split(maxsplit=1)[0] if title.strip() else ""
    if not name:
        return BadRecord("", 0, "record has no name after '>'")
    if name in seen:
        return BadRecord("", 0, f"duplicate record name {name!r}; names must be unique")
    seen.add(name)
    if not raw:
        return BadRecord("", 0, f"record {name!r} has an empty sequence")
    try:
        sequence = normalise_dna(raw, record=f"record {name!r}")
    except GenobirdError as exc:
        return BadRecord("", 0, str(exc))
    description = title[len(name) :].strip()
    return SequenceRecord(name, description, sequence)


# --------------------------------------------------------------------------- VCF
# the longest REF or ALT read as a small variant by default; longer ones are bad records
MAX_VCF_ALLELE_BP = 50


def read_vcf(
    path: str | os.PathLike,
    problems: list[BadRecord] | None = None,
    max_allele_length: int = MAX_VCF_ALLELE_BP,
) -> Iterator[Variant]:
    """Stream SNVs and small indels from a VCF (plain or gzipped), one Variant per ALT: a
    record of several ALTs gives one each, scored on rows of their own.

    Symbolic alleles (<DEL>), breakends, missing ALT ('.'), alleles longer than
    `max_allele_length` and alleles with an unknown base (N, or an IUPAC code) are bad
    records, as is an ALT equal to REF (nothing changes), each reported on its own: the
    record's other ALTs are still read.
    """
    source = str(path)
    with open_text(path) as handle:
        for line_number, line in enumerate(handle, 1):
            text = line.rstrip("\n")
            if not text.strip() or text.startswith("#"):
                continue
            try:
                alleles = _parse_vcf_line(text, max_allele_length, line_number)
            except GenobirdError as exc:
                _report(problems, BadRecord(source, line_number, str(exc), text))
                continue
            for allele in alleles:
                if isinstance(allele, Variant):
                    yield allele
                else:
                    _report(problems, BadRecord(source, line_number, allele, text))


_SYMBOLIC = re.compile(r"[<>\[\]*.]")
# why an allele holding N (an assembly gap's base, or an IUPAC code read as N) is refused
_UNKNOWN_BASE = (
    "is not a known base (N, or an ambiguity code read as N): no effect of "
    "changing it can be scored; nothing is scored"
)


def _parse_vcf_line(text: str, max_allele_length: int, line: int = 0) -> list[Variant | str]:
    """Each ALT of a VCF line as a Variant, or as the reason it cannot be scored."""
    fields = text.split("\t")
    if len(fields) < 5:
        raise FormatError(f"expected at least 5 tab-separated columns, got {len(fields)}")
    chrom, pos_text, variant_id, ref_text, alt_text = fields[:5]
    if not pos_text.isdigit() or int(pos_text) < 1:
        raise FormatError(f"POS must be a positive integer (1-based), got {pos_text!r}")
    ref = normalise_dna(ref_text, record=f"REF of {chrom}:{pos_text}")
    if "N" in ref:  # an assembly gap's base, or an ambiguity code: no allele to change
        raise FormatError(f"REF {ref_text} of {chrom}:{pos_text} {_UNKNOWN_BASE}")
    alleles = []
    for alt_raw in alt_text.split(","):
        if _SYMBOLIC.search(alt_raw):
            raise FormatError(f"unsupported ALT {alt_raw!r}: only SNVs and small indels are scored")
        alt = normalise_dna(alt_raw, record=f"ALT of {chrom}:{pos_text}")
        if max(len(ref), len(alt)) > max_allele_length:
            raise FormatError(
                f"allele longer than {max_allele_length} bp; only SNVs and small indels are scored"
            )
        if "N" in alt:
            alleles.append(f"ALT {alt_raw} of {chrom}:{pos_text} {_UNKNOWN_BASE}")
            continue
        if alt == ref:
            alleles.append(
                f"{chrom}:{pos_text}: ALT {alt_raw} is REF {ref_text}: nothing "
                "changes, nothing is scored"
            )
            continue
        alleles.append(Variant(chrom, int(pos_text), variant_id, ref, alt, line))
    return alleles


# --------------------------------------------------------------------------- windows
def centered_window(interval: Interval, width: int) -> Interval:
    """The `width`-bp window centred on the interval's midpoint, same chrom/name/strand.

    May extend past contig ends: fetch it with `pad=True` to fill with N.
    """
    return point_window(interval.chrom, interval.midpoint, width, interval.strand, interval.name)


def point_window(chrom: str, position: int, width: int, strand: str = ".", name: str = ""):
    """The `width`-bp window centred on a 0-based position: `position` is at index width//2."""
    if width <= 0:
        raise RegionError(f"window width must be positive, got {width}")
    start = position - width // 2
    return Interval(chrom, start, start + width, name, strand)


def oriented_window(
    chrom: str, tss: int, upstream: int, downstream: int, strand: str, name: str = ""
) -> Interval:
    """Window from -`upstream` to +`downstream` (exclusive) around a 0-based TSS, by strand.

    On '+' that is [tss-upstream, tss+downstream); on '-' upstream lies at higher
    coordinates, [tss-downstream+1, tss+upstream+1). Fetch with the interval's strand to
    read it 5'->3', so that the TSS is at index `upstream` in both cases.
    """
    if strand == "+":
        return Interval(chrom, tss - upstream, tss + downstream, name, "+")
    if strand == "-":
        return Interval(chrom, tss - downstream + 1, tss + upstream + 1, name, "-")
    raise RegionError(f"{chrom}:{tss}: an oriented window needs strand + or -, got {strand!r}")


# the coordinates follow the last colon: a contig name may hold colons itself
# ("22:20000001-21000000:1-100" is bases 1-100 of the contig "22:20000001-21000000")
_REGION_TEXT = re.compile(r"^(?P<chrom>\S+):(?P<start>[\d,]+)-(?P<end>[\d,]+)$")


def parse_region(text: str) -> Interval:
    """Parse 'chr1:1,001-2,000' (1-based, inclusive, as genome browsers show) to 0-based."""
    match = _REGION_TEXT.match(text.strip())
    if not match:
        raise RegionError(f"region {text!r} is not of the form chrom:start-end (1-based)")
    start = int(match["start"].replace(",", "")) - 1
    end = int(match["end"].replace(",", ""))
    if start < 0 or start >= end:
        raise RegionError(f"region {text!r}: need 1 <= start <= end")
    return Interval(match["chrom"], start, end)
