"""The demo genome's sequence (genobird.genome.demo, steps 1-7): the plan of each
chromosome (isochores, repeats, heterochromatin, promoters, enhancers, CTCF sites, gaps)
and the canvas it is written on. Every step draws from one random stream in a fixed
order: the byte-identical output depends on it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from genobird.genome import demo_longrange as longrange
from genobird.genome.demo_longrange import mutate, revcomp_codes

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
# The motifs planted in promoters (`_write_promoter`), which the demo reference writes
# as promoter_motifs.meme: what motif discovery on the promoter predictor may recover
PROMOTER_MOTIFS = ("TATA", "INR", "DPE", "CCAAT", "GCBOX", "POISED", "ETS", "NRF1", "YY1")
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
    blocked += [
        span
        for b in plan.boundaries
        for span in ((b.left, b.left + site), (b.right - site, b.right))
    ]
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
        rng,
        plan.length,
        plan.length // spec.boundary_spacing,
        len(MOTIFS["CTCF"]),
        lambda s, e: not _busy(plan, s, e, margin=200),
    )
    plan.copies = longrange.plan_copies(
        rng,
        plan.length,
        int(spec.copy_fraction * plan.length),
        lambda s, e: not _busy(plan, s, e, margin=100),
    )


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
