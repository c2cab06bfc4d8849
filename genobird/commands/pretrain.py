"""`genobird pretrain`: MLM + NSP pretraining."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from genobird.commands.common import (
    EXIT_OK,
    subcommand,
)
from genobird.commands.options import add_shared

log = logging.getLogger("genobird")


def cmd_pretrain(args: argparse.Namespace) -> int:
    from genobird.training.pretraining import load_run_config, run_pretraining

    overrides = {
        f"training.{name}": value
        for name, value in (
            ("max_steps", args.max_steps),
            ("batch_size", args.batch_size),
            ("effective_batch_size", args.effective_batch_size),
            ("learning_rate", args.learning_rate),
        )
        if value is not None
    }
    data = {"train": args.train, "eval": args.eval, "tokenizer": args.tokenizer, "init": args.model}
    overrides.update({f"data.{k}": str(v) for k, v in data.items() if v is not None})
    config = load_run_config(args.config, overrides)
    if args.out:
        config["output"] = str(args.out)
    if args.context_tokens:
        config["context_lengths"] = args.context_tokens
    config["no_resume"] = args.no_resume
    config["restart_changed"] = args.restart_changed
    config.setdefault("training", {})["progress"] = not args.quiet
    summary = run_pretraining(config)
    evaluation = summary.get("eval") or {}
    message = f"pretrained {summary['steps']} steps; model in {config['output']}/model"
    if evaluation:
        message += (
            f"; held-out MLM accuracy {evaluation['mlm_accuracy']:.3f}, "
            f"BPC {evaluation['bits_per_character']:.3f}"
        )
        if "nsp_accuracy" in evaluation:
            message += f", NSP accuracy {evaluation['nsp_accuracy']:.3f}"
    print(message)
    return EXIT_OK


def add_pretrain(commands) -> None:
    sub = subcommand(
        commands,
        "pretrain",
        "Pretrain BigBird with MLM + NSP on instance shards; resumes from the latest "
        "checkpoint in the output folder. Multi-GPU: torchrun --nproc_per_node N "
        "-m genobird.cli pretrain ...",
        cmd_pretrain,
    )
    add_shared(
        sub,
        "config",
        "out",
        config={"required": True, "help": "YAML: model, training, data"},
        out={"required": False, "help": "output folder (overrides the config)"},
    )
    data = sub.add_argument_group("data overrides")
    data.add_argument("--train", type=Path, help="training instances folder")
    data.add_argument("--eval", type=Path, help="held-out instances folder")
    add_shared(
        data,
        "tokenizer",
        "model",
        tokenizer="tokenizer.model or tokenizer.json",
        model={
            "required": False,
            "help": "continue pretraining this model directory (e.g. one from `convert from-hf`)",
        },
    )
    add_shared(
        sub.add_argument_group("training overrides"),
        "max_steps",
        "batch_size",
        "effective_batch_size",
        "learning_rate",
        batch_size={"default": None, "help": "per process"},
    )
    add_shared(
        sub,
        "context_tokens",
        context_tokens="also train and evaluate at each of these "
        "lengths in tokens (the context-length ablation)",
    )
    sub.add_argument("--no-resume", action="store_true", help="ignore existing checkpoints")
    add_shared(sub, "restart_changed")
