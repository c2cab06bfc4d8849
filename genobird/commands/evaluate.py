"""`genobird zero-shot|baseline`: figures to judge genobird's by (the baselines, their
paired comparisons, zero-shot classification by likelihood)."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from genobird.commands.common import (
    EXIT_OK,
    command_group,
    headline,
    subcommand,
    write_run_page,
)
from genobird.commands.options import add_shared
from genobird.errors import GenobirdError, InputError, UsageError
from genobird.fileio import atomic_write

log = logging.getLogger("genobird")


def cmd_zero_shot(args: argparse.Namespace) -> int:
    from genobird.baselines.markov import parse_orders
    from genobird.evaluation.zero_shot import zero_shot

    if args.stride is not None and args.model is None:
        raise GenobirdError("--stride is for --model (the language model's masking)")
    report = zero_shot(
        args.data,
        args.out,
        args.model,
        args.markov,
        parse_orders(args.orders),
        args.device,
        args.stride,
    )
    chosen = f" (order {report['order']})" if "order" in report else ""
    print(
        f"{report['model']}{chosen}: test AUROC {report['auroc']:.4f}, F1 {report['f1']:.4f}, "
        f"MCC {report['mcc']:.4f}; wrote {args.out / 'report'}"
    )
    return EXIT_OK


def add_zero_shot(commands) -> None:
    sub = subcommand(
        commands,
        "zero-shot",
        "Classify a single-feature data set by likelihood alone, with no fine-tuning: "
        "each window's bits per bp under a pretraining model (--model) or, the baseline, "
        "under order-k Markov models of the given DNA (--markov; the order chosen on the "
        "validation split), turned into a probability by a one-feature logistic fit on "
        "the training split; writes OUTPUT/report as finetune does.",
        cmd_zero_shot,
    )
    add_shared(sub, "data", "out", out="writes OUT/report")
    scorer = sub.add_mutually_exclusive_group(required=True)
    add_shared(scorer, "model", model={"required": False, "help": "pretraining model directory"})
    scorer.add_argument(
        "--markov",
        type=Path,
        help="FASTA or genobird documents to fit the Markov models on "
        "(e.g. the pretraining corpus's train.txt)",
    )
    add_shared(
        sub,
        "orders",
        "stride",
        "device",
        stride="with --model: pieces this far apart "
        "masked together (default 7, as genobird likelihood)",
    )


def cmd_baseline_markov(args: argparse.Namespace) -> int:
    from genobird.baselines.markov import markov_baseline, parse_orders, read_dna

    if args.vcf and (args.reference is None or args.scores is None):
        raise UsageError("--vcf needs --reference FASTA and --scores OUT.tsv")
    orders = parse_orders(args.orders)
    train = [codes for path in args.train for codes in read_dna(path)]
    heldout = [codes for path in args.heldout for codes in read_dna(path)]
    result = markov_baseline(train, heldout, orders, not args.forward_only, args.valid_fraction)
    report = {
        **result.to_dict(),
        "train": [str(p) for p in args.train],
        "heldout": [str(p) for p in args.heldout],
    }
    if args.out:
        with atomic_write(args.out) as handle:
            json.dump(report, handle, indent=2)
    print(
        f"order-{result.order} Markov (alpha {result.alpha:g}, chosen on validation DNA): "
        f"{result.bits_per_bp:.4f} bits/bp on {result.heldout_bp:,} held-out bases "
        f"(trained on {result.train_bp:,})"
    )
    if args.vcf:
        markov_variant_scores(args, train, result)
    return EXIT_OK


def markov_variant_scores(args: argparse.Namespace, train, result) -> None:
    """The chosen Markov model's variant effects (`genobird likelihood --vcf`'s yardstick):
    log2 P(ALT) - log2 P(REF) of each variant's windows, into --scores."""
    import pandas as pd

    from genobird.baselines.markov import fit_counts
    from genobird.genome import open_reference
    from genobird.scoring.tables import TsvSink, write_rejected
    from genobird.scoring.variant_effects import allele_windows, markov_variant_effects

    both = not args.forward_only
    counts = fit_counts(train, result.order, both)
    rejected: list = []
    windows = list(
        allele_windows(args.vcf, open_reference(args.reference), args.window_bp, rejected)
    )
    table = pd.DataFrame([w.ids() for w in windows])
    table["llr_bits"] = markov_variant_effects(counts, result.order, result.alpha, windows, both)
    sink = TsvSink(args.scores)
    sink.write(table)
    sink.close(ok=True)
    if rejected:
        write_rejected(args.scores, rejected)
    print(f"scored {len(windows):,} variants, rejected {len(rejected):,}; wrote {args.scores}")


def cmd_baseline_classifier(args: argparse.Namespace) -> int:
    from genobird.baselines import run_classifier_baseline

    options = {"window_bp": args.window_bp}
    if args.kind == "kmer-lr":
        options["rc_average"] = args.rc_average
    if args.kind in ("cnn", "deepsea-cnn"):
        options.update(
            rc_average=args.rc_average,
            max_minutes=args.max_minutes,
            max_epochs=args.max_epochs,
            device=args.device,
        )
        if args.channels is not None:
            options["channels"] = args.channels
    report = run_classifier_baseline(args.kind, args.data, args.out, args.seed, **options)
    write_run_page(args.out)
    print(
        f"{args.kind} baseline; test {headline(report)}; report in {args.out}/report, "
        f"page {args.out}/report.html"
    )
    return EXIT_OK


def cmd_baseline_compare(args: argparse.Namespace) -> int:
    from genobird.evaluation.compare import paired_bootstrap, read_predictions

    if args.against is None and len(args.runs) != 2:
        raise InputError(
            f"compare takes two runs (A, then B), got {len(args.runs)}; to compare seeds "
            "of one recipe with another, give A's runs, then --against and B's runs"
        )
    a_runs, b_runs = (args.runs, args.against) if args.against else ([args.runs[0]], [args.runs[1]])
    if _feature_count(a_runs[0]) > 1:
        return _compare_feature_runs(a_runs, b_runs, args)
    sides = {
        "A": [read_predictions(run) for run in a_runs],
        "B": [read_predictions(run) for run in b_runs],
    }
    result = paired_bootstrap(sides["A"], sides["B"], args.resamples, args.seed)
    result["a"], result["b"] = ([str(run.source) for run in runs] for runs in sides.values())
    if args.out:
        with atomic_write(args.out) as handle:
            json.dump(result, handle, indent=2)
    _print_comparison(result, sides, args.resamples)
    return EXIT_OK


def _feature_count(run: Path) -> int:
    from genobird.evaluation.compare import read_feature_predictions

    return len(read_feature_predictions(run).feature_names)


def _compare_feature_runs(a_runs: list[Path], b_runs: list[Path], args) -> int:
    """Two multi-feature runs (chromatin profiles): each category's median AUROC, paired."""
    from genobird.artifacts import describe_difference
    from genobird.evaluation.compare import paired_median_auroc, read_feature_predictions

    if len(a_runs) != 1 or len(b_runs) != 1:
        raise InputError("runs of several features are compared one against one (A, then B)")
    a, b = read_feature_predictions(a_runs[0]), read_feature_predictions(b_runs[0])
    result = paired_median_auroc(a, b, args.resamples, args.seed, args.min_positives)
    result["a"], result["b"] = str(a.source), str(b.source)
    if args.out:
        with atomic_write(args.out) as handle:
            json.dump(result, handle, indent=2)
    print(f"A {a.source}\nB {b.source}")
    print(
        f"{result['examples']:,} test examples, {args.resamples:,} paired resamples; median "
        f"AUROC over the features with >= {args.min_positives} test positives, 95% "
        "intervals:"
    )
    for category, row in result["categories"].items():
        print(
            f"  {category:<10} {row['features']:>4} features  A {row['a']:.3f}  B {row['b']:.3f}"
            f"  A - B {describe_difference(row)}  (A ahead in {row['a_better_share']:.0%} of "
            "resamples)"
        )
    return EXIT_OK


def _print_comparison(result: dict, sides: dict, resamples: int) -> None:
    from genobird.artifacts import describe_difference, describe_value

    for label, runs in sides.items():
        thresholds = " / ".join(f"{run.threshold:.3g}" for run in runs)
        sources = ", ".join(str(run.source) for run in runs)
        mean = f"the mean of {len(runs)} runs: " if len(runs) > 1 else ""
        print(f"{label} {mean}{sources} (called at {thresholds})")
    print(
        f"{result['examples']:,} test sequences, {resamples:,} paired resamples; MCC and F1 "
        "at each run's threshold chosen on its validation split, then at 0.5; 95% "
        "intervals:"
    )
    for name, row in result["metrics"].items():
        line = (
            f"  {name:<10} A {describe_value(row, 'a')}  B {describe_value(row, 'b')}  "
            f"A - B {describe_difference(row)}  (A ahead in {row['a_better_share']:.0%} "
            "of resamples)"
        )
        for side in "ab":
            if len(row[f"{side}_runs"]) > 1:
                line += f"; {side.upper()}'s runs " + " / ".join(
                    f"{value:.3f}" for value in row[f"{side}_runs"]
                )
        print(line)


def add_baseline(commands) -> None:
    kinds = command_group(
        commands,
        "baseline",
        "Simple models on the same data, to judge genobird's figures by.",
        dest="kind",
        metavar="MODEL",
    )
    markov = subcommand(
        kinds,
        "markov",
        "Order-k Markov model of DNA (k and add-alpha smoothing chosen on the last part of "
        "each training sequence): bits per base on held-out DNA, beside genobird's BPC.",
        cmd_baseline_markov,
    )
    markov.add_argument(
        "--train", type=Path, nargs="+", required=True, help="documents or FASTA files"
    )
    markov.add_argument(
        "--heldout", type=Path, nargs="+", required=True, help="documents or FASTA files"
    )
    add_shared(
        markov,
        "orders",
        "valid_fraction",
        valid_fraction="tail of each training sequence that chooses k and alpha",
    )
    markov.add_argument(
        "--forward-only",
        action="store_true",
        help="count the given strand only (default: both strands)",
    )
    add_shared(markov, "out", out={"required": False, "help": "JSON report"})
    variants = markov.add_argument_group("variant effects (the yardstick of likelihood --vcf)")
    variants.add_argument("--vcf", type=Path, help="variants to score, as `likelihood --vcf`")
    add_shared(
        variants,
        "reference",
        "window_bp",
        reference="genome FASTA(s) for --vcf",
        window_bp={
            "default": 1000,
            "help": "the window read around each variant (default: %(default)s)",
        },
    )
    variants.add_argument("--scores", type=Path, help="TSV of the variants' scores")
    for kind, text in (
        ("kmer-lr", "k-mer (3-6) counts and logistic regression, C chosen on the validation split"),
        ("cnn", "a 3-layer CNN on one-hot DNA, early stopping on the validation split"),
        (
            "deepsea-cnn",
            "DeepSEA's CNN (three 8 bp convolutions, max-pooling, a fully "
            "connected layer), scaled by --channels, early stopping on the "
            "validation split",
        ),
    ):
        sub = subcommand(
            kinds,
            kind,
            f"{text}; same splits and metrics.json as genobird finetune.",
            cmd_baseline_classifier,
        )
        add_shared(
            sub,
            "data",
            "out",
            "seed",
            "window_bp",
            out="writes OUT/report",
            window_bp="read each window as its central BP bases (default: whole)",
        )
        if kind == "kmer-lr":
            add_shared(
                sub,
                "rc_average",
                rc_average="fit and read the k-mer counts of both "
                "strands, each window's and its reverse complement's averaged "
                "(default: one strand)",
            )
        else:
            add_shared(
                sub,
                "rc_average",
                "max_epochs",
                "max_minutes",
                "channels",
                "device",
                rc_average="average both strands (default: all tasks but promoter)",
            )

    compare = subcommand(
        kinds,
        "compare",
        "Two predictors (fine-tuned or baseline runs) on the same test split, paired: each "
        "metric's difference A - B with a 95% bootstrap interval over the test sequences.",
        cmd_baseline_compare,
    )
    compare.add_argument(
        "runs",
        type=Path,
        nargs="+",
        metavar="RUN",
        help="output folders of genobird finetune or genobird baseline: "
        "A, then B; or A's runs (seeds of one recipe, compared as their "
        "mean) when --against is given",
    )
    compare.add_argument(
        "--against",
        type=Path,
        nargs="+",
        metavar="RUN",
        help="B's runs (one, or seeds of one recipe, compared as their mean)",
    )
    compare.add_argument(
        "--resamples", type=int, default=2000, help="resamples of the test sequences (at least 100)"
    )
    add_shared(compare, "seed", seed="seed of the resampling")
    compare.add_argument(
        "--min-positives",
        type=int,
        default=1,
        help="runs of several features (chromatin): count the features with "
        "at least this many test positives, e.g. 20",
    )
    add_shared(compare, "out", out={"required": False, "help": "JSON report"})
