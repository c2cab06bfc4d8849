"""Predicted tracks for a genome browser: a fine-tuned model scored along a region, bin by
bin, one track per feature (`genobird tracks`), as bedGraph or bigWig.

Each bin of `step_bp` bases (the last one may be shorter) is scored as `score --bed`
scores a region: the model's window centred on the bin. A bin is never wider than that
window (`step_for`), so every base of a region is read by the model: a wider step is
refused, with the reason. A bin whose window is more than half N (an assembly gap, a
contig's end: `inputs.MAX_N_FRACTION`) gets no value, so a browser shows nothing there
rather than a confident score of padding.

The format follows the output's name: `x.bw` (or .bigWig) is one bigWig, `x.bedGraph`
(or .bg) one bedGraph, each of one feature; any other name is a folder of one file per
feature (`<feature>.bedGraph`, or `.bw` with `--format bigwig`, the name made safe for a
file system). A bedGraph has a track line that names the feature, so IGV or the UCSC
browser show it beside the real peaks; a bigWig (through pyBigWig) carries the
reference's contig sizes and zoom levels, so a browser reads it indexed, zoomed out and
over HTTP. Bins are written in the reference's contig order; regions that overlap are
refused (a track has one value per base). Outputs appear only when every track is
complete. Regions longer than MAX_TRACK_BP, or outside the reference, are refused by
name before anything is scored.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import shutil
from pathlib import Path

from tqdm import tqdm

from genobird.errors import ConfigError, RegionError
from genobird.fileio import staging_folder

# genobird.genome (pyfaidx, Biopython) is imported where it is used: `genobird --help`
# reads MAX_TRACK_BP from here and imports nothing heavy

# the longest region one call scores: 10 Mb is 50,000 bins of 200 bp (about 40 minutes of
# an 8 kb model on 2 cores); a whole genome is a BED for `genobird score`
MAX_TRACK_BP = 10_000_000
# the bin a track is cut into unless asked: a chromatin data set's (the model's window
# where that is narrower)
DEFAULT_STEP_BP = 200
# bins scored per chunk: the memory of one chunk's windows and scores
CHUNK_BINS = 1024


def checked_regions(texts: list[str], reference) -> list:
    """The regions ('chr:start-end', 1-based inclusive) on the reference, each refused by
    name when its contig is not there, it runs past the contig's end, or it is longer
    than MAX_TRACK_BP."""
    from genobird.genome.regions import Interval, parse_region

    regions = []
    for text in texts:
        region = parse_region(text)
        chrom = reference.resolve(region.chrom)  # a ContigError names close contigs
        length = reference.length(chrom)
        if region.end > length:
            raise RegionError(f"region {text!r} runs past the end of {chrom} ({length:,} bp)")
        if region.width > MAX_TRACK_BP:
            raise RegionError(
                f"region {text!r} is {region.width:,} bp, longer than the "
                f"{MAX_TRACK_BP:,} bp a track request may cover: split it, or "
                "score a BED of its bins with `genobird score`"
            )
        regions.append(Interval(chrom, region.start, region.end))
    return regions


def bins(region, step_bp: int) -> list:
    """The region (an Interval) cut into bins of `step_bp` (the last one the rest)."""
    from genobird.genome.regions import Interval

    return [
        Interval(region.chrom, start, min(start + step_bp, region.end))
        for start in range(region.start, region.end, step_bp)
    ]


def step_for(window_bp: int, step_bp: int | None = None) -> int:
    """The bin of a track: `step_bp`, or DEFAULT_STEP_BP, or the model's window where that
    is narrower. A bin wider than the window would leave bases no window reads (a 200 bp
    bin of a 101 bp model: half of it), so a wider `step_bp` is refused."""
    if step_bp is None:
        return min(DEFAULT_STEP_BP, window_bp)
    if step_bp < 1:
        raise ConfigError(f"--step-bp must be at least 1, got {step_bp}")
    if step_bp > window_bp:
        raise ConfigError(
            f"--step-bp {step_bp} is wider than the model's {window_bp} bp "
            f"window: {step_bp - window_bp} bp of each bin would be read by no "
            f"window; give at most {window_bp}"
        )
    return step_bp


# --------------------------------------------------------------------------- formats
# a track format: the suffixes that name it
TRACK_FORMATS = {
    "bedgraph": (".bedGraph", ".bedgraph", ".bg"),
    "bigwig": (".bw", ".bigWig", ".bigwig"),
}
# bigWig zoom levels (pyBigWig's addHeader): each one summarises bins 4x wider than the
# one below, so a browser zoomed out to a chromosome reads a summary, not every bin
BIGWIG_ZOOMS = 10


def named_format(out: Path) -> str | None:
    """The track format `out`'s suffix names (None: a folder of tracks)."""
    return next(
        (fmt for fmt, suffixes in TRACK_FORMATS.items() if Path(out).suffix in suffixes), None
    )


def track_outputs(out: Path, fmt: str | None, features: list[str]) -> tuple[str, dict]:
    """(the format, each feature's file): a file named for a format holds one feature's
    track; any other name is a folder of one file per feature. Refused by name before
    anything is scored: an existing output, a file for several features, a --format that
    contradicts the name."""
    out = Path(out)
    named = named_format(out)
    if out.exists():
        raise ConfigError(
            f"--out {out} exists; give a new {'file' if named else 'folder'} for the tracks"
        )
    if named is None:
        fmt = fmt or "bedgraph"
        return fmt, {
            feature: out / name
            for feature, name in track_file_names(features, TRACK_FORMATS[fmt][0]).items()
        }
    if fmt is not None and fmt != named:
        raise ConfigError(
            f"--out {out} names a {named} file but --format is {fmt}; let the "
            "name decide (leave --format out) or rename it"
        )
    if len(features) != 1:
        raise ConfigError(
            f"--out {out} holds one track, and {len(features):,} features are "
            f"chosen: name one with --features, or give a folder (--out DIR "
            f"--format {named}) for one file per feature"
        )
    return named, {features[0]: out}


def track_file_names(features: list[str], suffix: str = ".bedGraph") -> dict[str, str]:
    """Each feature's file name: its name with anything but letters, digits, '.', '-'
    and '_' made '_' ('E068|H3K4me3' -> 'E068_H3K4me3.bedGraph'); two names that meet
    are told apart by their place in the feature list."""
    names = {}
    for index, feature in enumerate(features):
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", feature).strip("._") or "feature"
        if f"{stem}{suffix}" in names.values():
            stem = f"{stem}_{index}"
        names[feature] = f"{stem}{suffix}"
    return names


def sorted_regions(regions: list, reference) -> list:
    """The regions in the reference's contig order, then by start (a bigWig's entries,
    and a bedGraph a browser indexes, must be sorted); two that overlap are refused."""
    order = {name: index for index, name in enumerate(reference.lengths)}
    regions = sorted(regions, key=lambda region: (order[region.chrom], region.start))
    for before, after in itertools.pairwise(regions):
        if before.chrom == after.chrom and after.start < before.end:
            raise RegionError(
                f"regions {before.chrom}:{before.start + 1:,}-{before.end:,} and "
                f"{after.chrom}:{after.start + 1:,}-{after.end:,} overlap; a track holds one "
                "value per base: give them as one region"
            )
    return regions


class BedGraphTrack:
    """One feature's bedGraph: a track line naming it, then `chrom start end value`."""

    def __init__(self, path: Path, feature: str, description: str):
        self.handle = open(path, "w")  # noqa: SIM115 (closed by close(), as a bigWig is)
        self.handle.write(
            f'track type=bedGraph name="{feature}" description="{description}" '
            "visibility=full autoScale=on\n"
        )

    def add(self, bins: list, values) -> None:
        self.handle.writelines(
            f"{b.chrom}\t{b.start}\t{b.end}\t{value:.6g}\n"
            for b, value in zip(bins, values, strict=True)
        )

    def close(self) -> None:
        self.handle.close()


class BigWigTrack:
    """One feature's bigWig: the reference's contig sizes in its header, bins added in
    the reference's order, zoom levels built when it is closed."""

    def __init__(self, path: Path, lengths: dict[str, int]):
        import pyBigWig

        self.handle = pyBigWig.open(str(path), "w")
        self.handle.addHeader(list(lengths.items()), maxZooms=BIGWIG_ZOOMS)

    def add(self, bins: list, values) -> None:
        if bins:
            self.handle.addEntries(
                [b.chrom for b in bins],
                [b.start for b in bins],
                ends=[b.end for b in bins],
                values=[float(value) for value in values],
            )

    def close(self) -> None:
        self.handle.close()


# --------------------------------------------------------------------------- writing
def write_tracks(
    predictor,
    region_texts: list[str],
    reference,
    out: Path,
    features: list[str] | None = None,
    step_bp: int | None = None,
    progress: bool = False,
    fmt: str | None = None,
) -> dict[str, Path]:
    """Score every bin of the regions and write each feature's track (all features, or
    `features`) in the format `out` names (`track_outputs`), no value where a bin's
    window is mostly N; returns each feature's file."""
    import numpy as np

    from genobird.genome import open_reference
    from genobird.scoring.tables import select_features

    step_bp = step_for(predictor.input_length_bp, step_bp)
    out = Path(out)
    chosen = select_features(predictor, features)
    fmt, paths = track_outputs(out, fmt, chosen)
    columns = [predictor.feature_names.index(name) for name in chosen]
    reference = open_reference(reference)
    regions = sorted_regions(checked_regions(region_texts, reference), reference)
    folder = named_format(out) is None
    staging = staging_folder(out)  # a folder's tracks, or the one file, beside `out`
    staged = {
        feature: staging / (path.name if folder else out.name) for feature, path in paths.items()
    }
    tracks = {}
    try:
        for feature, path in staged.items():
            tracks[feature] = (
                BigWigTrack(path, reference.lengths)
                if fmt == "bigwig"
                else BedGraphTrack(
                    path,
                    feature,
                    f"genobird {predictor.model_dir.name}: {feature}, {step_bp} bp bins",
                )
            )
        all_bins = [b for region in regions for b in bins(region, step_bp)]
        bar = tqdm(total=len(all_bins), unit="bins", desc="tracks", disable=not progress)
        from genobird.scoring.windows import chunked  # torch: not at `tracks --help`

        for chunk, _ in chunked(all_bins, CHUNK_BINS):
            probabilities = predictor.score_regions(chunk, reference)[0]
            scored = ~np.isnan(probabilities).any(axis=1)  # gaps: no value
            kept = [b for b, keep in zip(chunk, scored, strict=True) if keep]
            for feature, column in zip(chosen, columns, strict=True):
                tracks[feature].add(kept, probabilities[scored, column])
            bar.update(len(chunk))
        bar.close()
        for track in tracks.values():
            track.close()
        if folder:
            staging.rename(out)
        else:
            staged[chosen[0]].rename(out)
            staging.rmdir()
    except BaseException:
        for track in tracks.values():
            with contextlib.suppress(Exception):
                track.close()
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return paths
