"""Genome bins labelled from peak files: interval arithmetic against bedtools and a
base-by-base oracle."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from genobird.cli import main
from genobird.datasets.chromatin import (
    bin_labels,
)
from genobird.genome import Reference
from tests.conftest import write

# --------------------------------------------------------------------------- negatives


# --------------------------------------------------------------------------- label builder
def test_label_builder_hand_example(tmp_path):
    bins = [("chr1", 0, 200), ("chr1", 200, 400), ("chr1", 400, 600), ("chr1", 600, 800)]
    first = write(
        tmp_path / "f1.bed",
        "chr1\t100\t200\n"  # covers exactly half of bin 0 -> positive
        "chr1\t200\t299\n"  # 99 bp of bin 1 -> negative
        "chr1\t400\t470\nchr1\t450\t520\n",  # overlapping peaks: 120 bp merged -> positive
    )
    second = write(tmp_path / "f2.bed", "chr1\t590\t800\n")  # all of bin 3, 10 bp of bin 2
    labels = bin_labels(bins, [first, second], min_overlap=0.5)
    assert labels.tolist() == [[1, 0], [0, 0], [1, 0], [0, 1]]


@pytest.mark.shared_data
def test_label_builder_on_real_peaks_matches_a_numpy_oracle(shared_data, tmp_path):
    region_start, region_end, chrom = 1_000_000, 3_000_000, "10"
    by_feature: dict[str, list[tuple[int, int]]] = {}
    with gzip.open(
        shared_data / "chromatin" / "deepsea_peaks_hg19_chr1_chr10_6features.bed.gz", "rt"
    ) as h:
        for line in h:
            c, s, e, feature = line.split()[:4]
            if c == chrom and int(e) > region_start and int(s) < region_end:
                by_feature.setdefault(feature, []).append((int(s), int(e)))
    names = sorted(by_feature)
    files = []
    for name in names:
        files.append(
            write(
                tmp_path / f"{name}.bed",
                "".join(f"{chrom}\t{s}\t{e}\n" for s, e in by_feature[name]),
            )
        )
    bins = [(chrom, s, s + 200) for s in range(region_start, region_end, 200)]
    labels = bin_labels(bins, files, min_overlap=0.5)
    covered = np.zeros((len(names), region_end - region_start + 2000), dtype=bool)
    for column, name in enumerate(names):
        for s, e in by_feature[name]:
            covered[column, max(0, s - region_start) : max(0, e - region_start)] = True
    fraction = covered[:, : region_end - region_start].reshape(len(names), -1, 200).mean(axis=2)
    assert np.array_equal(labels, (fraction >= 0.5).T.astype(np.uint8))
    assert labels.sum() > 100 and len(names) == 6


@pytest.mark.shared_data
@pytest.mark.slow
def test_numpy_label_builder_equals_bedtools_on_real_peaks(shared_data, tmp_path):
    """20 Mb of hg19 chr10 (100,000 bins x 6 real DeepSEA-style features), at DeepSEA's
    rule and two others; the peak BED is split per feature, gzipped as published."""
    from genobird.datasets.peaks import bedtools_bin_labels

    by_feature: dict[str, list[str]] = {}
    with gzip.open(
        shared_data / "chromatin" / "deepsea_peaks_hg19_chr1_chr10_6features.bed.gz", "rt"
    ) as handle:
        for line in handle:
            fields = line.split()
            by_feature.setdefault(fields[3], []).append("\t".join(fields[:3]) + "\n")
    files = []
    for name, lines in sorted(by_feature.items()):
        files.append(tmp_path / f"{name}.bed.gz")
        with gzip.open(files[-1], "wt") as handle:
            handle.writelines(lines)
    bins = [("10", s, s + 200) for s in range(60_000_000, 80_000_000, 200)]
    bins += [("1", 1_000_000 + 37 * i, 1_000_000 + 37 * i + 150) for i in range(2000)]
    for min_overlap in (0.5, 0.01, 1.0):
        ours = bin_labels(bins, files, min_overlap)
        assert np.array_equal(ours, bedtools_bin_labels(bins, files, min_overlap)), min_overlap
    assert ours.shape == (102_000, 6) and bin_labels(bins, files, 0.5).sum() > 1000


def test_interval_arithmetic_against_a_base_by_base_oracle(tmp_path):
    """Overlapping, nested, book-ended and empty peaks; bins of mixed widths that
    overlap each other; chromosomes without peaks; header and track lines."""
    from genobird.datasets.peaks import merge_intervals

    rng = np.random.default_rng(11)
    starts = rng.integers(0, 5000, 300)
    ends = starts + rng.integers(0, 120, 300)
    starts[:3], ends[:3] = [100, 200, 300], [200, 300, 300]  # book-ended and empty
    rows = "".join(f"chr1\t{s}\t{e}\tp\n" for s, e in zip(starts, ends, strict=True))
    peaks = write(tmp_path / "p.bed", "track name=x\n#comment\n" + rows)
    covered = np.zeros(6000, dtype=bool)
    for s, e in zip(starts, ends, strict=True):
        covered[s:e] = True
    bins = [
        ("chr1", int(s), int(s + w))
        for s, w in zip(rng.integers(0, 5800, 500), rng.integers(1, 200, 500), strict=True)
    ]
    bins.append(("chr2", 0, 100))
    for min_overlap in (0.5, 0.2, 1.0):
        expected = [
            covered[s:e].mean() >= min_overlap if c == "chr1" else False for c, s, e in bins
        ]
        assert bin_labels(bins, [peaks], min_overlap)[:, 0].tolist() == expected
    merged_starts, merged_ends = merge_intervals(starts, ends)
    assert (merged_starts[1:] > merged_ends[:-1]).all()  # disjoint, book-ended joined
    assert (merged_ends - merged_starts).sum() == covered.sum()


def test_peak_chromosomes_are_resolved_like_bed_regions(demo_reference, tmp_path, capsys):
    """Peaks named '1' label the reference's chr1 bins (as a BED scored against it is
    resolved); a peak file on none of the reference's chromosomes is a one-line error,
    not a feature labelled 0 everywhere."""
    from genobird.datasets.chromatin import peaks_on_reference
    from genobird.datasets.peaks import read_peaks

    reference = Reference(demo_reference / "genome.fa")
    peaks = read_peaks(write(tmp_path / "p.bed", "1\t100\t300\nchr1\t250\t400\nchrUn\t0\t9\n"))
    named = peaks_on_reference(peaks, reference, "p.bed")
    assert list(named) == ["chr1"] and named["chr1"][0].tolist() == [100]
    assert named["chr1"][1].tolist() == [400]  # '1' and 'chr1' merged
    write(tmp_path / "o.bed", "scaffold_7\t0\t500\n")
    table = write(tmp_path / "f.tsv", "name\tcategory\tpeak_file\nX\tTF\to.bed\n")
    fasta, out = demo_reference / "genome.fa", tmp_path / "c.h5"
    assert (
        main(
            [
                "-q",
                "dataset",
                "chromatin",
                "--features",
                str(table),
                "--reference",
                str(fasta),
                "--out",
                str(out),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert "o.bed: none of its chromosomes (scaffold_7, ...) is in the reference" in err


def test_a_bad_peak_file_is_a_one_line_error_naming_it(tmp_path):
    from genobird.datasets.peaks import read_peaks
    from genobird.errors import FormatError

    bad = write(tmp_path / "bad.bed", "chr1\t10\t20\nchr1\tten\t30\n")
    with pytest.raises(FormatError, match=r"bad\.bed: not a BED file of integer starts and ends"):
        read_peaks(bad)
    reversed_ = write(tmp_path / "rev.bed", "chr1\t10\t20\nchr2\t50\t30\n")
    with pytest.raises(FormatError, match=r"rev\.bed: interval chr2:50-30 has start > end"):
        read_peaks(reversed_)
    assert read_peaks(write(tmp_path / "empty.bed", "")) == {}
