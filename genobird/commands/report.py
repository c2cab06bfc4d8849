"""`genobird evaluate` (the pipeline's evaluations, each written as its artifact) and
`genobird report` (the page that draws them)."""

from __future__ import annotations

import argparse
from pathlib import Path

from genobird.commands.common import (
    EXIT_OK,
    command_group,
    subcommand,
)
from genobird.commands.options import add_shared
from genobird.errors import InputError


def cmd_report(args: argparse.Namespace) -> int:
    from genobird.report import build_report

    out = args.out or args.results / "report.html"
    build_report(args.results, out, settings=_pretrained_settings(args))
    print(f"wrote {out}")
    return EXIT_OK


def _pretrained_settings(args: argparse.Namespace) -> dict:
    from genobird.artifacts import pretrained_evaluation_settings

    return pretrained_evaluation_settings(
        args.context_tokens, args.context_windows, args.copy_context_tokens, args.copy_windows
    )


def cmd_evaluate(args: argparse.Namespace) -> int:
    from genobird.artifacts import CorpusStatistics, ResultsFolder, RunComparisons

    folder = ResultsFolder(args.results)
    if not folder.root.is_dir():
        raise InputError(f"{folder.root}: no such results folder; run the pipeline first")
    if args.what == "all":
        from genobird.evaluation.artifacts import evaluate_results

        ran = evaluate_results(folder.root, _pretrained_settings(args))
        print(f"evaluated {', '.join(ran)}" if ran else "every evaluation was up to date")
        return EXIT_OK
    if args.what == "runs":
        from genobird.evaluation.run_comparisons import compare_runs

        compare_runs(folder.root)
        print(f"wrote {RunComparisons.path(folder.root)}")
        return EXIT_OK
    if args.what == "corpus":
        from genobird.evaluation.corpus_statistics import corpus_statistics

        if corpus_statistics(folder.root) is None:
            raise InputError(
                f"{folder.corpus}: no corpus in {folder.root}; run the pipeline's corpus "
                "rules first"
            )
        print(f"wrote {CorpusStatistics.path(folder.root)}")
        return EXIT_OK
    from genobird.evaluation.pretrained import evaluate_pretrained

    if evaluate_pretrained(folder.root, _pretrained_settings(args)) is None:
        raise InputError(
            f"{folder.pretrain}: no pretraining in {folder.root}; run the "
            "pipeline's pretrain rule first"
        )
    print(f"wrote {folder.pretrained_evaluation}")
    return EXIT_OK


def add_pretrained_evaluation_options(sub) -> None:
    """What the pretrained model's evaluation scores (`genobird evaluate pretrained`, and
    `genobird report`, which refuses an evaluation made with other settings)."""
    add_shared(
        sub,
        "context_tokens",
        context_tokens={
            "default": [128, 256, 512, 1024],
            "help": "tokens at which to measure the pretrained MLM accuracy",
        },
    )
    sub.add_argument(
        "--context-windows",
        type=int,
        default=4000,
        help="held-out windows scored at each context length (fewer: faster, wider intervals)",
    )
    sub.add_argument(
        "--copy-context-tokens",
        type=int,
        nargs="+",
        default=[32, 128, 512, 1024],
        help="on a genome with copies.bed (the demo's): tokens at which to "
        "score bits per bp on copy-bearing and other held-out DNA",
    )
    sub.add_argument(
        "--copy-windows",
        type=int,
        default=300,
        help="held-out stretches scored at each of those lengths",
    )


def add_evaluate(commands) -> None:
    kinds = command_group(
        commands,
        "evaluate",
        "The pipeline's evaluations, each written as JSON in its results "
        "folder for the report to draw.",
        dest="what",
        metavar="WHAT",
    )
    pretrained = subcommand(
        kinds,
        "pretrained",
        "The pretrained model: held-out figures, masked-token accuracy and bits per bp by "
        "context length, and on a genome with copies, bits in copies and elsewhere; "
        "writes RESULTS/pretrain/evaluation.json.",
        cmd_evaluate,
    )
    runs = subcommand(
        kinds,
        "runs",
        "The fine-tuned models beside their baselines, paired: long-range chromatin "
        "features (on a genome that has them), the promoter MCC, each task's table of "
        "paired differences, each chromatin task's context ablation; writes "
        "RESULTS/comparisons.json.",
        cmd_evaluate,
    )
    corpus = subcommand(
        kinds,
        "corpus",
        "The corpus: documents, sentences and bases by part, the vocabulary's bp per token "
        "on held-out sentences; writes RESULTS/corpus/statistics.json.",
        cmd_evaluate,
    )
    every = subcommand(
        kinds,
        "all",
        "Every evaluation the report draws whose artifact is missing or older than what it "
        "reads (what the pipeline's rules run one by one).",
        cmd_evaluate,
    )
    for sub in (pretrained, runs, corpus, every):
        sub.add_argument(
            "--results", type=Path, required=True, help="the pipeline's results folder"
        )
    for sub in (pretrained, every):
        add_pretrained_evaluation_options(sub)


def add_report(commands) -> None:
    sub = subcommand(
        commands,
        "report",
        "Write the HTML report of a pipeline results folder (corpus and vocabulary, "
        "pretraining curves, MLM accuracy against context length, fine-tuning metrics "
        "with ROC/PR plots, links to the score tables), or the page of one finetune or "
        "baseline run (its plan, choices, start check, figures beside its baselines, "
        "curves and calibration). It draws the evaluations `genobird evaluate` wrote, and "
        "names the one to run where an artifact is missing.",
        cmd_report,
    )
    sub.add_argument(
        "--results",
        type=Path,
        required=True,
        help="the pipeline's results folder, or one finetune or baseline --out folder",
    )
    add_shared(
        sub, "out", out={"required": False, "help": "HTML file (default: RESULTS/report.html)"}
    )
    add_pretrained_evaluation_options(sub)
