"""`genobird convert from-hf|to-hf`: HuggingFace BigBird checkpoints in and out."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from genobird.commands.common import (
    EXIT_OK,
    command_group,
    subcommand,
)
from genobird.commands.options import add_shared

log = logging.getLogger("genobird")


def cmd_convert_from_hf(args: argparse.Namespace) -> int:
    from genobird.convert import from_hf

    out = args.out
    result = from_hf(args.hf_dir, out, window_bp=args.window_bp)
    fresh = result["fresh_heads"]
    print(
        f"wrote {out}: {result['model_class']} from {result['architecture']} "
        f"(attention {result['attention_type']})"
        + (f"; fresh heads (not in the file): {', '.join(fresh)}" if fresh else "")
    )
    return EXIT_OK


def cmd_convert_to_hf(args: argparse.Namespace) -> int:
    from genobird.convert import to_hf

    out = args.out
    result = to_hf(args.model, out)
    print(
        f"wrote {out}: {result['architecture']} ({result['tensors']} tensors, "
        f"attention_type {result['attention_type']}) and tokenizer.json"
    )
    if result.get("note"):
        print(f"note: {result['note']}")
    return EXIT_OK


def add_convert(commands) -> None:
    actions = command_group(
        commands, "convert", "HuggingFace BigBird checkpoints (e.g. GENA-LM) in and out."
    )
    source = subcommand(
        actions,
        "from-hf",
        "Convert a transformers BigBird directory (config.json, model.safetensors or "
        "pytorch_model.bin, tokenizer.json) into a genobird model directory.",
        cmd_convert_from_hf,
    )
    source.add_argument("hf_dir", type=Path, help="downloaded HuggingFace model folder")
    add_shared(
        source,
        "out",
        "window_bp",
        out="genobird model folder to write (new)",
        window_bp="classifiers: input length in bp they were fine-tuned on",
    )
    target = subcommand(
        actions,
        "to-hf",
        "Write a genobird model directory as a transformers BigBird directory with a "
        "tokenizer.json (BigBirdForMaskedLM, or ForSequenceClassification for a "
        "classifier fine-tuned with --pooling hf).",
        cmd_convert_to_hf,
    )
    add_shared(
        target,
        "model",
        "out",
        model="genobird model folder",
        out="HuggingFace folder to write (new)",
    )
