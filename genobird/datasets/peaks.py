"""Genome bins labelled from peak BED files by interval arithmetic in numpy.

A bin is positive for a feature when the feature's merged peaks cover at least
`min_overlap` of it (DeepSEA's rule is half): the result of `bedtools merge` then
`bedtools coverage`, computed without a row of Python per bin or per overlap.

Covered bases before a position x, C(x), is a piecewise-linear function of the merged
(disjoint, sorted) peaks: the full lengths of the peaks starting before x, less the part
of the last of them that lies at or after x. A bin [a, b) is covered C(b) - C(a) bp;
two binary searches per bin and feature, about 50 M bin-features per second per core
(benchmarks/labels.py), where the per-row Python over bedtools' output did 91 k.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from genobird.errors import FormatError
from genobird.fileio import open_text

Peaks = dict[str, tuple[np.ndarray, np.ndarray]]  # chrom -> (starts, ends) merged, sorted


def read_peaks(path: str | Path) -> Peaks:
    """A BED file's intervals per chromosome, merged as `bedtools merge` merges them
    (overlapping and book-ended intervals become one). Header, track and browser lines
    lines at the top are skipped; a row without integer start <= end is an error naming
    the file."""
    path = Path(path)
    try:
        table = pd.read_csv(
            path,
            sep="\t",
            header=None,
            usecols=[0, 1, 2],
            comment="#",
            skip_blank_lines=True,
            skiprows=_header_lines(path),
            dtype={0: str, 1: np.int64, 2: np.int64},
        )
    except pd.errors.EmptyDataError:
        return {}
    except (ValueError, pd.errors.ParserError) as exc:
        raise FormatError(f"{path}: not a BED file of integer starts and ends ({exc})") from exc
    starts, ends = table[1].to_numpy(), table[2].to_numpy()
    bad = np.nonzero((starts < 0) | (ends < starts))[0]
    if len(bad):
        row = table.iloc[bad[0]]
        raise FormatError(f"{path}: interval {row[0]}:{row[1]}-{row[2]} has start > end or < 0")
    codes, chroms = pd.factorize(table[0])
    by_chrom = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[by_chrom], np.arange(len(chroms) + 1))
    peaks: Peaks = {}
    for code, chrom in enumerate(chroms):
        rows = by_chrom[bounds[code] : bounds[code + 1]]
        peaks[chrom] = merge_intervals(starts[rows], ends[rows])
    return peaks


def _header_lines(path: Path) -> int:
    """Lines before the first interval: track, browser, comment and blank lines."""
    with open_text(path) as handle:
        for count, line in enumerate(handle):
            if line.strip() and not line.startswith(("track", "browser", "#")):
                return count
    return 0


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted intervals covering the same bases; book-ended ones are joined."""
    if not len(starts):
        return starts.astype(np.int64), ends.astype(np.int64)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    # a new merged interval begins where a start lies past everything before it
    begins = np.concatenate(([True], starts[1:] > reach[:-1]))
    first = np.nonzero(begins)[0]
    last = np.concatenate((first[1:], [len(starts)])) - 1
    return starts[first], reach[last]


def covered_bases(peaks: tuple[np.ndarray, np.ndarray], positions: np.ndarray) -> np.ndarray:
    """C(x): bases covered by the merged `peaks` in [0, x), for each x in ascending
    `positions`."""
    starts, ends = peaks
    before = np.concatenate(([0], np.cumsum(ends - starts)))  # lengths of the first k peaks
    # peaks starting before each x: search the few peaks in the many sorted positions
    # (first position past each start) and accumulate, rather than the reverse
    first_after = np.searchsorted(positions, starts, side="right")
    count = np.cumsum(np.bincount(first_after, minlength=len(positions) + 1))[: len(positions)]
    beyond = np.where(count > 0, ends[np.maximum(count - 1, 0)] - positions, 0)
    return before[count] - np.maximum(beyond, 0)


class BinEdges:
    """One chromosome's bin edges, sorted once for all its features. Tiled bins (a
    genome cut in 200 bp) share edges, so C is evaluated once per edge; other bins
    (any order, overlapping) at both ends of each, sorted and put back."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray):
        self.count = len(starts)
        self.tiled = bool(self.count) and np.array_equal(starts[1:], ends[:-1])
        if self.tiled:
            self.positions = np.append(starts, ends[-1])
        else:
            both = np.concatenate([starts, ends])
            self.order = np.argsort(both, kind="stable")
            self.positions = both[self.order]

    def coverage(self, peaks) -> np.ndarray:
        """Covered bases of each bin [start, end) by merged `peaks` (None: no peaks)."""
        if peaks is None or not len(peaks[0]) or not self.count:
            return np.zeros(self.count, dtype=np.int64)
        covered = covered_bases(peaks, self.positions)
        if self.tiled:
            return np.diff(covered)
        at = np.empty_like(covered)
        at[self.order] = covered
        return at[self.count :] - at[: self.count]


def label_bins(
    peak_sets: list[Peaks],
    chrom: str,
    bin_starts: np.ndarray,
    bin_ends: np.ndarray,
    min_overlap: float,
) -> np.ndarray:
    """uint8 [bins, features] of one chromosome's bins."""
    edges = BinEdges(bin_starts, bin_ends)
    widths = np.maximum(bin_ends - bin_starts, 1)
    labels = np.zeros((len(bin_starts), len(peak_sets)), dtype=np.uint8)
    for column, peaks in enumerate(peak_sets):
        # bedtools' comparison, the covered fraction (min_overlap * width can round up)
        labels[:, column] = edges.coverage(peaks.get(chrom)) / widths >= min_overlap
    return labels


def group_by_chromosome(bins: Iterable[tuple[str, int, int]]):
    """{chrom: (row indices, starts, ends)} of a list of (chrom, start, end) bins."""
    table = pd.DataFrame(list(bins), columns=["chrom", "start", "end"])
    groups = {}
    for chrom, rows in table.groupby("chrom", sort=False).indices.items():
        groups[chrom] = (
            rows,
            table["start"].to_numpy(np.int64)[rows],
            table["end"].to_numpy(np.int64)[rows],
        )
    return groups


def bedtools_bin_labels(bins: list[tuple[str, int, int]], peak_files, min_overlap: float):
    """The same labels through bedtools itself (merge, then coverage, via pybedtools), one
    Python row per bin and feature: the builder this module replaced, about 200x slower,
    kept as the independent check of the arithmetic above (tests, benchmarks/labels.py)."""
    import pybedtools

    labels = np.zeros((len(bins), len(peak_files)), dtype=np.uint8)
    bin_tool = pybedtools.BedTool([(c, s, e, str(i)) for i, (c, s, e) in enumerate(bins)]).sort()
    for column, peaks in enumerate(peak_files):
        merged = pybedtools.BedTool(str(peaks)).sort().merge()
        for row in bin_tool.coverage(merged):
            # bedtools coverage appends: overlapping features, covered bp, bin bp, fraction
            if float(row.fields[-1]) >= min_overlap:
                labels[int(row.fields[3]), column] = 1
    pybedtools.cleanup()
    return labels
