"""Chromatin label building: bin-features per second, numpy interval arithmetic against
the bedtools route it replaced (merge + coverage through pybedtools, a Python row per
bin and feature), in the same process.

    python benchmarks/labels.py                 # synthetic: 3 x 50 Mb, 40 features
    python benchmarks/labels.py --real \
        ../shared/data/chromatin/deepsea_peaks_hg19_chr1_chr10_6features.bed.gz

Synthetic peaks: per feature and chromosome, 1 peak per 5 kb on average, 150-1,500 bp
wide (about DeepSEA's narrowPeak density). The bedtools route runs on one chromosome and
4 features only (it is ~500x slower); both results are checked equal there. The GRCh37
line extrapolates to 15.5 M bins x 919 features on 2 cores.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from genobird.datasets.chromatin import bin_labels, label_genome_bins
from genobird.datasets.peaks import bedtools_bin_labels, read_peaks

GRCH37_BIN_FEATURES = 15_500_000 * 919


def synthetic_peaks(folder: Path, lengths: dict[str, int], features: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    files = []
    for feature in range(features):
        path = folder / f"f{feature}.bed.gz"
        with gzip.open(path, "wt") as handle:
            for chrom, length in lengths.items():
                count = length // 5000
                starts = np.sort(rng.integers(0, length - 2000, count))
                widths = rng.integers(150, 1500, count)
                handle.writelines(
                    f"{chrom}\t{s}\t{s + w}\n" for s, w in zip(starts, widths, strict=True)
                )
        files.append(path)
    return files


def real_peaks(folder: Path, path: Path) -> tuple[list, dict[str, int]]:
    """One BED per feature from a 4-column peak file (chrom, start, end, feature)."""
    rows: dict[str, list[str]] = {}
    ends: dict[str, int] = {}
    with gzip.open(path, "rt") as handle:
        for line in handle:
            chrom, start, end, feature = line.split()[:4]
            rows.setdefault(feature, []).append(f"{chrom}\t{start}\t{end}\n")
            ends[chrom] = max(ends.get(chrom, 0), int(end))
    files = []
    for feature, lines in sorted(rows.items()):
        files.append(folder / f"{feature}.bed")
        files[-1].write_text("".join(lines))
    return files, ends


def measure(
    lengths: dict[str, int], files: list, bin_size: int, baseline_chrom: str, baseline_features: int
) -> None:
    start = time.perf_counter()
    peak_sets = [read_peaks(path) for path in files]
    result = label_genome_bins(lengths, list(lengths), bin_size, peak_sets, 0.5)
    ours = time.perf_counter() - start
    bins = int(result.first_index[-1])
    ours_rate = bins * len(files) / ours
    print(
        f"numpy:    {bins:,} bins x {len(files)} features in {ours:.2f} s "
        f"({ours_rate / 1e6:.1f} M bin-features/s, peak reading included)"
    )
    sample = [
        (baseline_chrom, s, s + bin_size)
        for s in range(0, lengths[baseline_chrom] - bin_size + 1, bin_size)
    ]
    subset = files[:baseline_features]
    start = time.perf_counter()
    expected = bedtools_bin_labels(sample, subset, 0.5)
    theirs = time.perf_counter() - start
    theirs_rate = len(sample) * len(subset) / theirs
    print(
        f"bedtools: {len(sample):,} bins x {len(subset)} features in {theirs:.2f} s "
        f"({theirs_rate / 1e6:.3f} M bin-features/s)"
    )
    assert np.array_equal(bin_labels(sample, subset, 0.5), expected), "labels differ"
    print(f"labels equal on the baseline's bins; speed-up {ours_rate / theirs_rate:.0f}x")
    print(
        f"GRCh37 x 919 features: numpy {GRCH37_BIN_FEATURES / ours_rate / 60:.1f} min "
        f"(one core), bedtools {GRCH37_BIN_FEATURES / theirs_rate / 3600:.1f} h"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", type=Path, help="4-column peak BED(.gz): chrom start end feature")
    parser.add_argument("--features", type=int, default=40)
    parser.add_argument("--chromosome-mb", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.real:
            files, lengths = real_peaks(folder, args.real)
            print(f"real peaks: {args.real.name}, {len(files)} features, {sorted(lengths)}")
            measure(lengths, files, 200, max(lengths, key=lengths.get), len(files))
        else:
            size = args.chromosome_mb * 1_000_000
            lengths = {f"chr{i}": size for i in (1, 2, 3)}
            files = synthetic_peaks(folder, lengths, args.features, seed=0)
            print(f"synthetic: 3 x {args.chromosome_mb} Mb, {args.features} features")
            measure(lengths, files, 200, "chr1", 4)


if __name__ == "__main__":
    main()
