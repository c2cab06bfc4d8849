"""`genobird nlp ...`: text tokenizer, fine-tuning and prediction for the NLP heads
(genobird.nlp); heavy modules load inside the handlers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from genobird.commands.common import EXIT_OK, subcommand
from genobird.commands.options import add_shared
from genobird.fileio import atomic_write
from genobird.nlp.recipe import SETTINGS as RECIPE
from genobird.settings import add_options


def cmd_tokenizer(args: argparse.Namespace) -> int:
    from genobird.nlp.text import iter_texts, train_text_tokenizer

    tokenizer = train_text_tokenizer(
        iter_texts(args.input), args.out, args.vocab_size, args.model_type
    )
    print(f"wrote {args.out}: {tokenizer.vocab_size:,} pieces ({args.model_type})")
    return EXIT_OK


def cmd_finetune(args: argparse.Namespace) -> int:
    from genobird.nlp.finetune import (
        finetune_classify,
        finetune_multiple_choice,
        finetune_qa,
    )
    from genobird.nlp.recipe import NLPRecipe
    from genobird.nlp.summarize_run import finetune_summarize

    values = {one.name: getattr(args, one.name) for one in RECIPE}
    spec = NLPRecipe.of(**values, progress=not args.quiet)
    source = (args.train, args.out, spec, args.valid, args.model, args.tokenizer)
    if args.task == "qa":
        report = finetune_qa(*source, args.stride, args.max_answer_tokens)
    elif args.task == "multiple-choice":
        report = finetune_multiple_choice(*source, max_globals=args.max_globals)
    elif args.task == "summarize":
        report = finetune_summarize(
            *source,
            args.max_target_tokens,
            args.decoder_layers,
            args.share_weights,
            args.beams,
            args.length_penalty,
        )
    else:
        report = finetune_classify(*source, problem=args.problem)
    print(f"fine-tuned {args.task}; {_figures(report)}; model in {args.out}/model")
    return EXIT_OK


def _figures(report: dict) -> str:
    """The validation metrics of a report, or a note that there was no validation set."""
    names = (
        "exact_match",
        "f1",
        "accuracy",
        "mcc",
        "micro_f1",
        "macro_f1",
        "subset_accuracy",
        "pearson",
        "spearman",
        "rouge1",
        "rouge2",
        "rougeL",
    )
    shown = [f"{name} {report[name]:.3f}" for name in names if name in report]
    return ", ".join(shown) if shown else "no --valid set given"


def cmd_predict(args: argparse.Namespace) -> int:
    from genobird.nlp.finetune import (
        load_task,
        predict_classify,
        predict_multiple_choice,
    )
    from genobird.nlp.summarize_run import predict_summarize

    task = load_task(args.model)["task"]
    if task == "qa":
        return _predict_qa(args)
    predict = {
        "classify": predict_classify,
        "multiple_choice": predict_multiple_choice,
        "summarize": predict_summarize,
    }[task]
    rows, metrics = predict(args.model, args.input, args.batch_size, args.device)
    with atomic_write(args.out) as handle:  # JSON lines, one prediction per input record
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    message = f"predicted {len(rows):,} records ({task}); wrote {args.out}"
    print(message + (f"; {_figures(metrics)}" if metrics else ""))
    return EXIT_OK


def _predict_qa(args: argparse.Namespace) -> int:
    from genobird.nlp import qa
    from genobird.nlp.finetune import predict_qa

    answers = predict_qa(args.model, args.input, args.batch_size, args.device)
    with atomic_write(args.out) as handle:  # SQuAD's prediction format: {id: answer text}
        json.dump({qid: answer["text"] for qid, answer in answers.items()}, handle, indent=1)
    with atomic_write(Path(f"{args.out}.details.jsonl")) as handle:
        for qid, answer in answers.items():
            handle.write(json.dumps({"id": qid, **answer}) + "\n")
    message = f"answered {len(answers):,} questions; wrote {args.out}"
    metrics = qa.squad_metrics(qa.read_squad(args.input), answers)
    if metrics["questions"]:
        message += f"; exact match {metrics['exact_match']:.1f}, F1 {metrics['f1']:.1f}"
    print(message)
    return EXIT_OK


# =========================================================================== parser
def add_nlp(commands) -> None:
    nlp = commands.add_parser("nlp", help="NLP task heads on the BigBird encoder.")
    actions = nlp.add_subparsers(dest="action", metavar="ACTION", required=True)
    tokenizer = subcommand(
        actions,
        "tokenizer",
        "Train a sentencepiece text tokenizer ([PAD] [UNK] [CLS] [SEP] [MASK] = ids 0-4) on "
        "text files or the strings of JSON / JSON lines files.",
        cmd_tokenizer,
    )
    tokenizer.add_argument("--input", type=Path, nargs="+", required=True)
    add_shared(
        tokenizer,
        "out",
        "vocab_size",
        out="tokenizer .model to write",
        vocab_size={"default": 8000, "help": "at most this many"},
    )
    tokenizer.add_argument("--model-type", choices=["bpe", "unigram"], default="bpe")

    finetune = subcommand(
        actions,
        "finetune",
        "Fine-tune an NLP head. qa: extractive question answering on SQuAD-style JSON or "
        "JSON lines, long contexts in sliding windows. classify: [CLS] classification of a "
        "text or text pair (JSON lines, CSV, TSV; GLUE metrics). multiple-choice: WikiHop-"
        "style JSON, a global token per candidate, query token, paragraph and sentence. "
        "summarize: block-sparse encoder, full-attention decoder (JSON lines / CSV / TSV with "
        "document and summary), ROUGE of beam-search summaries.",
        cmd_finetune,
    )
    finetune.add_argument("task", choices=["qa", "classify", "multiple-choice", "summarize"])
    finetune.add_argument("--train", type=Path, required=True)
    add_shared(
        finetune,
        "valid",
        "out",
        valid="scored with exact match and F1",
        out="folder for the model (OUT/model) and its report",
    )
    source = finetune.add_mutually_exclusive_group(required=True)
    add_shared(
        source,
        "model",
        "from_scratch",
        model={"required": False, "help": "pretraining model directory"},
        from_scratch="a fresh 2 x 128 model",
    )
    add_shared(
        finetune,
        "tokenizer",
        "stride",
        tokenizer="with --from-scratch",
        stride="between windows (default max-tokens/2)",
    )
    finetune.add_argument("--max-answer-tokens", type=int, default=30, help="qa")
    finetune.add_argument(
        "--problem",
        choices=["single_label", "multi_label", "regression"],
        help="classify: default from the labels",
    )
    finetune.add_argument(
        "--max-globals", type=int, default=64, help="multiple-choice: global tokens per example"
    )
    summarize = finetune.add_argument_group("summarize")
    summarize.add_argument("--max-target-tokens", type=int, default=128)
    summarize.add_argument("--decoder-layers", type=int, default=2)
    summarize.add_argument(
        "--share-weights", action="store_true", help="decoder reuses the encoder layers' weights"
    )
    summarize.add_argument("--beams", type=int, default=4, help="1: greedy decoding")
    summarize.add_argument("--length-penalty", type=float, default=0.6, help="GNMT alpha")
    # the recipe's settings (genobird.nlp.recipe), each at its default
    add_options(dict.fromkeys(("data", "optim", "output"), finetune), RECIPE, given_only=False)

    predict = subcommand(
        actions,
        "predict",
        "Predict with a fine-tuned NLP model. qa: OUT holds {id: answer text} (SQuAD's "
        "format), OUT.details.jsonl the character offsets and scores. classify: OUT holds "
        "one JSON line per record (label and probabilities, or score); multiple-choice: "
        "one JSON line per example (answer and candidate scores); summarize: one JSON line "
        "per document (summary).",
        cmd_predict,
    )
    add_shared(predict, "model")
    predict.add_argument("--input", type=Path, required=True, help="as for finetune")
    add_shared(
        predict, "out", "batch_size", "device", out={"help": None}, batch_size={"default": 8}
    )
