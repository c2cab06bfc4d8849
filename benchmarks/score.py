"""Scoring throughput (regions per second at 8 kb) and memory on a 1,000,000-line BED.

    python benchmarks/score.py                      # CPU: tiny and base models, then memory
    python benchmarks/score.py --skip-memory --regions 64
    python benchmarks/score.py --device cuda --skip-memory --workers 0 4   # GPU feeding
    python benchmarks/score.py --shapes --skip-memory --segmentations 0 4 16  # averaging cost

Models are built here with random weights (speed does not depend on them): the demo's
tiny shape (2 x 128) and the paper's base shape (12 x 768), both reading 8 kb windows
(1,792 tokens at the demo vocabulary's ~5 bp/token), through `genobird.load_predictor`
and `Predictor.score_bed` on the demo genome. Memory: peak RSS of `genobird score` in a
fresh process on BED files of 250,000 and 1,000,000 lines (a one-layer model on 200 bp
windows, so that a million regions finish in minutes on 2 cores): it should be flat.
Segmentation averaging: `Predictor.predict` on 101 bp windows (GUE's length, both
strands) with K BPE-dropout cuts per strand, each K timed in turn over several rounds
(medians), as regions/s and as the time of the tokenizer's cut (K = 0) over K's.
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from genobird.corpus import DocumentSpec, VocabSpec, train_vocabulary, write_documents
from genobird.genome.demo import DemoSpec, generate_demo_reference
from genobird.model import BigBirdConfig, BigBirdForSequenceClassification, save_pretrained
from genobird.scoring.predict import load_predictor

SHAPES = {
    "tiny": dict(hidden_size=128, num_layers=2, num_heads=4, intermediate_size=512),
    "base": dict(hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072),
    "micro": dict(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64),
}


def make_model_dir(
    folder: Path, shape: str, tokenizer, window_bp: int, max_tokens: int, **task_changes
) -> Path:
    config = BigBirdConfig(
        vocab_size=tokenizer.vocab_size, max_position=max_tokens, **SHAPES[shape]
    )
    model = BigBirdForSequenceClassification(config, 16, "multi_label")
    task = {
        "task": "chromatin",
        "feature_names": [f"f{i}" for i in range(16)],
        "categories": ["TF"] * 16,
        "window_bp": window_bp,
        "max_tokens": max_tokens,
        **task_changes,
    }
    directory = folder / shape
    save_pretrained(model, directory, extra={"task_info": task})
    tokenizer.save(directory)
    return directory


def random_bed(path: Path, lengths: dict[str, int], count: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    names = list(lengths)
    chroms = rng.integers(0, len(names), count)
    with open(path, "w") as handle:
        for chrom_index, position in zip(chroms, rng.random(count), strict=True):
            chrom = names[chrom_index]
            start = int(position * (lengths[chrom] - 300))
            handle.write(f"{chrom}\t{start}\t{start + 200}\n")
    return path


def regions_per_second(
    model_dir: Path, bed: Path, fasta: Path, batch_size: int, args, workers: int | None = None
) -> float:
    predictor = load_predictor(
        model_dir,
        device=args.device,
        batch_size=batch_size,
        rc_average=False,
        precision=args.precision,
        num_workers=workers,
    )
    if args.device.startswith("cuda"):  # compile the attention kernel outside the timing
        predictor.score_bed(bed, fasta)
        torch.cuda.synchronize()
    started = time.perf_counter()
    table = predictor.score_bed(bed, fasta)
    return len(table) / (time.perf_counter() - started)


def scoring_parts(
    model_dir: Path, bed: Path, fasta: Path, batch_size: int, args, workers: int
) -> dict:
    """Regions/s of each half of scoring alone, to show which one bounds it: the inputs
    (fetched, tokenised and batched by `workers` DataLoader workers, no model) and the
    model (the same batches, already on the device, run back to back)."""
    from genobird.genome import Reference, centered_window, read_bed
    from genobird.genome.regions import Interval
    from genobird.inputs import model_padding
    from genobird.model.precision import autocast
    from genobird.scoring.windows import WindowInputs, collate_views

    predictor = load_predictor(
        model_dir,
        device=args.device,
        batch_size=batch_size,
        rc_average=False,
        precision=args.precision,
    )
    reference = Reference(fasta)
    windows = []
    for interval in read_bed(bed, contigs=reference.lengths):
        window = centered_window(interval, predictor.input_length_bp)
        windows.append(Interval(window.chrom, window.start, window.end, strand="+"))
    collate = functools.partial(
        collate_views, pad_id=predictor.tokenizer.pad_id, **model_padding(predictor.model)
    )
    loader = torch.utils.data.DataLoader(
        WindowInputs(windows, reference, predictor._views()),
        batch_size=batch_size,
        collate_fn=collate,
        num_workers=workers,
    )
    started = time.perf_counter()
    batches = [views[0] for views, *_ in loader]
    inputs_rate = len(windows) / (time.perf_counter() - started)
    batches = [ids.to(predictor.device) for ids in batches]
    pad_id = predictor.tokenizer.pad_id

    def run_model() -> None:
        with torch.no_grad(), autocast(predictor.device, predictor.autocast_dtype):
            for ids in batches:
                predictor.model(ids, None, ids != pad_id).logits.float().sigmoid().cpu()

    run_model()  # compiles each batch length outside the timing
    started = time.perf_counter()
    run_model()
    return {"inputs": inputs_rate, "model": len(windows) / (time.perf_counter() - started)}


def segmentation_rates(work: Path, tokenizer, cuts: list[int], args, rounds: int = 3) -> dict:
    """Regions/s of the tiny shape on random 101 bp windows, both strands, for each K."""
    model_dir = make_model_dir(
        work / "segmentations", "tiny", tokenizer, 101, 64, rc_average=True, bpe_dropout=0.1
    )
    rng = np.random.default_rng(0)
    windows = ["".join(rng.choice(list("ACGT"), 101)) for _ in range(args.regions)]
    predictors = {
        k: load_predictor(
            model_dir, device=args.device, batch_size=64, segmentations=k, precision=args.precision
        )
        for k in cuts
    }
    times: dict[int, list[float]] = {k: [] for k in cuts}
    for _ in range(rounds):
        for k, predictor in predictors.items():
            started = time.perf_counter()
            predictor.predict(windows)
            times[k].append(time.perf_counter() - started)
    return {k: args.regions / float(np.median(seconds)) for k, seconds in times.items()}


def peak_memory_mib(model_dir: Path, bed: Path, fasta: Path, out: Path) -> float:
    command = [
        sys.executable,
        "-c",
        "import resource, sys; from genobird.cli import main; "
        f"code = main(['-q', 'score', '--model', {str(model_dir)!r}, '--bed', {str(bed)!r}, "
        f"'--reference', {str(fasta)!r}, '--out', {str(out)!r}, "
        "'--batch-size', '256', '--no-rc-average']); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)",
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1]
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-500:])
    return float(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regions", type=int, default=64, help="regions timed per model")
    parser.add_argument("--shapes", nargs="*", default=["tiny", "base"], choices=["tiny", "base"])
    parser.add_argument(
        "--segmentations",
        type=int,
        nargs="*",
        default=[],
        help="cuts per strand to time on 101 bp windows, e.g. 0 4 16",
    )
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--precision", default="auto", help="auto: bf16 on CUDA, fp32 on CPU")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[0],
        help="DataLoader workers fetching and tokenising (each timed)",
    )
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="genobird-score-"))
    generate_demo_reference(work / "genome", DemoSpec(seed=0, size_mb=4.2))
    fasta = work / "genome" / "genome.fa"
    write_documents(fasta, work / "docs.txt", DocumentSpec(passes=1), progress=False)
    tokenizer = train_vocabulary(work / "docs.txt", work / "tokenizer.model", VocabSpec(4000))
    from genobird.genome import Reference

    lengths = Reference(fasta).lengths
    bed = random_bed(work / "timed.bed", lengths, args.regions)
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    print(
        f"{device}, precision {args.precision}, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}; 8 kb windows, 1792 tokens"
    )
    for shape in args.shapes:
        model_dir = make_model_dir(work, shape, tokenizer, 8000, 1792)
        for workers in args.workers:
            rate = regions_per_second(model_dir, bed, fasta, args.batch_size, args, workers)
            print(
                f"{shape}: {rate:.2f} regions/s ({args.regions} regions, batch "
                f"{args.batch_size}, one strand, {workers} workers)"
            )
    if args.segmentations:
        rates = segmentation_rates(work, tokenizer, args.segmentations, args)
        plain = rates.get(0)
        for k, rate in rates.items():
            ratio = f", {plain / rate:.1f}x the time of K = 0" if plain else ""
            print(
                f"segmentations {k}: {rate:.1f} regions/s (tiny, 101 bp, both strands, "
                f"{args.regions} regions){ratio}"
            )
    if not args.skip_memory:
        micro = make_model_dir(work, "micro", tokenizer, 200, 64)
        for count in (250_000, 1_000_000):
            big = random_bed(work / f"{count}.bed", lengths, count, seed=1)
            started = time.perf_counter()
            peak = peak_memory_mib(micro, big, fasta, work / f"{count}.tsv")
            print(
                f"score {count:,} BED lines (micro model, 200 bp): peak RSS {peak:.0f} MiB, "
                f"{time.perf_counter() - started:.0f} s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
