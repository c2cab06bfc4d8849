"""The demo genome's long-range structure: what only a model reading kilobases can learn.

Real genomes carry information across kilobases that no k-mer statistic holds. The demo
genome plants three such structures, each named in elements.bed / copies.bed:

1. Copies within reach. Segmental duplications (a 300-1,500 bp segment copied 0.2-4 kb
   downstream, same strand), inverted repeats (the same, reverse-complemented) and tandem
   arrays (2-4 adjacent units of 200-500 bp), each copy 1-4% diverged. A masked piece
   of one copy is read from the other in context, which no order-k Markov model can do;
   more context puts more copies in view.
2. Enhancer-promoter grammar. Every active promoter gets a distal element (three DR1-like
   motifs in 60 bp) 1-3 kb away. Half are engaged: upstream of the TSS, motifs on the
   promoter's strand; H3K27ac marks the promoter core and the element. The others are
   decoys with the same motifs: downstream on the promoter's strand, or upstream on the
   other strand; they carry no mark. A bag of k-mers over the window sees the same
   motifs either way; only their arrangement tells the classes apart.
3. Boundary domains. Pairs of CTCF-like sites 2-5 kb apart: convergent pairs (the left
   site on the + strand, the right on the -, facing each other) close a domain that
   H3K27me3 covers from site to site; divergent pairs (facing away) close none. Both
   hold one site of each orientation; a bin in the middle of a domain lies a kilobase
   or more from either site.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DISTAL_MOTIF = "TGACCTTTGACCT"  # DR1-like (nuclear receptor); not its own reverse complement
DISTAL_WIDTH = 60  # bp of a distal element: the motif at 0, 24 and 47
DISTAL_OFFSETS = (0, 24, 47)
DISTAL_RANGE = (1_000, 3_000)  # bp between the TSS and the element's near end
BOUNDARY_GAP = (2_000, 5_000)  # bp between the two sites of a pair
COPY_GAP = (200, 4_000)  # bp between a segment and its copy
COPY_DIVERGENCE = (0.01, 0.04)


@dataclass(frozen=True)
class Distal:
    start: int
    end: int
    strand: str  # the motifs' strand
    promoter: int  # index into the plan's promoters
    placement: str  # "engaged", "downstream" (decoy) or "reversed" (decoy)

    @property
    def engaged(self) -> bool:
        return self.placement == "engaged"


@dataclass(frozen=True)
class BoundaryPair:
    left: int  # start of the left site
    right: int  # end of the right site
    convergent: bool  # left site on +, right on - (a domain); else facing away

    @property
    def kind(self) -> str:
        return "convergent" if self.convergent else "divergent"


@dataclass(frozen=True)
class Copy:
    kind: str  # "segmental", "inverted" or "tandem"
    source: tuple[int, int]
    copy: tuple[int, int]
    divergence: float


class _Placed:
    """Spans placed so far by one planner, on top of what `is_free` already blocks."""

    def __init__(self, is_free, margin: int = 100):
        self.is_free, self.margin, self.spans = is_free, margin, []

    def take(self, start: int, end: int) -> bool:
        """Claim [start, end) if it is free of everything; False (nothing claimed) if not."""
        m = self.margin
        if not self.is_free(start, end) or any(
            start < e + m and s - m < end for s, e in self.spans
        ):
            return False
        self.spans.append((start, end))
        return True


def revcomp_codes(codes: np.ndarray) -> np.ndarray:
    return (3 - codes)[::-1]


def mutate(rng: np.random.Generator, codes: np.ndarray, rate: float) -> np.ndarray:
    out = codes.copy()
    hit = rng.random(len(out)) < rate
    out[hit] = (out[hit] + rng.integers(1, 4, size=int(hit.sum()))) % 4
    return out


def plan_distal(rng, promoters, is_free) -> list[Distal]:
    """A distal element for every active promoter, engaged or a decoy (half each), placed
    where `is_free(start, end)` allows (else none)."""
    planned, placed = [], _Placed(is_free)
    for index, promoter in enumerate(promoters):
        if promoter.poised:
            continue
        placement = (
            "engaged" if rng.random() < 0.5 else ("downstream", "reversed")[int(rng.integers(2))]
        )
        distance = int(rng.integers(*DISTAL_RANGE))
        upstream = placement != "downstream"
        # genome direction of "upstream" on the promoter's strand
        sign = -1 if (promoter.strand == "+") == upstream else 1
        near = promoter.tss + sign * distance
        start = near - DISTAL_WIDTH if sign < 0 else near
        if not placed.take(start, start + DISTAL_WIDTH):
            continue
        strand = promoter.strand
        if placement == "reversed":
            strand = "-" if strand == "+" else "+"
        planned.append(Distal(start, start + DISTAL_WIDTH, strand, index, placement))
    return planned


def write_distal(put, element: Distal, motif_codes: np.ndarray) -> None:
    """`put(start, codes)` writes unmasked bases; the motifs read 5'->3' on the element's
    strand, in order from its 5' end."""
    for offset in DISTAL_OFFSETS:
        if element.strand == "+":
            put(element.start + offset, motif_codes)
        else:
            put(element.end - offset - len(motif_codes), revcomp_codes(motif_codes))


def plan_boundaries(rng, length: int, count: int, site_width: int, is_free) -> list:
    """`count` pairs of sites at free places, convergent or divergent (half each)."""
    pairs, placed = [], _Placed(is_free)
    for _ in range(count * 10):  # tries: the genome is busy in places
        if len(pairs) == count:
            break
        gap = int(rng.integers(*BOUNDARY_GAP))
        left = int(rng.integers(0, max(1, length - gap - 2 * site_width)))
        right = left + 2 * site_width + gap
        if right <= length and placed.take(left, right):
            pairs.append(BoundaryPair(left, right, convergent=bool(rng.random() < 0.5)))
    return sorted(pairs, key=lambda pair: pair.left)


def write_boundary(put, pair: BoundaryPair, site_codes: np.ndarray) -> None:
    forward, reverse = site_codes, revcomp_codes(site_codes)
    left_site, right_site = (forward, reverse) if pair.convergent else (reverse, forward)
    put(pair.left, left_site)
    put(pair.right - len(site_codes), right_site)


def plan_copies(rng, length: int, target_bp: int, is_free) -> list[Copy]:
    """Copies (segmental, inverted, tandem in 2:1:1) until their copied bases reach
    `target_bp`, each spanning only free places (source, gap and copies)."""
    copies, copied, tries, placed = [], 0, 0, _Placed(is_free)
    while copied < target_bp and tries < 50 * (target_bp // 500 + 1):
        tries += 1
        kind = ("segmental", "segmental", "inverted", "tandem")[int(rng.integers(4))]
        divergence = float(rng.uniform(*COPY_DIVERGENCE))
        if kind == "tandem":
            unit, units = int(rng.integers(200, 501)), int(rng.integers(2, 5))
            start = int(rng.integers(0, max(1, length - unit * units)))
            if not placed.take(start, start + unit * units):
                continue
            for n in range(1, units):
                at = start + n * unit
                copies.append(Copy(kind, (start, start + unit), (at, at + unit), divergence))
            copied += unit * (units - 1)
            continue
        size, gap = int(rng.integers(300, 1_501)), int(rng.integers(*COPY_GAP))
        start = int(rng.integers(0, max(1, length - 2 * size - gap)))
        end = start + 2 * size + gap
        if end > length or not placed.take(start, end):
            continue
        at = start + size + gap
        copies.append(Copy(kind, (start, start + size), (at, at + size), divergence))
        copied += size
    return copies


def write_copy(rng, codes: np.ndarray, masked: np.ndarray, copy: Copy) -> None:
    """The source's bases (and soft-mask) written over the copy's span, diverged, and
    reverse-complemented for an inverted repeat."""
    (s0, s1), (c0, c1) = copy.source, copy.copy
    bases, mask = codes[s0:s1].copy(), masked[s0:s1].copy()
    if copy.kind == "inverted":
        bases, mask = revcomp_codes(bases), mask[::-1]
    codes[c0:c1] = mutate(rng, bases, copy.divergence)
    masked[c0:c1] = mask
