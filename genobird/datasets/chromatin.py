"""Chromatin-profile prediction (paper section 5, appendix F.3): data sets of your own
features (DeepSEA's bundle: datasets.deepsea).

For users' own features (and the demo), `build_chromatin_dataset` labels genome bins
(200 bp by default) from peak BED files (interval arithmetic in numpy, datasets/peaks.py): a
bin is positive for a feature when peaks of that feature cover at least `min_overlap` of
it (default half, as DeepSEA's rule). Bins with at least one positive are kept, plus
`negative_ratio` times as many all-negative bins drawn at random.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from genobird.datasets.peaks import group_by_chromosome, label_bins, merge_intervals, read_peaks
from genobird.datasets.splits import GenomeSplit
from genobird.datasets.windows import MISSING_LABEL, WindowSet
from genobird.errors import ConfigError, InputError
from genobird.fileio import read_small_tsv, require_unique_names
from genobird.genome import open_reference, point_window
from genobird.inputs import mostly_n

log = logging.getLogger(__name__)


# =========================================================================== own features
@dataclass(frozen=True)
class ChromatinSpec:
    bin_size: int = 200
    context: int = 8000
    min_overlap: float = 0.5
    # All-negative bins drawn per bin with a peak (DeepSEA kept every bin with a peak and
    # no negatives of its own; a ratio of 1 gives the classifier the genome's background)
    negative_ratio: float = 1.0
    max_bins: int | None = None  # random subsample of the labelled bins (small runs)
    chromosomes: tuple[str, ...] | None = None
    # Held-out chromosomes or regions (datasets/splits.py): DeepSEA's are chr8 and chr9 for
    # test and a region of chr7 for validation
    valid_chromosomes: tuple[str, ...] = ("chr7",)
    test_chromosomes: tuple[str, ...] = ("chr8", "chr9")
    # feature table -> where its features were measured, for tables without an assayed
    # column (chromosomes comma-separated, or a BED of regions)
    assayed: dict | None = None
    seed: int = 0
    # Labels of the `profile_bins` bins centred on each window's bin stored beside its own
    # (an odd count; 0: none), for a profile head that learns every one of them from one
    # pass over the window (fine-tuning's pooling "profile")
    profile_bins: int = 0

    def __post_init__(self):
        if self.profile_bins < 0 or (self.profile_bins and self.profile_bins % 2 == 0):
            raise ConfigError(
                f"profile_bins must be 0 (none) or odd, so that the window's own "
                f"bin is the middle one; got {self.profile_bins}"
            )
        if self.profile_bins * self.bin_size > self.context:
            raise ConfigError(
                f"profile_bins {self.profile_bins} x {self.bin_size} bp bins do not "
                f"fit in the {self.context} bp window"
            )


def read_feature_table(path: str | Path, assayed: str = "") -> list[dict]:
    """A TSV with columns name, category, peak_file (relative to the table) and, optionally,
    assayed: where the feature was measured, as comma-separated chromosome names or a BED
    file of regions (relative to the table); empty or absent: everywhere, or `assayed`
    where given for the whole table. Outside it the feature's label is unknown
    (`MISSING_LABEL`), not negative. An optional `scale` column (e.g. local, broad) is
    kept with the data set, and the context ablation reports medians per scale."""
    path = Path(path)
    header, rows = read_small_tsv(path)
    if not {"name", "category", "peak_file"} <= set(header):
        raise InputError(f"{path}: needs columns name, category, peak_file; has {header}")
    require_unique_names(
        [row["name"] for row in rows], "feature names", path, "each feature needs its own name"
    )
    for row in rows:
        row["table"] = path
        row["peak_path"] = (path.parent / row["peak_file"]).resolve()
        if not row["peak_path"].is_file():
            raise InputError(
                f"{path}: feature {row['name']!r}: peak file {row['peak_file']} not found "
                f"(looked for {row['peak_path']}); peak_file is relative to the table"
            )
        row["assayed"] = parse_assayed(row.get("assayed") or assayed, path, row["name"])
    return rows


def read_feature_tables(paths, assayed: dict | None = None) -> list[dict]:
    """One feature table, or several read as one (in order): e.g. TF peaks measured
    genome-wide beside histone marks measured on one chromosome. Names must be unique
    across them. `assayed` maps a table's path to where its features were measured, for
    rows that do not say (the `assayed` column's syntax)."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    assayed = {Path(k).resolve(): v for k, v in (assayed or {}).items()}
    for table in assayed:
        if table not in {Path(p).resolve() for p in paths}:
            raise InputError(
                f"assayed is given for {table}, which is not one of the feature "
                "tables; write it as TABLE=WHERE with TABLE as given"
            )
    features = []
    for path in paths:
        features += read_feature_table(path, assayed.get(Path(path).resolve(), ""))
    require_unique_names(
        [row["name"] for row in features],
        "feature names",
        " + ".join(str(p) for p in paths),
        "each feature needs its own name across the tables",
    )
    return features


@dataclass(frozen=True)
class Assayed:
    """Where one feature was measured: everywhere (both None), whole chromosomes, or
    regions of a BED file (merged peaks-like intervals, keyed by chromosome)."""

    chromosomes: tuple[str, ...] | None = None
    regions_file: Path | None = None

    @property
    def everywhere(self) -> bool:
        return self.chromosomes is None and self.regions_file is None

    def describe(self) -> str:
        if self.everywhere:
            return "everywhere"
        return ", ".join(self.chromosomes) if self.chromosomes else str(self.regions_file)


def parse_assayed(text: str, table: Path, feature: str) -> Assayed:
    text = text.strip()
    if not text:
        return Assayed()
    candidate = (table.parent / text).resolve()
    if candidate.is_file():
        return Assayed(regions_file=candidate)
    if text.endswith((".bed", ".bed.gz")):
        raise InputError(
            f"{table}: feature {feature!r}: assayed regions file {text} not found (looked for "
            f"{candidate}); it is relative to the table"
        )
    return Assayed(chromosomes=tuple(name.strip() for name in text.split(",") if name.strip()))


class AssayedMasks:
    """Which bins each feature was measured in, for the features whose table says so."""

    def __init__(self, features: list[dict], reference):
        self.columns, self.regions = [], []
        for column, feature in enumerate(features):
            assayed: Assayed = feature["assayed"]
            if assayed.everywhere:
                continue
            if assayed.chromosomes:
                regions = {}
                for chrom in assayed.chromosomes:
                    try:
                        contig = reference.resolve(chrom)
                    except KeyError:
                        raise InputError(
                            f"{feature['table']}: feature {feature['name']!r} is assayed on "
                            f"{chrom!r}, "
                            f"which is not a contig of {reference.name}; name the reference's "
                            "contigs (comma-separated) or give a BED of regions"
                        ) from None
                    length = reference.lengths[contig]
                    regions[contig] = (np.array([0], np.int64), np.array([length], np.int64))
            else:
                regions = peaks_on_reference(
                    read_peaks(assayed.regions_file), reference, assayed.regions_file
                )
            self.columns.append(column)
            self.regions.append(regions)

    def apply(self, labels: np.ndarray, chrom: str, starts: np.ndarray, ends: np.ndarray):
        """Set the labels of bins outside each feature's assayed regions to MISSING_LABEL
        (a bin counts as assayed where at least half of it is)."""
        if not self.columns:
            return labels
        measured = label_bins(self.regions, chrom, starts, ends, 0.5).astype(bool)
        for index, column in enumerate(self.columns):
            labels[~measured[:, index], column] = MISSING_LABEL
        return labels


def bin_labels(bins: list[tuple[str, int, int]], peak_files: list[Path], min_overlap: float):
    """uint8 [bins, features]: 1 where a feature's merged peaks cover >= min_overlap of the bin."""
    peak_sets = [read_peaks(path) for path in peak_files]
    labels = np.zeros((len(bins), len(peak_sets)), dtype=np.uint8)
    for chrom, (rows, starts, ends) in group_by_chromosome(bins).items():
        labels[rows] = label_bins(peak_sets, chrom, starts, ends, min_overlap)
    return labels


@dataclass
class LabelledBins:
    """Bins of whole chromosomes numbered across them (chromosome order, then position),
    with the labels of the positive bins only, bit-packed: the rest are all-negative by
    definition, so memory stays near one chromosome's label matrix plus the positives."""

    chromosomes: list[str]
    first_index: np.ndarray  # int64 [C + 1]: global index of each chromosome's first bin
    bin_size: int
    positive: np.ndarray  # int64 [P], ascending
    packed_labels: np.ndarray  # uint8 [P, ceil(F / 8)]: np.packbits of each positive's row
    features: int
    negative: np.ndarray  # int64 [bins - P], ascending

    def locate(self, index: int) -> tuple[str, int]:
        """(chrom, start) of a global bin index."""
        chromosome = int(np.searchsorted(self.first_index, index, side="right")) - 1
        return self.chromosomes[chromosome], (
            index - int(self.first_index[chromosome])
        ) * self.bin_size

    def labels_of(self, index: int) -> np.ndarray:
        row = int(np.searchsorted(self.positive, index))
        if row < len(self.positive) and self.positive[row] == index:
            return np.unpackbits(self.packed_labels[row], count=self.features)
        return np.zeros(self.features, dtype=np.uint8)


def profile_labels(bins: LabelledBins, index: int, count: int, assayed: AssayedMasks):
    """uint8 [count, F]: the labels of the `count` bins centred on bin `index`, with each
    feature's assayed regions applied; MISSING_LABEL where a bin lies off its chromosome."""
    chromosome = int(np.searchsorted(bins.first_index, index, side="right")) - 1
    first, end = int(bins.first_index[chromosome]), int(bins.first_index[chromosome + 1])
    half = count // 2
    neighbours = np.arange(max(first, index - half), min(end, index + half + 1))
    out = np.full((count, bins.features), MISSING_LABEL, dtype=np.uint8)
    labels = np.stack([bins.labels_of(int(j)) for j in neighbours])
    starts = (neighbours - first) * bins.bin_size
    chrom = bins.chromosomes[chromosome]
    out[neighbours - (index - half)] = assayed.apply(labels, chrom, starts, starts + bins.bin_size)
    return out


def peaks_on_reference(peaks: dict, reference, path) -> dict:
    """Peaks keyed by the reference's own contig names (chr1 <-> 1, chrM <-> MT), as BED
    regions are resolved when scored; contigs the reference lacks are left out. A peak
    file none of whose chromosomes is in the reference is an error: its labels would all
    be 0 without a word."""
    named: dict = {}
    for chrom, (starts, ends) in peaks.items():
        try:
            contig = reference.resolve(chrom)
        except KeyError:  # e.g. unplaced contigs of another assembly
            continue
        if contig in named:  # "1" and "chr1" in one file
            starts = np.concatenate([named[contig][0], starts])
            ends = np.concatenate([named[contig][1], ends])
        named[contig] = merge_intervals(starts, ends)
    if peaks and not named:
        raise InputError(
            f"{path}: none of its chromosomes ({', '.join(list(peaks)[:3])}, ...) is in the "
            f"reference {reference.name}; is it another assembly or naming?"
        )
    return named


def label_genome_bins(
    lengths: dict[str, int],
    chromosomes,
    bin_size: int,
    peak_sets: list,
    min_overlap: float,
    progress: bool = False,
) -> LabelledBins:
    """Every whole bin of `chromosomes`, labelled chromosome by chromosome from
    `read_peaks` results (one per feature, keyed by the same contig names)."""
    counts = [max(0, lengths[chrom] // bin_size) for chrom in chromosomes]
    first_index = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    positive, positive_labels, negative = [], [], []
    bar = tqdm(
        total=int(first_index[-1]) * len(peak_sets),
        desc="label bins",
        unit="bin-features",
        unit_scale=True,
        disable=not progress,
    )
    for chrom, count, offset in zip(chromosomes, counts, first_index, strict=False):
        starts = np.arange(count, dtype=np.int64) * bin_size
        labels = label_bins(peak_sets, chrom, starts, starts + bin_size, min_overlap)
        has_peak = labels.any(axis=1)
        positive.append(np.nonzero(has_peak)[0] + offset)
        positive_labels.append(np.packbits(labels[has_peak], axis=1))
        negative.append(np.nonzero(~has_peak)[0] + offset)
        bar.update(count * len(peak_sets))
    bar.close()
    empty = np.zeros(0, dtype=np.int64)
    packed_width = -(-len(peak_sets) // 8)
    return LabelledBins(
        list(chromosomes),
        first_index,
        bin_size,
        np.concatenate([empty, *positive]),
        np.concatenate([np.zeros((0, packed_width), np.uint8), *positive_labels]),
        len(peak_sets),
        np.concatenate([empty, *negative]),
    )


def build_chromatin_dataset(
    feature_table, fasta, out_path, spec: ChromatinSpec = ChromatinSpec(), progress: bool = False
):
    """Label genome bins from peak BEDs and write their context windows to HDF5.

    `fasta`: one FASTA or several read as one genome (`open_reference`). Bins with a
    peak of any feature are kept with `negative_ratio` times as many all-negative bins;
    a window more than half N (`inputs.mostly_n`: a gap, a contig's end), or whose
    context reaches into a split above its own (`GenomeSplit.window_split`), is left out,
    each counted in the log."""
    if not 0 < spec.min_overlap <= 1:
        raise ConfigError(f"min_overlap must be in (0, 1], got {spec.min_overlap}")
    features = read_feature_tables(feature_table, spec.assayed)
    reference = open_reference(fasta)
    split = GenomeSplit.parse(spec.valid_chromosomes, spec.test_chromosomes, reference.contigs)
    check_split_chromosomes(split, reference)
    chromosomes = (
        [reference.resolve(c) for c in spec.chromosomes] if spec.chromosomes else reference.contigs
    )
    files = tqdm(
        [f["peak_path"] for f in features], desc="peaks", unit="files", disable=not progress
    )
    peak_sets = [peaks_on_reference(read_peaks(path), reference, path) for path in files]
    assayed = AssayedMasks(features, reference)
    bins = label_genome_bins(
        reference.lengths, chromosomes, spec.bin_size, peak_sets, spec.min_overlap, progress
    )
    rng = np.random.default_rng(spec.seed)
    positive, negative = bins.positive, bins.negative
    wanted = min(len(negative), round(spec.negative_ratio * len(positive)))
    chosen = np.concatenate([positive, rng.choice(negative, wanted, replace=False)])
    if spec.max_bins is not None and len(chosen) > spec.max_bins:
        chosen = rng.choice(chosen, spec.max_bins, replace=False)
    chosen = np.sort(chosen)
    windows = WindowSet(
        "chromatin",
        [f["name"] for f in features],
        [f["category"] for f in features],
        scales=[f.get("scale") or "" for f in features],
        profile_bins=spec.profile_bins,
        profile_bin_bp=spec.bin_size if spec.profile_bins else 0,
    )
    guarded = gaps = 0
    for index in chosen:
        chrom, start = bins.locate(int(index))
        window = point_window(chrom, start + spec.bin_size // 2, spec.context)
        bin_end = start + spec.bin_size
        window_split = split.window_split(chrom, start, bin_end, window.start, window.end)
        if window_split is None:
            guarded += 1
            continue
        sequence = reference.fetch(chrom, window.start, window.end, pad=True)
        if mostly_n(sequence):  # a gap or a contig's end: as the scorers refuse it
            gaps += 1
            continue
        profile = None
        if spec.profile_bins:  # the window's own bin is the profile's middle one
            profile = profile_labels(bins, int(index), spec.profile_bins, assayed)
            labels = profile[spec.profile_bins // 2]
        else:
            labels = bins.labels_of(int(index))[None, :]
            labels = assayed.apply(labels, chrom, np.array([start]), np.array([bin_end]))[0]
        windows.add(sequence, labels, chrom, window.start, window.end, "+", window_split, profile)
    windows.write(out_path)
    log.info(
        "chromatin data: %d bins (%d with a peak) of %d; %d left out where their context "
        "reached a held-out split, %d whose window is more than half N (a gap, a contig's end)",
        len(windows),
        len(positive),
        int(bins.first_index[-1]),
        guarded,
        gaps,
    )
    warn_features_without_positives(windows)
    return windows


def check_split_chromosomes(split: GenomeSplit, reference) -> None:
    """A held-out chromosome the reference lacks holds nothing out: a warning naming it
    (a misspelt name), not an error, since the default split (DeepSEA's chr7-9) may
    simply not apply to a small genome."""
    for region in (*split.valid, *split.test):
        if region.chrom not in reference:
            log.warning(
                "held-out %s: chromosome %r is not in %s (its contigs: %s); nothing is held "
                "out there",
                region,
                region.chrom,
                reference.name,
                ", ".join(reference.contigs[:8]),
            )


def positives_by_split(windows: WindowSet) -> dict[str, np.ndarray]:
    """Positives per feature in each split (unknown labels not counted)."""
    labels, splits = np.stack(windows.labels), np.asarray(windows.splits)
    return {s: (labels[splits == s] == 1).sum(axis=0) for s in ("train", "valid", "test")}


def warn_features_without_positives(windows: WindowSet) -> None:
    """A feature with no positive in a held-out split cannot be evaluated there: a
    warning naming it, so that a split can be chosen again."""
    counts = positives_by_split(windows)
    for split_name in ("valid", "test"):
        if not (np.asarray(windows.splits) == split_name).any():
            continue
        empty = [n for n, c in zip(windows.feature_names, counts[split_name], strict=True) if not c]
        if empty:
            shown = ", ".join(empty[:5]) + (
                f", ... ({len(empty) - 5} more)" if len(empty) > 5 else ""
            )
            log.warning(
                "%d feature(s) have no positive in the %s split and will not be evaluated "
                "there: %s",
                len(empty),
                split_name,
                shown,
            )
