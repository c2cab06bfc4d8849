"""Attention core benchmark: genobird block-sparse vs dense SDPA vs HuggingFace BigBird.

    python benchmarks/attention.py                       # CPU, fp32, N = 1024 .. 32768
    python benchmarks/attention.py --lengths 4096 --repeats 5
    python benchmarks/attention.py --device cuda --dtype bf16 --lengths 8192 16384

All methods get the same q, k, v [B, H, N, D] in one process; each repeat runs every
method once (interleaved), and the median is reported, so machine noise hits all
methods alike. Ratios are sparse / baseline. Peak memory is measured per method in a
fresh subprocess after one warm-up call (CPU: peak RSS above the inputs; CUDA:
torch.cuda.max_memory_allocated).
HuggingFace's BigBirdBlockSparseAttention (optional: pip install transformers) runs in
train mode, because in eval mode it drops its random blocks.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

if "--no-thp" not in sys.argv:  # as the genobird command does (genobird/cli.py)
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from genobird.attention import attention, bigbird_layout

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


# --------------------------------------------------------------------------- methods
def make_inputs(args, length):
    generator = torch.Generator().manual_seed(0)
    shape = (args.batch, args.heads, length, args.dim)
    return [
        torch.randn(shape, generator=generator)
        .to(args.device, DTYPES[args.dtype])
        .requires_grad_(True)
        for _ in range(3)
    ]


def genobird_method(args, length):
    layout = bigbird_layout(
        length, args.block_size, num_heads=args.heads, num_random_blocks=args.random_blocks
    ).to(args.device)
    return lambda q, k, v: attention(q, k, v, layout, impl=args.impl)


def sdpa_method(args, length):
    return lambda q, k, v: F.scaled_dot_product_attention(q, k, v)


def hf_method(args, length):
    from transformers import BigBirdConfig as HFConfig
    from transformers.models.big_bird.modeling_big_bird import (
        BigBirdBlockSparseAttention,
        BigBirdModel,
    )

    config = HFConfig(
        hidden_size=args.heads * args.dim,
        num_attention_heads=args.heads,
        block_size=args.block_size,
        num_random_blocks=args.random_blocks,
        attention_type="block_sparse",
        max_position_embeddings=length,
    )
    module = BigBirdBlockSparseAttention(config, seed=0).to(args.device).train()
    # In the inputs' dtype: transformers scatters mask values into score tensors, and a
    # float32 mask beside bf16 scores fails there.
    mask = torch.ones(args.batch, length, device=args.device, dtype=DTYPES[args.dtype])
    blocked, band, from_mask, to_mask = BigBirdModel.create_masks_for_block_sparse_attn(
        mask, args.block_size
    )

    def run(q, k, v):
        out, _ = module.bigbird_block_sparse_attention(
            q,
            k,
            v,
            band,
            from_mask,
            to_mask,
            blocked,
            blocked,
            args.heads,
            args.random_blocks,
            args.dim,
            args.block_size,
            args.block_size,
            args.batch,
            length,
            length,
            seed=0,
            plan_from_length=None,
            plan_num_rand_blocks=None,
        )
        return out

    return run


METHODS = {"genobird": genobird_method, "sdpa": sdpa_method, "hf": hf_method}


# --------------------------------------------------------------------------- timing
def synchronise(device):
    if device == "cuda":
        torch.cuda.synchronize()


def time_once(fn, q, k, v, backward: bool, device: str) -> float:
    for t in (q, k, v):
        t.grad = None
    synchronise(device)
    start = time.perf_counter()
    if backward:
        fn(q, k, v).float().sum().backward()
    else:
        with torch.no_grad():
            fn(q, k, v)
    synchronise(device)
    return time.perf_counter() - start


def time_methods(args, length, names):
    q, k, v = make_inputs(args, length)
    fns = {name: METHODS[name](args, length) for name in names}
    results = {}
    for backward in (False, True):
        for name, fn in list(fns.items()):  # warm-up (and compile, on CUDA)
            try:
                time_once(fn, q, k, v, backward, args.device)
            except Exception as exc:  # an optional baseline that cannot run here
                if name == "genobird":
                    raise
                print(f"  {name} dropped at N={length}: {type(exc).__name__}: {exc}"[:300])
                del fns[name]
        names = list(fns)
        samples = {name: [] for name in names}
        for _ in range(args.repeats):
            for name, fn in fns.items():
                samples[name].append(time_once(fn, q, k, v, backward, args.device))
        key = "fwd_bwd" if backward else "fwd"
        results[key] = {name: statistics.median(times) for name, times in samples.items()}
    return results


# --------------------------------------------------------------------------- memory
def measure_memory(args, length, name) -> float | None:
    """Peak extra memory (MiB) of one forward+backward, in a fresh subprocess."""
    command = [
        sys.executable,
        __file__,
        "--memory-probe",
        name,
        "--lengths",
        str(length),
        "--device",
        args.device,
        "--dtype",
        args.dtype,
        "--heads",
        str(args.heads),
        "--dim",
        str(args.dim),
        "--batch",
        str(args.batch),
        "--block-size",
        str(args.block_size),
        "--random-blocks",
        str(args.random_blocks),
        "--impl",
        args.impl,
        *(["--no-thp"] if args.no_thp else []),
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"  memory probe {name} N={length} failed: {done.stderr.strip()[-300:]}")
        return None
    return float(done.stdout.strip().splitlines()[-1])


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # kB -> MiB
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak_rss() -> None:
    """Linux: writing 5 to clear_refs resets the peak resident set size (VmHWM)."""
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def memory_probe(args) -> None:
    length = args.lengths[0]
    q, k, v = make_inputs(args, length)
    fn = METHODS[args.memory_probe](args, length)
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn(q, k, v).float().sum().backward()
        print((torch.cuda.max_memory_allocated() - base) / 2**20)
        return
    # The first call sets up thread pools and kernel caches (hundreds of MiB that do not
    # depend on N): run it once, then measure the peak of a second run above the inputs.
    fn(q, k, v).float().sum().backward()
    for t in (q, k, v):
        t.grad = None
    gc.collect()
    _reset_peak_rss()
    base = _status_mib("VmRSS")
    fn(q, k, v).float().sum().backward()
    print(_status_mib("VmHWM") - base)


# --------------------------------------------------------------------------- report
def useful_flops(args, length) -> float:
    """Forward FLOPs of the pattern's allowed (query, key) pairs: 4 * D per pair."""
    layout = bigbird_layout(length, args.block_size, num_heads=args.heads)
    pairs = float(layout.block_mask.sum()) * args.block_size**2
    return 4 * args.dim * pairs * args.batch


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384, 32768])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--block-size", type=int, default=64)
    parser.add_argument("--random-blocks", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=DTYPES, default="fp32")
    parser.add_argument("--impl", default="auto", help="genobird attention_impl")
    parser.add_argument("--dense-max", type=int, default=16384, help="longest N timed for SDPA")
    parser.add_argument("--no-hf", action="store_true", help="skip HuggingFace BigBird")
    parser.add_argument(
        "--hf-max", type=int, default=16384, help="longest N for HF (it allocates H*N*N probs)"
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the memory probes")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    parser.add_argument(
        "--no-thp", action="store_true", help="plain 4 KiB pages (THP_MEM_ALLOC_ENABLE unset)"
    )
    parser.add_argument("--memory-probe", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_probe:
        memory_probe(args)
        return 0
    torch.set_grad_enabled(True)
    have_hf = not args.no_hf
    if have_hf:
        try:
            import transformers  # noqa: F401
        except ImportError:
            print("transformers not installed: HuggingFace comparison skipped")
            have_hf = False
    print(
        f"device {args.device}, {args.dtype}, B={args.batch} H={args.heads} D={args.dim} "
        f"block {args.block_size}, random blocks {args.random_blocks}, median of {args.repeats}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"THP_MEM_ALLOC_ENABLE={os.environ.get('THP_MEM_ALLOC_ENABLE', 'unset')}"
    )
    rows = []
    for length in args.lengths:
        names = ["genobird"]
        if length <= args.dense_max:
            names.append("sdpa")
        if have_hf and length % args.block_size == 0 and length <= args.hf_max:
            names.append("hf")
        timing = time_methods(args, length, names)
        memory = {}
        if not args.no_memory:
            memory = {name: measure_memory(args, length, name) for name in names}
        row = {"N": length, "timing_s": timing, "peak_mib": memory}
        row["tflops_fwd"] = useful_flops(args, length) / timing["fwd"]["genobird"] / 1e12
        rows.append(row)
        print_row(row)
    print_summary(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


def _ratio(numerator, denominator):
    return f"{numerator / denominator:.2f}x" if numerator and denominator else "-"


def print_row(row) -> None:
    t, m = row["timing_s"], row["peak_mib"]
    parts = [f"N={row['N']:>6}"]
    for key in ("fwd", "fwd_bwd"):
        times = t[key]
        text = f"{key}: genobird {times['genobird'] * 1e3:8.1f} ms"
        for baseline in ("sdpa", "hf"):
            if baseline in times:
                ratio = _ratio(times["genobird"], times[baseline])
                text += f", {baseline} {times[baseline] * 1e3:8.1f} ms ({ratio})"
        parts.append(text)
    if m:
        parts.append("peak MiB " + ", ".join(f"{k} {v:.0f}" for k, v in m.items() if v is not None))
    print(" | ".join(parts))


def print_summary(rows) -> None:
    by_n = {row["N"]: row for row in rows}
    if 4096 in by_n and 32768 in by_n:
        growth = (
            by_n[32768]["timing_s"]["fwd_bwd"]["genobird"]
            / by_n[4096]["timing_s"]["fwd_bwd"]["genobird"]
        )
        print(f"growth t(32768)/t(4096), fwd+bwd: {growth:.2f} (linear: 8)")
    if 32768 in by_n:
        sparse = by_n[32768]["peak_mib"].get("genobird")
        heads, n = 12, 32768
        materialised = heads * n * n * 4 / 2**20  # fp32 scores of dense attention, forward only
        if sparse:
            print(
                f"N=32768 peak memory: genobird {sparse:.0f} MiB vs {materialised:.0f} MiB for the "
                f"dense score matrix alone ({sparse / materialised:.3f}x)"
            )


if __name__ == "__main__":
    sys.exit(main())
