"""Does a language model trained at 4,096 tokens use them? One GPU study, prepared here.

    python benchmarks/long_context.py prepare --out .gpu/long-context      # CPU, once
    python benchmarks/gpu.py --out DIR --steps long_context                # GPU (carry .gpu)
    python benchmarks/long_context.py summarise DIR/long_context           # CPU, after
    python benchmarks/long_context.py run --inputs IN --out DIR --dry-run  # CPU, tiny

`prepare` writes what the GPU run reads (under 64 MiB, so it travels with the tree): the
human-mini corpus (pipelines/human-mini.yaml) as MLM instances of 4,096 and of 512
tokens (new masks each epoch), its tokenizer, and the held-out GRCh37 22:20-21 Mb.

`run` trains models of one architecture (8 x 512, rotary positions, so any reads any
length), each step 32,768 token slots, each arm capped in minutes:
1. from scratch on 4,096-token instances with FlexAttention (the CUDA default) and with
   the PyTorch block-sparse kernel, briefly: their MLM loss curves tell a kernel that
   trains wrongly from long instances that train slowly (trained from scratch at 4,096
   tokens for 2.25 minutes, a model stayed at the unigram level where one at 512 did not);
2. one model pretrained on 512-token instances, then continued for the same minutes on
   4,096-token instances ("long") and on 512-token ones ("short"), as BigBird itself
   starts from a model pretrained at 512 tokens.
Then "long" and "short" score the held-out Mb at 512, 1,024, 2,048 and 4,096 tokens on
the same masked pieces: the pieces are cut into stretches of 256, each stretch read
through a window of each length centred on it (only stretches whose 4,096-token window
fits inside an A/C/G/T run), one piece in 7 of the stretch masked per pass (7 passes:
every piece once). Only the context around the stretch changes with the length.
Per-piece bits come back (pieces.npz), with each arm's bits per bp at each length and
the gains, paired over stretches; each arm's training log comes back as train-NAME.jsonl.

`summarise` adds, on the CPU, what needs no GPU: the order-10 Markov model's bits on the
same pieces (fitted on the training chromosomes) and the split into pieces inside copies
(bases whose 24-mer occurs elsewhere in the held-out Mb, on either strand: the held-out
piece is not soft-masked, and copies within reach are what a longer window can read) and
outside them; it writes long_context.md.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CORPUS = REPO / "results" / "human-mini" / "corpus"
SHARED = REPO.parent / "shared" / "data"
HELDOUT_FASTA = SHARED / "genome" / "grch37_22_20-21Mb.fa"
TRAIN_FASTAS = (
    SHARED / "genome" / "grch38_chr20_chr21_0-10Mb.fa.gz",
    SHARED / "genome" / "hg19_chr19_0-3119000_softmasked.fa",
)
LENGTHS = (512, 1024, 2048, 4096)
STRETCH = 256  # pieces scored per window: half the shortest length
STRIDE = 7  # one piece in 7 masked per pass, about pretraining's 15%
CHUNK_BP = 100_000  # the held-out runs are tokenised in chunks, as the corpus cuts documents
COPY_K = 24

MODEL = dict(
    hidden_size=512,
    num_layers=8,
    num_heads=8,
    intermediate_size=2048,
    block_size=64,
    num_random_blocks=3,
    hidden_dropout=0.1,
    attention_dropout=0.0,
    composed_token_embeddings=True,
    position_encoding="rotary",
    base_conv_channels=256,
    base_conv_width=9,
)
# Both arms see 32,768 token slots per step and one schedule; the minutes cap the run.
FULL = dict(
    model=MODEL,
    tokens_per_step=32_768,
    max_steps=1_500,
    warmup_steps=100,
    learning_rate=5e-4,
    minutes=2.0,
    workers=6,
    score_tokens=65_536,
    continued=dict(learning_rate=2e-4, warmup_steps=20, max_steps=1_000, minutes=1.25),
    kernels=("flex", "block_sparse"),
    kernel_minutes=0.5,
    lengths=LENGTHS,
    stretch=STRETCH,
    heldout_bp=None,
)
DRY = dict(
    model={
        **MODEL,
        "hidden_size": 32,
        "num_layers": 1,
        "num_heads": 2,
        "intermediate_size": 64,
        "block_size": 16,
        "num_random_blocks": 1,
        "base_conv_channels": 8,
    },
    tokens_per_step=512,
    max_steps=2,
    warmup_steps=1,
    learning_rate=1e-3,
    minutes=1.0,
    workers=0,
    score_tokens=1024,
    lengths=(64, 128, 256),
    continued=dict(learning_rate=1e-3, warmup_steps=1, max_steps=2, minutes=1.0),
    kernels=("block_sparse",),
    kernel_minutes=1.0,
    stretch=32,
    heldout_bp=30_000,
)
# The CPU study (`run --cpu`): a small shape with the GPU arms' recipe (rotary positions,
# base convolution, dropout 0.1, masks drawn anew each epoch), trained from scratch at
# the long and at the short length through the PyTorch block-sparse kernel, for equal
# steps of equal token slots (2 x 4,096 or 16 x 512), both arms scored at both lengths.
CPU = dict(
    model={
        **MODEL,
        "hidden_size": 128,
        "num_layers": 2,
        "num_heads": 4,
        "intermediate_size": 512,
        "base_conv_channels": 128,
    },
    tokens_per_step=8_192,
    max_steps=600,
    warmup_steps=60,
    learning_rate=5e-4,
    minutes=60.0,
    workers=0,
    score_tokens=16_384,
    lengths=(512, 4096),
    kernels=(),
    kernel_minutes=0,
    from_scratch_arms=True,
    stretch=STRETCH,
    heldout_bp=300_000,
)


# --------------------------------------------------------------------------- prepare
def prepare(
    out: Path, corpus: Path = CORPUS, heldout: Path = HELDOUT_FASTA, lengths=(4096, 512)
) -> None:
    """Instances of each training length from the corpus's training documents, its
    tokenizer and the held-out FASTA, into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.model",):
        shutil.copy(corpus / name, out / name)
    shutil.copy(heldout, out / "heldout.fa")
    for length in lengths:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "genobird.cli",
                "-q",
                "corpus",
                "instances",
                "--documents",
                str(corpus / "train.txt"),
                "--tokenizer",
                str(corpus / "tokenizer.model"),
                "--out",
                str(out / f"train-{length}"),
                "--max-tokens",
                str(length),
                "--dynamic-masking",
            ],
            check=True,
            cwd=REPO,
        )
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{out}: {total / 2**20:.1f} MiB")


def check_inputs(inputs: Path) -> None:
    """Refuse, naming what is missing and the command that prepares it, a folder that
    lacks the study's inputs (made on the CPU and carried to the GPU machine)."""
    missing = [name for name in ("tokenizer.model", "heldout.fa") if not (inputs / name).is_file()]
    if not any(inputs.glob("train-*/manifest.json")):
        missing.append("train-LENGTH/ (instances of each training length)")
    if missing:
        raise FileNotFoundError(
            f"the long-context study's inputs are not in {inputs}: no {', '.join(missing)}; "
            f"prepare them on the CPU with `python benchmarks/long_context.py prepare --out "
            f"{inputs}` (from human-mini's corpus: `snakemake --cores 2 --configfile "
            "pipelines/human-mini.yaml` first) and carry the folder"
        )


# --------------------------------------------------------------------------- train
def train_arm(
    inputs: Path,
    out: Path,
    length: int,
    sizes: dict,
    minutes: float,
    init: Path | None = None,
    model_changes: dict | None = None,
) -> dict:
    """Pretrain one arm on `length`-token instances for at most `minutes` (from scratch,
    or continued from the model `init`); returns its steps, minutes and tokens/s."""
    from genobird.training.pretraining import run_pretraining

    batch = max(1, sizes["tokens_per_step"] // length)
    model = {**sizes["model"], **(model_changes or {})} if init is None else {}
    rates = sizes["continued"] if init is not None else sizes
    config = {
        "model": {**model, "max_position": length},
        "training": dict(
            learning_rate=rates["learning_rate"],
            warmup_steps=rates["warmup_steps"],
            max_steps=rates["max_steps"],
            max_minutes=minutes,
            batch_size=batch,
            effective_batch_size=batch,
            log_every=50,
            checkpoint_every=10**9,
            eval_every=0,
            num_workers=sizes["workers"],
            progress=False,
        ),
        "data": {
            "train": str(inputs / f"train-{length}"),
            "dynamic_masking": True,
            "tokenizer": str(inputs / "tokenizer.model"),
            **({"init": str(init)} if init is not None else {}),
        },
        "output": str(out),
        "no_resume": True,
    }
    started = time.perf_counter()
    summary = run_pretraining(config)
    elapsed = (time.perf_counter() - started) / 60
    history = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rates = [row["tokens_per_second"] for row in history if "tokens_per_second" in row]
    losses = [(row["step"], row["mlm_loss"]) for row in history if "mlm_loss" in row]
    tokens_per_s = float(np.median(rates[1:] or rates)) if rates else None  # the first: start-up
    return {
        "train_length": length,
        "batch": batch,
        "steps": summary["steps"],
        "minutes": elapsed,
        "tokens_per_s": tokens_per_s,
        "continued": init is not None,
        "mfu": utilisation(out / "model", length, tokens_per_s),
        "mlm_loss_by_step": losses,
        "last_loss": next((row["loss"] for row in reversed(history) if "loss" in row), None),
    }


def utilisation(model_dir: Path, length: int, tokens_per_s: float | None) -> float | None:
    """Model FLOPs utilisation of a training rate (real tokens) against the card's dense
    bf16 peak (benchmarks/train.py's definition); None off a known GPU."""
    import torch

    from genobird.model import BigBirdConfig
    from genobird.model.bigbird import model_flops_per_token
    from genobird.model.io import read_model_description

    if not (tokens_per_s and torch.cuda.is_available()):
        return None
    peaks = {"H100": 989.0, "H200": 989.0, "A100": 312.0}  # as benchmarks/gpu.py
    peak = next((v for k, v in peaks.items() if k in torch.cuda.get_device_name()), None)
    config = BigBirdConfig(**read_model_description(model_dir)["config"])
    flops = 3 * model_flops_per_token(config, length) * tokens_per_s
    return flops / (peak * 1e12) if peak else None


# --------------------------------------------------------------------------- score
def first_record(fasta: Path, max_bp: int | None = None) -> str:
    """The sequence of a FASTA file's first record (its first `max_bp` bases)."""
    lines = fasta.read_text().splitlines()
    body = []
    for line in lines[1:]:
        if line.startswith(">"):
            break
        body.append(line.strip())
    return "".join(body)[:max_bp]


def heldout_pieces(fasta: Path, tokenizer, max_bp: int | None = None) -> list[dict]:
    """The held-out record's A/C/G/T runs, each as piece ids and each piece's start (bp,
    in the record); tokenised in CHUNK_BP chunks."""
    text = first_record(fasta, max_bp)
    runs = []
    for match in re.finditer("[ACGTacgt]+", text):
        ids, starts = [], []
        for chunk_start in range(0, len(match.group()), CHUNK_BP):
            chunk = match.group()[chunk_start : chunk_start + CHUNK_BP]
            chunk_ids = tokenizer.encode(chunk.upper(), normalise=False)
            lengths = tokenizer.piece_lengths[chunk_ids]
            starts += (match.start() + chunk_start + np.cumsum(lengths) - lengths).tolist()
            ids += list(chunk_ids)
        runs.append(
            {"ids": np.asarray(ids, dtype=np.int64), "starts": np.asarray(starts, dtype=np.int64)}
        )
    return runs


def stretches(runs: list[dict], longest: int, stretch: int) -> list[tuple[int, int]]:
    """(run, first piece) of every stretch whose window of `longest` tokens ([CLS] and
    [SEP] included) centred on it lies inside its run."""
    width = longest - 2
    out = []
    for index, run in enumerate(runs):
        n = len(run["ids"])
        first = max(0, width // 2 - stretch // 2)
        for start in range(first, n, stretch):
            window_start = start + stretch // 2 - width // 2
            if start + stretch <= n and window_start >= 0 and window_start + width <= n:
                out.append((index, start))
    return out


def score_lengths(model, tokenizer, runs, picked, lengths, stretch, score_tokens, device):
    """Bits of every piece of every stretch at each length: {length: array}, in the order
    of `picked` then position in the stretch."""
    import torch

    from genobird.inputs import model_padding
    from genobird.model.precision import autocast, autocast_dtype
    from genobird.scoring.likelihood import masked_batch_at, masked_bits

    padding = model_padding(model)
    dtype = autocast_dtype("auto", torch.device(device))
    out = {}
    for length in lengths:
        width = length - 2
        bits = np.zeros((len(picked), stretch))
        windows, offsets_in_window = [], []
        for run_index, start in picked:
            window_start = start + stretch // 2 - width // 2
            ids = runs[run_index]["ids"][window_start : window_start + width]
            windows.append(ids.tolist())
            offsets_in_window.append(start - window_start)
        per_batch = max(1, score_tokens // length)
        for offset in range(STRIDE):
            in_stretch = np.arange(offset, stretch, STRIDE)
            for first in range(0, len(windows), per_batch):
                rows = range(first, min(first + per_batch, len(windows)))
                scored = [in_stretch + offsets_in_window[row] for row in rows]
                batch = masked_batch_at([windows[row] for row in rows], scored, tokenizer, padding)
                with autocast(torch.device(device), dtype):
                    values = masked_bits(model, batch, device)
                bits[first : first + len(rows), in_stretch] = values.reshape(len(rows), -1)
        out[length] = bits.reshape(-1)
    return out


def paired(longer: np.ndarray, shorter: np.ndarray, bp: np.ndarray, groups: np.ndarray) -> dict:
    """Bits per bp saved by `longer` over `shorter` on the same pieces, with a 95% interval
    over groups (stretches): neighbouring pieces are not independent, stretches nearly are."""
    saved = shorter - longer
    ids = np.unique(groups)
    sums = np.array([saved[groups == g].sum() for g in ids])
    bps = np.array([bp[groups == g].sum() for g in ids])
    mean = sums.sum() / bps.sum()
    # ratio estimator's standard error over clusters
    residual = sums - mean * bps
    se = math.sqrt(len(ids) / max(len(ids) - 1, 1) * (residual**2).sum()) / bps.sum()
    return {
        "saved_bits_per_bp": float(mean),
        "ci95": [float(mean - 1.96 * se), float(mean + 1.96 * se)],
        "stretches": len(ids),
    }


def score_arms(inputs: Path, arms: dict, out: Path, sizes: dict, device: str) -> dict:
    """Both arms' per-piece bits at each length: pieces.npz and the figures."""
    from genobird.corpus.tokenizer import load_tokenizer
    from genobird.model.io import from_pretrained

    tokenizer = load_tokenizer(inputs / "tokenizer.model")
    runs = heldout_pieces(inputs / "heldout.fa", tokenizer, sizes["heldout_bp"])
    lengths, stretch = list(sizes["lengths"]), sizes["stretch"]
    picked = stretches(runs, max(lengths), stretch)
    piece_ids = np.concatenate([runs[r]["ids"][s : s + stretch] for r, s in picked])
    starts = np.concatenate([runs[r]["starts"][s : s + stretch] for r, s in picked])
    bp = tokenizer.piece_lengths[piece_ids].astype(np.float64)
    group = np.repeat(np.arange(len(picked)), stretch)
    arrays = {
        "piece_id": piece_ids.astype(np.int32),
        "start": starts.astype(np.int32),
        "bp": bp.astype(np.int16),
        "stretch": group.astype(np.int32),
    }
    figures = {
        "pieces": len(piece_ids),
        "bp": float(bp.sum()),
        "stretches": len(picked),
        "arms": {},
    }
    for name, model_dir in arms.items():
        started = time.perf_counter()
        model = from_pretrained(model_dir, device, {"max_position": max(lengths)}).eval()
        bits = score_lengths(
            model, tokenizer, runs, picked, lengths, stretch, sizes["score_tokens"], device
        )
        arm = {
            "bits_per_bp": {str(k): float(v.sum() / bp.sum()) for k, v in bits.items()},
            "gain_over_shortest": {
                str(k): paired(v, bits[lengths[0]], bp, group)
                for k, v in bits.items()
                if k != lengths[0]
            },
            "seconds": time.perf_counter() - started,
        }
        figures["arms"][name] = arm
        arrays.update({f"bits_{name}_{k}": v.astype(np.float32) for k, v in bits.items()})
        del model
    names = list(arms)
    if len(names) == 2:
        figures["long_minus_short_arm"] = {
            str(k): paired(
                arrays[f"bits_{names[0]}_{k}"].astype(np.float64),
                arrays[f"bits_{names[1]}_{k}"].astype(np.float64),
                bp,
                group,
            )
            for k in lengths
        }
    np.savez_compressed(out / "pieces.npz", **arrays)
    return figures


def run(
    inputs: Path,
    out: Path,
    dry_run: bool = False,
    device: str | None = None,
    work: Path | None = None,
    sizes: dict | None = None,
) -> dict:
    """Every arm trained (in `work`: models and checkpoints stay out of `out`), then
    "long" and "short" scored; `out` gets long_context.json after each stage, each arm's
    training log and pieces.npz."""
    import tempfile

    check_inputs(inputs)
    if work is None:  # models and checkpoints are not results: removed at the end
        with tempfile.TemporaryDirectory(prefix="genobird-long-context-") as folder:
            return run(inputs, out, dry_run, device, Path(folder), sizes)
    import torch

    sizes = dict(sizes or (DRY if dry_run else FULL))
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    out.mkdir(parents=True, exist_ok=True)
    lengths = sizes["lengths"]
    long_arm, short_arm = max(lengths), min(lengths)
    if dry_run or sizes["lengths"] != LENGTHS:  # instances of other lengths
        train_lengths = sorted({int(p.name.split("-")[1]) for p in inputs.glob("train-*")})
        long_arm, short_arm = max(train_lengths), min(train_lengths)
    result = {
        "device": device,
        "sizes": {k: v for k, v in sizes.items() if k != "model"},
        "model": sizes["model"],
        "training": {},
    }
    if device == "cuda":
        result["card"] = torch.cuda.get_device_name()

    def train(name, length, minutes, init=None, **model_changes):
        arm_out = work / name
        result["training"][name] = train_arm(
            inputs, arm_out, length, sizes, minutes, init, model_changes
        )
        shutil.copy(arm_out / "metrics.jsonl", out / f"train-{name}.jsonl")
        write_json(out / "long_context.json", result)
        return arm_out / "model"

    if sizes.get("from_scratch_arms"):  # the CPU study: both lengths from scratch
        arms = {
            "long": train(
                f"scratch-{long_arm}", long_arm, sizes["minutes"], attention_impl="block_sparse"
            ),
            "short": train(
                f"scratch-{short_arm}", short_arm, sizes["minutes"], attention_impl="block_sparse"
            ),
        }
        result["scores"] = score_arms(inputs, arms, out, sizes, device)
        result["scores"]["trained_as"] = {
            "long": f"scratch-{long_arm}",
            "short": f"scratch-{short_arm}",
        }
        write_json(out / "long_context.json", result)
        return result
    # From scratch at the long length, FlexAttention (the CUDA default) against the
    # PyTorch block-sparse kernel: where one leaves the unigram level and the other does
    # not, the kernel's training is at fault, not long instances.
    for impl in sizes["kernels"]:
        train(f"scratch-{long_arm}-{impl}", long_arm, sizes["kernel_minutes"], attention_impl=impl)
    # The study: one model pretrained at the short length, then continued for the same
    # minutes at the long length and at the short one (BigBird itself starts from a
    # model pretrained at 512 tokens).
    start = train(f"start-{short_arm}", short_arm, sizes["minutes"])
    arms = {
        "long": train(f"continued-{long_arm}", long_arm, sizes["continued"]["minutes"], start),
        "short": train(f"continued-{short_arm}", short_arm, sizes["continued"]["minutes"], start),
    }
    result["scores"] = score_arms(inputs, arms, out, sizes, device)
    result["scores"]["trained_as"] = {
        "long": f"continued-{long_arm}",
        "short": f"continued-{short_arm}",
    }
    write_json(out / "long_context.json", result)
    return result


def write_json(path: Path, value: dict) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(value, indent=2))
    partial.replace(path)


# --------------------------------------------------------------------------- summarise
def copy_mask(text: str, k: int = COPY_K) -> np.ndarray:
    """True at bases covered by a k-mer that occurs at least twice in `text` (counting
    both strands): bases inside copies within the region."""
    from collections import Counter

    upper = text.upper()
    table = str.maketrans("ACGT", "TGCA")
    kmers = [upper[i : i + k] for i in range(len(upper) - k + 1)]
    counts = Counter(kmer for kmer in kmers if "N" not in kmer)
    covered = np.zeros(len(upper) + 1, dtype=np.int32)
    for i, kmer in enumerate(kmers):
        if "N" in kmer:
            continue
        if counts[kmer] + counts.get(kmer.translate(table)[::-1], 0) >= 2:
            covered[i] += 1
            covered[i + k] -= 1
    return np.cumsum(covered)[:-1] > 0


def markov_piece_bits(
    heldout: str,
    starts: np.ndarray,
    bp: np.ndarray,
    order: int = 10,
    train_fastas=TRAIN_FASTAS,
    alpha: float = 4.0,
) -> np.ndarray:
    """Bits of each piece's bases under the order-`order` Markov model of the training
    chromosomes (both strands counted, add-`alpha` smoothing: `genobird baseline
    markov`'s model and benchmarks/repeats.py's), reading the held-out record left to
    right."""
    import pyfaidx

    from genobird.baselines.markov import base_bits, base_counts, dna_codes, fit_counts

    training = []
    for path in train_fastas:
        fasta = pyfaidx.Fasta(str(path))
        training += [dna_codes(str(record[:]).upper()) for record in fasta]
    counts = fit_counts(training, order, both_strands=True)
    codes = dna_codes(heldout.upper())
    per_base = np.zeros(len(codes))
    per_base[codes < 4] = base_bits(*base_counts(counts, codes, order), alpha)
    cumulative = np.concatenate([[0.0], np.cumsum(per_base)])
    return cumulative[starts + bp] - cumulative[starts]


def split_rows(bits: dict, bp: np.ndarray, group: np.ndarray, subsets: dict) -> list[str]:
    """Markdown rows: each model's bits per bp at each length, on each subset of pieces."""
    rows = []
    for name, values in bits.items():
        cells = [f"{values[keep].sum() / bp[keep].sum():.4f}" for keep in subsets.values()]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


def gain_rows(pairs: dict, bp: np.ndarray, group: np.ndarray, subsets: dict) -> list[str]:
    """Markdown rows: bits per bp saved by the first of each pair over the second, paired
    over stretches, on each subset."""
    rows = []
    for name, (better, worse) in pairs.items():
        cells = []
        for keep in subsets.values():
            gain = paired(better[keep], worse[keep], bp[keep], group[keep])
            low, high = gain["ci95"]
            cells.append(f"{gain['saved_bits_per_bp']:+.4f} [{low:+.4f}, {high:+.4f}]")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


def summarise(folder: Path, heldout_fasta: Path = HELDOUT_FASTA, train_fastas=TRAIN_FASTAS) -> str:
    """long_context.md: every arm's bits per bp at each length beside the Markov model's,
    on all pieces, pieces inside copies and the rest; the gains with intervals."""
    result = json.loads((folder / "long_context.json").read_text())
    arrays = dict(np.load(folder / "pieces.npz"))
    text = first_record(heldout_fasta)
    starts, bp = arrays["start"].astype(np.int64), arrays["bp"].astype(np.float64)
    group = arrays["stretch"]
    copies = np.concatenate([[0], np.cumsum(copy_mask(text))])
    in_copy = (copies[starts + bp.astype(np.int64)] - copies[starts]) * 2 > bp
    subsets = {
        "all pieces": np.ones(len(bp), bool),
        "in copies": in_copy,
        "outside copies": ~in_copy,
    }
    lengths = result["sizes"]["lengths"]
    training, scores = result["training"], result["scores"]
    trained_as = scores.get("trained_as", {arm: arm for arm in scores["arms"]})

    def label(name):
        row = training[name]
        how = "continued" if row.get("continued") else "trained"
        return f"{how} at {row['train_length']:,}"

    names = {arm: label(trained_as[arm]) for arm in scores["arms"]}
    bits = {
        f"{names[arm]}, read at {length:,}": arrays[f"bits_{arm}_{length}"].astype(float)
        for arm in names
        for length in lengths
    }
    markov = markov_piece_bits(text, starts, bp.astype(np.int64), train_fastas=train_fastas)
    bits["Markov order 10 (left context)"] = markov
    columns = [f"{name} ({int(keep.sum()):,} pieces)" for name, keep in subsets.items()]
    header = "| model | " + " | ".join(columns) + " |"
    rule = "| --- |" + " ---: |" * len(subsets)
    short, long_ = min(lengths), max(lengths)

    def scored(arm, length):
        return arrays[f"bits_{arm}_{length}"].astype(float)

    pairs = {}
    for arm in names:
        for length in lengths[1:]:
            pairs[f"{names[arm]}: read at {length:,} over {short:,}"] = (
                scored(arm, length),
                scored(arm, short),
            )
    for length in (short, long_):
        pairs[f"{names['long']} over {names['short']}, read at {length:,}"] = (
            scored("long", length),
            scored("short", length),
        )
    for arm in names:
        pairs[f"{names[arm]} (read at {long_:,}) over Markov order 10"] = (
            scored(arm, long_),
            markov,
        )
    card = result.get("card", result["device"])
    lines = [
        f"# Long context: two language models on {card}",
        "",
        f"Held-out {result['scores']['bp']:,.0f} bp of GRCh37 22:20-21 Mb in "
        f"{result['scores']['stretches']} stretches of {result['sizes']['stretch']} pieces; "
        f"in copies: most bases covered by a {COPY_K}-mer found again in the Mb (either "
        "strand).",
        "",
    ]
    for name, row in training.items():
        losses = row.get("mlm_loss_by_step") or []
        curve = ", ".join(
            f"{loss:.2f} at {step}" for step, loss in losses[:: max(1, len(losses) // 6)]
        )
        lines.append(
            f"- {name}: {row['steps']:,} steps of {row['batch']} in "
            f"{row['minutes']:.2f} min, {row['tokens_per_s']:,.0f} tokens/s, "
            f"last training loss {row['last_loss']:.3f}" + (f"; MLM loss {curve}" if curve else "")
        )
    from genobird.training.collapse import context_blind_note

    for arm in names:  # a model whose bits do not move with its context reads nothing
        per_length = {length: float(scored(arm, length).sum() / bp.sum()) for length in lengths}
        if note := context_blind_note(per_length):
            lines.append(f"- {names[arm]}: {note}")
    lines += [
        "",
        "Bits per bp:",
        "",
        header,
        rule,
        *split_rows(bits, bp, group, subsets),
        "",
        "Bits per bp saved (95% interval over stretches):",
        "",
        header,
        rule,
        *gain_rows(pairs, bp, group, subsets),
        "",
    ]
    report = "\n".join(lines)
    (folder / "long_context.md").write_text(report)
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser("prepare", help="the GPU run's inputs, on the CPU")
    prep.add_argument("--out", type=Path, required=True)
    prep.add_argument(
        "--corpus",
        type=Path,
        default=CORPUS,
        help="a folder with train.txt and tokenizer.model (default: %(default)s)",
    )
    prep.add_argument(
        "--heldout",
        type=Path,
        default=HELDOUT_FASTA,
        help="FASTA whose first record is scored (default: %(default)s)",
    )
    prep.add_argument(
        "--lengths",
        type=int,
        nargs=2,
        default=(4096, 512),
        help="the two training lengths (default: %(default)s)",
    )
    go = commands.add_parser("run", help="train both arms and score them")
    go.add_argument("--inputs", type=Path, required=True)
    go.add_argument("--out", type=Path, required=True)
    go.add_argument("--dry-run", action="store_true", help="tiny sizes, on the CPU")
    go.add_argument(
        "--cpu",
        action="store_true",
        help="the CPU study: a small shape from scratch at both lengths",
    )
    done = commands.add_parser("summarise", help="baselines and the copies split, on the CPU")
    done.add_argument("folder", type=Path)
    done.add_argument(
        "--heldout",
        type=Path,
        default=HELDOUT_FASTA,
        help="the FASTA the run scored (default: %(default)s)",
    )
    done.add_argument(
        "--train-fastas",
        type=Path,
        nargs="+",
        default=TRAIN_FASTAS,
        help="the Markov model's training DNA (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.out, args.corpus, args.heldout, args.lengths)
    elif args.command == "run":
        run(args.inputs, args.out, args.dry_run, sizes=CPU if args.cpu else None)
    else:
        print(summarise(args.folder, args.heldout, args.train_fastas))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
