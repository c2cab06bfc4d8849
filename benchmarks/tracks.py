"""A whole chromosome piece as tracks: bigWig against bedGraph, in time and size.

    python benchmarks/tracks.py --model results/demo/chromatin/model

Region: `--region` (chr19:1-3,119,000, the whole hg19 chr19 piece in ../shared/data) at
`--step-bp` (100) bp bins, scored once by `genobird tracks` into a folder of bedGraphs
(every feature of the model; the demo's chromatin model by default: a format benchmark,
so the model's skill on human DNA does not matter, only its bins). Then, from the same
values, in one process:

- writing: seconds to write every feature's bedGraph and bigWig (`BedGraphTrack`,
  `BigWigTrack`), and their sizes on disk;
- reading one feature's track as a browser does, zoomed out to the whole piece (the
  mean of each of 1,000 bins over the region: the bigWig's `pyBigWig.stats` against
  parsing the bedGraph with pandas and averaging) and zoomed in (`--views` (100) random
  10 kb windows: the bigWig's indexed `intervals` against parsing the bedGraph once and
  selecting each window's rows), with their ratios. A bedGraph is read whole, so its
  time grows with the file (a genome is about 1,000 times this piece); the bigWig reads
  the index and the blocks it needs.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
PIECE = REPO.parent / "shared" / "data" / "genome" / "hg19_chr19_0-3119000_softmasked.fa"
SUMMARY_BINS = 1_000  # a browser window's width in pixels, about


def bins_of(rows) -> list:
    from genobird.genome.regions import Interval

    return [Interval(chrom, int(start), int(end)) for chrom, start, end in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=REPO / "results/demo/chromatin/model")
    parser.add_argument("--reference", type=Path, default=PIECE)
    parser.add_argument("--region", default="chr19:1-3,119,000")
    parser.add_argument("--step-bp", type=int, default=100)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--views", type=int, default=100)
    args = parser.parse_args()

    import pandas as pd
    import pyBigWig

    from genobird import load_predictor
    from genobird.genome import open_reference
    from genobird.scoring.tracks import BedGraphTrack, BigWigTrack, write_tracks

    work = Path(tempfile.mkdtemp(prefix="genobird-tracks-"))
    predictor = load_predictor(args.model, device=args.device)
    started = time.perf_counter()
    files = write_tracks(
        predictor,
        [args.region],
        args.reference,
        work / "scored",
        step_bp=args.step_bp,
        progress=True,
    )
    scoring_s = time.perf_counter() - started
    tables = {
        feature: pd.read_csv(
            path, sep="\t", skiprows=1, header=None, names=["chrom", "start", "end", "value"]
        )
        for feature, path in files.items()
    }
    lengths = open_reference(args.reference).lengths
    first = next(iter(tables.values()))
    bins = bins_of(first[["chrom", "start", "end"]].itertuples(index=False))

    seconds, sizes = {}, {}
    for fmt in ("bedgraph", "bigwig"):
        folder = work / fmt
        folder.mkdir()
        started = time.perf_counter()
        for index, (feature, table) in enumerate(tables.items()):
            path = folder / f"{index}.{'bw' if fmt == 'bigwig' else 'bedGraph'}"
            track = (
                BigWigTrack(path, lengths)
                if fmt == "bigwig"
                else BedGraphTrack(path, feature, feature)
            )
            track.add(bins, table["value"].to_numpy())
            track.close()
        seconds[fmt] = time.perf_counter() - started
        sizes[fmt] = sum(path.stat().st_size for path in folder.iterdir())

    # a zoomed-out view of one feature's track: SUMMARY_BINS means over the region
    chrom, start, end = bins[0].chrom, bins[0].start, bins[-1].end
    started = time.perf_counter()
    with pyBigWig.open(str(work / "bigwig" / "0.bw")) as track:
        from_zooms = np.array(
            track.stats(chrom, start, end, type="mean", nBins=SUMMARY_BINS), dtype=float
        )
    zoom_s = time.perf_counter() - started
    started = time.perf_counter()
    table = pd.read_csv(
        work / "bedgraph" / "0.bedGraph",
        sep="\t",
        skiprows=1,
        header=None,
        names=["chrom", "start", "end", "value"],
    )
    edges = np.linspace(start, end, SUMMARY_BINS + 1)
    which = np.clip(
        np.searchsorted(edges, table["start"].to_numpy(), side="right") - 1, 0, SUMMARY_BINS - 1
    )
    sums = np.bincount(which, weights=table["value"].to_numpy(), minlength=SUMMARY_BINS)
    parsed_s = time.perf_counter() - started
    covered = np.bincount(which, minlength=SUMMARY_BINS) > 0
    # zoomed in: random 10 kb windows, as a browser showing a gene
    rng = np.random.default_rng(0)
    views = rng.integers(start, end - 10_000, size=args.views)
    started = time.perf_counter()
    with pyBigWig.open(str(work / "bigwig" / "0.bw")) as track:
        indexed = [len(track.intervals(chrom, int(a), int(a) + 10_000) or ()) for a in views]
    indexed_s = time.perf_counter() - started
    started = time.perf_counter()
    table = pd.read_csv(
        work / "bedgraph" / "0.bedGraph",
        sep="\t",
        skiprows=1,
        header=None,
        names=["chrom", "start", "end", "value"],
    )
    starts = table["start"].to_numpy()
    selected = [int(((starts >= a) & (starts < a + 10_000)).sum()) for a in views]
    selected_s = time.perf_counter() - started
    result = {
        "region": args.region,
        "step_bp": args.step_bp,
        "bins": len(bins),
        "features": len(tables),
        "scoring_and_bedgraph_s": round(scoring_s, 1),
        "write_s": {fmt: round(value, 2) for fmt, value in seconds.items()},
        "mib": {fmt: round(value / 2**20, 2) for fmt, value in sizes.items()},
        "bigwig_over_bedgraph_size": round(sizes["bigwig"] / sizes["bedgraph"], 3),
        "zoomed_out_view_s": {
            "bigwig_zooms": round(zoom_s, 4),
            "bedgraph_parsed": round(parsed_s, 4),
        },
        "bedgraph_over_bigwig_view_time": round(parsed_s / zoom_s, 2),
        "zoomed_in_views_s": {
            "bigwig_index": round(indexed_s, 4),
            "bedgraph_parsed": round(selected_s, 4),
        },
        "bedgraph_over_bigwig_zoomed_in": round(selected_s / indexed_s, 2),
        "bins_per_view": {"bigwig": int(np.median(indexed)), "bedgraph": int(np.median(selected))},
        "view_bins_with_values": int(covered.sum()),
        "nan_bins_in_bigwig_view": int(np.isnan(from_zooms).sum()),
        "bigwig_levels": pyBigWig.open(str(work / "bigwig" / "0.bw")).header()["nLevels"],
    }
    assert np.isfinite(sums).all()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
