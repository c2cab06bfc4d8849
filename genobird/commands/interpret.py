"""`genobird attribute|motifs`: what a fine-tuned model reads across many windows, and
the motifs it reads, named by their JASPAR matches."""

from __future__ import annotations

import argparse
from pathlib import Path

from genobird.commands.common import EXIT_OK, report_rejected, subcommand, write_run_page
from genobird.commands.options import add_shared
from genobird.commands.scoring import _add_predictor_options, _load_predictor
from genobird.errors import ConfigError, UsageError
from genobird.interpret import JASPAR_RELEASE, JASPAR_TAXON, RUN_MOTIFS_FOLDER

MODEL_HELP = (
    "a fine-tuned model directory, or a `genobird baseline cnn|deepsea-cnn|kmer-lr` run's "
    "folder (its fitted model)"
)


def cmd_attribute(args: argparse.Namespace) -> int:
    attributions, rejected = _attributions(args)
    path = _write_attributions(attributions, rejected, args.out)
    print(
        f"attributed {len(attributions.ids):,} windows of {attributions.window_bp} bp"
        f"{attributions.span_words} to "
        f"{attributions.feature!r} ({attributions.method}, {attributions.score}); wrote {path}"
    )
    return EXIT_OK


def cmd_motifs(args: argparse.Namespace) -> int:
    from genobird.interpret.attributions import Attributions
    from genobird.interpret.motif_report import MotifRun, write_motifs
    from genobird.interpret.motifs import Jaspar, KnownMotifs
    from genobird.report.run_page import is_run_folder

    if args.attributions is None and args.model is None:
        raise UsageError("give --attributions A.h5, or --model DIR with --data, --fasta or --bed")
    # refused before any work
    jaspar = Jaspar.load(args.jaspar_release, args.taxon)
    beside = [MotifRun.read(folder) for folder in args.beside]
    known = KnownMotifs.read(args.known) if args.known is not None else None
    if args.attributions is not None:
        attributions = Attributions.read(args.attributions)
        if args.model is not None:  # attributions said to be this model's must fit it
            length = _load_model(args).input_length_bp
            if attributions.window_bp != length:
                raise ConfigError(
                    f"{args.attributions} holds windows of {attributions.window_bp} bp and "
                    f"{args.model} reads {length:,} bp; attribute with this model (genobird "
                    "attribute), or leave --model out"
                )
    else:
        attributions, rejected = _attributions(args)
        args.out.mkdir(parents=True, exist_ok=True)
        _write_attributions(attributions, rejected, args.out / "attributions.h5")
    summary = write_motifs(attributions, jaspar, args.out, beside, known)
    print(summary)
    run = Path(args.out).parent
    if Path(args.out).name == RUN_MOTIFS_FOLDER and is_run_folder(run):
        write_run_page(run)  # a run's page links its motifs
        print(f"its run's page, {run / 'report.html'}, links them")
    return EXIT_OK


def _attributions(args: argparse.Namespace):
    from genobird.interpret.attributions import (
        check_span,
        ism_attributions,
        windows_to_attribute,
    )

    if args.data is None and args.fasta is None and args.bed is None:
        raise UsageError("give the windows: --data H5, --fasta FASTA or --bed BED --reference FA")
    predictor = _load_model(args)
    rejected: list = []
    check_span(args.span, predictor.input_length_bp)  # before any window is read
    ids, sequences = windows_to_attribute(
        predictor, args, rejected, feature=args.feature, limit=args.limit
    )
    return ism_attributions(predictor, ids, sequences, args.feature, args.span), rejected


def _load_model(args: argparse.Namespace):
    """A fine-tuned model directory's predictor, or a `genobird baseline` run's fitted
    model read as one (interpret.baselines)."""
    from genobird.interpret.baselines import load_baseline, saved_baseline_file

    if saved_baseline_file(args.model) is not None:
        # a baseline reads its windows as it was fitted: on its own strands, from bases
        given = [
            name for name in ("rc_average", "segmentations") if getattr(args, name) is not None
        ]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise ConfigError(
                f"{flag}: {args.model} is a baseline, which reads its windows as it was "
                f"fitted (its own strands, no BPE cuts); leave {flag} out"
            )
        return load_baseline(args.model, args.data)
    return _load_predictor(args)


def span_type(text: str) -> tuple[int, int]:
    """START-END, two whole numbers."""
    try:
        start, end = (int(part) for part in text.split("-"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: give START-END, e.g. 1960-2040") from exc
    return start, end


def _write_attributions(attributions, rejected: list, out: Path) -> Path:
    """The attributions at `out`, the windows set aside beside them (OUT.rejected.tsv,
    as score, ism and embed keep theirs) and logged."""
    from genobird.scoring.tables import write_rejected

    path = attributions.write(out)
    report_rejected(rejected)
    if rejected:
        write_rejected(out, rejected)
    return path


def _add_windows(sub, required: bool) -> None:
    """The windows attributed: a data set's split (its windows of one label), or FASTA
    records and BED regions read as `genobird score` reads them."""
    windows = sub.add_argument_group("the windows attributed")
    inputs = windows.add_mutually_exclusive_group(required=required)
    inputs.add_argument("--data", type=Path, help="a data set (genobird dataset) to read from")
    inputs.add_argument("--fasta", type=Path, help="sequences (fitted to the model's window)")
    inputs.add_argument("--bed", type=Path, help="regions (centred on, the model's window)")
    add_shared(windows, "reference", reference="genome FASTA (for --bed)")
    windows.add_argument(
        "--split", default="test", help="with --data: the split read (train, valid or test)"
    )
    windows.add_argument(
        "--label",
        type=int,
        choices=(0, 1),
        help="with --data: only windows of this label of the feature (default: all)",
    )
    windows.add_argument("--limit", type=int, help="at most N windows, the first read")
    windows.add_argument(
        "--span",
        type=span_type,
        metavar="START-END",
        help="attribute only these bases of each window (0-based, END excluded; each "
        "mutant is still scored as the whole window; default: every base)",
    )
    windows.add_argument("--feature", help="the feature attributed (default: the model's only one)")
    windows.add_argument(
        "--method",
        choices=("ism",),
        default="ism",
        help="in-silico mutagenesis: every base changed to each other one, its logit's change",
    )


def add_attribute(commands) -> None:
    sub = subcommand(
        commands,
        "attribute",
        "Per-base attributions of many windows to one feature of a fine-tuned model "
        "(in-silico mutagenesis, on the logit scale), as the one-hot and hypothetical "
        "contribution arrays [N, 4, L] TF-MoDISco reads (HDF5).",
        cmd_attribute,
    )
    add_shared(sub, "model", "out", model=MODEL_HELP, out="HDF5 to write")
    _add_windows(sub, required=True)
    _add_predictor_options(sub)


def add_motifs(commands) -> None:
    sub = subcommand(
        commands,
        "motifs",
        "The motifs a model reads across many windows: TF-MoDISco patterns of its "
        "attributions, each matched to JASPAR by TOMTOM; writes DIR/motifs.tsv, "
        "DIR/motifs.meme and DIR/motifs.html.",
        cmd_motifs,
    )
    sub.add_argument(
        "--attributions", type=Path, help="attributions of `genobird attribute` (HDF5)"
    )
    sub.add_argument("--model", type=Path, help=MODEL_HELP + ", to attribute first")
    sub.add_argument("--out", type=Path, required=True, help="folder to write")
    sub.add_argument(
        "--jaspar-release",
        type=int,
        default=JASPAR_RELEASE,
        help="the JASPAR release matched against (pyjaspar ships it)",
    )
    sub.add_argument(
        "--taxon",
        default=JASPAR_TAXON,
        help="the JASPAR CORE taxon matched against",
    )
    sub.add_argument(
        "--known",
        type=Path,
        metavar="MEME",
        help="motifs you know (a MEME file): each pattern's best match among them too, "
        "and which of them were recovered",
    )
    sub.add_argument(
        "--beside",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="an earlier genobird motifs folder (a baseline's, say) whose factors the page "
        "sets beside this model's; repeat for several",
    )
    _add_windows(sub, required=False)
    _add_predictor_options(sub)
