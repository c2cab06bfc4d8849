"""Corpus throughput: documents, tokenisation and instance creation, per core.

    python benchmarks/corpus.py                     # demo genome + real hg19 pieces
    python benchmarks/corpus.py --shared ../shared/data --vocab-size 4000

Every stage runs single-process, so its rate is per core. Peak memory of the documents
stage is measured in subprocesses on a genome and on one 4x larger (it should stay
flat: chromosomes are streamed). The projection for GRCh37 (3.1 Gbp, 10 passes) divides
the work of each stage by its rate and the number of cores; documents parallelise over
24 chromosomes, tokenisation and instances over document chunks.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from genobird.corpus import (
    DocumentSpec,
    InstanceSpec,
    VocabSpec,
    read_documents,
    train_vocabulary,
    write_documents,
    write_instances,
)
from genobird.genome.demo import DemoSpec, generate_demo_reference

GRCH37_BP = 3.1e9
PASSES = 10


def documents_rate(fasta: Path, workdir: Path, passes: int) -> tuple[float, Path]:
    out = workdir / "documents.txt"
    chromosomes = _contigs(fasta)
    summary = write_documents(
        fasta, out, DocumentSpec(passes=passes), chromosomes, threads=1, progress=False
    )
    return summary.mbp_per_second, out  # bp scanned, N runs included


def _contigs(fasta: Path) -> list[str]:
    from genobird.genome import Reference

    return Reference(fasta).contigs


def tokenisation_rate(tokenizer, documents: Path) -> float:
    sentences = [s for document in read_documents(documents) for s in document]
    started = time.perf_counter()
    tokenizer.encode_batch(sentences, threads=1)
    return sum(map(len, sentences)) / 1e6 / (time.perf_counter() - started)


def instances_rate(tokenizer, documents: Path, workdir: Path, length: int) -> float:
    spec = InstanceSpec(max_seq_length=length, documents_per_chunk=500)
    manifest = write_instances(documents, tokenizer.path, workdir / "inst", spec, progress=False)
    return manifest["bp"] / 1e6 / manifest["seconds"]


def peak_memory_mib(fasta: Path, passes: int) -> float:
    """Peak RSS of the documents stage on `fasta`, in a fresh process."""
    code = (
        "import resource, sys, tempfile, pathlib;"
        "from genobird.corpus import DocumentSpec, write_documents;"
        "from genobird.genome import Reference;"
        f"f = pathlib.Path({str(fasta)!r});"
        "out = pathlib.Path(tempfile.mkdtemp()) / 'd.txt';"
        f"write_documents(f, out, DocumentSpec(passes={passes}), Reference(f).contigs,"
        " progress=False);"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    return float(done.stdout.strip().splitlines()[-1])


def measure(name: str, fasta: Path, workdir: Path, tokenizer, passes: int, length: int) -> dict:
    docs_rate, documents = documents_rate(fasta, workdir, passes)
    row = {
        "input": name,
        "documents_mbp_s": docs_rate,
        "tokenise_mbp_s": tokenisation_rate(tokenizer, documents),
        "instances_mbp_s": instances_rate(tokenizer, documents, workdir, length),
    }
    print(
        f"{name}: documents {row['documents_mbp_s']:.1f} Mbp/s, tokenisation "
        f"{row['tokenise_mbp_s']:.2f} Mbp/s/core, instances {row['instances_mbp_s']:.2f} Mbp/s/core"
    )
    return row


def project(row: dict, cores: int) -> float:
    """Hours for all of GRCh37 with 10 passes on `cores` cores."""
    work_mbp = GRCH37_BP * PASSES / 1e6
    hours = work_mbp / (row["documents_mbp_s"] * min(cores, 24))
    hours += work_mbp / (row["tokenise_mbp_s"] * cores)
    hours += work_mbp / (row["instances_mbp_s"] * cores)  # tokenises again inside
    return hours / 3600


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = Path(__file__).resolve().parents[1]
    parser.add_argument("--shared", type=Path, default=root.parent / "shared" / "data")
    parser.add_argument("--vocab-size", type=int, default=4000)
    parser.add_argument("--passes", type=int, default=2, help="passes per genome in the run")
    parser.add_argument("--max-seq-length", type=int, default=4096)
    parser.add_argument("--memory-mb", type=float, default=8.0, help="smaller memory genome")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="genobird-bench-"))
    demo = workdir / "demo"
    generate_demo_reference(demo, DemoSpec(seed=0, size_mb=4.2))
    demo_docs = workdir / "vocab-docs.txt"
    write_documents(demo / "genome.fa", demo_docs, DocumentSpec(passes=1), progress=False)
    started = time.perf_counter()
    tokenizer = train_vocabulary(
        demo_docs, workdir / "tokenizer.model", VocabSpec(vocab_size=args.vocab_size)
    )
    print(
        f"vocabulary: {args.vocab_size} pieces trained on the demo genome in "
        f"{time.perf_counter() - started:.1f} s"
    )
    settings = (tokenizer, args.passes, args.max_seq_length)
    rows = [measure("demo 4.2 Mb", demo / "genome.fa", workdir / "d", *settings)]
    real = args.shared / "genome" / "hg19_chr20_0-2Mb.fa"
    if real.is_file():
        rows.append(measure("hg19 chr20 0-2Mb", real, workdir / "r", *settings))
    else:
        print(f"real genome piece not found at {real}: skipped")
    # Chromosomes of the larger genome (up to 11.5 Mb) exceed the 4 Mb read buffer, so
    # flat memory here shows the streaming, not just a small input.
    memory = {}
    for size_mb in (args.memory_mb, 4 * args.memory_mb):
        genome = workdir / f"memory-{size_mb}"
        generate_demo_reference(genome, DemoSpec(seed=1, size_mb=size_mb))
        memory[size_mb] = peak_memory_mib(genome / "genome.fa", args.passes)
    small, large = memory.values()
    print(
        f"documents peak memory: {small:.0f} MiB on {args.memory_mb} Mb, {large:.0f} MiB on "
        f"{4 * args.memory_mb} Mb (4x input: {large / small:.2f}x memory)"
    )
    for row in rows:
        print(
            f"projected GRCh37 (3.1 Gbp x {PASSES} passes) from {row['input']} rates: "
            f"{project(row, 2):.1f} h on 2 cores, {project(row, 16):.1f} h on 16 cores"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
