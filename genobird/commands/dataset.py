"""`genobird dataset promoter|promoter-sequences|chromatin|deepsea|classify`: labelled windows."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from genobird.commands.common import (
    EXIT_OK,
    command_group,
    report_rejected,
    subcommand,
)
from genobird.commands.options import add_shared
from genobird.errors import GenobirdError, InputError

log = logging.getLogger("genobird")


def cmd_dataset_promoter(args: argparse.Namespace) -> int:
    from genobird.datasets.promoter import PromoterSpec, build_promoter_dataset

    spec = PromoterSpec(
        upstream=args.upstream_bp,
        downstream=args.downstream_bp,
        hard_negatives=args.hard_negatives,
        training_negatives=args.training_negatives,
        min_distance=args.min_distance,
        off_end=args.off_end,
        valid_chromosomes=tuple(args.valid_chromosomes),
        test_chromosomes=tuple(args.test_chromosomes),
        seed=args.seed,
    )
    windows, problems = build_promoter_dataset(
        args.tss, args.reference, args.out, spec, liftover_chain=args.liftover
    )
    report_rejected(problems)
    print(f"wrote {args.out}: {len(windows):,} windows; {len(problems)} TSS rows skipped")
    return EXIT_OK


def cmd_dataset_promoter_sequences(args: argparse.Namespace) -> int:
    from genobird.datasets.promoter import PromoterSpec, build_promoter_sequence_dataset

    spec = PromoterSpec(seed=args.seed, training_negatives=args.training_negatives)
    windows, problems = build_promoter_sequence_dataset(
        args.positives, args.out, spec, args.valid_fraction, args.test_fraction
    )
    report_rejected(problems)
    positives = sum(int(label[0]) for label in windows.labels)
    print(
        f"wrote {args.out}: {positives:,} promoters and {len(windows) - positives:,} DeePromoter "
        f"negatives; {len(problems)} records skipped"
    )
    return EXIT_OK


def cmd_dataset_chromatin(args: argparse.Namespace) -> int:
    import numpy as np

    from genobird.datasets.chromatin import (
        ChromatinSpec,
        build_chromatin_dataset,
        positives_by_split,
    )

    spec = ChromatinSpec(
        bin_size=args.bin_size,
        context=args.context_bp,
        min_overlap=args.min_overlap,
        negative_ratio=args.negative_ratio,
        max_bins=args.max_bins,
        chromosomes=tuple(args.chromosomes) if args.chromosomes else None,
        valid_chromosomes=tuple(args.valid_chromosomes),
        test_chromosomes=tuple(args.test_chromosomes),
        assayed=_assayed_pairs(args.assayed),
        seed=args.seed,
        profile_bins=args.profile_bins,
    )
    windows = build_chromatin_dataset(
        args.features, args.reference, args.out, spec, progress=not args.quiet
    )
    print(f"wrote {args.out}: {len(windows):,} windows x {len(windows.feature_names)} features")
    splits = np.asarray(windows.splits)
    for split, positives in positives_by_split(windows).items():
        print(
            f"  {split}: {int((splits == split).sum()):,} windows; positives per feature "
            f"median {int(np.median(positives))}, min {int(positives.min())}; "
            f"{int((positives >= 20).sum())} of {len(positives)} features with 20 or "
            "more"
        )
    return EXIT_OK


def _assayed_pairs(pairs: list[str]) -> dict:
    """{table: where} of --assayed TABLE=WHERE."""
    assayed = {}
    for pair in pairs:
        table, separator, where = pair.partition("=")
        if not separator or not table or not where:
            raise InputError(f"--assayed {pair!r}: write TABLE=WHERE, e.g. histone.tsv=chr19")
        assayed[table] = where
    return assayed


def _names_preview(names: list[str], shown: int = 5) -> str:
    """'3 labels: a, b, c', or the first few and a count: a data set may have 919."""
    listed = ", ".join(names[:shown]) + (
        f", ... ({len(names) - shown} more)" if len(names) > shown else ""
    )
    return f"{len(names)} label{'s' * (len(names) != 1)}: {listed}"


def cmd_dataset_classify(args: argparse.Namespace) -> int:
    from genobird.datasets.classify import build_classify_dataset

    windows, problems = build_classify_dataset(
        args.input,
        args.out,
        args.label_columns,
        args.valid_fraction,
        args.test_fraction,
        args.seed,
        args.valid,
        args.test,
        args.min_split_positives,
    )
    report_rejected(problems)
    print(
        f"wrote {args.out}: {len(windows):,} sequences, {_names_preview(windows.feature_names)}; "
        f"{len(problems)} records skipped"
    )
    return EXIT_OK


def cmd_dataset_deepsea(args: argparse.Namespace) -> int:
    if args.csv:
        return _dataset_deepsea_csv(args)
    from genobird.datasets.deepsea import import_deepsea

    missing = [
        f"--{name}" for name in ("split", "coordinates", "reference") if getattr(args, name) is None
    ]
    if missing:
        raise GenobirdError(f"--mat needs {', '.join(missing)}")
    if len(args.mat) != len(args.split):
        raise GenobirdError("give one --split name per --mat file, in the same order")
    windows = import_deepsea(
        dict(zip(args.split, args.mat, strict=True)),
        args.coordinates,
        args.reference,
        args.out,
        args.features,
        args.context_bp,
    )
    print(f"wrote {args.out}: {len(windows):,} windows x {len(windows.feature_names)} features")
    return EXIT_OK


def _dataset_deepsea_csv(args: argparse.Namespace) -> int:
    from genobird.datasets.deepsea_csv import DEEPSEA_WINDOW_BP, import_deepsea_csv

    if args.split_column and (args.valid or args.test):
        raise GenobirdError("give either --split-column or --valid/--test files, not both")
    summary = import_deepsea_csv(
        args.csv,
        args.out,
        args.features,
        args.split_column,
        args.valid_fraction,
        args.test_fraction,
        args.seed,
        args.valid,
        args.test,
    )
    report_rejected(summary.problems)
    if summary.other_length:
        log.warning(
            "%d sequences are not %d bp long (kept)", summary.other_length, DEEPSEA_WINDOW_BP
        )
    splits = ", ".join(f"{count:,} {split}" for split, count in summary.counts.items())
    skipped = len(summary.problems)
    print(f"wrote {args.out}: {splits}; {skipped} row{'s' * (skipped != 1)} skipped")
    return EXIT_OK


# the parsed arguments that are the command line's, not the data set's
NOT_PROVENANCE = ("command", "action", "handler", "parser", "quiet", "verbose", "debug")


def provenance(name: str, args: argparse.Namespace) -> dict:
    """How a data set was built: `genobird dataset NAME` and its options (paths as
    given), and the genobird version, which the model cards of its models read."""
    from genobird.version import __version__

    def plain(value):
        if isinstance(value, (list, tuple)):
            return [plain(item) for item in value]
        return value if isinstance(value, (int, float, str, bool, type(None))) else str(value)

    options = {
        key: plain(value) for key, value in sorted(vars(args).items()) if key not in NOT_PROVENANCE
    }
    return {"command": f"genobird dataset {name}", "options": options, "genobird": __version__}


def _recorded_subcommand(actions, name: str, help_text: str, handler):
    """A `dataset` command whose data set records how it was built (`provenance`)."""

    def build(args: argparse.Namespace) -> int:
        from genobird.datasets.windows import record_provenance

        code = handler(args)
        if code == EXIT_OK:
            record_provenance(args.out, provenance(name, args))
        return code

    return subcommand(actions, name, help_text, build)


def add_dataset(commands) -> None:
    actions = command_group(commands, "dataset", "Build fine-tuning data sets (HDF5).")
    promoter = _recorded_subcommand(
        actions,
        "promoter",
        "Promoter windows around EPDnew-style TSSs, with DeePromoter negatives.",
        cmd_dataset_promoter,
    )
    promoter.add_argument("--tss", type=Path, required=True, help="EPDnew-style TSS BED")
    add_shared(promoter, "reference", "out", reference={"required": True}, out="HDF5 to write")
    promoter.add_argument("--upstream-bp", type=int, default=5000, help="bp before the TSS")
    promoter.add_argument("--downstream-bp", type=int, default=3000, help="bp from the TSS on")
    promoter.add_argument("--liftover", type=Path, help="chain file hg38 -> hg19")
    promoter.add_argument("--hard-negatives", type=int, default=0, help="per positive")
    add_shared(promoter, "training_negatives")
    promoter.add_argument("--min-distance", type=int, default=10_000)
    promoter.add_argument("--off-end", choices=["skip", "pad"], default="skip")
    _add_split_arguments(promoter)
    sequences = _recorded_subcommand(
        actions,
        "promoter-sequences",
        "Promoter sequences without coordinates (one per line, or FASTA; e.g. EPDnew's as "
        "DeePromoter publishes them), each with a DeePromoter negative; seeded split.",
        cmd_dataset_promoter_sequences,
    )
    sequences.add_argument("--positives", type=Path, required=True, help="text or FASTA")
    add_shared(
        sequences,
        "out",
        "training_negatives",
        "valid_fraction",
        "test_fraction",
        "seed",
        out="HDF5 to write",
        seed="seed of the split",
    )
    chromatin = _recorded_subcommand(
        actions,
        "chromatin",
        "Genome bins labelled from peak BEDs (features.tsv: name, category, peak_file).",
        cmd_dataset_chromatin,
    )
    chromatin.add_argument(
        "--features",
        type=Path,
        nargs="+",
        required=True,
        help="feature table TSV(s): name, category, peak_file, and "
        "optionally assayed (chromosomes, or a BED, where the feature was "
        "measured; elsewhere its label is unknown)",
    )
    add_shared(chromatin, "reference", "out", reference={"required": True}, out="HDF5 to write")
    chromatin.add_argument("--bin-size", type=int, default=200)
    add_shared(chromatin, "context_bp", context_bp="window around each bin")
    chromatin.add_argument("--min-overlap", type=float, default=0.5, help="bin fraction")
    chromatin.add_argument("--negative-ratio", type=float, default=1.0)
    chromatin.add_argument("--max-bins", type=int, help="subsample the labelled bins")
    chromatin.add_argument(
        "--profile-bins",
        type=int,
        default=0,
        metavar="K",
        help="also store the labels of the K bins centred on each window's "
        "bin (odd), for `finetune chromatin --pooling profile`, which "
        "learns all K from one pass (default 0: none)",
    )
    chromatin.add_argument(
        "--assayed",
        nargs="+",
        metavar="TABLE=WHERE",
        default=[],
        help="where the features of a table without an assayed column "
        "were measured: chromosomes (comma-separated) or a BED of regions, "
        "e.g. histone.tsv=chr19; elsewhere their labels are unknown, not "
        "negative",
    )
    add_shared(chromatin, "chromosomes")
    _add_split_arguments(chromatin, regions=True)
    deepsea = _recorded_subcommand(
        actions,
        "deepsea",
        "DeepSEA's 919 chromatin features: from the .mat files (a wider context cut from "
        "the reference around the published 200 bp bins), or from a CSV of sequences and "
        "labels (the layout GENA-LM and others publish).",
        cmd_dataset_deepsea,
    )
    source = deepsea.add_mutually_exclusive_group(required=True)
    source.add_argument("--mat", type=Path, nargs="+", help="train.mat, valid.mat and/or test.mat")
    source.add_argument("--csv", type=Path, help="CSV(.gz): a sequence then 919 labels per row")
    mat = deepsea.add_argument_group(".mat route")
    mat.add_argument(
        "--split",
        choices=["train", "valid", "test"],
        nargs="+",
        help="the split of each --mat, in order",
    )
    mat.add_argument(
        "--coordinates", type=Path, help="BED of the bins: one split's, or genome-wide"
    )
    add_shared(mat, "reference", "context_bp", reference="hg19 FASTA", context_bp="paper: 8 kb")
    table = deepsea.add_argument_group("CSV route")
    table.add_argument("--split-column", help="column of train/valid/test (needs a header)")
    add_shared(
        table,
        "valid",
        "test",
        "valid_fraction",
        "test_fraction",
        "seed",
        valid="CSV of the validation split",
        test="CSV of the test split",
        valid_fraction={"default": 0.05},
        test_fraction={"default": 0.05},
    )
    deepsea.add_argument(
        "--features",
        type=Path,
        help="919-feature table TSV (default: placeholder names, DeepSEA's categories)",
    )
    add_shared(deepsea, "out", out="HDF5 to write")
    classify = _recorded_subcommand(
        actions,
        "classify",
        "Your own labelled sequences: CSV/TSV (sequence column + label columns) or FASTA "
        "(labels as key=value in the header).",
        cmd_dataset_classify,
    )
    classify.add_argument("--input", type=Path, required=True, help="CSV, TSV or FASTA")
    add_shared(
        classify,
        "valid",
        "test",
        "out",
        valid="validation records in their own file (then --input is train)",
        test="test records in their own file (then --input is train)",
        out="HDF5 to write",
    )
    classify.add_argument("--label-columns", nargs="+", help="default: all but reserved")
    add_shared(
        classify,
        "valid_fraction",
        "test_fraction",
        "seed",
        seed="seed of the split",
        valid_fraction="of the --input records without a split, drawn to validation "
        "when no --valid file gives it",
        test_fraction="of the --input records without "
        "a split, drawn to test when no --test file gives it",
    )
    classify.add_argument(
        "--min-split-positives",
        type=int,
        metavar="N",
        help="refuse a validation or test split with fewer than N "
        "positives of a label, or no negative (default: 5; 0: write any "
        "split)",
    )


def _add_split_arguments(parser, regions: bool = False) -> None:
    what = (
        (
            "chromosomes or regions chrom:start-end (1-based); a window whose context "
            "reaches into a held-out region from outside it is left out"
        )
        if regions
        else ("chromosomes")
    )
    add_shared(
        parser,
        "valid_chromosomes",
        "test_chromosomes",
        "seed",
        valid_chromosomes=f"validation {what}",
        test_chromosomes=f"test {what}",
    )
