"""The embedded default reference: a deterministic synthetic genome that looks like one.

A fresh clone has no GRCh37, so the demo pipeline runs on this. It must give the models
something real to learn, so it is built the way a genome is layered, not as uniform noise:

1. background in GC isochores (100-400 kb of 37-55% GC) with CpG depletion, as
   deamination leaves in vertebrate DNA (about 3/4 of CG dinucleotides become TG/CA);
2. interspersed repeat families (SINE-, LINE-, MIR-, ERV-like consensi; 5'-truncated
   LINE copies; microsatellites) inserted as diverged copies on both strands and
   soft-masked (lowercase), so that BPE finds long recurring tokens;
3. heterochromatin blocks dense in LINE copies and satellite arrays;
4. promoters on both strands: CpG islands, and TATA box, Inr, CCAAT box, GC boxes and
   DPE at their usual offsets from the TSS; some are "poised" (CpG island, GA-repeat
   element, no TATA) and carry a broad repressive mark instead of active ones;
5. enhancers of three cell-type classes, each a cluster of class-specific TF motifs;
6. CTCF sites, bound except inside heterochromatin;
7. N gaps: telomeres, a centromere-like gap flanked by satellite, a few small gaps;
8. long-range structure (genobird.genome.demo_longrange): copies of segments 0.2-4 kb
   apart (segmental duplications, inverted repeats, tandem arrays), distal elements
   1-3 kb from promoters whose arrangement decides a mark, and boundary-site pairs whose
   orientation decides a domain.

The chromatin features are computed from that plan and from motif matches in the final
sequence. The histone marks need distant context, as in the paper: H3K36me3 covers
+1.5..+4 kb downstream of active TSSs; H3K27me3 +/-3 kb around poised ones and the
domains between convergent boundary sites; H3K27ac the promoters whose distal element
sits upstream on their strand (and that element). A 200 bp bin is only labelled right by
a model that sees kilobases around it; the TF and DNase features are local.

Same seed and size -> byte-identical files (checked by the manifest's sha256 values).

Over 600 lines on purpose: one generator, read top to bottom in the order the genome is
layered, whose steps share the private plan (ChromosomePlan, _Canvas) and draw from one
random stream in a fixed order (which the byte-identical output depends on); the
long-range structure, which has its own plan, lives in demo_longrange.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from genobird.fileio import atomic_write, file_digest, staging_folder
from genobird.genome import demo_longrange as longrange
from genobird.genome.alphabet import reverse_complement
from genobird.genome.demo_longrange import mutate, revcomp_codes

log = logging.getLogger(__name__)

GENERATOR_VERSION = 3
FASTA_LINE_WIDTH = 60
N_CODE = 4
_UPPER = np.frombuffer(b"ACGTN", dtype=np.uint8)
_LOWER = np.frombuffer(b"acgtn", dtype=np.uint8)
_CODE_OF = {base: code for code, base in enumerate("ACGT")}

# Motifs planted in promoters and enhancers (consensus sequences, + strand).
MOTIFS = {
    "TATA": "TATAAAAG",
    "INR": "TCAGTTCT",  # A of 'CAG' at index 2 is the TSS (+1): YYA+1NWYY-like
    "CCAAT": "GGCCAATCT",
    "GCBOX": "GGGGCGGGGC",
    "DPE": "AGACGTG",
    "POISED": "GAGAGAGAGAGAGAGA",
    "CTCF": "CCACCAGGGGGCGC",
    "GATA": "AGATAAGG",
    "AP1": "ATGACTCAT",
    "ETS": "ACCGGAAGT",
    "NRF1": "GCGCATGCGC",
    "SP1": "GGGGCGGGGC",
    "EBOX": "CCACGTGG",
    "YY1": "AAGATGGCGGC",
}
# Enhancer classes: which motifs cluster in them and which cell type opens them.
ENHANCER_CLASSES = {
    "A": ("GATA", "ETS", "EBOX"),
    "B": ("AP1", "EBOX", "NRF1"),
    "C": ("AP1", "GATA", "YY1"),
}
TF_FEATURES = ("CTCF", "GATA", "AP1", "ETS", "NRF1", "SP1", "EBOX", "YY1")
DNASE_FEATURES = ("DNase_cellA", "DNase_cellB", "DNase_cellC")
HISTONE_FEATURES = ("H3K4me3", "H3K27ac", "H3K36me3", "H3K27me3", "H3K9me3")
# The features whose label depends on DNA kilobases from the bin (the rest are local)
LONG_RANGE_FEATURES = ("H3K27ac", "H3K36me3", "H3K27me3")


@dataclass(frozen=True)
class RepeatFamily:
    name: str
    length: int
    gc: float
    divergence: float  # per-base substitution rate of a copy against the consensus
    coverage: float  # fraction of the genome its copies cover
    truncated: bool = False  # LINE-like: most copies keep only the 3' end
    poly_a: int = 0


REPEAT_FAMILIES = (
    RepeatFamily("SINE_Alu-like", 290, 0.56, 0.08, 0.10, poly_a=18),
    RepeatFamily("LINE_L1-like", 6000, 0.40, 0.12, 0.13, truncated=True),
    RepeatFamily("SINE_MIR-like", 260, 0.46, 0.20, 0.03),
    RepeatFamily("LTR_ERV-like", 900, 0.47, 0.10, 0.04),
)
SATELLITE_MONOMER = 171  # alpha-satellite-like monomer length
MICROSATELLITES = ("CA", "TTAGGG", "A", "AAT", "GGAA")


@dataclass(frozen=True)
class DemoSpec:
    """What to generate. `size_mb` scales the default chromosome lengths proportionally."""

    seed: int = 0
    size_mb: float = 4.2
    chromosome_shares: tuple[tuple[str, float], ...] = (
        ("chr1", 0.36),
        ("chr2", 0.28),
        ("chr3", 0.21),
        ("chrX", 0.15),
    )
    promoter_spacing: int = 10_000  # mean bp between planted TSSs
    enhancer_spacing: int = 12_000
    ctcf_spacing: int = 25_000
    boundary_spacing: int = 20_000  # mean bp per pair of boundary sites
    copy_fraction: float = 0.08  # of each chromosome's bases written as a nearby copy
    peak_dropout: float = 0.03  # fraction of peaks removed, as real peak calls miss some

    def chromosome_lengths(self) -> list[tuple[str, int]]:
        total = int(self.size_mb * 1_000_000)
        return [(name, max(100_000, int(total * share))) for name, share in self.chromosome_shares]


@dataclass
class Promoter:
    chrom: str
    tss: int  # 0-based position of the +1 base
    strand: str
    cpg_island: bool
    tata: bool
    poised: bool
    name: str = ""


@dataclass
class ChromosomePlan:
    """Everything planted in one chromosome, in 0-based half-open coordinates."""

    name: str
    length: int
    gaps: list[tuple[int, int]] = field(default_factory=list)
    centromere: tuple[int, int] = (0, 0)
    heterochromatin: list[tuple[int, int]] = field(default_factory=list)
    promoters: list[Promoter] = field(default_factory=list)
    enhancers: list[tuple[int, int, str]] = field(default_factory=list)  # start, end, class
    distal: list[longrange.Distal] = field(default_factory=list)
    boundaries: list[longrange.BoundaryPair] = field(default_factory=list)
    copies: list[longrange.Copy] = field(default_factory=list)

    def satellite_flank(self) -> int:
        return min(8_000, self.length // 30)  # satellite arrays flank the centromere gap


# =========================================================================== sequence
def _random_bases(rng: np.random.Generator, length: int, gc: float) -> np.ndarray:
    at = (1 - gc) / 2
    return rng.choice(4, size=length, p=[at, gc / 2, gc / 2, at]).astype(np.uint8)


def _deplete_cpg(rng: np.random.Generator, codes: np.ndarray, fraction: float = 0.75) -> None:
    """Turn `fraction` of CG dinucleotides into TG or CA, in place (deamination)."""
    sites = np.nonzero((codes[:-1] == 1) & (codes[1:] == 2))[0]
    chosen = sites[rng.random(len(sites)) < fraction]
    to_tg = rng.random(len(chosen)) < 0.5
    codes[chosen[to_tg]] = 3  # C -> T
    codes[chosen[~to_tg] + 1] = 0  # G -> A (C -> T on the other strand)


def _encode(sequence: str) -> np.ndarray:
    return np.array([_CODE_OF[base] for base in sequence], dtype=np.uint8)


def _background(rng: np.random.Generator, length: int) -> np.ndarray:
    codes = np.empty(length, dtype=np.uint8)
    position = 0
    while position < length:
        size = min(int(rng.integers(100_000, 400_000)), length - position)
        gc = float(rng.choice([0.37, 0.41, 0.46, 0.53]))
        codes[position : position + size] = _random_bases(rng, size, gc)
        position += size
    _deplete_cpg(rng, codes)
    return codes


def make_repeat_consensi(seed: int) -> dict[str, np.ndarray]:
    """One consensus per family, shared by all chromosomes (drawn from its own stream)."""
    rng = np.random.default_rng([seed, 10_000])
    consensi = {}
    for family in REPEAT_FAMILIES:
        body = _random_bases(rng, family.length, family.gc)
        _deplete_cpg(rng, body, fraction=0.5)
        consensi[family.name] = np.concatenate([body, np.zeros(family.poly_a, np.uint8)])
    consensi["SATELLITE"] = _random_bases(rng, SATELLITE_MONOMER, 0.38)
    return consensi


class _Canvas:
    """A chromosome being written: base codes plus a soft-mask flag per base."""

    def __init__(self, codes: np.ndarray):
        self.codes = codes
        self.masked = np.zeros(len(codes), dtype=bool)

    def put(self, start: int, codes: np.ndarray, masked: bool) -> None:
        end = min(start + len(codes), len(self.codes))
        if start < 0 or end <= start:
            return
        self.codes[start:end] = codes[: end - start]
        self.masked[start:end] = masked

    def put_oriented(self, anchor: int, strand: str, offset: int, codes: np.ndarray) -> None:
        """Write `codes` (given 5'->3' on `strand`) at relative `offset` from `anchor`."""
        if strand == "+":
            self.put(anchor + offset, codes, masked=False)
        else:
            self.put(anchor - offset - len(codes) + 1, revcomp_codes(codes), masked=False)


def _insert_repeats(rng, canvas: _Canvas, consensi: dict[str, np.ndarray]) -> None:
    length = len(canvas.codes)
    for family in REPEAT_FAMILIES:
        consensus = consensi[family.name]
        covered = 0
        while covered < family.coverage * length:
            copy = consensus
            if family.truncated:  # keep the 3' end, as most LINE insertions do
                copy = copy[-int(rng.integers(300, len(copy) + 1)) :]
            copy = mutate(rng, copy, family.divergence)
            if rng.random() < 0.5:
                copy = revcomp_codes(copy)
            canvas.put(int(rng.integers(0, length - len(copy))), copy, masked=True)
            covered += len(copy)
    for _ in range(length // 20_000):
        unit = _encode(MICROSATELLITES[int(rng.integers(len(MICROSATELLITES)))])
        copies = int(rng.integers(20, 80)) // len(unit) + 4
        canvas.put(int(rng.integers(0, length - 500)), np.tile(unit, copies), masked=True)


def _satellite_array(rng, consensi, length: int) -> np.ndarray:
    monomers = length // SATELLITE_MONOMER + 1
    parts = [mutate(rng, consensi["SATELLITE"], 0.03) for _ in range(monomers)]
    return np.concatenate(parts)[:length]


def _plan_layout(rng, name: str, length: int) -> ChromosomePlan:
    """Gaps and heterochromatin first: promoters and enhancers must avoid them."""
    plan = ChromosomePlan(name, length)
    telomere = min(10_000, length // 50)  # gaps scale down for small test genomes
    centre = int(length * rng.uniform(0.35, 0.6))
    plan.centromere = (centre, centre + min(30_000, length // 25))
    plan.gaps = [(0, telomere), plan.centromere, (length - telomere, length)]
    for _ in range(3):
        start = int(rng.integers(telomere, length - telomere - 2_000))
        plan.gaps.append((start, start + int(rng.integers(100, 2_000))))
    for _ in range(max(1, length // 600_000)):
        start = int(rng.integers(telomere + 5_000, length - telomere - 70_000))
        plan.heterochromatin.append((start, start + int(rng.integers(20_000, 60_000))))
    plan.gaps.sort()
    return plan


def _busy(plan: ChromosomePlan, start: int, end: int, margin: int) -> bool:
    flank = plan.satellite_flank()
    blocked = plan.gaps + plan.heterochromatin
    blocked += [(plan.centromere[0] - flank, plan.centromere[1] + flank)]
    blocked += [(p.tss - 600, p.tss + 600) for p in plan.promoters]
    blocked += [(s, e) for s, e, _ in plan.enhancers]
    blocked += [(d.start, d.end) for d in plan.distal]
    site = len(MOTIFS["CTCF"])
    blocked += [span for b in plan.boundaries for span in ((b.left, b.left + site),
                                                           (b.right - site, b.right))]  # fmt: skip
    blocked += [span for c in plan.copies for span in (c.source, c.copy)]
    return any(start < b_end + margin and b_start - margin < end for b_start, b_end in blocked)


def _free_position(rng, plan: ChromosomePlan, half_width: int, margin: int) -> int | None:
    for _ in range(50):
        centre = int(rng.integers(half_width + margin, plan.length - half_width - margin))
        if not _busy(plan, centre - half_width, centre + half_width, margin):
            return centre
    return None


def _plan_elements(rng, plan: ChromosomePlan, spec: DemoSpec) -> None:
    for _ in range(plan.length // spec.promoter_spacing):
        tss = _free_position(rng, plan, 600, margin=4_500)
        if tss is None:
            continue
        cpg_island = rng.random() < 0.7
        poised = cpg_island and rng.random() < 0.2
        tata = not poised and rng.random() < 0.35
        strand = "+" if rng.random() < 0.5 else "-"
        plan.promoters.append(Promoter(plan.name, tss, strand, cpg_island, tata, poised))
    for _ in range(plan.length // spec.enhancer_spacing):
        centre = _free_position(rng, plan, 200, margin=1_000)
        if centre is not None:
            klass = "ABC"[int(rng.integers(3))]
            plan.enhancers.append((centre - 200, centre + 200, klass))
    plan.promoters.sort(key=lambda p: p.tss)
    plan.enhancers.sort()


def _plan_long_range(rng, plan: ChromosomePlan, spec: DemoSpec) -> None:
    """Distal elements, boundary pairs, then copies, each clear of what came before."""
    plan.distal = longrange.plan_distal(
        rng, plan.promoters, lambda s, e: not _busy(plan, s, e, margin=200)
    )
    plan.boundaries = longrange.plan_boundaries(
        rng, plan.length, plan.length // spec.boundary_spacing, len(MOTIFS["CTCF"]),
        lambda s, e: not _busy(plan, s, e, margin=200),
    )  # fmt: skip
    plan.copies = longrange.plan_copies(
        rng, plan.length, int(spec.copy_fraction * plan.length),
        lambda s, e: not _busy(plan, s, e, margin=100),
    )  # fmt: skip


def _write_promoter(rng, canvas: _Canvas, promoter: Promoter) -> None:
    """Promoter architecture in TSS-relative coordinates (TSS = 0, upstream negative)."""
    if promoter.cpg_island:
        canvas.put_oriented(promoter.tss, promoter.strand, -600, _random_bases(rng, 1000, 0.66))
    motifs = [("INR", -2), ("DPE", 28)]
    if promoter.tata:
        motifs.append(("TATA", -31))
    if promoter.poised:
        motifs = [("POISED", -120), ("POISED", 60)]
    else:
        motifs.append(("CCAAT", -int(rng.integers(70, 95))))
        for slot in range(int(rng.integers(1, 4))):
            motifs.append(("GCBOX", -45 - 22 * slot - int(rng.integers(0, 8))))
        for tf in ("ETS", "NRF1", "YY1"):
            if promoter.cpg_island and rng.random() < 0.4:
                motifs.append((tf, -int(rng.integers(160, 400))))
    for motif, offset in motifs:
        canvas.put_oriented(promoter.tss, promoter.strand, offset, _encode(MOTIFS[motif]))


def _write_enhancer(rng, canvas: _Canvas, start: int, end: int, klass: str) -> None:
    canvas.put(start, _random_bases(rng, end - start, 0.47), masked=False)
    slots = rng.permutation((end - start - 20) // 25)[: int(rng.integers(3, 6))]
    for slot in slots:
        motif = _encode(MOTIFS[ENHANCER_CLASSES[klass][int(rng.integers(3))]])
        if rng.random() < 0.5:
            motif = revcomp_codes(motif)
        canvas.put(start + 5 + 25 * int(slot), motif, masked=False)


def build_chromosome(
    spec: DemoSpec, index: int, name: str, length: int, consensi
) -> tuple[bytes, ChromosomePlan]:
    """Sequence (soft-masked ASCII) and plan of one chromosome; its own random stream."""
    rng = np.random.default_rng([spec.seed, index])
    canvas = _Canvas(_background(rng, length))
    _insert_repeats(rng, canvas, consensi)
    plan = _plan_layout(rng, name, length)
    for start, end in plan.heterochromatin:
        for _ in range((end - start) // 3_000):  # LINE-dense, as constitutive heterochromatin
            copy = mutate(rng, consensi["LINE_L1-like"][-int(rng.integers(1_000, 3_000)) :], 0.1)
            canvas.put(int(rng.integers(start, end - len(copy))), copy, masked=True)
        canvas.put(start, _satellite_array(rng, consensi, 4_000), masked=True)
    _plan_elements(rng, plan, spec)
    _plan_long_range(rng, plan, spec)
    for copy in plan.copies:  # first: their sources lie clear of every element
        longrange.write_copy(rng, canvas.codes, canvas.masked, copy)
    for promoter in plan.promoters:
        _write_promoter(rng, canvas, promoter)
    for start, end, klass in plan.enhancers:
        _write_enhancer(rng, canvas, start, end, klass)

    def put(start: int, codes: np.ndarray) -> None:
        canvas.put(start, codes, masked=False)

    for element in plan.distal:
        longrange.write_distal(put, element, _encode(longrange.DISTAL_MOTIF))
    for pair in plan.boundaries:
        longrange.write_boundary(put, pair, _encode(MOTIFS["CTCF"]))
    for _ in range(length // spec.ctcf_spacing):
        motif = _encode(MOTIFS["CTCF"])
        if rng.random() < 0.5:
            motif = revcomp_codes(motif)
        canvas.put(int(rng.integers(0, length - 20)), motif, masked=False)
    flank = plan.satellite_flank()
    for flank_start in (plan.centromere[0] - flank, plan.centromere[1]):
        canvas.put(flank_start, _satellite_array(rng, consensi, flank), masked=True)
    for start, end in plan.gaps:
        canvas.codes[start:end] = N_CODE
        canvas.masked[start:end] = False
    ascii_codes = np.where(canvas.masked, _LOWER[canvas.codes], _UPPER[canvas.codes])
    return ascii_codes.astype(np.uint8).tobytes(), plan


# =========================================================================== features
def _merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def _oriented_span(promoter: Promoter, rel_start: int, rel_end: int) -> tuple[int, int]:
    """Genome span of TSS-relative [rel_start, rel_end) on the promoter's strand."""
    if promoter.strand == "+":
        return promoter.tss + rel_start, promoter.tss + rel_end
    return promoter.tss - rel_end + 1, promoter.tss - rel_start + 1


def _inside(position: int, spans: list[tuple[int, int]]) -> bool:
    return any(start <= position < end for start, end in spans)


def _motif_centres(sequence: str, motif: str) -> list[int]:
    """Centres of exact matches on either strand (overlapping matches included)."""
    centres = []
    for pattern in {motif, reverse_complement(motif)}:
        centres += [m.start() + len(motif) // 2 for m in re.finditer(f"(?={pattern})", sequence)]
    return sorted(centres)


def chromatin_peaks(plan: ChromosomePlan, sequence: str) -> dict[str, list[tuple[int, int]]]:
    """Peaks of every feature on one chromosome (before drop-out), from plan and sequence."""
    active = [p for p in plan.promoters if not p.poised]
    cores = [_oriented_span(p, -300, 200) for p in active]
    enhancers = {k: [(s, e) for s, e, c in plan.enhancers if c == k] for k in ENHANCER_CLASSES}
    engaged = [d for d in plan.distal if d.engaged]
    peaks = {
        "DNase_cellA": cores + enhancers["A"],
        "DNase_cellB": cores + enhancers["B"],
        "DNase_cellC": [c for c, p in zip(cores, active, strict=True) if p.cpg_island]
        + enhancers["C"],
        "H3K4me3": [_oriented_span(p, -500, 1500) for p in active],
        "H3K27ac": [_oriented_span(plan.promoters[d.promoter], -1000, 1000) for d in engaged]
        + [((d.start + d.end) // 2 - 500, (d.start + d.end) // 2 + 500) for d in engaged],
        "H3K36me3": [_oriented_span(p, 1500, 4000) for p in active],
        "H3K27me3": [_oriented_span(p, -3000, 3000) for p in plan.promoters if p.poised]
        + [(b.left, b.right) for b in plan.boundaries if b.convergent],
        "H3K9me3": list(plan.heterochromatin),
    }
    open_regions = _merge(peaks["DNase_cellA"] + peaks["DNase_cellB"] + peaks["DNase_cellC"])
    upper = sequence.upper()
    for tf in TF_FEATURES:
        centres = _motif_centres(upper, MOTIFS[tf])
        if tf == "CTCF":  # binds almost anywhere it has a site, but not in heterochromatin
            bound = [c for c in centres if not _inside(c, plan.heterochromatin)]
        else:  # other factors need open chromatin
            bound = [c for c in centres if _inside(c, open_regions)]
        peaks[tf] = [(c - 100, c + 100) for c in bound]
    return {
        name: [(max(0, s), min(plan.length, e)) for s, e in _merge(spans)]
        for name, spans in peaks.items()
    }


def feature_table() -> list[tuple[str, str]]:
    """(name, category) of every demo feature, in output order: DNase, TF, Histone."""
    return (
        [(name, "DNase") for name in DNASE_FEATURES]
        + [(name, "TF") for name in TF_FEATURES]
        + [(name, "Histone") for name in HISTONE_FEATURES]
    )


# =========================================================================== writing
def _write_fasta(path: Path, chromosomes: list[tuple[str, bytes]]) -> None:
    """FASTA with 60-bp lines and its .fai, computed directly (no indexer run needed)."""
    fai_rows, offset = [], 0
    with atomic_write(path, "wb") as handle:
        for name, sequence in chromosomes:
            header = f">{name}\n".encode()
            offset += len(header)
            fai_rows.append(f"{name}\t{len(sequence)}\t{offset}\t60\t61\n")
            lines = [sequence[i : i + FASTA_LINE_WIDTH] for i in range(0, len(sequence), 60)]
            body = b"\n".join(lines) + b"\n"
            handle.write(header + body)
            offset += len(body)
    with atomic_write(Path(str(path) + ".fai")) as handle:
        handle.writelines(fai_rows)


def _epdnew_bed_row(promoter: Promoter) -> str:
    """EPDnew hg19 BED style: the row spans -49..+10 around the TSS; thick part = the TSS."""
    start, end = _oriented_span(promoter, -49, 11)
    return (
        f"{promoter.chrom}\t{start}\t{end}\t{promoter.name}\t900\t{promoter.strand}"
        f"\t{promoter.tss}\t{promoter.tss + 1}\n"
    )


def _write_annotations(outdir: Path, plans: list[ChromosomePlan]) -> None:
    promoters = [p for plan in plans for p in plan.promoters]
    with atomic_write(outdir / "tss.bed") as handle:
        handle.writelines(_epdnew_bed_row(p) for p in promoters)
    with atomic_write(outdir / "promoters.tsv") as handle:
        handle.write("name\tchrom\ttss\tstrand\tcpg_island\ttata\tpoised\n")
        for p in promoters:
            handle.write(
                f"{p.name}\t{p.chrom}\t{p.tss}\t{p.strand}\t{int(p.cpg_island)}"
                f"\t{int(p.tata)}\t{int(p.poised)}\n"
            )
    with atomic_write(outdir / "elements.bed") as handle:
        for plan in plans:
            rows = [(s, e, f"enhancer_{k}") for s, e, k in plan.enhancers]
            rows += [(s, e, "heterochromatin") for s, e in plan.heterochromatin]
            rows += [(s, e, "gap") for s, e in plan.gaps]
            rows += [(d.start, d.end, f"distal_{d.placement}") for d in plan.distal]
            rows += [(b.left, b.right, f"boundary_{b.kind}") for b in plan.boundaries]
            handle.writelines(f"{plan.name}\t{s}\t{e}\t{label}\n" for s, e, label in sorted(rows))
    with atomic_write(outdir / "copies.bed") as handle:  # BED6: each copy and its source
        for plan in plans:
            for number, copy in enumerate(plan.copies, 1):
                name = f"{copy.kind}_{plan.name}_{number}"
                strand = "-" if copy.kind == "inverted" else "+"
                handle.write(f"{plan.name}\t{copy.source[0]}\t{copy.source[1]}\t{name}_source"
                             f"\t0\t+\n{plan.name}\t{copy.copy[0]}\t{copy.copy[1]}\t{name}_copy"
                             f"\t{round(1000 * copy.divergence)}\t{strand}\n")  # fmt: skip


def _write_peaks(outdir: Path, spec: DemoSpec, plans, sequences) -> dict[str, int]:
    per_feature = {name: [] for name, _ in feature_table()}
    for plan, (_, sequence) in zip(plans, sequences, strict=True):
        for name, spans in chromatin_peaks(plan, sequence.decode("ascii")).items():
            per_feature[name] += [(plan.name, s, e) for s, e in spans]
    counts = {}
    (outdir / "peaks").mkdir(exist_ok=True)
    with atomic_write(outdir / "features.tsv") as table:
        table.write("index\tname\tcategory\tpeak_file\n")
        for index, (name, category) in enumerate(feature_table()):
            rng = np.random.default_rng([spec.seed, 20_000 + index])
            kept = [row for row in per_feature[name] if rng.random() >= spec.peak_dropout]
            with atomic_write(outdir / "peaks" / f"{name}.bed") as handle:
                handle.writelines(f"{c}\t{s}\t{e}\t{name}\n" for c, s, e in kept)
            table.write(f"{index}\t{name}\t{category}\tpeaks/{name}.bed\n")
            counts[name] = len(kept)
    return counts


SAMPLE_WINDOW = 2000  # bp of each demo FASTA record
SAMPLES_PER_KIND = 10  # promoter windows, background windows and variants each


def _sample_promoters(plans: list[ChromosomePlan], sequences) -> tuple[list[Promoter], str]:
    """Promoters of the last chromosome (the demo's test chromosome) whose sample window
    lies inside it, and that chromosome's sequence."""
    sequence = sequences[-1][1].decode()  # soft-masked ASCII
    half = SAMPLE_WINDOW // 2
    inside = [p for p in plans[-1].promoters if half <= p.tss <= len(sequence) - half]
    return inside[:SAMPLES_PER_KIND], sequence


def _write_samples(outdir: Path, spec: DemoSpec, plans, sequences) -> None:
    """Inputs for the demo's scoring: samples.fa (promoter-centred and background windows
    of the last chromosome) and variants.vcf (SNVs 30 bp upstream of those TSSs, where
    TATA boxes sit, and at random background positions), REF read from the genome."""
    rng = np.random.default_rng(spec.seed + 7919)
    promoters, sequence = _sample_promoters(plans, sequences)
    chrom, half = sequences[-1][0], SAMPLE_WINDOW // 2
    background = sorted(int(x) for x in rng.integers(half, len(sequence) - half, SAMPLES_PER_KIND))
    with atomic_write(outdir / "samples.fa") as handle:
        for promoter in promoters:
            window = sequence[promoter.tss - half : promoter.tss + half]
            handle.write(f">{promoter.name} {chrom}:{promoter.tss - half}-{promoter.tss + half}\n")
            handle.write(f"{window}\n")
        for index, centre in enumerate(background):
            window = sequence[centre - half : centre + half]
            handle.write(f">background_{index} {chrom}:{centre - half}-{centre + half}\n")
            handle.write(f"{window}\n")
    sites = [(p.tss - 30 if p.strand == "+" else p.tss + 30, p.name) for p in promoters]
    sites += [(int(x), f"bg_{i}") for i, x in enumerate(rng.integers(0, len(sequence), 10))]
    rows = []
    for position, name in sorted(sites):
        ref = sequence[position].upper()
        if ref not in "ACGT":
            continue
        alt = "ACGT"[("ACGT".index(ref) + 1 + int(rng.integers(0, 3))) % 4]
        rows.append(f"{chrom}\t{position + 1}\t{name}\t{ref}\t{alt}\t.\tPASS\t.\n")
    with atomic_write(outdir / "variants.vcf") as handle:
        handle.write("##fileformat=VCFv4.2\n##source=genobird-demo\n")
        handle.writelines(f"##contig=<ID={n},length={len(q)}>\n" for n, q in sequences)
        handle.write("#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n")
        handle.writelines(rows)


def generate_demo_reference(outdir: str | Path, spec: DemoSpec = DemoSpec()) -> dict:
    """Write the demo reference into `outdir` and return its manifest.

    Files are built in a staging folder beside `outdir` and moved in only when all are
    written; `manifest.json` goes last, so its presence means the set is complete.
    """
    outdir = Path(outdir)
    outdir.parent.mkdir(parents=True, exist_ok=True)
    consensi = make_repeat_consensi(spec.seed)
    sequences, plans = [], []
    for index, (name, length) in enumerate(spec.chromosome_lengths()):
        sequence, plan = build_chromosome(spec, index, name, length, consensi)
        for number, promoter in enumerate(plan.promoters, 1):
            promoter.name = f"DEMO_{name}_{number:04d}_1"
        sequences.append((name, sequence))
        plans.append(plan)
        log.info("%s: %d bp, %d promoters", name, length, len(plan.promoters))
    staging = staging_folder(outdir)
    try:
        _write_fasta(staging / "genome.fa", sequences)
        with atomic_write(staging / "chrom.sizes") as handle:
            handle.writelines(f"{name}\t{len(seq)}\n" for name, seq in sequences)
        _write_annotations(staging, plans)
        peak_counts = _write_peaks(staging, spec, plans, sequences)
        _write_samples(staging, spec, plans, sequences)
        manifest = _manifest(staging, spec, sequences, plans, peak_counts)
        _move_into(staging, outdir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


def _long_range_counts(plans: list[ChromosomePlan]) -> dict:
    """How many of each long-range structure the genome holds (the manifest's record)."""
    counts: dict[str, int] = {}
    for plan in plans:
        names = [f"copies_{c.kind}" for c in plan.copies]
        names += [f"distal_{d.placement}" for d in plan.distal]
        names += [f"boundaries_{b.kind}" for b in plan.boundaries]
        for name in names:
            counts[name] = counts.get(name, 0) + 1
    counts["copied_bp"] = sum(c.copy[1] - c.copy[0] for plan in plans for c in plan.copies)
    return dict(sorted(counts.items()))


def _manifest(staging: Path, spec: DemoSpec, sequences, plans, peak_counts) -> dict:
    files = sorted(p for p in staging.rglob("*") if p.is_file())
    manifest = {
        "name": "genobird-demo",
        "generator_version": GENERATOR_VERSION,
        "seed": spec.seed,
        "size_mb": spec.size_mb,
        "coordinates": "0-based half-open (BED)",
        "chromosomes": {name: len(seq) for name, seq in sequences},
        "promoters": sum(len(plan.promoters) for plan in plans),
        "enhancers": sum(len(plan.enhancers) for plan in plans),
        "long_range": _long_range_counts(plans),
        "long_range_features": list(LONG_RANGE_FEATURES),
        "features": peak_counts,
        "files": {str(p.relative_to(staging)): file_digest(p) for p in files},
    }
    with atomic_write(staging / "manifest.json") as handle:
        json.dump(manifest, handle, indent=2, sort_keys=True)
        handle.write("\n")
    return manifest


def _move_into(staging: Path, outdir: Path) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    stale_manifest = outdir / "manifest.json"
    if stale_manifest.exists():  # an interrupted move must not look complete
        stale_manifest.unlink()
    for path in sorted(staging.rglob("*"), key=lambda p: p.name == "manifest.json"):
        if path.is_file():
            target = outdir / path.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            path.replace(target)
