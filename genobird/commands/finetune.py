"""`genobird finetune`: a pretrained model fine-tuned on a sequence data set."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from genobird.commands.common import (
    EXIT_OK,
    headline,
    subcommand,
)
from genobird.errors import GenobirdError, UsageError
from genobird.finetuning.recipe import POOLINGS, PROBE_STEPS, QUESTIONS, TASK_DEFAULTS

log = logging.getLogger("genobird")
# recipe options that add a base reader (a head transformers has no counterpart of)
BASE_READERS = {"base_cnn_channels": "base CNN", "base_kmers": "base k-mers"}


def fresh_shape_of(model_dir: Path) -> dict:
    """The architecture of a model directory, for a fresh model of the same shape (the
    from-scratch control of a pretrained model); the vocabulary comes from --tokenizer."""
    from genobird.model.io import read_model_description

    config = dict(read_model_description(model_dir)["config"])
    config.pop("vocab_size")
    return config


def fill_task_defaults(args: argparse.Namespace, train_windows: int) -> None:
    """Each recipe option not given takes its task kind's default (TASK_DEFAULTS). The
    base readers (base CNN, base k-mers) have no transformers counterpart, so a head for
    export (--pooling hf) runs without them unless one is given (which is then refused
    with the reason). The default batch is at most the training windows there are."""
    for key, value in TASK_DEFAULTS[args.task].items():  # pooling before the base readers
        if getattr(args, key) is None:
            if key in BASE_READERS and value and args.pooling == "hf":
                log.info("no %s: the head is transformers' (--pooling hf)", BASE_READERS[key])
                value = 0
            if key == "batch_size":  # a default batch is never more than the data set
                value = max(1, min(value, train_windows))
            setattr(args, key, value)


def cmd_finetune(args: argparse.Namespace) -> int:
    from genobird.datasets.windows import read_metadata
    from genobird.finetuning.finetune import FinetuneSpec, finetune

    meta = read_metadata(args.data)
    if meta["task"] != args.task:
        raise GenobirdError(f"{args.data} is a {meta['task']} data set, not {args.task}")
    # the recipe settings not given, which a classify run chooses on validation
    choose = tuple(key for key in QUESTIONS if getattr(args, key) is None)
    fill_task_defaults(args, meta["counts"]["train"])
    training = {
        "learning_rate": args.learning_rate,
        "warmup_steps": args.warmup_steps,
        "max_steps": args.max_steps,
        "batch_size": args.batch_size,
        "effective_batch_size": args.effective_batch_size or args.batch_size,
        "checkpoint_every": args.checkpoint_every,
        "log_every": 20,
        "eval_every": 0,
        "progress": not args.quiet,
        "seed": args.seed,
        "ema_decay": args.ema_decay,
    }
    spec = FinetuneSpec(
        max_tokens=args.max_tokens,
        window_bp=args.window_bp,
        pos_weight=args.pos_weight,
        rc_average=args.rc_average,
        rc_augment=args.rc_augment,
        probe_steps=args.probe_steps,
        choose_on_validation=choose,
        pooling=args.pooling,
        centre_bp=args.centre_bp,
        base_cnn_channels=args.base_cnn_channels,
        base_kmers=args.base_kmers,
        dropout=args.dropout,
        eval_every=args.eval_every,
        patience=args.patience,
        layer_decay=args.layer_decay,
        head_lr_scale=args.head_lr_scale,
        bpe_dropout=args.bpe_dropout,
        segmentations=args.segmentations,
        training=training,
        seed=args.seed,
    )  # fmt: skip
    if not args.from_scratch and args.model is None:
        raise UsageError("give --model PRETRAINED_DIR, or --from-scratch (with --tokenizer, "
                            "or --model DIR for its architecture with fresh weights)")  # fmt: skip
    pretrained, tokenizer = args.model, args.tokenizer
    if args.from_scratch:
        pretrained = None
        if args.model is not None:  # the architecture of that model, fresh weights
            spec.model = fresh_shape_of(args.model)
            tokenizer = tokenizer or args.model
    report = finetune(args.data, args.out, spec, pretrained, tokenizer)
    print(f"fine-tuned {args.task}; test {headline(report)}; model in {args.out}/model")
    return EXIT_OK


def add_finetune(commands) -> None:
    sub = subcommand(
        commands,
        "finetune",
        "Fine-tune a pretrained model (or one from scratch) on a sequence data set; writes "
        "a model directory and a report (metrics.json, ROC/PR plots).",
        cmd_finetune,
    )
    sub.add_argument("task", choices=["promoter", "chromatin", "classify"])
    data = sub.add_argument_group("data")
    data.add_argument("--data", type=Path, required=True, help="HDF5 from genobird dataset")
    data.add_argument("--window-bp", type=int,
                      help="read each window as its central WINDOW_BP bases (default: whole): "
                      "one data set fine-tuned at several contexts around the same "
                      "bins")  # fmt: skip
    data.add_argument("--max-tokens", type=int,
                      help="longest input (default: what the data set's windows need); each "
                      "batch is padded only to its own longest window")  # fmt: skip
    data.add_argument("--rc-augment", action=argparse.BooleanOptionalAction, default=None,
                      help="train on a random strand per window (default: chromatin yes, "
                      "promoter no, classify chosen on validation: --probe-steps)")  # fmt: skip
    data.add_argument("--probe-steps", type=int, default=PROBE_STEPS, metavar="N",
                      help="classify: what is not given of the strands (--rc-augment, "
                      "--rc-average), --learning-rate and --pooling is chosen on validation, "
                      "each candidate fine-tuned at most N steps, at most 4 such probes "
                      "(default %(default)s; 0: none, the defaults kept)")  # fmt: skip
    data.add_argument("--bpe-dropout", type=float, default=0.0,
                      help="cut each training window into pieces with BPE-dropout, each "
                      "merge skipped with this probability, e.g. 0.1 (0: the tokenizer's "
                      "own pieces); validation checks read the tokenizer's own")  # fmt: skip
    model = sub.add_argument_group("model")
    model.add_argument("--model", type=Path, metavar="PRETRAINED_DIR",
                       help="the pretraining model directory to start from (with "
                       "--from-scratch: only its architecture)")  # fmt: skip
    model.add_argument("--from-scratch", action="store_true",
                       help="fresh weights: the architecture of --model, or a 2-layer, "
                       "128-wide model (then give --tokenizer)")  # fmt: skip
    model.add_argument("--tokenizer", type=Path, help="with --from-scratch and no --model")
    model.add_argument("--pooling", choices=POOLINGS,
                       help="[CLS] pooler (the paper; the default for promoter and "
                       "chromatin), the mean of the token states (classify's default), "
                       "HuggingFace BigBird's head on [CLS] (exportable with `convert "
                       "to-hf`), or the mean of the states of the tokens over the window's "
                       "central --centre-bp (a chromatin bin), or one such mean for each bin of a "
                       "data set built with --profile-bins, every bin learnt from one pass "
                       "(the window's own is scored); classify: mean or cls, chosen on "
                       "validation")  # fmt: skip
    model.add_argument("--centre-bp", type=int, default=200,
                       help="with --pooling centre: the bases pooled, centred")  # fmt: skip
    model.add_argument("--base-cnn-channels", type=int, metavar="C",
                       help="a CNN of C filters on the window's bases beside the encoder "
                       "(genobird's CNN baseline's tower), trained alone first, then "
                       "pooled and read by the head with the encoder's vector (default: "
                       "128 for classify, else 0: none)")  # fmt: skip
    model.add_argument("--base-kmers", type=int, metavar="K",
                       help="the counts of the window's 3- to K-mers beside the encoder (the "
                       "k-mer LR baseline's features), its LR fitted first; the head starts "
                       "from it, blended with the base CNN on validation (default: 6 for "
                       "classify, else 0: none)")  # fmt: skip
    model.add_argument("--dropout", type=float,
                       help="dropout on hidden states while fine-tuning (default: 0.3 for "
                       "classify, else the model's own)")  # fmt: skip
    recipe = sub.add_argument_group("recipe")
    recipe.add_argument("--max-steps", type=int,
                        help="optimiser steps of the run, at most, and of each recipe probe "
                        "(default: 3000 for classify, stopped by validation; 300 otherwise); "
                        "the base CNN trains first on its own clock (3 min at most per "
                        "strand setting); the plan is logged at the start")  # fmt: skip
    recipe.add_argument(
        "--batch-size", type=int, help="windows per step (default: 32 for classify, 8 otherwise)"
    )
    recipe.add_argument("--effective-batch-size", type=int,
                        help="windows per optimiser step, by accumulation (default: "
                        "--batch-size)")  # fmt: skip
    recipe.add_argument("--learning-rate", type=float,
                        help="the encoder's peak learning rate (default: 3e-4; classify: 3e-4 "
                        "or 1e-4, chosen on validation)")  # fmt: skip
    recipe.add_argument("--warmup-steps", type=int, default=20)
    recipe.add_argument("--head-lr-scale", type=float,
                        help="the fresh head's learning rate as a multiple of "
                        "--learning-rate (default: 10 for chromatin, 1 otherwise)")  # fmt: skip
    recipe.add_argument("--layer-decay", type=float, default=1.0,
                        help="layer-wise learning-rate decay: each encoder layer learns this "
                        "times as fast as the one above it, the embeddings slowest "
                        "(1: one rate)")  # fmt: skip
    recipe.add_argument("--pos-weight", type=float,
                        help="weight of a positive in the loss (default: 8 for chromatin, "
                        "else 1)")  # fmt: skip
    recipe.add_argument("--ema-decay", type=float, default=0.0,
                        help="evaluate, select and keep an exponential moving average of the "
                        "weights with this decay per step, e.g. 0.999 (0: the weights as "
                        "trained)")  # fmt: skip
    recipe.add_argument("--seed", type=int, default=0)
    evaluation = sub.add_argument_group("evaluation")
    evaluation.add_argument("--eval-every", type=int,
                            help="steps between validation AUROC checks, at most one pass "
                            "over the training windows; the best weights are kept (default: "
                            "500 for classify, else 0: none)")  # fmt: skip
    evaluation.add_argument("--patience", type=int,
                            help="stop after this many checks without improvement (default: "
                            "3 for classify, else 0: never)")  # fmt: skip
    evaluation.add_argument("--rc-average", action=argparse.BooleanOptionalAction,
                            default=None, help="evaluate on both strands, and score so with "
                            "the saved model (default: chromatin yes, promoter no, classify as "
                            "chosen on validation with --rc-augment)")  # fmt: skip
    evaluation.add_argument("--segmentations", type=int, default=0,
                            help="average the test and validation predictions (and the saved "
                            "model's scores) over this many BPE-dropout cuts of each window "
                            "per strand, e.g. 16; needs --bpe-dropout (0: the tokenizer's "
                            "own cut)")  # fmt: skip
    output = sub.add_argument_group("output")
    output.add_argument("--out", type=Path, required=True,
                        help="folder for the model (OUT/model) and the report "
                        "(OUT/report)")  # fmt: skip
    output.add_argument("--checkpoint-every", type=int, default=1000)
