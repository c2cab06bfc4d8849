"""Training throughput: tokens per second of MLM+NSP steps, and model FLOPs utilisation.

    python benchmarks/train.py                         # CPU: tiny and base at 4096 tokens
    python benchmarks/train.py --device cuda --configs base --batch-size 8   # bf16 on GPU
    python benchmarks/train.py --configs human-mini --length 512 --batch-size 16 --base-conv 128

Random token ids (throughput does not depend on content), 15% of positions predicted.
Each configuration runs `--warmup` untimed steps, then `--steps` timed ones; the figure
is the median step. MFU = 3 x forward FLOPs (genobird.model.model_flops_per_token, which
counts the block-sparse attention actually computed) / step time / `--peak-tflops`.
With `--base-conv K` each configuration is also run with a K-filter base convolution
(model.bigbird.BaseConvolution) over a vocabulary of random DNA pieces of 1-12 bases
(6.5 on average; genobird's 16,000-piece human vocabulary: 6.1), and the ratio printed;
with `--rotary`, also with rotary positions instead of the position table.
`--cuda-graph` replays each step from one captured CUDA graph (no host work between
kernels); `--profile` adds where a step's time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path

os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # as the genobird command does

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from genobird.model import BigBirdConfig, BigBirdForPretraining, bigbird, count_parameters
from genobird.model.bigbird import model_flops_per_token

CONFIGS = {
    "tiny": dict(hidden_size=128, num_layers=2, num_heads=4, intermediate_size=512),
    "base": dict(hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072),
    # pipelines/pretrain/human-mini.yaml, and the wider shape it replaced on 2 CPU cores
    "human-mini": dict(hidden_size=128, num_layers=4, num_heads=4, intermediate_size=512),
    "human-mini-256": dict(hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024),
}
VOCAB_SIZE = 32_000


def dna_pieces(count: int) -> list[str]:
    """Special tokens, then random DNA pieces of 1-12 bases."""
    generator = torch.Generator().manual_seed(0)
    sizes = torch.randint(1, 13, (count - 5,), generator=generator).tolist()
    bases = torch.randint(0, 4, (sum(sizes),), generator=generator).tolist()
    text = "".join("ACGT"[b] for b in bases)
    pieces, start = [], 0
    for size in sizes:
        pieces.append(text[start : start + size])
        start += size
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *pieces]


def batch(config: BigBirdConfig, size: int, length: int, device):
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, config.vocab_size, (size, length), generator=generator)
    predictions = int(0.15 * length)
    positions = torch.stack(
        [torch.randperm(length, generator=generator)[:predictions] for _ in range(size)]
    )
    return {
        "input_ids": ids.to(device),
        "segment_ids": (torch.arange(length) >= length // 2).long().expand(size, -1).to(device),
        "attention_mask": torch.ones(size, length, dtype=torch.bool, device=device),
        "masked_positions": positions.to(device),
        "masked_labels": torch.gather(ids, 1, positions).to(device),
        "nsp_labels": torch.randint(0, 2, (size,), generator=generator).to(device),
    }


def measure(name: str, args, base_conv: int = 0, position_encoding: str = "absolute") -> dict:
    config = BigBirdConfig(
        vocab_size=VOCAB_SIZE,
        max_position=args.length,
        **CONFIGS[name],
        gradient_checkpointing=args.checkpointing,
        attention_impl=args.impl,
        attention_dropout=args.attention_dropout,
        base_conv_channels=base_conv,
        position_encoding=position_encoding,
    )
    model = BigBirdForPretraining(config)
    if base_conv:
        model.encoder.embeddings.set_vocabulary(dna_pieces(VOCAB_SIZE))
    model = model.to(args.device).train()
    if getattr(args, "compile", None) == "layers":
        # Regional compilation: each encoder layer through Inductor (fusing bias, GELU,
        # dropout, residual and LayerNorm), the attention core left to its own kernel
        # (a graph break), so FlexAttention needs no autotuned tiles here.
        bigbird.attention = torch.compiler.disable(bigbird.attention)
        for layer in model.encoder.layers:
            layer.attention.layout_for(args.length, torch.device(args.device))  # not traced
            layer.compile(dynamic=False)
    elif getattr(args, "compile", None) == "inductor":
        # max_autotune: FlexAttention's backward needs tiles that divide a 64-token block,
        # which only its autotuning offers (genobird/attention/flex.py); matrix products
        # stay on cuBLAS (ATEN) so that autotuning does not time every GEMM shape.
        options = {"max_autotune": True, "max_autotune_gemm_backends": "ATEN"}
        model = torch.compile(model, dynamic=False, options=options)
    elif getattr(args, "compile", None):  # "eager": Dynamo's tracing only
        model = torch.compile(model, backend=args.compile, dynamic=False)
    graphed = getattr(args, "cuda_graph", False) and args.device == "cuda"
    # A step replayed from a CUDA graph needs an optimiser whose step count stays on the GPU.
    optimiser = torch.optim.AdamW(
        model.parameters(), lr=1e-4, capturable=graphed, fused=args.device == "cuda"
    )  # as the trainer
    inputs = batch(config, args.batch_size, args.length, args.device)
    dtype = torch.bfloat16 if args.device == "cuda" else None

    def step() -> None:
        # No autocast weight cache: a graph's casts must be recorded, not looked up.
        with torch.autocast(
            args.device, dtype=dtype, enabled=dtype is not None, cache_enabled=not graphed
        ):
            loss = model(**inputs).loss
        loss.backward()
        optimiser.step()
        if not graphed:
            optimiser.zero_grad(set_to_none=True)

    unset = partial(optimiser.zero_grad, set_to_none=True)
    run = cuda_graph(step, unset) if graphed else step
    times = []
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for index in range(args.warmup + args.steps):
        if args.device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        run()
        if args.device == "cuda":
            torch.cuda.synchronize()
        if index >= args.warmup:
            times.append(time.perf_counter() - started)
    step_time = statistics.median(times)
    tokens = args.batch_size * args.length
    flops = 3 * model_flops_per_token(config, args.length) * tokens
    row = {
        "config": name,
        "parameters_m": count_parameters(model) / 1e6,
        "step_s": step_time,
        "tokens_per_s": tokens / step_time,
        "tflops": flops / step_time / 1e12,
    }
    if args.device == "cuda":
        row["peak_gib_per_sample"] = torch.cuda.max_memory_allocated() / 2**30 / args.batch_size
    if args.peak_tflops:
        row["mfu"] = row["tflops"] / args.peak_tflops
    if getattr(args, "profile", False):
        row["profile"] = profile(run, args.device)
    return row


def cuda_graph(step, unset_gradients):
    """`step` captured once as a CUDA graph: each replay launches its kernels with no
    Python, guards or launch latency in between (torch.cuda.graphs' whole-network
    recipe: warm up on a side stream, which also compiles FlexAttention, then capture
    with gradients unset, so that every replay writes them afresh)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            unset_gradients()
            step()
    torch.cuda.current_stream().wait_stream(side)
    unset_gradients()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def profile(run, device: str, steps: int = 2, top: int = 12) -> dict:
    """Where a step's time goes: the kernels that take most of the device's time, and the
    share of the wall-clock step during which the device computes (the rest is the host:
    Python, launches, synchronisation). On the CPU (dry runs): operators' self time."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    on_cuda = device == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    profiler = torch_profile(activities=activities)
    started = time.perf_counter()
    with profiler:
        for _ in range(steps):
            run()
        if on_cuda:
            torch.cuda.synchronize()
    wall = (time.perf_counter() - started) / steps
    if on_cuda:
        events = [e for e in profiler.key_averages() if e.device_type == DeviceType.CUDA]
        seconds = {e.key: e.self_device_time_total / 1e6 / steps for e in events}
    else:
        seconds = {e.key: e.self_cpu_time_total / 1e6 / steps for e in profiler.key_averages()}
    busy = sum(seconds.values()) if on_cuda else wall
    ranked = sorted(seconds.items(), key=lambda item: item[1], reverse=True)[:top]
    return {
        "wall_s_per_step": wall,
        "device_busy_s_per_step": busy,
        "device_busy_fraction": busy / wall if wall else None,
        "top": {name[:80]: value for name, value in ranked},
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", choices=CONFIGS, default=list(CONFIGS))
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--checkpointing", action="store_true", help="gradient checkpointing")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--impl", default="auto", help="attention_impl (auto: flex on CUDA without dropout)"
    )
    parser.add_argument(
        "--attention-dropout", type=float, default=0.1, help="0 lets CUDA use FlexAttention"
    )
    parser.add_argument(
        "--base-conv",
        type=int,
        default=0,
        metavar="K",
        help="also run each config with a K-filter base convolution",
    )
    parser.add_argument(
        "--rotary", action="store_true", help="also run each config with rotary positions"
    )
    parser.add_argument(
        "--compile",
        nargs="?",
        const="inductor",
        metavar="BACKEND",
        help="the model through torch.compile (default: inductor; "
        "'layers': each encoder layer, attention left eager)",
    )
    parser.add_argument(
        "--cuda-graph", action="store_true", help="replay each step from one captured CUDA graph"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also print where a step's time goes (torch.profiler)",
    )
    parser.add_argument("--peak-tflops", type=float, help="device peak, for MFU (H100 bf16: 989)")
    args = parser.parse_args(argv)
    print(
        f"device {args.device}, {args.length} tokens, batch {args.batch_size}, median of "
        f"{args.steps} steps, torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"attention_impl {args.impl}, attention dropout {args.attention_dropout}"
        + (f", torch.compile ({args.compile})" if args.compile else "")
        + (f", {torch.cuda.get_device_name()}" if args.device == "cuda" else "")
    )
    for name in args.configs:
        row = measure(name, args)
        text = (
            f"{name}: {row['parameters_m']:.1f} M parameters, {row['step_s']:.2f} s/step, "
            f"{row['tokens_per_s']:,.0f} tokens/s, {row['tflops'] * 1000:.1f} GFLOP/s"
        )
        if "peak_gib_per_sample" in row:
            text += f", peak {row['peak_gib_per_sample']:.2f} GiB/sample"
        if "mfu" in row:
            text += f", MFU {100 * row['mfu']:.1f}%"
        print(text)
        if "profile" in row:
            print(json.dumps(row["profile"], indent=2))
        table = row
        if args.base_conv:
            with_conv = table = measure(name, args, args.base_conv)
            print(
                f"{name} + base convolution ({args.base_conv} filters): "
                f"{with_conv['step_s']:.2f} s/step, {with_conv['tokens_per_s']:,.0f} tokens/s, "
                f"{with_conv['tokens_per_s'] / row['tokens_per_s']:.2f}x the throughput without"
            )
        if args.rotary:
            rotary = measure(name, args, args.base_conv, "rotary")
            ratio = rotary["tokens_per_s"] / table["tokens_per_s"]
            print(
                f"{name} with rotary positions: {rotary['step_s']:.2f} s/step, "
                f"{rotary['tokens_per_s']:,.0f} tokens/s, {ratio:.2f}x the throughput with "
                "the position table"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
