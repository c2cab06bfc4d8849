"""One prepared GPU run: every GPU figure genobird reports, in one script, in order.

    python benchmarks/gpu.py --prepare               # here, with internet: wheels into .whl/
    python benchmarks/gpu.py --out DIR               # on the GPU machine (about 8 minutes)
    python benchmarks/gpu.py --out DIR --dry-run     # the same steps at tiny sizes on the CPU

GPU machines reach no package index: `--prepare` downloads the wheels genobird needs
that such a machine lacks (its image holds PyTorch, NumPy, h5py, transformers, ...) into
.whl/, an ignored folder that travels with the working tree; the run installs them into
a private folder first, and builds genobird's C BPE encoder for the machine's Python
(the tree carries the CPU machine's build only). Then, each step's figures written to
DIR/gpu.json and DIR/gpu.md as soon as the step ends (a run cut short keeps what it measured):

  a. attention forward+backward at 4k / 16k / 32k tokens (B=1, H=12, D=64, block 64,
     3 random blocks, bf16): genobird's path, dense flash SDPA, transformers' BigBird,
     and each one's peak memory; one call at a time, and 20 calls queued; then the
     same forward+backward replayed from a captured CUDA graph (no host work);
  b. base pretraining (12 x 768, 4,096 tokens, bf16): tokens/s and MFU against the
     card's dense bf16 peak, and the kernels that take the step's device time; then
     the same step replayed from one captured CUDA graph;
  c. a GENA-LM-shaped model (12 x 768, 32k pieces, 4,096 tokens) converted from
     transformers: training step and inference, genobird against transformers (bf16),
     and the largest output difference in bf16 and fp32, beside each model's own bf16
     rounding (its bf16 logits against its fp32 ones);
  d. scoring 8 kb windows with the base and tiny shapes: regions/s with 4, 8 and 14
     DataLoader workers, then each half alone (inputs: fetch, tokenise, batch; model:
     the same batches on the device) to show which bounds it;
  e. the CUDA tests (`pytest -k "cuda or flex"`; the dry run only collects them);
  f. step c with the model through torch.compile;
  g. the long-context study (benchmarks/long_context.py): two language models of one
     shape pretrained at 4,096 and at 512 tokens for the same minutes, each scored on
     held-out DNA at 512 to 4,096 tokens; its inputs are prepared on the CPU
     (`long_context.py prepare --out .gpu/long-context`) and carried. Into DIR/long_context.

The targets these are read against are in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
WHEELS = REPO / ".whl"
# What genobird imports that the GPU machines' image lacks (their pip list: KINDS.md of
# the device library); sentencepiece is there, but older than genobird's 0.2.3.
MISSING_THERE = ("pyfaidx", "biopython", "sentencepiece")
# Dense bf16 tensor-core peaks (TFLOP/s) of the cards genobird is timed on, for MFU.
CUDA_TEST_FILES = ("tests/test_attention.py", "tests/test_model.py", "tests/test_training.py")
PEAK_BF16 = {"H100": 989.0, "H200": 989.0, "A100": 312.0}

FULL = SimpleNamespace(
    attention_lengths=[4096, 16384, 32768],
    heads=12,
    dim=64,
    repeats=3,
    dtype="bf16",
    queued_calls=20,
    train_config="base",
    train_length=4096,
    train_batch=4,
    train_steps=3,
    # regions per shape, seconds of scoring each: at 2,048 regions the tiny model's whole
    # run took under a second with 14 workers, so their start-up weighed in its rate
    score_shapes=["base", "tiny"],
    score_regions={"base": 4096, "tiny": 16384},
    score_workers=[4, 8, 14],
    score_batch=32,
    hf=dict(layers=12, hidden=768, heads=12, vocab=32_000, length=4096),
)
DRY = SimpleNamespace(
    attention_lengths=[256, 512],
    heads=2,
    dim=16,
    repeats=1,
    dtype="fp32",
    queued_calls=2,
    train_config="tiny",
    train_length=256,
    train_batch=1,
    train_steps=1,
    score_shapes=["tiny"],
    score_regions={"tiny": 8},
    score_workers=[0],
    score_batch=4,
    hf=dict(layers=1, hidden=64, heads=4, vocab=1000, length=256),
)


# --------------------------------------------------------------------------- set-up
def prepare(wheels: Path = WHEELS, python_version: str = "3.12") -> None:
    """Download the wheels of MISSING_THERE (and their own needs) for the GPU machines'
    Python on x86-64 Linux, at the versions installed here."""
    from importlib import metadata

    wheels.mkdir(exist_ok=True)
    for name in MISSING_THERE:
        version = metadata.version(name)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                python_version,
                "--implementation",
                "cp",
                *[
                    f"--platform={tag}"
                    for tag in (
                        "manylinux_2_28_x86_64",
                        "manylinux_2_17_x86_64",
                        "manylinux2014_x86_64",
                        "manylinux1_x86_64",
                    )
                ],
                "-d",
                str(wheels),
                f"{name}=={version}",
            ],
            check=True,
        )
    # pure-Python ones (pyfaidx) come as py3-none-any and need no platform
    print(f"wheels in {wheels}: {sorted(p.name for p in wheels.glob('*.whl'))}")


def install_carried_wheels(wheels: Path = WHEELS) -> str | None:
    """Install carried wheels into a private folder (the machine's own Python is left
    alone) and put it first on the import path, here and for subprocesses."""
    found = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    if not found:
        return None
    target = Path(tempfile.gettempdir()) / "genobird-site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--upgrade",
            "--target",
            str(target),
            *map(str, found),
        ],
        check=True,
    )
    sys.path.insert(0, str(target))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(target), str(REPO), os.environ.get("PYTHONPATH", "")]
    ).rstrip(os.pathsep)
    return str(target)


def build_bpe_extension() -> str:
    """Build genobird's C BPE encoder in place when this Python has none (the tree
    carries the extension built for the CPU machine's Python only; the GPU image has a
    C compiler, which Triton needs too). Without it scoring tokenises with
    sentencepiece's encoder, about half as fast. Returns the encoder scoring will use."""
    import shutil
    import sysconfig

    # checked by file, not by import: importing genobird now would fix its choice of
    # encoder before the build
    target = REPO / "genobird" / "corpus" / f"_bpe{sysconfig.get_config_var('EXT_SUFFIX')}"
    if target.exists():
        return "fast_bpe"
    compiler = shutil.which("cc") or shutil.which("gcc")
    done = subprocess.run(
        [
            compiler or "cc",
            "-O2",
            "-shared",
            "-fPIC",
            f"-I{sysconfig.get_paths()['include']}",
            str(REPO / "genobird" / "corpus" / "_bpe.c"),
            "-o",
            str(target),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        print(f"[gpu] C BPE encoder not built: {done.stderr.strip()[-300:]}", flush=True)
        return "sentencepiece"
    return "fast_bpe"


def load_benchmark(name: str):
    """A sibling benchmark script as a module (they are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(
        f"bench_{name}", REPO / "benchmarks" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- steps
def long_context(sizes, device: str, dry_run: bool) -> dict:
    study = load_benchmark("long_context")
    result = study.run(sizes.long_context_inputs, sizes.out / "long_context", dry_run, device)
    return {"training": result["training"], "scores": result["scores"]}


def cuda_tests(sizes, device: str, dry_run: bool) -> dict:
    # Only the files that hold CUDA tests: collecting every test module would need
    # packages the GPU machines lack (pybedtools, snakemake).
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-k",
        "cuda or flex",
        *CUDA_TEST_FILES,
    ]
    if dry_run:
        command.append("--collect-only")
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=240)
    tail = done.stdout.strip().splitlines()[-1:] or [""]
    counts = {
        key: int(value)
        for value, key in re.findall(
            r"(\d+) (passed|failed|skipped|errors?|tests? collected|selected)", tail[0]
        )
    }
    return {
        "returncode": done.returncode,
        "summary": tail[0],
        **counts,
        "failures": [
            line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))
        ][:20],
    }


def attention(sizes, device: str, dry_run: bool) -> dict:
    import torch

    bench = load_benchmark("attention")
    args = SimpleNamespace(
        batch=1,
        heads=sizes.heads,
        dim=sizes.dim,
        block_size=64,
        random_blocks=3,
        repeats=sizes.repeats,
        device=device,
        dtype=sizes.dtype,
        impl="auto",
    )
    try:
        import transformers  # noqa: F401

        have_hf = True
    except ImportError:
        have_hf = False
    rows = []
    for length in sizes.attention_lengths:
        names = ["genobird", "sdpa"] + (["hf"] if have_hf and length <= 16_384 else [])
        timing = bench.time_methods(args, length, names)
        memory = {}
        if device == "cuda":
            for name in timing["fwd_bwd"]:
                q, k, v = bench.make_inputs(args, length)
                fn = bench.METHODS[name](args, length)
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
                bench.time_once(fn, q, k, v, True, device)
                memory[name] = (torch.cuda.max_memory_allocated() - base) / 2**20
                del q, k, v, fn
        timing["fwd_bwd_queued"] = queued_fwd_bwd(
            bench, args, length, list(timing["fwd_bwd"]), device, sizes.queued_calls
        )
        fwd_bwd = timing["fwd_bwd"]
        rows.append(
            {
                "tokens": length,
                "seconds": timing,
                "peak_mib": memory,
                "genobird_over_sdpa": fwd_bwd["genobird"] / fwd_bwd["sdpa"]
                if "sdpa" in fwd_bwd
                else None,
                "genobird_over_hf": fwd_bwd["genobird"] / fwd_bwd["hf"]
                if "hf" in fwd_bwd
                else None,
            }
        )
    return {"rows": rows}


def queued_fwd_bwd(bench, args, length: int, names: list, device: str, calls: int) -> dict:
    """Seconds per forward+backward when `calls` of them are queued before one
    synchronisation, as in a model whose layers keep the GPU busy: host latency (Python,
    guards, launches) hides behind GPU work where there is enough of it. The one-call
    figures above wait for each call, so at small sizes they time the host."""
    import torch

    q, k, v = bench.make_inputs(args, length)
    result = {}
    for name in names:
        fn = bench.METHODS[name](args, length)
        bench.time_once(fn, q, k, v, True, device)  # warm-up
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(calls):
            fn(q, k, v).float().sum().backward()
        if device == "cuda":
            torch.cuda.synchronize()
        result[name] = (time.perf_counter() - started) / calls
    return result


def pretraining(
    sizes, device: str, dry_run: bool, compiled: str | None = None, cuda_graph: bool = False
) -> dict:
    bench = load_benchmark("train")
    peak = card_peak_tflops(device)
    args = SimpleNamespace(
        length=sizes.train_length,
        batch_size=sizes.train_batch,
        steps=sizes.train_steps,
        warmup=1,
        checkpointing=False,
        device=device,
        impl="auto",
        attention_dropout=0.0,
        peak_tflops=peak,
        compile=compiled,
        cuda_graph=cuda_graph,
        profile=True,
    )
    return bench.measure(sizes.train_config, args)


def pretraining_graphed(sizes, device: str, dry_run: bool) -> dict:
    """The same step replayed from one captured CUDA graph: what the step costs with no
    host work between kernels. Its gap to `pretraining` is the host's share of the
    eager step. (The dry run has no CUDA graphs: it times the eager step again.)"""
    return pretraining(sizes, device, dry_run, cuda_graph=True)


def attention_graphed(sizes, device: str, dry_run: bool) -> dict:
    """Attention forward+backward replayed from a captured CUDA graph, genobird and
    dense SDPA: the kernels' own time, with the host's launch work (which the one-call
    and queued figures of `attention` include at 4k) taken out for both."""
    import torch

    bench, capture = load_benchmark("attention"), load_benchmark("train").cuda_graph
    args = SimpleNamespace(
        batch=1,
        heads=sizes.heads,
        dim=sizes.dim,
        block_size=64,
        random_blocks=3,
        device=device,
        dtype=sizes.dtype,
        impl="auto",
    )
    rows = []
    for length in sizes.attention_lengths:
        seconds = {}
        for name in ("genobird", "sdpa"):
            q, k, v = bench.make_inputs(args, length)
            fn = bench.METHODS[name](args, length)

            def step(fn=fn, q=q, k=k, v=v):
                fn(q, k, v).float().sum().backward()

            def unset(leaves=(q, k, v)):
                for tensor in leaves:
                    tensor.grad = None

            replay = capture(step, unset) if device == "cuda" else step
            replay()
            if device == "cuda":
                torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(sizes.queued_calls):
                replay()
            if device == "cuda":
                torch.cuda.synchronize()
            seconds[name] = (time.perf_counter() - started) / sizes.queued_calls
        rows.append(
            {
                "tokens": length,
                "seconds": seconds,
                "genobird_over_sdpa": seconds["genobird"] / seconds["sdpa"],
            }
        )
    return {"rows": rows}


def pretraining_compiled(sizes, device: str, dry_run: bool) -> dict:
    """The same step with the whole model through torch.compile (Inductor fuses the
    layer norms, GELUs, dropouts and residual adds the eager step runs one by one). The
    dry run traces it only (backend "eager"): no C++ or Triton build on the CPU."""
    return pretraining(sizes, device, dry_run, compiled="eager" if dry_run else "inductor")


def scoring(sizes, device: str, dry_run: bool) -> dict:
    bench = load_benchmark("score")
    from genobird.corpus import DocumentSpec, VocabSpec, train_vocabulary, write_documents
    from genobird.genome import Reference
    from genobird.genome.demo import DemoSpec, generate_demo_reference

    work = Path(tempfile.mkdtemp(prefix="genobird-gpu-score-"))
    generate_demo_reference(work / "genome", DemoSpec(seed=0, size_mb=1.0 if dry_run else 4.2))
    fasta = work / "genome" / "genome.fa"
    write_documents(fasta, work / "docs.txt", DocumentSpec(passes=1), progress=False)
    tokenizer = train_vocabulary(
        work / "docs.txt", work / "tokenizer.model", VocabSpec(500 if dry_run else 4000)
    )
    args = SimpleNamespace(device=device, precision="auto")
    window, tokens = (1000, 320) if dry_run else (8000, 1792)
    rates, parts = {}, {}
    for shape in sizes.score_shapes:
        model_dir = bench.make_model_dir(work, shape, tokenizer, window, tokens)
        bed = bench.random_bed(
            work / f"timed-{shape}.bed", Reference(fasta).lengths, sizes.score_regions[shape]
        )
        for workers in sizes.score_workers:
            rate = bench.regions_per_second(model_dir, bed, fasta, sizes.score_batch, args, workers)
            rates[f"{shape}, {workers} workers"] = rate
        parts[shape] = bench.scoring_parts(
            model_dir, bed, fasta, sizes.score_batch, args, max(sizes.score_workers)
        )
    built = importlib.util.find_spec("genobird.corpus._bpe") is not None
    encoder = "fast_bpe" if built else "sentencepiece"
    return {
        "window_bp": window,
        "regions": sizes.score_regions,
        "encoder": encoder,
        "regions_per_s": rates,
        "parts_regions_per_s": parts,
    }


def hf_model(sizes, device: str, dry_run: bool) -> dict:
    import statistics

    import torch

    bench = load_benchmark("hf_model")
    args = SimpleNamespace(**sizes.hf, batch=1, device=device)
    with tempfile.TemporaryDirectory() as tmp:
        theirs, ours = bench.build_pair(args, Path(tmp))
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, args.vocab, (1, args.length), generator=generator).to(device)
    result = bf16_agreement(bench, theirs, ours, ids, device)
    dtype = torch.bfloat16 if device == "cuda" else None
    steps = {"transformers": [], "genobird": []}
    for _ in range(sizes.repeats):
        steps["transformers"].append(
            bench.timed(bench.step_theirs, theirs, ids, ids, dtype, device)
        )
        steps["genobird"].append(bench.timed(bench.step_ours, ours, ids, ids, dtype, device))
    result["training_step_s"] = {k: statistics.median(v) for k, v in steps.items()}
    result["training_genobird_over_transformers"] = (
        result["training_step_s"]["genobird"] / result["training_step_s"]["transformers"]
    )
    inference = {"transformers": [], "genobird": []}
    with torch.no_grad():
        for _ in range(sizes.repeats):
            for name, logits, model in (
                ("transformers", bench.logits_theirs, theirs),
                ("genobird", bench.logits_ours, ours),
            ):
                inference[name].append(timed_forward(logits, model, ids, dtype, device))
    result["inference_s"] = {k: statistics.median(v) for k, v in inference.items()}
    result["inference_genobird_over_transformers"] = (
        result["inference_s"]["genobird"] / result["inference_s"]["transformers"]
    )
    return result


def bf16_agreement(bench, theirs, ours, ids, device: str) -> dict:
    """The largest difference of the two models' MLM logits in fp32 and in bf16 autocast;
    beside it, how far each model's own bf16 logits lie from its fp32 ones (bf16's own
    rounding at this size), the scale against which the bf16 difference is read, and the
    largest logit (bf16 keeps 8 bits: a logit near 4 moves in steps of 1/64)."""
    import torch

    logits = {}
    for name, dtype in (("fp32", None), ("bf16", torch.bfloat16)):
        if name == "bf16" and device != "cuda":
            continue
        # forward only: a backward pass here would autotune FlexAttention's fp32 backward
        # kernel, which took 3 of the step's 4 minutes on an H200 and measures nothing
        with torch.no_grad():
            logits[name] = (
                bench.logits_theirs(theirs, ids, dtype).float(),
                bench.logits_ours(ours, ids, dtype).float(),
            )
    result = {}
    for name, (expected, got) in logits.items():
        result[f"largest_difference_{name}"] = (expected - got).abs().max().item()
    if "bf16" in logits:
        (theirs32, ours32), (theirs16, ours16) = logits["fp32"], logits["bf16"]
        result["bf16_from_own_fp32"] = {
            "transformers": (theirs16 - theirs32).abs().max().item(),
            "genobird": (ours16 - ours32).abs().max().item(),
        }
        result["largest_logit"] = theirs32.abs().max().item()
    return result


def timed_forward(logits, model, ids, dtype, device: str) -> float:
    """Seconds of one forward pass (`logits`: hf_model's logits_theirs or logits_ours)."""
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    logits(model, ids, dtype)
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started


# The figures first, the tests last: a run cut short keeps the figures.
STEPS = (
    ("attention", attention),
    ("attention_graphed", attention_graphed),
    ("pretraining", pretraining),
    ("pretraining_graphed", pretraining_graphed),
    ("hf_model", hf_model),
    ("scoring", scoring),
    ("cuda_tests", cuda_tests),
    ("pretraining_compiled", pretraining_compiled),
    ("long_context", long_context),
)


def card_peak_tflops(device: str) -> float | None:
    if device != "cuda":
        return None
    import torch

    name = torch.cuda.get_device_name()
    return next((peak for card, peak in PEAK_BF16.items() if card in name), None)


# --------------------------------------------------------------------------- results
def environment(device: str) -> dict:
    import torch

    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device": device,
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
    }
    if device == "cuda":
        info["card"] = torch.cuda.get_device_name()
        info["cuda"] = torch.version.cuda
        try:
            info["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            info["driver"] = None
    return info


def markdown(results: dict) -> str:
    """One table of the run's figures (those measured so far)."""
    env = results["environment"]
    lines = [
        f"# genobird GPU run: {env.get('card', env['device'])}",
        "",
        f"torch {env['torch']}, CUDA {env.get('cuda')}, driver {env.get('driver')}; "
        f"`{env['command']}`",
        "",
        "| step | figure | value |",
        "| --- | --- | --- |",
    ]
    for name, step in results["steps"].items():
        if "error" in step:
            lines.append(f"| {name} | error | {step['error'][:200]} |")
            continue
        for figure, value in flatten(step["result"]):
            lines.append(f"| {name} | {figure} | {format_value(value)} |")
        lines.append(f"| {name} | seconds | {step['seconds']:.1f} |")
    return "\n".join(lines) + "\n"


def flatten(value, prefix: str = ""):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from flatten(item, f"{prefix}{'.' if prefix else ''}{key}")
    elif isinstance(value, list) and value and isinstance(value[0], dict):
        for item in value:
            label = item.get("tokens", "")
            yield from flatten(
                {k: v for k, v in item.items() if k != "tokens"}, f"{prefix}[{label}]"
            )
    else:
        yield prefix, value


def format_value(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def write_results(out: Path, results: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, text in (("gpu.json", json.dumps(results, indent=2)), ("gpu.md", markdown(results))):
        partial = out / f".{name}.partial"
        partial.write_text(text)
        partial.replace(out / name)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="folder for gpu.json and gpu.md")
    parser.add_argument(
        "--dry-run", action="store_true", help="the same steps at tiny sizes on the CPU"
    )
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="download the wheels the GPU machine lacks into .whl/",
    )
    parser.add_argument(
        "--steps",
        nargs="+",
        choices=[name for name, _ in STEPS],
        help="run only these steps (default: all, in order)",
    )
    parser.add_argument(
        "--train-batch",
        type=int,
        help=f"instances per pretraining step (default: {FULL.train_batch})",
    )
    parser.add_argument(
        "--score-shapes",
        nargs="+",
        choices=["base", "tiny"],
        help="the model shapes the scoring step times (default: both)",
    )
    parser.add_argument(
        "--long-context-inputs",
        type=Path,
        default=REPO / ".gpu" / "long-context",
        help="the long-context study's inputs (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if args.prepare:
        prepare()
        return 0
    if args.out is None:
        parser.error("--out is required (or --prepare)")
    if not args.dry_run:
        install_carried_wheels()
        build_bpe_extension()
    sys.path.insert(0, str(REPO))
    import torch

    device = "cuda" if torch.cuda.is_available() and not args.dry_run else "cpu"
    if not args.dry_run and device != "cuda":
        print("no GPU here: the figures would be CPU ones; use --dry-run", file=sys.stderr)
        return 2
    sizes = SimpleNamespace(
        **vars(DRY if args.dry_run else FULL),
        out=args.out,
        long_context_inputs=args.long_context_inputs,
    )
    if args.score_shapes:
        sizes.score_shapes = args.score_shapes
    if args.train_batch:
        sizes.train_batch = args.train_batch
    results = {"environment": environment(device), "dry_run": args.dry_run, "steps": {}}
    for name, step in STEPS:
        if args.steps and name not in args.steps:
            continue
        started = time.perf_counter()
        print(f"[gpu] {name} ...", flush=True)
        try:
            outcome = {"result": step(sizes, device, args.dry_run)}
        except Exception as error:  # a failed step must not cost the ones after it
            outcome = {"error": f"{type(error).__name__}: {error}"}
        outcome["seconds"] = time.perf_counter() - started
        results["steps"][name] = outcome
        write_results(args.out, results)
        print(f"[gpu] {name}: {json.dumps(outcome)[:600]}", flush=True)
    failed = [name for name, step in results["steps"].items() if "error" in step]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
