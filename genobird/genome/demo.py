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

The sequence is planned and written by genobird.genome.demo_sequence (steps 1-7, read
top to bottom in the order the genome is layered, drawing from one random stream in a
fixed order, which the byte-identical output depends on); the long-range structure,
which has its own plan, lives in demo_longrange. This module labels the result and
writes the files.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from pathlib import Path

import numpy as np

from genobird.fileio import atomic_write, file_digest, staging_folder
from genobird.genome.alphabet import reverse_complement
from genobird.genome.demo_sequence import (
    DNASE_FEATURES,
    ENHANCER_CLASSES,
    HISTONE_FEATURES,
    LONG_RANGE_FEATURES,
    MOTIFS,
    PROMOTER_MOTIFS,
    TF_FEATURES,
    ChromosomePlan,
    DemoSpec,
    Promoter,
    build_chromosome,
    make_repeat_consensi,
)
from genobird.genome.meme import consensus_matrix, write_meme

log = logging.getLogger(__name__)

GENERATOR_VERSION = 3
DEFAULT_SPEC = DemoSpec()  # the embedded default's seed and size
FASTA_LINE_WIDTH = 60
PROMOTER_MOTIFS_FILE = "promoter_motifs.meme"


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
    write_meme(
        outdir / PROMOTER_MOTIFS_FILE,
        ((name, name, consensus_matrix(MOTIFS[name]), 1) for name in PROMOTER_MOTIFS),
    )
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
                handle.write(
                    f"{plan.name}\t{copy.source[0]}\t{copy.source[1]}\t{name}_source"
                    f"\t0\t+\n{plan.name}\t{copy.copy[0]}\t{copy.copy[1]}\t{name}_copy"
                    f"\t{round(1000 * copy.divergence)}\t{strand}\n"
                )


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


def generate_demo_reference(outdir: str | Path, spec: DemoSpec = DEFAULT_SPEC) -> dict:
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
