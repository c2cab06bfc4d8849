"""In-silico mutagenesis (`genobird ism`): every base of a region changed to each other
base, and the effect on every feature of a predictor, as DeepSEA and Selene users expect.

For each record the input window is cut (BED: centred on the interval; FASTA: the record
fitted as `score` fits it), and every position of its central `window` bp is mutated to
each of the three other bases (N positions to all four). The effect of a mutation is
alt - ref of the feature's probability, or logit(alt) - logit(ref) with
score="log_odds"; the reference base's own entry is 0. Mutants are scored in batches
through the predictor, so the result equals scoring each mutated sequence on its own.

HDF5 output, one row per record:
    effects      float32 [R, W, 4, F]   bases in A, C, G, T order
    reference    float32 [R, F]         probabilities of the unmutated window
    sequence     S{W} [R]               the reference bases of the mutated window
    name S [R], chrom S [R], start int64 [R]   first mutated base (0-based; FASTA: in
                                               the record, chrom = record name)
    positions    int64 [R, W]           the coordinate of each mutated base
    feature_names [F] (UTF-8);  attrs: score, window, bases
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
from tqdm import tqdm

from genobird.errors import ConfigError, InputError
from genobird.fileio import atomic_path, utf8_names
from genobird.scoring.predict import logit
from genobird.scoring.source import WindowPolicy, records
from genobird.scoring.tables import H5Output, select_features

BASES = "ACGT"
SCORE_LABELS = {"diff": "alt - ref", "log_odds": "logit(alt) - logit(ref)"}
SCORES = tuple(SCORE_LABELS)


@dataclass
class Region:
    """One record to mutate: its input window and where the window sits."""

    name: str
    chrom: str
    window_start: int  # of the input window: genome (BED) or record (FASTA) coordinate
    sequence: str  # the predictor's whole input window


@dataclass
class IsmResult:
    region: Region
    first: int  # offset of the first mutated base in the input window
    reference: np.ndarray  # float32 [F]
    effects: np.ndarray  # float32 [W, 4, F]

    @property
    def mutated_sequence(self) -> str:
        return self.region.sequence[self.first : self.first + len(self.effects)]

    @property
    def start(self) -> int:
        return self.region.window_start + self.first


def mutated_span(input_bp: int, window: int) -> tuple[int, int]:
    """(first, length) of the central `window` bp of an input of `input_bp`."""
    if window < 1:
        raise ConfigError(f"--window must be at least 1 bp, got {window}")
    length = min(window, input_bp)
    return (input_bp - length) // 2, length


def mutants(sequence: str, first: int, length: int) -> Iterator[tuple[int, int, str]]:
    """(position in the span, base index, mutated sequence) for every single-base change."""
    for offset in range(length):
        position = first + offset
        for index, base in enumerate(BASES):
            if sequence[position] != base:
                yield offset, index, sequence[:position] + base + sequence[position + 1 :]


def mutagenesis(
    predictor, region: Region, window: int, score: str = "diff", features: list[int] | None = None
) -> IsmResult:
    """Effects of every single-base change in the central `window` bp of `region`."""
    if score not in SCORES:
        raise ConfigError(f"score must be one of {SCORES}, got {score!r}")
    first, length = mutated_span(len(region.sequence), window)
    columns = features if features is not None else slice(None)
    reference = predictor.predict([region.sequence])[0][columns]
    changes = mutants(region.sequence, first, length)  # made as they are scored
    effects = np.zeros((length, len(BASES), len(reference)), dtype=np.float32)
    batch = max(predictor.batch_size * 16, 64)  # bounded memory, full batches
    while part := list(itertools.islice(changes, batch)):
        alt = predictor.predict([sequence for _, _, sequence in part])[:, columns]
        offsets = np.array([offset for offset, _, _ in part])
        bases = np.array([index for _, index, _ in part])
        effects[offsets, bases] = _effect(alt, reference, score)
    return IsmResult(region, first, reference.astype(np.float32), effects)


def _effect(alt: np.ndarray, reference: np.ndarray, score: str) -> np.ndarray:
    if score == "log_odds":
        return logit(alt) - logit(reference[None, :])
    return alt.astype(np.float64) - reference[None, :]


# ------------------------------------------------------------------ inputs
def ism_regions(kind: str, path, input_bp: int, problems: list, reference=None):
    """The records to mutate, read by the record source (scoring.source) as `genobird
    score` reads them: a FASTA record fitted to the input window, a BED region's window
    centred on it on the genome's + strand (positions and bases as the reference's); a
    window more than half N is set aside in `problems`."""
    policy = WindowPolicy(input_bp, strand="genome")
    for record in records(kind, path, policy, problems, reference):
        if kind == "fasta":
            yield Region(record.name, record.name, record.offset, record.sequence)
            continue
        region = record.region
        name = region.name or f"{region.chrom}:{region.start}-{region.end}"
        yield Region(name, region.chrom, record.window.start, record.sequence)


# ------------------------------------------------------------------ output
class IsmWriter:
    """Appends one record at a time to the HDF5 file (renamed into place at the end)."""

    def __init__(self, path: Path, feature_names: list[str], window: int, score: str):
        self._output = H5Output(path)
        self._output.put("feature_names", utf8_names(feature_names))
        self._output.attrs.update(score=score, window=window, bases=BASES)
        self.path, self.features, self.window, self.rows = path, len(feature_names), window, 0

    def write(self, result: IsmResult) -> None:
        self._append("effects", result.effects[None], np.float32)
        self._append("reference", result.reference[None], np.float32)
        self._append("sequence", np.array([result.mutated_sequence], dtype="S"), f"S{self.window}")
        for name, value in (("name", result.region.name), ("chrom", result.region.chrom)):
            self._append(name, np.array([value], dtype=object), h5py.string_dtype())
        self._append("start", np.array([result.start], dtype=np.int64), np.int64)
        positions = result.start + np.arange(len(result.effects), dtype=np.int64)
        self._append("positions", positions[None], np.int64)
        self.rows += 1

    def _append(self, name: str, values: np.ndarray, dtype) -> None:
        # one record per chunk: h5py's own choice (256 records) made a file of a few
        # records 300x its data
        self._output.append(name, values, dtype, rows_per_chunk=1)

    def close(self, ok: bool) -> None:
        self._output.close(ok)


def run_ism(
    predictor,
    regions: Iterator[Region],
    out: Path,
    window: int,
    score: str = "diff",
    features: list[str] | None = None,
    progress: bool = False,
) -> tuple[int, IsmResult]:
    """ISM of every region into `out`, one record in memory at a time; returns the number
    of records and the first one's result (for the plot)."""
    names = select_features(predictor, features)
    columns = [predictor.feature_names.index(name) for name in names]
    _, length = mutated_span(predictor.input_length_bp, window)
    writer = IsmWriter(out, names, length, score)
    first = None
    try:
        for region in tqdm(regions, unit="regions", desc="ism", disable=not progress):
            result = mutagenesis(predictor, region, window, score, columns)
            writer.write(result)
            first = first or result
    finally:
        writer.close(ok=first is not None)
    if first is None:
        raise InputError("no record could be mutated (the input has no usable record)")
    return writer.rows, first


# ------------------------------------------------------------------ plot
def plot_ism(
    result: IsmResult, feature: int, feature_name: str, path: Path, score: str = "diff"
) -> Path:
    """Write `ism_figure` to `path`, in the format its suffix names (png, pdf, svg)."""
    from matplotlib import pyplot as plt

    figure = ism_figure(result, feature, feature_name, score)
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=120, format=Path(path).suffix.lstrip(".") or "png")
    plt.close(figure)
    return Path(path)


# the letters' colours, as sequence logos draw them (A green, C blue, G orange, T red)
LOGO_COLOURS = {"A": "#109648", "C": "#255C99", "G": "#F7B32B", "T": "#D62839"}


def reference_importance(result: IsmResult, feature: int) -> np.ndarray:
    """Each mutated position's importance for one feature: minus the mean effect of
    changing its reference base to each of the three others (the reference's own entry
    is 0), so a base whose loss lowers the prediction stands tall; NaN at an N, which has
    no reference base."""
    effects = result.effects[:, :, feature].astype(np.float64)  # [W, 4]
    importance = -effects.sum(axis=1) / 3
    unknown = np.array([base not in BASES for base in result.mutated_sequence.upper()])
    importance[unknown] = np.nan
    return importance


def draw_logo(axis, sequence: str, heights: np.ndarray, first_position: int) -> None:
    """The sequence as letters, each as wide as a base and as tall as its height: above
    the axis where the height is positive, below it (upright) where negative. Each
    letter is one patch labelled with its base."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.patches import PathPatch
    from matplotlib.textpath import TextPath
    from matplotlib.transforms import Affine2D

    font = FontProperties(family="DejaVu Sans", weight="bold")
    shapes = {base: TextPath((0, 0), base, size=1, prop=font) for base in LOGO_COLOURS}
    for offset, (base, height) in enumerate(zip(sequence.upper(), heights, strict=True)):
        if base not in shapes or not np.isfinite(height) or height == 0:
            continue
        shape = shapes[base]
        box = shape.get_extents()
        place = (
            Affine2D()
            .translate(-box.x0, -box.y0)
            .scale(0.9 / box.width, abs(height) / box.height)
            .translate(first_position + offset - 0.45, min(height, 0.0))
        )
        axis.add_patch(
            PathPatch(
                place.transform_path(shape),
                facecolor=LOGO_COLOURS[base],
                edgecolor="none",
                label=base,
            )
        )
    finite = heights[np.isfinite(heights)]
    low, high = (min(0.0, finite.min()), max(0.0, finite.max())) if finite.size else (0, 1)
    pad = 0.05 * ((high - low) or 1.0)
    axis.set_ylim(low - pad, high + pad)
    axis.axhline(0, color="#999", linewidth=0.5)


def ism_figure(result: IsmResult, feature: int, feature_name: str, score: str = "diff"):
    """A sequence logo of the reference bases, each scaled by its importance
    (`reference_importance`), above the heatmap of positions x bases for one feature.
    The position axis is labelled at whole bases, as many as fit side by side at the
    figure's width."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.ticker import MaxNLocator

    effects = result.effects[:, :, feature].T  # [4, W]
    limit = float(np.abs(effects).max()) or 1.0
    width = max(6.0, min(24.0, len(result.effects) / 25))
    figure, (logo, heat) = plt.subplots(
        2, 1, figsize=(width, 4), sharex=True, gridspec_kw={"height_ratios": [1, 1.4]}
    )
    positions = np.arange(result.start, result.start + len(result.effects))
    draw_logo(logo, result.mutated_sequence, reference_importance(result, feature), result.start)
    logo.set_ylabel("importance")
    # wrapped to the logo's width (three quarters of the figure's, about 0.6 em a
    # character): one long line was cut off at the figure's edge
    title = (
        f"{result.region.name}: {feature_name} (a base's importance: minus the mean "
        "effect of changing it)"
    )
    logo.set_title(textwrap.fill(title, width=int(width * 72 * 0.75 / (0.6 * 9))), fontsize=9)
    image = heat.imshow(
        effects,
        aspect="auto",
        cmap="RdBu_r",
        vmin=-limit,
        vmax=limit,
        extent=(positions[0] - 0.5, positions[-1] + 0.5, 3.5, -0.5),
        interpolation="nearest",
    )
    heat.set_yticks(range(4), list(BASES))
    # whole positions only, about one label per inch of a coordinate's digits at 8 pt
    digits = len(f"{positions[-1]:,}")
    heat.xaxis.set_major_locator(
        MaxNLocator(nbins=max(2, int(width * 10 / digits)), integer=True, min_n_ticks=2)
    )
    heat.xaxis.set_major_formatter(lambda value, _: f"{round(value):,}")
    heat.tick_params(axis="x", labelsize=8)
    heat.set_xlabel(f"{result.region.chrom} position (0-based)")
    figure.colorbar(image, ax=heat, label=SCORE_LABELS[score], orientation="horizontal", pad=0.25)
    figure.tight_layout()
    return figure
