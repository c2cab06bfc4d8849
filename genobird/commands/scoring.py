"""`genobird score|likelihood|ism`: fine-tuned and pretrained models applied to FASTA,
BED and VCF."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from genobird.commands.common import (
    EXIT_FAILURE,
    EXIT_OK,
    report_rejected,
    subcommand,
)
from genobird.commands.options import add_shared
from genobird.errors import ConfigError, GenobirdError
from genobird.scoring.options import BATCH_SIZES, STRANDS, VARIANT_WINDOW_BP

log = logging.getLogger("genobird")


def cmd_score(args: argparse.Namespace) -> int:
    from genobird.scoring.tables import write_scores

    kind, source = _score_source(args, ("fasta", "bed", "vcf"))
    predictor = _load_predictor(args)
    summary = write_scores(
        predictor,
        kind,
        source,
        args.out,
        args.format,
        args.features,
        args.reference,
        args.tiles,
        progress=not args.quiet,
        chromosomes=args.chromosomes,
    )
    return _finish_scoring(summary, kind, source, args)


def cmd_likelihood(args: argparse.Namespace) -> int:
    from genobird.scoring.likelihood import LikelihoodScorer
    from genobird.scoring.options import ScoringOptions
    from genobird.scoring.tables import write_scores
    from genobird.scoring.variant_effects import VariantEffectScorer

    kind, source = _score_source(args, ("fasta", "bed", "vcf"))
    options = ScoringOptions.from_args(args)
    if kind == "vcf":
        scorer = VariantEffectScorer(args.model, options, window_bp=args.window_bp)
    else:
        scorer = LikelihoodScorer(args.model, options, stride=args.stride)
    summary = write_scores(
        scorer,
        kind,
        source,
        args.out,
        args.format,
        None,
        args.reference,
        progress=not args.quiet,
        chromosomes=args.chromosomes,
    )
    return _finish_scoring(summary, kind, source, args)


def _score_source(args: argparse.Namespace, kinds: tuple[str, ...]) -> tuple[str, Path]:
    """The input kind and file of a scoring command (score, likelihood, embed, ism),
    checked against its other options (`scoring.windows.check_source`)."""
    from genobird.scoring.windows import check_source

    kind, source = next((k, getattr(args, k)) for k in kinds if getattr(args, k))
    check_source(kind, args.reference, getattr(args, "chromosomes", None))
    return kind, source


def _finish_scoring(summary, kind: str, source: Path, args: argparse.Namespace) -> int:
    """Say what a scoring command wrote; exit 1 when nothing was scored, or with --strict
    when anything was rejected."""
    records = "variants" if kind == "vcf" else "records"
    print(
        f"scored {summary.scored:,} {records}, rejected {summary.rejected:,}; wrote "
        + ", ".join(str(p) for p in summary.outputs)
    )
    if summary.scored == 0:
        reason = (
            f"all {summary.rejected:,} {records} were rejected (reasons in {args.out}.rejected.tsv)"
            if summary.rejected
            else f"{source} has no {kind.upper()} records"
        )
        print(f"genobird: error: nothing could be scored: {reason}", file=sys.stderr)
        return EXIT_FAILURE
    if args.strict and summary.rejected:
        print(
            f"genobird: error: --strict and {summary.rejected} {records} rejected", file=sys.stderr
        )
        return EXIT_FAILURE
    return EXIT_OK


def cmd_tracks(args: argparse.Namespace) -> int:
    from genobird.scoring.tracks import TRACK_FORMATS, step_for, write_tracks

    predictor = _load_predictor(args)
    step_bp = step_for(predictor.input_length_bp, args.step_bp)
    files = write_tracks(
        predictor,
        args.region,
        args.reference,
        args.out,
        args.features,
        step_bp,
        progress=not args.quiet,
        fmt=args.format,
    )
    kind = (
        "bigWig"
        if files and next(iter(files.values())).suffix in TRACK_FORMATS["bigwig"]
        else "bedGraph"
    )
    print(
        f"wrote {len(files):,} {kind} track{'s' if len(files) != 1 else ''} ({step_bp} bp "
        f"bins) to {args.out}"
    )
    return EXIT_OK


def cmd_embed(args: argparse.Namespace) -> int:
    from genobird.scoring.embed import Embedder, write_embeddings
    from genobird.scoring.options import ScoringOptions

    kind, source = _score_source(args, ("fasta", "bed", "vcf"))
    embedder = Embedder(
        args.model, ScoringOptions.from_args(args), layer=args.layer, mean_last=args.mean_last
    )
    summary = write_embeddings(
        embedder,
        kind,
        source,
        args.out,
        args.level,
        args.pooling,
        args.reference,
        args.window_bp,
        progress=not args.quiet,
    )
    print(
        f"embedded {summary.embedded:,} records ({args.level}), rejected "
        f"{summary.rejected:,}; wrote {', '.join(map(str, summary.outputs))}"
    )
    return EXIT_OK


def cmd_ism(args: argparse.Namespace) -> int:
    from genobird.scoring.mutagenesis import ism_regions, plot_ism, run_ism
    from genobird.scoring.tables import write_rejected

    _score_source(args, ("fasta", "bed"))
    check_ism_outputs(args.out, args.plot)  # before any model is loaded or record mutated
    predictor = _load_predictor(args)
    features = args.features or predictor.feature_names
    plotted = args.feature or features[0]
    if args.plot and plotted not in features:
        raise GenobirdError(f"--feature {plotted!r} is not among the features mutated")
    problems: list = []
    kind, source = ("bed", args.bed) if args.bed else ("fasta", args.fasta)
    regions = ism_regions(kind, source, predictor.input_length_bp, problems, args.reference)
    try:
        count, first = run_ism(
            predictor,
            regions,
            args.out,
            args.window_bp,
            args.score,
            args.features,
            progress=not args.quiet,
        )
    finally:  # the skipped records explain an input where nothing could be mutated
        report_rejected(problems)
        if problems:  # beside the output, as score, likelihood and embed keep them
            write_rejected(args.out, problems)
    print(
        f"mutated {count:,} records x {len(first.effects):,} bp x 3 bases "
        f"({len(features):,} features); {len(problems)} records skipped; wrote {args.out}"
    )
    if args.plot:
        plot_ism(first, features.index(plotted), plotted, args.plot, args.score)
        print(f"wrote {args.plot} ({plotted}, {first.region.name})")
    return EXIT_OK


# the figure formats `ism --plot` writes, by the name's suffix (matplotlib's)
PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def check_ism_outputs(out: Path, plot: Path | None) -> None:
    """`ism` writes HDF5 to --out and a figure to --plot, each in the format its name says."""
    from genobird.scoring.tables import H5_SUFFIXES

    if Path(out).suffix.lower() not in H5_SUFFIXES:
        raise ConfigError(
            f"--out {out}: ism writes HDF5 (every base x 3 changes x features); "
            f"name it .h5, e.g. {Path(out).with_suffix('.h5')}"
        )
    if plot is not None and Path(plot).suffix.lower() not in PLOT_SUFFIXES:
        raise ConfigError(
            f"--plot {plot}: name the figure {', '.join(PLOT_SUFFIXES)}, e.g. "
            f"{Path(plot).with_suffix('.png')}"
        )


def add_inputs(sub, **kinds: str) -> None:
    """The records a command reads, one of FASTA, BED or VCF (`kinds`: each one's help),
    and the --reference that BED and VCF need."""
    inputs = sub.add_mutually_exclusive_group(required=True)
    for kind, text in kinds.items():
        inputs.add_argument(f"--{kind}", type=Path, help=text)
    needing = " and ".join(f"--{kind}" for kind in kinds if kind != "fasta")
    add_shared(sub, "reference", reference=f"genome FASTA, or several read as one (for {needing})")


def add_score(commands) -> None:
    sub = subcommand(
        commands,
        "score",
        "Score FASTA records, BED regions or VCF variants with a fine-tuned model; "
        "unscorable records go to OUT.rejected.tsv. Exit 1 when nothing was scored, or "
        "with --strict when anything was rejected.",
        cmd_score,
    )
    add_shared(sub, "model")
    add_inputs(
        sub,
        fasta="sequences to score",
        bed="regions (centred, resized to the window)",
        vcf="variants (ref and alt windows)",
    )
    add_shared(
        sub,
        "chromosomes",
        "out",
        "format",
        "features",
        chromosomes="only the BED regions or variants on these chromosomes",
        features="only these feature columns",
    )
    sub.add_argument("--tiles", action="store_true", help="score long FASTA records in tiles")
    _add_predictor_options(sub)
    add_shared(sub, "strict")


def add_tracks(commands) -> None:
    from genobird.scoring.tracks import MAX_TRACK_BP, TRACK_FORMATS

    sub = subcommand(
        commands,
        "tracks",
        "Score a region bin by bin with a fine-tuned model and write one track per "
        "feature, bedGraph or bigWig, for a genome browser (IGV, UCSC) beside the real "
        "peaks.",
        cmd_tracks,
    )
    add_shared(sub, "model")
    sub.add_argument(
        "--region",
        nargs="+",
        required=True,
        metavar="CHROM:START-END",
        help=f"regions to score, 1-based inclusive as genome browsers show "
        f"them, each at most {MAX_TRACK_BP:,} bp",
    )
    add_shared(
        sub,
        "reference",
        "out",
        "features",
        reference={"required": True},
        out="a new file for one feature's track, in the format its name says (x.bw or "
        "x.bigWig: bigWig; x.bedGraph or x.bg: bedGraph), or a new folder of one file per "
        "feature (OUT/<feature>.bedGraph, or .bw with --format bigwig)",
    )
    sub.add_argument(
        "--format",
        choices=tuple(TRACK_FORMATS),
        help="the tracks' format (default: what --out's name says; a folder's: bedgraph)",
    )
    sub.add_argument(
        "--step-bp",
        type=int,
        help="bin size, at most the model's window; each bin is scored with the "
        "model's window centred on it (default: 200, the chromatin data sets' "
        "bin, or the model's window where that is narrower)",
    )
    _add_predictor_options(sub)


def add_embed(commands) -> None:
    sub = subcommand(
        commands,
        "embed",
        "Embeddings of FASTA records, BED regions or VCF alleles from any layer of a "
        "genobird model (pretrained, fine-tuned or converted): pooled, per BPE piece, or "
        "per base (each piece's vector over its bases); HDF5, written as it goes.",
        cmd_embed,
    )
    add_shared(sub, "model", model="a genobird model directory")
    add_inputs(
        sub,
        fasta="sequences, each whole",
        bed="regions, as given on their own strand",
        vcf="variants: REF and ALT windows of --window-bp",
    )
    add_shared(sub, "out", out="HDF5 to write (.h5)")
    what = sub.add_argument_group("what is embedded")
    what.add_argument(
        "--level",
        choices=["pooled", "token", "base"],
        default="pooled",
        help="one vector per record, per BPE piece (with its bases), or per "
        "base (default: %(default)s)",
    )
    what.add_argument(
        "--pooling",
        choices=["mean", "cls"],
        default="mean",
        help="pooled: the mean of the pieces' vectors, or [CLS]'s",
    )
    what.add_argument(
        "--layer",
        type=int,
        default=-1,
        help="0: the embeddings, 1..L: after that layer, -1: the last",
    )
    what.add_argument(
        "--mean-last",
        type=int,
        default=1,
        metavar="K",
        help="the mean of the last K layers (default: 1, the --layer alone)",
    )
    add_shared(
        what,
        "rc_average",
        "window_bp",
        rc_average={
            "default": STRANDS["embed"],
            "help": "average both strands, the reverse "
            "complement's vectors laid back onto the forward bases (pooled "
            "and base levels)",
        },
        window_bp="BED: each region centred and resized to this; VCF: the allele "
        f"windows (default {VARIANT_WINDOW_BP})",
    )
    add_shared(
        sub.add_argument_group("run"),
        "batch_size",
        "device",
        "precision",
        "workers",
        batch_size={"default": BATCH_SIZES["embed"]},
        workers="processes tokenising the next records while the model embeds "
        "(default: up to 8 on CUDA, none on CPU)",
    )


def add_likelihood(commands) -> None:
    sub = subcommand(
        commands,
        "likelihood",
        "Score FASTA records or BED regions zero-shot with a pretrained language model: "
        "the bits it needs to predict each sequence's pieces from their context (every "
        "piece masked once), in all and per bp; or VCF variants: log2 P(ALT) - log2 P(REF) "
        "of the pieces that differ, in a window around each. Exit 1 when nothing was scored.",
        cmd_likelihood,
    )
    add_shared(sub, "model", model="pretraining model directory (e.g. RESULTS/pretrain/model)")
    add_inputs(
        sub,
        fasta="sequences to score, each whole",
        bed="regions to score as they are",
        vcf="variants: each allele's window scored",
    )
    add_shared(
        sub,
        "window_bp",
        "chromosomes",
        "out",
        "format",
        "stride",
        "rc_average",
        "batch_size",
        "device",
        "strict",
        window_bp={
            "default": VARIANT_WINDOW_BP,
            "help": "--vcf: the window read around each variant (default: %(default)s)",
        },
        chromosomes="only the BED regions on these chromosomes",
        stride="pieces this far apart are masked together, in as many passes (default "
        "7: as pretraining scores its held-out bits per bp; one larger than a "
        "sequence's piece count masks one piece at a time)",
        rc_average={
            "default": STRANDS["likelihood"],
            "help": "average the scores of both strands (--no-rc-average: the "
            "given strand; BED regions on their own)",
        },
        batch_size={"default": BATCH_SIZES["likelihood"]},
    )


def add_ism(commands) -> None:
    sub = subcommand(
        commands,
        "ism",
        "In-silico mutagenesis: every base of the central WINDOW bp changed to each other "
        "base, and the change of each feature's score (HDF5), with an optional heatmap.",
        cmd_ism,
    )
    add_shared(sub, "model")
    add_inputs(
        sub, fasta="sequences (fitted to the model's window)", bed="regions (centred, + strand)"
    )
    add_shared(
        sub,
        "window_bp",
        "out",
        window_bp={"required": True, "help": "bp mutated, centred"},
        out="HDF5 to write",
    )
    sub.add_argument(
        "--score",
        choices=["diff", "log_odds"],
        default="diff",
        help="alt - ref probability, or the log-odds change",
    )
    add_shared(sub, "features")
    sub.add_argument(
        "--plot",
        type=Path,
        help="a figure of the first record (.png, .pdf or .svg): a sequence logo "
        "of its bases scaled by importance above the heatmap of every "
        "change",
    )
    sub.add_argument("--feature", help="the feature to plot (default: the first)")
    _add_predictor_options(sub)


def _add_predictor_options(sub) -> None:
    """How a fine-tuned model runs: the options of `load_predictor`."""
    add_shared(
        sub.add_argument_group("how the model runs"),
        "rc_average",
        "segmentations",
        "batch_size",
        "device",
        "precision",
        "workers",
        batch_size={"default": BATCH_SIZES["predict"]},
    )


def _load_predictor(args: argparse.Namespace):
    from genobird.scoring.options import ScoringOptions
    from genobird.scoring.predict import load_predictor

    return load_predictor(
        args.model, ScoringOptions.from_args(args), segmentations=args.segmentations
    )
