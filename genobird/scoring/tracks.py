"""Predicted tracks for a genome browser: a fine-tuned model scored along a region, bin by
bin, one bedGraph per feature (`genobird tracks`).

Each bin of `step_bp` bases (the last one may be shorter) is scored as `score --bed`
scores a region: the model's window centred on the bin. A bin is never wider than that
window (`step_for`), so every base of a region is read by the model: a wider step is
refused, with the reason. A bin whose window is more than half N (an assembly gap, a
contig's end: `inputs.MAX_N_FRACTION`) gets no value, so a browser shows nothing there
rather than a confident score of padding. The files go to a folder, one per feature
(`<feature>.bedGraph`, the name made safe for a file system), each with a track line
that names the feature, so IGV or the UCSC browser show them beside the real peaks. The
folder appears only when every track is complete. Regions longer than MAX_TRACK_BP, or
outside the reference, are refused by name before anything is scored.
"""

from __future__ import annotations

import contextlib
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
            raise RegionError(f"region {text!r} is {region.width:,} bp, longer than the "
                              f"{MAX_TRACK_BP:,} bp a track request may cover: split it, or "
                              "score a BED of its bins with `genobird score`")  # fmt: skip
        regions.append(Interval(chrom, region.start, region.end))
    return regions


def bins(region, step_bp: int) -> list:
    """The region (an Interval) cut into bins of `step_bp` (the last one the rest)."""
    from genobird.genome.regions import Interval

    return [Interval(region.chrom, start, min(start + step_bp, region.end))
            for start in range(region.start, region.end, step_bp)]  # fmt: skip


def track_file_names(features: list[str]) -> dict[str, str]:
    """Each feature's file name: its name with anything but letters, digits, '.', '-'
    and '_' made '_' ('E068|H3K4me3' -> 'E068_H3K4me3.bedGraph'); two names that meet
    are told apart by their place in the feature list."""
    names = {}
    for index, feature in enumerate(features):
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", feature).strip("._") or "feature"
        if f"{stem}.bedGraph" in names.values():
            stem = f"{stem}_{index}"
        names[feature] = f"{stem}.bedGraph"
    return names


def step_for(window_bp: int, step_bp: int | None = None) -> int:
    """The bin of a track: `step_bp`, or DEFAULT_STEP_BP, or the model's window where that
    is narrower. A bin wider than the window would leave bases no window reads (a 200 bp
    bin of a 101 bp model: half of it), so a wider `step_bp` is refused."""
    if step_bp is None:
        return min(DEFAULT_STEP_BP, window_bp)
    if step_bp < 1:
        raise ConfigError(f"--step-bp must be at least 1, got {step_bp}")
    if step_bp > window_bp:
        raise ConfigError(f"--step-bp {step_bp} is wider than the model's {window_bp} bp "
                          f"window: {step_bp - window_bp} bp of each bin would be read by no "
                          f"window; give at most {window_bp}")  # fmt: skip
    return step_bp


def write_tracks(predictor, region_texts: list[str], reference, out: Path,
                 features: list[str] | None = None, step_bp: int | None = None,
                 progress: bool = False) -> dict[str, Path]:  # fmt: skip
    """Score every bin of the regions and write OUT/<feature>.bedGraph for each feature
    (all, or `features`), no value where a bin's window is mostly N; returns each
    feature's file."""
    import numpy as np

    from genobird.genome import open_reference
    from genobird.scoring.tables import select_features

    step_bp = step_for(predictor.input_length_bp, step_bp)
    out = Path(out)
    if out.exists():
        raise ConfigError(f"--out {out} exists; give a new folder for the tracks")
    chosen = select_features(predictor, features)
    columns = [predictor.feature_names.index(name) for name in chosen]
    reference = open_reference(reference)
    regions = checked_regions(region_texts, reference)
    names = track_file_names(chosen)
    staging = staging_folder(out)
    try:
        with contextlib.ExitStack() as files:
            handles = {feature: files.enter_context(open(staging / names[feature], "w"))
                       for feature in chosen}  # fmt: skip
            for feature, handle in handles.items():
                handle.write(f'track type=bedGraph name="{feature}" description="genobird '
                             f'{predictor.model_dir.name}: {feature}, {step_bp} bp bins" '
                             "visibility=full autoScale=on\n")  # fmt: skip
            all_bins = [b for region in regions for b in bins(region, step_bp)]
            bar = tqdm(total=len(all_bins), unit="bins", desc="tracks", disable=not progress)
            for first in range(0, len(all_bins), CHUNK_BINS):
                chunk = all_bins[first : first + CHUNK_BINS]
                probabilities = predictor.score_regions(chunk, reference)[0]
                scored = ~np.isnan(probabilities).any(axis=1)  # gaps: no value
                for feature, column in zip(chosen, columns, strict=True):
                    handles[feature].writelines(
                        f"{b.chrom}\t{b.start}\t{b.end}\t{value:.6g}\n"
                        for b, value, kept in zip(
                            chunk, probabilities[:, column], scored, strict=True
                        )
                        if kept
                    )
                bar.update(len(chunk))
            bar.close()
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {feature: out / names[feature] for feature in chosen}
