"""Promoter region prediction (paper section 5, appendix F.2): the data set.

Positives: windows around EPDnew TSSs, oriented by strand, -5000/+3000 bp by default
(the paper's 8 kb). EPDnew's hg19 BED rows span -49..+10 around the TSS; the TSS is
thickStart on '+' and thickEnd-1 on '-' (equal for its 1-bp thick part). hg38 files can
be lifted to hg19 with `liftover=CHAIN` (the maintained `liftover` package).

Negatives, as Oubounyt et al. (DeePromoter): each positive is split into 20 equal
subsequences; 8 chosen at random are kept and the other 12 replaced by random bases.
The choice is drawn afresh for every negative: one public implementation reused a
single pattern for all negatives, which a model learns instead of biology. The training
split may get several negatives per positive (`training_negatives`); validation and
test keep one each, the published balance, so their metrics stay comparable. Optionally
also "hard" negatives: real genomic windows at least `min_distance` from any TSS.

The split is by chromosome, so no window of a test chromosome is seen in training.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from genobird.datasets.windows import WindowSet, chromosome_split
from genobird.errors import ConfigError, InputError
from genobird.genome import open_reference, oriented_window, read_bed
from genobird.genome.regions import BadRecord

log = logging.getLogger(__name__)

BASES = np.frombuffer(b"ACGT", dtype=np.uint8)


@dataclass(frozen=True)
class PromoterSpec:
    upstream: int = 5000
    downstream: int = 3000
    segments: int = 20
    kept_segments: int = 8
    hard_negatives: int = 0  # per positive
    training_negatives: int = 1  # DeePromoter negatives per training positive
    min_distance: int = 10_000  # of hard negatives from any TSS
    off_end: str = "skip"  # windows past a contig end: "skip" (reported) or "pad" with N
    valid_chromosomes: tuple[str, ...] = ("chr7",)
    test_chromosomes: tuple[str, ...] = ("chr8", "chr9")
    seed: int = 0

    def validate(self) -> None:
        if self.off_end not in ("skip", "pad"):
            raise ConfigError(f"off_end must be 'skip' or 'pad', got {self.off_end!r}")
        if not 0 < self.kept_segments < self.segments:
            raise ConfigError("need 0 < kept_segments < segments")
        if self.upstream + self.downstream < self.segments:
            raise ConfigError("the window must be at least one base per segment")
        if self.training_negatives < 1:
            raise ConfigError(
                f"training_negatives must be at least 1, got {self.training_negatives}"
            )


def tss_of(interval) -> int:
    """The 0-based TSS of an EPDnew row: thickStart on '+', thickEnd-1 on '-'; without
    thick columns, from the -49..+10 span."""
    if interval.thick_start is not None:
        return interval.thick_start if interval.strand == "+" else interval.thick_end - 1
    return interval.start + 49 if interval.strand == "+" else interval.end - 50


def read_tss(path, contigs, problems: list[BadRecord], liftover_chain=None):
    """(chrom, tss, strand, name) per row; rows without a strand or not liftable are
    reported in `problems`."""
    converter = None
    if liftover_chain:
        from liftover import ChainFile

        converter = ChainFile(str(liftover_chain), "hg38", "hg19")
    rows = []
    for interval in read_bed(path, contigs=None if converter else contigs, problems=problems):
        if interval.strand not in ("+", "-"):
            problems.append(BadRecord(str(path), 0, f"{interval.name}: no strand", interval.name))
            continue
        chrom, tss, strand = interval.chrom, tss_of(interval), interval.strand
        if converter is not None:
            lifted = converter[chrom][tss]
            if not lifted:
                problems.append(BadRecord(str(path), 0, f"{interval.name}: not liftable to hg19"))
                continue
            chrom, tss, lifted_strand = lifted[0]
            strand = strand if lifted_strand == "+" else {"+": "-", "-": "+"}[strand]
            if chrom not in contigs:
                problems.append(
                    BadRecord(str(path), 0, f"{interval.name}: {chrom} not in reference")
                )
                continue
        rows.append((chrom, tss, strand, interval.name))
    return rows


def shuffled_negative(
    sequence: str, rng: np.random.Generator, segments: int = 20, kept: int = 8
) -> str:
    """DeePromoter's negative: `kept` of `segments` near-equal pieces kept in place, the
    others replaced by uniform random bases; same length as the positive."""
    codes = np.frombuffer(sequence.encode("ascii"), dtype=np.uint8).copy()
    pieces = np.array_split(np.arange(len(codes)), segments)
    replaced = rng.permutation(segments)[kept:]
    for index in replaced:
        span = pieces[index]
        codes[span] = BASES[rng.integers(0, 4, size=len(span))]
    return codes.tobytes().decode("ascii")


def deepromoter_negatives(sequence: str, split: str, rng, extra_rng, spec: PromoterSpec):
    """The negatives made from one positive: one, plus `training_negatives - 1` more in
    the training split. The extra ones come from their own generator, so adding them
    leaves every split and first negative as they were without them."""
    negatives = [shuffled_negative(sequence, rng, spec.segments, spec.kept_segments)]
    if split == "train":
        negatives += [
            shuffled_negative(sequence, extra_rng, spec.segments, spec.kept_segments)
            for _ in range(spec.training_negatives - 1)
        ]
    return negatives


def extra_negatives_rng(spec: PromoterSpec) -> np.random.Generator:
    return np.random.default_rng([spec.seed, 1])


def split_of(chrom: str, spec: PromoterSpec) -> str:
    return chromosome_split(chrom, spec.valid_chromosomes, spec.test_chromosomes)


def build_promoter_dataset(
    tss_bed, fasta, out_path, spec: PromoterSpec = PromoterSpec(), liftover_chain=None
) -> tuple[WindowSet, list[BadRecord]]:
    """Positives, DeePromoter negatives (and optional hard negatives) -> HDF5; `fasta`:
    one FASTA or several read as one genome (`open_reference`)."""
    spec.validate()
    reference = open_reference(fasta)
    problems: list[BadRecord] = []
    rows = read_tss(tss_bed, reference.lengths, problems, liftover_chain)
    rng, extra_rng = np.random.default_rng(spec.seed), extra_negatives_rng(spec)
    windows = WindowSet(task="promoter", feature_names=["promoter"], categories=["promoter"])
    kept_tss = []
    for chrom, tss, strand, name in rows:
        window = oriented_window(chrom, tss, spec.upstream, spec.downstream, strand, name)
        length = reference.length(chrom)
        if (window.start < 0 or window.end > length) and spec.off_end == "skip":
            problems.append(BadRecord(str(tss_bed), 0, f"{name}: window {window} runs off {chrom}"))
            continue
        sequence = reference.fetch(chrom, window.start, window.end, strand, pad=True)
        split = split_of(chrom, spec)
        windows.add(sequence, [1], chrom, window.start, window.end, strand, split)
        for negative in deepromoter_negatives(sequence, split, rng, extra_rng, spec):
            windows.add(negative, [0], chrom, window.start, window.end, strand, split)
        kept_tss.append((chrom, tss))
    if not kept_tss:
        raise InputError(f"{tss_bed}: no usable TSS ({len(problems)} rows rejected)")
    for _ in range(spec.hard_negatives * len(kept_tss)):
        _add_hard_negative(reference, windows, kept_tss, rng, spec)
    windows.write(out_path)
    log.info("promoter data: %d windows, %d rows rejected", len(windows), len(problems))
    return windows, problems


def build_promoter_sequence_dataset(
    path,
    out_path,
    spec: PromoterSpec = PromoterSpec(),
    valid_fraction: float = 0.1,
    test_fraction: float = 0.1,
) -> tuple[WindowSet, list[BadRecord]]:
    """Promoter sequences without coordinates (one per line, or FASTA), as DeePromoter
    publishes EPDnew's: each positive with its DeePromoter negatives, all kept in the
    positive's seeded split so no negative shares DNA with another split."""
    from genobird.datasets.classify import draw_split, read_plain_sequences

    spec.validate()
    rng, extra_rng = np.random.default_rng(spec.seed), extra_negatives_rng(spec)
    problems: list[BadRecord] = []
    windows = WindowSet("promoter", ["promoter"], ["promoter"])
    for name, sequence in read_plain_sequences(path, problems):
        if len(sequence) < spec.segments:
            problems.append(BadRecord(str(path), 0, f"{name}: shorter than {spec.segments} bp"))
            continue
        split = draw_split(rng, valid_fraction, test_fraction)
        windows.add(sequence, [1], name, 0, len(sequence), "+", split)
        for negative in deepromoter_negatives(sequence, split, rng, extra_rng, spec):
            windows.add(negative, [0], f"{name}/negative", 0, len(sequence), "+", split)
    if not len(windows):
        raise InputError(f"{path}: no usable promoter sequence ({len(problems)} rejected)")
    windows.write(out_path)
    return windows, problems


def _add_hard_negative(reference, windows, tss_list, rng, spec: PromoterSpec) -> None:
    by_chrom: dict[str, np.ndarray] = {}
    for chrom, tss in tss_list:
        by_chrom.setdefault(chrom, []).append(tss)
    chroms = sorted(by_chrom)
    width = spec.upstream + spec.downstream
    for _ in range(100):
        chrom = chroms[int(rng.integers(len(chroms)))]
        length = reference.length(chrom)
        if length <= width:
            continue
        start = int(rng.integers(0, length - width))
        centre = start + spec.upstream
        if np.min(np.abs(np.array(by_chrom[chrom]) - centre)) < spec.min_distance:
            continue
        strand = "+" if rng.random() < 0.5 else "-"
        sequence = reference.fetch(chrom, start, start + width, strand)
        if sequence.count("N") > 0.1 * width:
            continue
        windows.add(sequence, [0], chrom, start, start + width, strand, split_of(chrom, spec))
        return
