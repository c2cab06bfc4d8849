"""Fine-tuning step throughput on short windows, and what composing only the batch's
token embeddings saves (or, with --padding, what padding a batch to a multiple of 8
instead of whole blocks saves).

    python benchmarks/finetune.py                    # GUE-sized: 32 windows of 24 tokens
    python benchmarks/finetune.py --length 64        # EPDnew-sized (300 bp)
    python benchmarks/finetune.py --padding --length 85   # 500 bp windows

The human-mini shape (4 x 128, 16,000 random DNA pieces, composed token embeddings, a
256-filter base convolution) with a classification head, AdamW (fused), fp32. Two
variants alternate step by step in the same process: the token embeddings composed for
the pieces in the batch only (genobird's `ComposedTokenEmbedding.forward`), and the
whole [V, C] table composed every step, as before (the baseline). With `--padding` the
variants are one model's steps on the batch padded as fine-tuning pads it
(`genobird.datasets.windows.padded_length` with the model's densely attended length) and padded
to whole blocks of 64 (the baseline). Medians of `--steps`; tokens/s counts real tokens.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # as the genobird command does

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.train import CONFIGS, dna_pieces
from genobird.inputs import model_padding, padded_length
from genobird.model import BigBirdConfig, BigBirdForSequenceClassification

VOCAB_SIZE = 16_000


def build(length: int, whole_table: bool) -> BigBirdForSequenceClassification:
    torch.manual_seed(0)
    config = BigBirdConfig(
        vocab_size=VOCAB_SIZE,
        max_position=max(64, length),
        **CONFIGS["human-mini"],
        composed_token_embeddings=True,
        base_conv_channels=256,
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )
    model = BigBirdForSequenceClassification(config, num_labels=1, problem="multi_label")
    model.encoder.embeddings.set_vocabulary(dna_pieces(VOCAB_SIZE))
    if whole_table:
        tokens = model.encoder.embeddings.tokens
        tokens.forward = lambda ids: F.embedding(ids, tokens.weight)
    return model.train()


def embedding_variants(ids: torch.Tensor) -> dict:
    """Two models on the same batch: the batch's pieces composed, the whole table."""
    variants = {}
    for name, whole in (("composing the batch's pieces only", False), ("the whole table", True)):
        model = build(ids.shape[1], whole)
        optimiser = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        variants[name] = (model, optimiser, ids)
    return variants


def padding_variants(length: int, ids: torch.Tensor) -> dict:
    """One model on the batch padded two ways: as fine-tuning pads it, to whole blocks."""
    model = build(512, whole_table=False)
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    fitted = padded_length(length, **model_padding(model))
    blocks = padded_length(length, model.config.block_size)
    variants = {}
    for name, width in (("fitted padding", fitted), ("whole blocks", blocks)):
        padded = torch.zeros(ids.shape[0], width, dtype=ids.dtype)  # [PAD] is 0
        padded[:, :length] = ids
        variants[name] = (model, optimiser, padded)
    return variants


def step_seconds(model, optimiser, inputs: dict) -> float:
    started = time.perf_counter()
    model(**inputs).loss.backward()
    optimiser.step()
    optimiser.zero_grad(set_to_none=True)
    return time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--length", type=int, default=24, help="tokens per window")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument(
        "--padding", action="store_true", help="compare batch paddings instead of token embeddings"
    )
    args = parser.parse_args(argv)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, VOCAB_SIZE, (args.batch_size, args.length), generator=generator)
    labels = torch.randint(0, 2, (args.batch_size, 1), generator=generator).float()
    variants = padding_variants(args.length, ids) if args.padding else embedding_variants(ids)
    times = {name: [] for name in variants}
    for step in range(args.steps + 2):  # two untimed warm-up steps each
        for name, (model, optimiser, padded) in variants.items():
            inputs = {"input_ids": padded, "attention_mask": padded > 0, "labels": labels}
            seconds = step_seconds(model, optimiser, inputs)
            if step >= 2:
                times[name].append(seconds)
    tokens = args.batch_size * args.length
    print(
        f"{args.batch_size} x {args.length} tokens, {torch.get_num_threads()} threads, "
        f"median of {args.steps} steps, torch {torch.__version__}"
    )
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, seconds in medians.items():
        width = variants[name][2].shape[1]
        print(
            f"{name} ({width} positions): {seconds:.3f} s/step, "
            f"{tokens / seconds:,.0f} real tokens/s"
        )
    variant, baseline = medians  # the change first, its baseline second
    print(f"{variant}: {medians[baseline] / medians[variant]:.2f}x the throughput of {baseline}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
