"""`Reference`: random access to a genome FASTA (plain or bgzipped) through pyfaidx.

Coordinates are 0-based, half-open everywhere. Contig names are aliased (chr1 <-> 1,
chrM <-> MT) so that a BED from UCSC works against an Ensembl FASTA and back. The
pyfaidx handle is opened lazily and dropped when pickled, so a Reference can be handed
to DataLoader workers and each worker opens its own file handle.
"""

from __future__ import annotations

import difflib
import logging
import os
from pathlib import Path

import pyfaidx

from genobird.errors import ContigError, FormatError, ReferenceFileError, RegionError
from genobird.fileio import is_gzipped
from genobird.genome.alphabet import normalise_dna, reverse_complement

log = logging.getLogger(__name__)

_MITO_NAMES = ("chrM", "MT", "chrMT", "M")


class _BlockAtItsStart(pyfaidx.BgzfBlock):
    """A BGZF block of pyfaidx's .gzi index that counts as before an offset it starts at.

    pyfaidx finds the block holding uncompressed offset x as the one before
    bisect_left(blocks, x): for an x where a block starts, that is the block before, read
    at offset x - its start = its whole size. A block of 65,536 bytes (Biopython's
    bgzf writes them; htslib's bgzip writes 65,280) then makes a virtual offset of 2**16,
    which BGZF cannot express, and the fetch fails. Ordered by `ustart <= x`, bisect_left
    finds the block after the one that holds x, so pyfaidx reads it from there."""

    __slots__ = ()

    def __lt__(self, other):
        if isinstance(other, (int, float)):
            return self.ustart <= other
        return super().__lt__(other)


def contig_aliases(name: str) -> list[str]:
    """Other spellings of a contig name, most likely first: chr1 <-> 1, chrM <-> MT."""
    if name in _MITO_NAMES:
        return [alias for alias in _MITO_NAMES if alias != name]
    if name.startswith("chr"):
        return [name[3:]]
    return ["chr" + name]


class Reference:
    """A genome FASTA with a .fai index (built when missing).

    >>> ref = Reference("hg19.fa")                                   # doctest: +SKIP
    >>> ref.fetch("chr20", 1_000_000, 1_000_010)                    # doctest: +SKIP
    >>> ref.fetch("20", -5, 5, pad=True)  # 'NNNNN' + first 5 bases   # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if not self.path.is_file():
            raise ReferenceFileError(f"{self.path}: reference FASTA not found")
        self._fasta: pyfaidx.Fasta | None = None
        self._lengths: dict[str, int] | None = None

    # ----------------------------------------------------------------- index and handle
    @property
    def index_path(self) -> Path:
        return Path(str(self.path) + ".fai")

    def ensure_index(self) -> None:
        """Build the .fai when it is missing or older than the FASTA; check it fits the file.

        Raises ReferenceFileError when it cannot be written or describes another file."""
        index = self.index_path
        if index.exists() and index.stat().st_mtime < self.path.stat().st_mtime:
            log.warning("%s is older than %s: rebuilding it", index, self.path)
            self._build_index(reason="stale")
        elif not index.exists():
            self._build_index(reason="missing")
        self._check_index_fits_file()

    def _build_index(self, reason: str) -> None:
        if is_gzipped(self.path) and not _is_bgzf(self.path):
            raise ReferenceFileError(
                f"{self.path}: gzip-compressed FASTA must be bgzip-compressed to be indexed; "
                f"run: gunzip {self.path.name} && bgzip {self.path.with_suffix('').name}"
            )
        try:
            for stale in (self.index_path, Path(str(self.path) + ".gzi")):
                if reason == "stale" and stale.exists():
                    stale.unlink()
            pyfaidx.Faidx(str(self.path), build_index=True, rebuild=True).close()
        except PermissionError as exc:
            raise ReferenceFileError(
                f"{self.path}: the .fai index is {reason} and cannot be written ({exc.strerror}); "
                f"make {self.path.parent} writable, or copy the FASTA to a writable folder"
            ) from exc
        except (pyfaidx.FastaIndexingError, ValueError) as exc:
            raise FormatError(f"{self.path}: cannot index FASTA: {exc}") from exc

    def _check_index_fits_file(self) -> None:
        """Catch an index that describes another file (copied .fai, edited FASTA)."""
        if is_gzipped(self.path):
            return  # offsets are in uncompressed bytes; pyfaidx checks the .gzi itself
        size = self.path.stat().st_size
        for name, length, offset, line_bases, line_width in _read_fai(self.index_path):
            full_lines, rest = divmod(length, line_bases) if line_bases else (0, 0)
            end = offset + full_lines * line_width + rest
            if end > size + 1:  # +1: a last line without its newline
                raise ReferenceFileError(
                    f"{self.index_path}: index does not match {self.path.name} (contig {name} "
                    f"ends at byte {end} of a {size}-byte file); delete the .fai to rebuild it"
                )

    def _open(self) -> pyfaidx.Fasta:
        if self._fasta is None:
            self.ensure_index()
            try:
                self._fasta = pyfaidx.Fasta(
                    str(self.path), as_raw=True, rebuild=False, build_index=False
                )
            except ValueError as exc:  # duplicate record names
                raise FormatError(f"{self.path}: {exc}") from exc
            faidx = self._fasta.faidx
            if getattr(faidx, "_bgzf", False):
                faidx.gzi_index = [_BlockAtItsStart(*block) for block in faidx.gzi_index]
        return self._fasta

    def close(self) -> None:
        if self._fasta is not None:
            self._fasta.close()
            self._fasta = None

    def __enter__(self) -> Reference:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self) -> dict:
        # File handles do not survive pickling; each DataLoader worker reopens lazily.
        state = self.__dict__.copy()
        state["_fasta"] = None
        return state

    def __repr__(self) -> str:
        return f"Reference({str(self.path)!r})"

    @property
    def name(self) -> str:
        """The file's name, as messages show it."""
        return self.path.name

    # ----------------------------------------------------------------- contigs
    @property
    def lengths(self) -> dict[str, int]:
        """Contig name -> length, in FASTA order (read from the index, no sequence read)."""
        if self._lengths is None:
            self.ensure_index()
            self._lengths = {row[0]: row[1] for row in _read_fai(self.index_path)}
        return self._lengths

    @property
    def contigs(self) -> list[str]:
        return list(self.lengths)

    def resolve(self, chrom: str) -> str:
        """The FASTA's own name for `chrom`, trying aliases (chr1 <-> 1, chrM <-> MT).

        Raises ContigError (a KeyError) listing close names when none matches.
        """
        lengths = self.lengths
        if chrom in lengths:
            return chrom
        for alias in contig_aliases(chrom):
            if alias in lengths:
                return alias
        close = difflib.get_close_matches(chrom, lengths, n=5, cutoff=0.5)
        hint = f"close names: {', '.join(close)}" if close else f"it has {len(lengths)} contigs"
        raise ContigError(f"contig {chrom!r} is not in {self.path.name} ({hint})")

    def __contains__(self, chrom: str) -> bool:
        try:
            self.resolve(chrom)
        except ContigError:
            return False
        return True

    def length(self, chrom: str) -> int:
        return self.lengths[self.resolve(chrom)]

    # ----------------------------------------------------------------- sequence
    def fetch(self, chrom: str, start: int, end: int, strand: str = "+", pad: bool = False) -> str:
        """Normalised DNA of chrom[start:end] (0-based, half-open), reverse-complemented on '-'.

        Out-of-bounds coordinates raise RegionError, unless `pad=True`, which fills the
        part beyond either contig end with N (the window keeps its requested width).
        Soft-masked (lowercase) bases come back uppercase; IUPAC codes come back as N.
        """
        name = self.resolve(chrom)
        length = self.lengths[name]
        if start > end:
            raise RegionError(f"{chrom}:{start}-{end}: start is greater than end")
        if strand not in ("+", "-"):
            raise RegionError(f"{chrom}:{start}-{end}: strand must be '+' or '-', got {strand!r}")
        if not pad and (start < 0 or end > length):
            raise RegionError(
                f"{chrom}:{start}-{end} is outside the contig (length {length}); "
                "use pad=True (--pad) to fill with N past the contig ends"
            )
        inner_start, inner_end = max(start, 0), min(end, length)
        raw = ""
        if inner_start < inner_end:
            raw = self._open()[name][inner_start:inner_end]
        sequence = normalise_dna(raw, record=f"{self.path.name}:{name}", offset=inner_start)
        if pad:
            left = min(max(-start, 0), end - start)
            right = end - start - left - len(sequence)
            sequence = "N" * left + sequence + "N" * right
        return reverse_complement(sequence) if strand == "-" else sequence

    def fetch_contig(self, chrom: str) -> str:
        """The whole contig, normalised (soft-masking removed)."""
        return self.fetch(chrom, 0, self.length(chrom))


class ReferenceSet:
    """Several FASTA files read as one genome: a genome shipped in pieces (one file per
    chromosome, or the pieces of a test genome). Contig names must be unique across the
    files; every `Reference` method that names a contig goes to the file that holds it.

    >>> genome = open_reference(["chr19.fa", "chr20.fa.gz"])  # doctest: +SKIP
    >>> genome.fetch("chr20", 1_000_000, 1_000_010)            # doctest: +SKIP
    """

    def __init__(self, paths):
        self.references = [Reference(path) for path in paths]
        if not self.references:
            raise ReferenceFileError("no reference FASTA given")
        self.path = self.references[0].path  # where messages name one file
        self._owner: dict[str, Reference] | None = None

    @property
    def name(self) -> str:
        return " + ".join(reference.path.name for reference in self.references)

    def _owners(self) -> dict[str, Reference]:
        if self._owner is None:
            owner: dict[str, Reference] = {}
            for reference in self.references:
                for contig in reference.lengths:
                    if contig in owner:
                        raise FormatError(
                            f"contig {contig!r} is in both {owner[contig].path.name} and "
                            f"{reference.path.name}; give each contig in one file only"
                        )
                    owner[contig] = reference
            self._owner = owner
        return self._owner

    @property
    def lengths(self) -> dict[str, int]:
        return {contig: owner.lengths[contig] for contig, owner in self._owners().items()}

    @property
    def contigs(self) -> list[str]:
        return list(self._owners())

    def resolve(self, chrom: str) -> str:
        owners = self._owners()
        for name in (chrom, *contig_aliases(chrom)):
            if name in owners:
                return name
        close = difflib.get_close_matches(chrom, owners, n=5, cutoff=0.5)
        hint = f"close names: {', '.join(close)}" if close else f"it has {len(owners)} contigs"
        raise ContigError(f"contig {chrom!r} is not in {self.name} ({hint})")

    def __contains__(self, chrom: str) -> bool:
        try:
            self.resolve(chrom)
        except ContigError:
            return False
        return True

    def length(self, chrom: str) -> int:
        return self.lengths[self.resolve(chrom)]

    def fetch(self, chrom: str, start: int, end: int, strand: str = "+", pad: bool = False) -> str:
        name = self.resolve(chrom)
        return self._owners()[name].fetch(name, start, end, strand, pad)

    def fetch_contig(self, chrom: str) -> str:
        return self.fetch(chrom, 0, self.length(chrom))

    def close(self) -> None:
        for reference in self.references:
            reference.close()

    def __enter__(self) -> ReferenceSet:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_owner": None}

    def __repr__(self) -> str:
        return f"ReferenceSet({[str(r.path) for r in self.references]!r})"


def open_reference(paths) -> Reference | ReferenceSet:
    """One FASTA path (or a list of one) as a `Reference`; several as a `ReferenceSet`.
    An open Reference or ReferenceSet is returned as it is."""
    if isinstance(paths, (Reference, ReferenceSet)):
        return paths
    if isinstance(paths, (str, os.PathLike)):
        return Reference(paths)
    paths = list(paths)
    return Reference(paths[0]) if len(paths) == 1 else ReferenceSet(paths)


def _read_fai(path: Path) -> list[tuple[str, int, int, int, int]]:
    rows = []
    with open(path) as handle:
        for line_number, line in enumerate(handle, 1):
            fields = line.rstrip("\n").split("\t")
            try:
                name, length, offset, line_bases, line_width = fields[:5]
                rows.append((name, int(length), int(offset), int(line_bases), int(line_width)))
            except ValueError as exc:
                raise ReferenceFileError(
                    f"{path}:{line_number}: malformed index line; delete the .fai to rebuild it"
                ) from exc
    return rows


def _is_bgzf(path: Path) -> bool:
    """bgzip writes a 'BC' extra subfield in every block header; plain gzip does not."""
    with open(path, "rb") as handle:
        header = handle.read(18)
    return len(header) >= 14 and header[3] & 4 and header[12:14] == b"BC"


def read_chrom_sizes(path: str | os.PathLike) -> dict[str, int]:
    """Read a UCSC-style chrom.sizes file (name<TAB>length per line)."""
    sizes: dict[str, int] = {}
    with open(path) as handle:
        for line_number, line in enumerate(handle, 1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split()
            if len(fields) < 2 or not fields[1].isdigit():
                raise FormatError(f"{path}:{line_number}: expected 'name<TAB>length', got {line!r}")
            sizes[fields[0]] = int(fields[1])
    return sizes
