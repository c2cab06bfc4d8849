"""`genobird finetune`: a pretrained model fine-tuned on a sequence data set."""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path

from genobird.commands.common import (
    EXIT_OK,
    headline,
    subcommand,
    write_run_page,
)
from genobird.commands.options import add_shared
from genobird.errors import GenobirdError, UsageError
from genobird.finetuning.recipe import (
    BASE_READERS,
    GROUPS,
    QUESTIONS,
    SETTINGS,
    TASK_DEFAULTS,
    TASKS,
    add_options,
    read_config,
    resolve,
)

log = logging.getLogger("genobird")


def fresh_shape_of(model_dir: Path) -> dict:
    """The architecture of a model directory, for a fresh model of the same shape (the
    from-scratch control of a pretrained model); the vocabulary comes from --tokenizer."""
    from genobird.model.io import read_model_description

    config = dict(read_model_description(model_dir)["config"])
    config.pop("vocab_size")
    return config


def given_settings(args: argparse.Namespace) -> dict:
    """The recipe settings of a command: those of --config, then the options given."""
    given = read_config(args.config) if args.config else {}
    given.update(
        {s.name: getattr(args, s.name) for s in SETTINGS if getattr(args, s.name) is not None}
    )
    return given


def recipe_of(values: dict, choose: tuple, quiet: bool):
    """The Recipe of resolved settings (recipe.resolve)."""
    from genobird.finetuning.recipe import Recipe

    return Recipe.of(**values, choose_on_validation=choose, progress=not quiet)


def run_baselines(out: Path, baseline_runs) -> dict:
    """The baselines a fine-tuning run is paired with: its own base readers and start
    (finetuning.run_folder.RunFolder.readers, as written this run) and the baseline runs
    it read them from."""
    from genobird.finetuning.run_folder import RunFolder

    found = {}
    for name in ("cnn", "kmer-lr", "start"):
        if (folder := RunFolder(out).reader(name)).is_dir():
            found[f"base {name}" if name != "start" else "start"] = folder
    for run in baseline_runs:
        found[f"baseline run {Path(run).name}"] = Path(run)
    return found


def cmd_finetune(args: argparse.Namespace) -> int:
    from genobird.baselines.saved import SAVED_FOLDER
    from genobird.datasets.windows import read_metadata
    from genobird.evaluation.compare import compare_run
    from genobird.finetuning.finetune import finetune
    from genobird.finetuning.job import FinetuneJob

    meta = read_metadata(args.data)
    if meta["task"] != args.task:
        raise GenobirdError(f"{args.data} is a {meta['task']} data set, not {args.task}")
    given = given_settings(args)
    values = resolve(given, args.task, meta["counts"]["train"])
    for name in BASE_READERS:
        if values["pooling"] == "hf" and given.get(name) is None and TASK_DEFAULTS[args.task][name]:
            log.info("no %s: the head is transformers' (--pooling hf)", name)
    # the settings not given, which a classify run chooses on validation
    spec = recipe_of(values, tuple(key for key in QUESTIONS if key not in given), args.quiet)
    if not args.from_scratch and args.model is None:
        raise UsageError(
            "give --model PRETRAINED_DIR, or --from-scratch (with --tokenizer, "
            "or --model DIR for its architecture with fresh weights)"
        )
    pretrained, tokenizer = args.model, args.tokenizer
    if args.from_scratch:
        pretrained = None
        if args.model is not None:  # the architecture of that model, fresh weights
            spec = replace(spec, fresh_shape=fresh_shape_of(args.model))
            tokenizer = tokenizer or args.model
    for run in args.base_start_from or ():
        if not any((run / SAVED_FOLDER).glob("*.safetensors")):
            raise UsageError(
                f"--base-start-from {run}: no fitted baseline in "
                f"{run / SAVED_FOLDER}; give the --out folder of `genobird "
                "baseline cnn|deepsea-cnn|kmer-lr`"
            )
    job = FinetuneJob.open(
        args.data,
        args.out,
        pretrained,
        tokenizer,
        args.base_start_from or (),
        args.restart_changed,
        meta,
    )
    report = finetune(spec, job)
    compare_run(args.out, run_baselines(args.out, args.base_start_from or ()))
    write_run_page(args.out)
    print(
        f"fine-tuned {args.task}; test {headline(report)}; model in {args.out}/model, "
        f"page {args.out}/report.html"
    )
    return EXIT_OK


def add_finetune(commands) -> None:
    sub = subcommand(
        commands,
        "finetune",
        "Fine-tune a pretrained model (or one from scratch) on a sequence data set; writes "
        "a model directory (with finetune.json, the recipe as run) and a report "
        "(metrics.json, ROC/PR plots).",
        cmd_finetune,
    )
    sub.add_argument("task", choices=TASKS)
    # the data set and starting model, the recipe file, then each branch of the recipe
    names = ("data", "model", "recipe", *(group for group in GROUPS if group != "data"))
    groups = {name: sub.add_argument_group(name) for name in names}
    add_shared(groups["data"], "data")
    add_shared(
        groups["model"],
        "model",
        "from_scratch",
        "tokenizer",
        model={
            "required": False,
            "metavar": "PRETRAINED_DIR",
            "help": "the pretraining model directory to start from (with "
            "--from-scratch: only its architecture)",
        },
        from_scratch="fresh weights: the architecture of --model, or a 2-layer, "
        "128-wide model (then give --tokenizer)",
        tokenizer="with --from-scratch and no --model",
    )
    groups["model"].add_argument(
        "--base-start-from",
        type=Path,
        nargs="+",
        metavar="RUN",
        help="output folders of `genobird baseline` runs on the same data set: a base reader "
        "(--base-cnn-channels, --base-kmers) that such a run fitted exactly as this run "
        "would is read from it instead of fitted again",
    )
    add_shared(
        groups["recipe"],
        "config",
        config={
            "metavar": "RECIPE",
            "help": "a recipe file (YAML or JSON, e.g. a model's finetune.json): its "
            "settings, under the options given here",
        },
    )
    add_options(groups)
    add_shared(
        groups["output"], "out", out="folder for the model (OUT/model) and the report (OUT/report)"
    )
    add_shared(groups["output"], "restart_changed")
