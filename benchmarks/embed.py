"""Embedding throughput against scoring's, on the same regions, and embedding memory.

    python benchmarks/embed.py --model results/human-mini/pretrain/model

Regions: `--regions` (10,000) random 1 kb windows of the hg19 pieces (no N). In one
process, on the same BED: `Predictor.score_bed` of a classifier on the model's encoder
(a fresh head, 1 kb windows: speed does not depend on its weights) and `genobird embed`'s
`write_embeddings` at the pooled level; regions per second of each and their ratio.
Memory: the peak RSS of `genobird embed --level base` in a fresh process on a BED of
`--memory-mb` (5) Mb, as 1 kb regions and as 100 kb regions, beside the HDF5 it writes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
GENOME = REPO.parent / "shared" / "data" / "genome"
PIECES = [
    GENOME / name
    for name in (
        "hg19_chr19_0-3119000_softmasked.fa",
        "hg19_chr20_0-2Mb.fa",
        "hg19_chr22_0-21Mb.fa.gz",
    )
]
# runs a command line in a fresh process and prints its own peak RSS (kB) last
PEAK = (
    "import resource, sys; from genobird.cli import main; code = main(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); sys.exit(code)"
)


def random_bed(path: Path, count: int, width: int, seed: int = 0) -> Path:
    """`count` regions of `width` bp without N on the hg19 pieces."""
    from genobird.genome import open_reference

    genome = open_reference(PIECES)
    rng = np.random.default_rng(seed)
    contigs = list(genome.lengths)
    lines = []
    while len(lines) < count:
        chrom = contigs[int(rng.integers(len(contigs)))]
        start = int(rng.integers(0, genome.lengths[chrom] - width))
        if "N" not in genome.fetch(chrom, start, start + width):
            lines.append(f"{chrom}\t{start}\t{start + width}\n")
    path.write_text("".join(lines))
    return path


def classifier_dir(model: Path, folder: Path, window_bp: int) -> Path:
    """A classifier on the model's encoder with a fresh head, as a predictor directory."""
    from genobird.corpus.tokenizer import load_tokenizer
    from genobird.model import BigBirdConfig, BigBirdForSequenceClassification, save_pretrained
    from genobird.model.io import read_model_description
    from genobird.model.task_model import load_encoder

    config = BigBirdConfig.from_dict(read_model_description(model)["config"])
    classifier = BigBirdForSequenceClassification(config, 1, "multi_label", pooling="mean")
    load_encoder(classifier, model)
    task = {
        "task": "classify",
        "feature_names": ["f"],
        "categories": ["label"],
        "window_bp": window_bp,
        "max_tokens": config.max_position,
        "rc_average": False,
    }
    save_pretrained(classifier, folder, extra={"task_info": task})
    load_tokenizer(model).save(folder)
    return folder


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=REPO / "results/human-mini/pretrain/model")
    parser.add_argument("--regions", type=int, default=10_000)
    parser.add_argument("--memory-mb", type=float, default=5.0)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args(argv)
    from genobird.scoring.embed import Embedder, write_embeddings
    from genobird.scoring.predict import load_predictor

    folder = Path(tempfile.mkdtemp(prefix="genobird-embed-"))
    bed = random_bed(folder / "regions.bed", args.regions, 1000)
    classifier = classifier_dir(args.model, folder / "classifier", 1000)
    predictor = load_predictor(
        classifier, device="cpu", batch_size=args.batch_size, rc_average=False
    )
    embedder = Embedder(args.model, device="cpu", batch_size=args.batch_size)
    started = time.perf_counter()
    predictor.score_bed(bed, PIECES)
    score_s = time.perf_counter() - started
    started = time.perf_counter()
    write_embeddings(embedder, "bed", bed, folder / "pooled.h5", "pooled", reference=PIECES)
    embed_s = time.perf_counter() - started
    figures = {
        "regions": args.regions,
        "score_regions_per_s": args.regions / score_s,
        "embed_regions_per_s": args.regions / embed_s,
        "embed_over_score_time": embed_s / score_s,
    }
    print(
        f"{args.regions:,} regions of 1 kb: score {figures['score_regions_per_s']:.1f} "
        f"regions/s, embed (pooled) {figures['embed_regions_per_s']:.1f} regions/s: embed "
        f"takes {figures['embed_over_score_time']:.2f}x score's time "
        "(target: at most 1.5x)"
    )
    for width in (1000, 100_000):
        count = int(args.memory_mb * 1e6 // width)
        regions = random_bed(folder / f"memory-{width}.bed", count, width, seed=1)
        out = folder / f"base-{width}.h5"
        command = [
            sys.executable,
            "-c",
            PEAK,
            "-q",
            "embed",
            "--model",
            str(args.model),
            "--bed",
            str(regions),
            "--reference",
            *map(str, PIECES),
            "--level",
            "base",
            "--out",
            str(out),
            "--device",
            "cpu",
        ]
        done = subprocess.run(command, check=True, cwd=REPO, capture_output=True, text=True)
        peak_mb = int(done.stdout.split()[-1]) / 1024
        figures[f"base_{width}bp_peak_rss_mb"] = peak_mb
        figures[f"base_{width}bp_file_mb"] = out.stat().st_size / 1e6
        print(
            f"  base level, {count:,} regions of {width:,} bp ({args.memory_mb:g} Mb): peak "
            f"RSS {peak_mb:,.0f} MB, HDF5 {out.stat().st_size / 1e6:,.0f} MB"
        )
        out.unlink()
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
