"""`genobird tracks` as bigWig: the same values as the bedGraph at every bin, the
reference's contig sizes, zoom levels, nothing over a gap; one file per name, refused by
name where the name and the request disagree."""

from __future__ import annotations

import numpy as np
import pyBigWig
import pytest

from genobird.cli import main
from genobird.genome import Reference
from genobird.inputs import mostly_n


def bedgraph_rows(path) -> list[tuple[str, int, int, float]]:
    lines = path.read_text().splitlines()
    assert lines[0].startswith("track type=bedGraph")
    return [
        (c, int(a), int(b), float(v)) for c, a, b, v in (line.split("\t") for line in lines[1:])
    ]


def bigwig_rows(path, chroms) -> list[tuple[str, int, int, float]]:
    with pyBigWig.open(str(path)) as track:
        return [(chrom, a, b, v) for chrom in chroms for a, b, v in (track.intervals(chrom) or ())]


@pytest.fixture(scope="module")
def tracks_of(predictor, demo_reference, tmp_path_factory):
    """The tracks of two features over two regions given out of the reference's order,
    one reaching into chr1's telomere gap, in each format."""
    folder = tmp_path_factory.mktemp("tracks")
    fasta = str(demo_reference / "genome.fa")
    features = predictor.feature_names[:2]
    argv = [
        "-q",
        "tracks",
        "--model",
        str(predictor.model_dir),
        "--reference",
        fasta,
        "--region",
        "chr2:5,001-7,000",
        "chr1:1-9,000",
    ]
    runs = {"bedgraph": folder / "bg", "bigwig": folder / "bw"}
    for fmt, out in runs.items():
        assert main([*argv, "--features", *features, "--out", str(out), "--format", fmt]) == 0
    assert main([*argv, "--features", features[0], "--out", str(folder / "one.bw")]) == 0
    assert main([*argv, "--features", features[0], "--out", str(folder / "one.bedGraph")]) == 0
    return folder, features, fasta


def test_bigwig_holds_the_bedgraph_values_at_every_bin_and_nothing_over_gaps(tracks_of):
    folder, features, fasta = tracks_of
    reference = Reference(fasta)
    for feature in features:
        stem = feature.replace("|", "_")
        rows = bedgraph_rows(folder / "bg" / f"{stem}.bedGraph")
        # in the reference's contig order, every 200 bp bin but those whose window is
        # mostly N (chr1's telomere)
        windows = {
            (c, a): reference.fetch(c, a + 100 - 200, a + 100 + 200, pad=True)
            for c, a, _, _ in rows
        }
        assert [row[0] for row in rows] == sorted(
            (row[0] for row in rows), key=["chr1", "chr2"].index
        )
        assert not any(mostly_n(window) for window in windows.values())
        chr1_starts = [a for c, a, _, _ in rows if c == "chr1"]
        gap_bins = [a for a in range(0, 9000, 200) if a not in chr1_starts]
        assert gap_bins and gap_bins[0] == 0  # the telomere's bins have no value
        for a in gap_bins:
            assert mostly_n(reference.fetch("chr1", a - 100, a + 300, pad=True))
        assert chr1_starts == [a for a in range(0, 9000, 200) if a not in gap_bins]
        assert [a for c, a, _, _ in rows if c == "chr2"] == list(range(5000, 7000, 200))
        wig = bigwig_rows(folder / "bw" / f"{stem}.bw", ["chr1", "chr2"])
        assert [row[:3] for row in wig] == [row[:3] for row in rows]
        np.testing.assert_allclose([row[3] for row in wig], [row[3] for row in rows], rtol=1e-5)
    # one feature's file, in the format its name says, equals the folder's
    stem = features[0].replace("|", "_")
    assert bedgraph_rows(folder / "one.bedGraph") == bedgraph_rows(
        folder / "bg" / f"{stem}.bedGraph"
    )
    assert bigwig_rows(folder / "one.bw", ["chr1", "chr2"]) == bigwig_rows(
        folder / "bw" / f"{stem}.bw", ["chr1", "chr2"]
    )


def test_bigwig_carries_the_reference_sizes_and_zoom_levels(tracks_of):
    folder, _, fasta = tracks_of
    with pyBigWig.open(str(folder / "one.bw")) as track:
        assert track.isBigWig()
        assert track.chroms() == Reference(fasta).lengths
        assert track.header()["nLevels"] >= 1  # a browser zoomed out reads a summary
        # the summary over the region equals the mean of its bins
        values = [v for _, _, v in track.intervals("chr2", 5000, 7000)]
        assert track.stats("chr2", 5000, 7000, type="mean")[0] == pytest.approx(np.mean(values))


@pytest.mark.parametrize(
    ("out", "extra", "message"),
    [
        ("x.bw", [], "holds one track, and 2 features are chosen: name one with --features"),
        ("x.bw", ["--format", "bedgraph"], "names a bigwig file but --format is bedgraph"),
        (
            "x.bedGraph",
            ["--region", "chr1:10,001-10,400", "chr1:10,201-10,600"],
            "regions chr1:10,001-10,400 and chr1:10,201-10,600 overlap",
        ),
    ],
)
def test_track_requests_the_output_cannot_hold_are_refused_by_name(
    predictor, demo_reference, tmp_path, capsys, out, extra, message
):
    features = (
        predictor.feature_names[:2] if out == "x.bw" and not extra else predictor.feature_names[:1]
    )
    regions = [] if "--region" in extra else ["--region", "chr1:10,001-10,400"]
    argv = [
        "tracks",
        "--model",
        str(predictor.model_dir),
        "--reference",
        str(demo_reference / "genome.fa"),
        *regions,
        *extra,
        "--features",
        *features,
        "--out",
        str(tmp_path / out),
    ]
    assert main(argv) == 1
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1, error
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing staged
