"""A HuggingFace BigBird checkpoint run by transformers and by genobird, same weights.

    python benchmarks/hf_model.py                                # CPU, fp32, 4 x 768
    python benchmarks/hf_model.py --layers 12 --device cuda --dtype bf16

A randomly initialised transformers BigBirdForMaskedLM (GENA-LM's shape by default:
768 wide, 12 heads, block 64, 3 random blocks, 32k vocabulary, 4,096 positions) is saved,
converted with `genobird convert from-hf` (attention_type "hf": transformers' own
pattern and random plan), and both models run forward + backward (MLM loss on every
token) at --length tokens. Both are in training mode with dropout 0: transformers' eval
mode drops its random blocks, so training mode is where the two compute the same thing;
the script prints the largest logit difference first. Each repeat times transformers
then genobird, and the medians and their ratio are printed (genobird / transformers).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from genobird.convert import from_hf
from genobird.corpus.hf_export import write_hf_tokenizer
from genobird.corpus.tokenizer import SPECIAL_TOKENS
from genobird.model import from_pretrained
from genobird.model.precision import autocast

DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--vocab", type=int, default=32_000)
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=DTYPES, default="fp32")
    return parser.parse_args(argv)


class _PiecesOnly:
    """The smallest genobird-shaped vocabulary that `convert` accepts: special tokens
    first, then made-up DNA pieces (only ids matter here)."""

    def __init__(self, size: int):
        from genobird.corpus.tokenizer import GENOBIRD_SPECIAL_IDS

        self.special = GENOBIRD_SPECIAL_IDS
        self.pieces = list(SPECIAL_TOKENS) + [  # distinct 8-mers (4^8 > 32k)
            "".join("ACGT"[(i >> (2 * k)) & 3] for k in range(8))
            for i in range(size - len(SPECIAL_TOKENS))
        ]
        self.piece_scores = -torch.arange(size).double().numpy()


def build_pair(args, folder: Path):
    import transformers

    config = transformers.BigBirdConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=4 * args.hidden,
        max_position_embeddings=max(4096, args.length),
        block_size=64,
        num_random_blocks=3,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=0,
        architectures=["BigBirdForMaskedLM"],
    )
    torch.manual_seed(0)
    theirs = transformers.BigBirdForMaskedLM(config)
    theirs.save_pretrained(folder / "hf")
    write_hf_tokenizer(_PiecesOnly(args.vocab), folder / "hf", config.max_position_embeddings)
    from_hf(folder / "hf", folder / "genobird")
    ours = from_pretrained(folder / "genobird")
    return theirs.to(args.device).train(), ours.to(args.device).train()


def logits_theirs(model, ids, dtype):
    """transformers' MLM logits, [B, N, V]."""
    with torch.autocast(ids.device.type, dtype=dtype, enabled=dtype is not None):
        return model(input_ids=ids).logits


def logits_ours(model, ids, dtype):
    """genobird's MLM logits, [B, N, V]."""
    positions = torch.arange(ids.shape[1], device=ids.device).expand_as(ids)
    with autocast(ids.device, dtype):
        return model(ids, None, None, positions).mlm_logits.view(*ids.shape, -1)


def step_theirs(model, ids, labels, dtype):
    logits = logits_theirs(model, ids, dtype)
    F.cross_entropy(logits.float().flatten(0, 1), labels.flatten()).backward()
    return logits


def step_ours(model, ids, labels, dtype):
    logits = logits_ours(model, ids, dtype)
    F.cross_entropy(logits.float().flatten(0, 1), labels.flatten()).backward()
    return logits


def timed(step, model, ids, labels, dtype, device: str) -> float:
    model.zero_grad(set_to_none=True)
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    step(model, ids, labels, dtype)
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main(argv=None) -> int:
    args = parse_args(argv)
    dtype = DTYPES[args.dtype]
    with tempfile.TemporaryDirectory() as tmp:
        theirs, ours = build_pair(args, Path(tmp))
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, args.vocab, (args.batch, args.length), generator=generator)
    ids, labels = ids.to(args.device), ids.to(args.device)
    expected = step_theirs(theirs, ids, labels, dtype).detach()
    got = step_ours(ours, ids, labels, dtype).detach()
    difference = (expected.float() - got.float()).abs().max().item()
    print(
        f"{args.layers} x {args.hidden}, {args.length} tokens, batch {args.batch}, "
        f"{args.device} {args.dtype}: largest MLM logit difference {difference:.2e}"
    )
    times = {"transformers": [], "genobird": []}
    for _ in range(args.repeats):
        times["transformers"].append(timed(step_theirs, theirs, ids, labels, dtype, args.device))
        times["genobird"].append(timed(step_ours, ours, ids, labels, dtype, args.device))
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, value in medians.items():
        print(f"{name:>12}: forward + backward {value * 1000:8.1f} ms (median of {args.repeats})")
    print(f"genobird / transformers: {medians['genobird'] / medians['transformers']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
