"""Held-out parts of a genome: which windows of a coordinate data set validate and test.

DeepSEA holds out whole chromosomes (test: chr8 and chr9) and one region of another
(validation: chr7:30,508,751-35,296,850). A `GenomeSplit` takes either, per split: a
chromosome name, or a region written as genome browsers show it ("chr19:2,600,001-3,119,000",
1-based, inclusive; a name that is itself a contig of the reference, such as
"22:20000001-21000000", is that whole contig).

A window belongs to the split of its labelled bin (test before validation where both
hold it). Its context may reach further: a window is left out when its context reaches
into a split that ranks above its own (test > valid > train), so no base of the test
regions is read in training or validation, and no base of the validation regions in
training. Between a held-out region and the rest of its chromosome that leaves a gap
of half a context on each side.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from genobird.errors import RegionError
from genobird.genome.reference import contig_aliases
from genobird.genome.regions import parse_region

RANK = {"train": 0, "valid": 1, "test": 2}


@dataclass(frozen=True)
class HeldOutRegion:
    chrom: str
    start: int = 0  # 0-based, half-open
    end: int | None = None  # None: to the chromosome's end

    def overlaps(self, start: int, end: int) -> bool:
        return start < (self.end if self.end is not None else end + 1) and self.start < end

    def __str__(self) -> str:
        if self.end is None and not self.start:
            return self.chrom
        return f"{self.chrom}:{self.start + 1:,}-{self.end:,}"


def parse_held_out(text: str, contigs: Iterable[str] = ()) -> HeldOutRegion:
    """A chromosome name or a 1-based region; a whole contig of `contigs` wins, so
    names holding a colon stay names."""
    contigs = set(contigs)
    if text in contigs or ":" not in text:
        return HeldOutRegion(text)
    try:
        region = parse_region(text)
    except RegionError as exc:
        raise RegionError(
            f"held-out {text!r} is neither a contig of the reference nor a region "
            "chrom:start-end (1-based)"
        ) from exc
    return HeldOutRegion(region.chrom, region.start, region.end)


def _names(chrom: str) -> set[str]:
    """A chromosome's spellings (chr1 and 1; chrM and MT)."""
    return {chrom, *contig_aliases(chrom)}


@dataclass(frozen=True)
class GenomeSplit:
    valid: tuple[HeldOutRegion, ...] = ()
    test: tuple[HeldOutRegion, ...] = ()

    @classmethod
    def parse(cls, valid: Iterable[str], test: Iterable[str], contigs: Iterable[str] = ()):
        contigs = list(contigs)
        return cls(
            tuple(parse_held_out(t, contigs) for t in valid),
            tuple(parse_held_out(t, contigs) for t in test),
        )

    def _hits(self, split: str, chrom: str, start: int, end: int) -> bool:
        names = _names(chrom)
        regions = self.test if split == "test" else self.valid
        return any(r.chrom in names and r.overlaps(start, end) for r in regions)

    def split_of(self, chrom: str, start: int, end: int) -> str:
        """The split of a labelled bin [start, end) on `chrom`."""
        for split in ("test", "valid"):
            if self._hits(split, chrom, start, end):
                return split
        return "train"

    def window_split(
        self, chrom: str, bin_start: int, bin_end: int, window_start: int, window_end: int
    ) -> str | None:
        """The bin's split, or None when the window's context reaches into a split that
        ranks above it (the window is then left out)."""
        split = self.split_of(chrom, bin_start, bin_end)
        for other in ("test", "valid"):
            if RANK[other] > RANK[split] and self._hits(other, chrom, window_start, window_end):
                return None
        return split

    def chromosomes(self) -> set[str]:
        """Every spelling of the chromosomes named by either split."""
        return {name for r in (*self.valid, *self.test) for name in _names(r.chrom)}

    def describe(self) -> dict:
        return {"valid": [str(r) for r in self.valid], "test": [str(r) for r in self.test]}
