"""Genome documents for pretraining, exactly as the paper builds them (appendix F.1).

For each chromosome, `passes` times (10 in the paper): start at a uniformly random
offset in [0, 5000) from the 5' end, then cut documents of s ~ U{50..100} consecutive
sentences, each sentence ~ U{500..1000} bp, until the chromosome ends. The sentences of
a document concatenate back to the exact genome slice [start, end).

N runs (our documented handling; the paper does not say): a sentence that is more than
`max_n_fraction` N is dropped and the document is closed there, so no sentence is mostly
N and no document spans a gap; the next document starts right after the dropped
sentence. The last sentence before a chromosome end may be shorter than 500 bp; one
shorter than `min_last_sentence` is dropped.

Output text: one sentence per line, a blank line between documents (what sentencepiece
and the instance builder read). The index JSON lists per document: chromosome, start,
end (0-based half-open), pass and sentence count. Soft-masked bases are uppercased.

Memory does not grow with the genome: each chromosome is read through a sliding buffer.
Chromosomes are processed in parallel; each draws from its own generator seeded by
(seed, chromosome index, pass), so the output does not depend on the thread count.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from genobird.errors import InputError
from genobird.fileio import atomic_write, staging_folder
from genobird.genome.reference import Reference

log = logging.getLogger(__name__)

# GRCh37's assembled chromosomes: 1-22, X, Y, with or without "chr" (no chrM, no
# unplaced *_random / chrUn_* contigs, no alternate haplotypes such as chr6_ssto_hap7).
DEFAULT_CHROMOSOME_PATTERN = r"^(chr)?([1-9]|1[0-9]|2[0-2]|X|Y)$"


@dataclass(frozen=True)
class DocumentSpec:
    passes: int = 10
    max_start_offset: int = 5000
    min_sentences: int = 50
    max_sentences: int = 100
    min_sentence_bp: int = 500
    max_sentence_bp: int = 1000
    max_n_fraction: float = 0.5
    min_last_sentence: int = 50
    seed: int = 0

    def validate(self) -> None:
        if self.passes < 1:
            raise InputError(f"passes must be >= 1, got {self.passes}")
        if not 1 <= self.min_sentences <= self.max_sentences:
            raise InputError("need 1 <= min_sentences <= max_sentences")
        if not 1 <= self.min_sentence_bp <= self.max_sentence_bp:
            raise InputError("need 1 <= min_sentence_bp <= max_sentence_bp")
        if not 0 <= self.max_n_fraction <= 1:
            raise InputError(f"max_n_fraction must be in [0, 1], got {self.max_n_fraction}")


@dataclass(frozen=True)
class Document:
    chrom: str
    start: int
    end: int
    pass_index: int
    sentences: tuple[str, ...]


class SequenceWindow:
    """Forward-only reads of one chromosome through a buffer of about `buffer_bp`."""

    def __init__(self, reference: Reference, chrom: str, buffer_bp: int = 4_000_000):
        self.reference, self.chrom = reference, chrom
        self.length = reference.length(chrom)
        self.buffer_bp = buffer_bp
        self.start, self.text = 0, ""

    def read(self, start: int, end: int) -> str:
        end = min(end, self.length)
        if start < self.start or end > self.start + len(self.text):
            self.start = start
            self.text = self.reference.fetch(
                self.chrom, start, min(self.length, max(end, start + self.buffer_bp))
            )
        return self.text[start - self.start : end - self.start]


def chromosome_documents(
    reference: Reference, chrom: str, chrom_index: int, spec: DocumentSpec
) -> Iterator[Document]:
    """All documents of one chromosome, pass after pass."""
    for pass_index in range(spec.passes):
        rng = np.random.default_rng([spec.seed, chrom_index, pass_index])
        window = SequenceWindow(reference, chrom)
        yield from _one_pass(window, rng, pass_index, spec)


def _one_pass(window: SequenceWindow, rng, pass_index: int, spec: DocumentSpec):
    position = int(rng.integers(0, spec.max_start_offset))
    while position < window.length:
        wanted = int(rng.integers(spec.min_sentences, spec.max_sentences + 1))
        start, sentences = position, []
        while len(sentences) < wanted and position < window.length:
            size = int(rng.integers(spec.min_sentence_bp, spec.max_sentence_bp + 1))
            sentence = window.read(position, position + size)
            position += len(sentence)
            if sentence.count("N") > spec.max_n_fraction * len(sentence) or (
                len(sentence) < spec.min_last_sentence
            ):
                break  # close the document before the gap (or the too-short tail)
            sentences.append(sentence)
        if sentences:
            end = start + sum(len(s) for s in sentences)
            yield Document(window.chrom, start, end, pass_index, tuple(sentences))


def select_chromosomes(
    reference: Reference, chromosomes: list[str] | None, pattern: str = DEFAULT_CHROMOSOME_PATTERN
) -> list[str]:
    """The FASTA's names of `chromosomes` (aliases resolved), or those matching `pattern`."""
    if chromosomes:
        return [reference.resolve(name) for name in chromosomes]
    chosen = [name for name in reference.contigs if re.match(pattern, name)]
    if not chosen:
        raise InputError(
            f"{reference.path}: no contig matches {pattern!r}; name the chromosomes to use "
            f"with --chromosomes (it has: {', '.join(reference.contigs[:8])} ...)"
        )
    return chosen


def plan_chromosomes(
    fastas: list[Path], chromosomes: list[str] | None
) -> list[tuple[Path, str, int]]:
    """(FASTA, contig, seed index) of every chromosome to cut, in file order then contig
    order. The seed index (the contig's place among all files' contigs) seeds its passes,
    so documents do not depend on the thread count or on which chromosomes are chosen.

    With several FASTAs, each named chromosome is taken from the file that has it, and
    a contig name may occur in one file only (it names the documents' rows)."""
    plan: list[tuple[Path, str, int]] = []
    contigs_before = 0
    for fasta in fastas:
        with Reference(fasta) as reference:
            if chromosomes and len(fastas) > 1:
                names = [n for n in (_find(reference, c) for c in chromosomes) if n]
            else:
                names = select_chromosomes(reference, chromosomes)
            order = {name: i for i, name in enumerate(reference.contigs)}
            plan += [(fasta, n, contigs_before + order[n]) for n in sorted(names, key=order.get)]
            contigs_before += len(reference.contigs)
    seen: dict[str, Path] = {}
    for fasta, name, _ in plan:
        if name in seen:
            raise InputError(
                f"contig {name!r} is in both {seen[name]} and {fasta}; rename it in one file "
                "or choose the chromosomes with --chromosomes"
            )
        seen[name] = fasta
    if chromosomes and len(fastas) > 1:
        missing = [c for c in chromosomes if not any(_same(c, name) for name in seen)]
        if missing:
            raise InputError(f"chromosomes {missing} are in none of {[str(f) for f in fastas]}")
    return plan


def _find(reference: Reference, name: str) -> str | None:
    try:
        return reference.resolve(name)
    except KeyError:
        return None


def _same(asked: str, contig: str) -> bool:
    return asked.removeprefix("chr") == contig.removeprefix("chr")


@dataclass
class CorpusSummary:
    documents: int = 0
    sentences: int = 0
    bp: int = 0  # in documents
    bp_scanned: int = 0  # read, including N runs that were dropped
    seconds: float = 0.0
    chromosomes: int = 0

    @property
    def mbp_per_second(self) -> float:
        """Processing rate: bp scanned (passes x chromosome length) per second."""
        return self.bp_scanned / 1e6 / self.seconds if self.seconds else 0.0


def _write_chromosome(job) -> tuple[str, list, int, int]:
    """Worker: write one chromosome's documents to a part file; return its index rows."""
    fasta, chrom, chrom_index, spec, part_path = job
    reference = Reference(fasta)
    rows, sentences, bp = [], 0, 0
    with open(part_path, "w") as handle:
        for document in chromosome_documents(reference, chrom, chrom_index, spec):
            handle.write("\n".join(document.sentences))
            handle.write("\n\n")
            rows.append(
                [chrom, document.start, document.end, document.pass_index, len(document.sentences)]
            )
            sentences += len(document.sentences)
            bp += document.end - document.start
    reference.close()
    return part_path, rows, sentences, bp


def write_documents(
    fasta: str | Path | list,
    out_text: str | Path,
    spec: DocumentSpec = DocumentSpec(),
    chromosomes: list[str] | None = None,
    threads: int = 1,
    progress: bool = True,
) -> CorpusSummary:
    """Write the documents of `chromosomes` (default: 1-22, X, Y) to `out_text` and the
    index to `out_text` with suffix .index.json; both atomically. `fasta` may be a list
    of FASTA files (one genome in pieces, or several genomes): their documents go to one
    file, in file order."""
    spec.validate()
    fastas = [Path(f) for f in (fasta if isinstance(fasta, (list, tuple)) else [fasta])]
    plan = plan_chromosomes(fastas, chromosomes)
    names = [name for _, name, _ in plan]
    out_text = Path(out_text)
    out_text.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    summary = CorpusSummary(chromosomes=len(names))
    index_rows = []
    staging = staging_folder(out_text)
    try:
        jobs = [
            (str(path), name, seed_index, spec, str(staging / f"{i:05d}.txt"))
            for i, (path, name, seed_index) in enumerate(plan)
        ]
        for part_path, rows, sentences, bp in _run_jobs(jobs, threads, progress):
            index_rows.append((part_path, rows))
            summary.sentences += sentences
            summary.bp += bp
        summary.bp_scanned = spec.passes * sum(_length(path, name) for path, name, _ in plan)
        index_rows.sort()
        if not any(rows for _, rows in index_rows):  # fail before writing anything
            raise InputError(
                f"{', '.join(map(str, fastas))}: no document could be cut from "
                f"{', '.join(names)} (all shorter "
                "than one sentence, or all N); use a longer reference or a smaller "
                "--min-sentence-bp"
            )
        with atomic_write(out_text, "wb") as handle:
            for part_path, _ in index_rows:
                with open(part_path, "rb") as part:
                    shutil.copyfileobj(part, handle, 1 << 20)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    documents = [row for _, rows in index_rows for row in rows]
    summary.documents = len(documents)
    summary.seconds = time.perf_counter() - started
    _write_index(out_text, spec, names, documents, summary)
    log.info(
        "documents: %d documents, %d sentences, %.1f Mbp in %.1f s (%.1f Mbp/s)",
        summary.documents,
        summary.sentences,
        summary.bp / 1e6,
        summary.seconds,
        summary.mbp_per_second,
    )
    return summary


def _length(fasta: Path, name: str) -> int:
    with Reference(fasta) as reference:
        return reference.length(name)


def _run_jobs(jobs, threads: int, progress: bool):
    from tqdm import tqdm

    bar = tqdm(total=len(jobs), unit="chrom", disable=not progress, desc="documents")
    if threads <= 1 or len(jobs) == 1:
        for job in jobs:
            yield _write_chromosome(job)
            bar.update()
    else:
        context = multiprocessing.get_context("spawn")
        with context.Pool(min(threads, len(jobs))) as pool:
            for result in pool.imap_unordered(_write_chromosome, jobs):
                yield result
                bar.update()
    bar.close()


def index_path_for(text_path: str | Path) -> Path:
    return Path(str(text_path) + ".index.json")


def _write_index(out_text: Path, spec, names, documents, summary: CorpusSummary) -> None:
    index = {
        "format": "genobird-documents/1",
        "coordinates": "0-based half-open",
        "spec": asdict(spec),
        "chromosomes": names,
        "columns": ["chrom", "start", "end", "pass", "sentences"],
        "documents": documents,
        "summary": {k: v for k, v in asdict(summary).items()},
    }
    with atomic_write(index_path_for(out_text)) as handle:
        json.dump(index, handle, separators=(",", ":"))


def read_index(text_path: str | Path) -> dict:
    path = index_path_for(text_path)
    if not path.is_file():
        raise InputError(
            f"{path}: document index missing; rebuild with `genobird corpus documents`"
        )
    return json.loads(path.read_text())


def read_documents(text_path: str | Path) -> Iterator[list[str]]:
    """Stream documents (lists of sentences) from a documents text file."""
    sentences: list[str] = []
    with open(text_path) as handle:
        for line in handle:
            line = line.rstrip("\n")
            if line:
                sentences.append(line)
            elif sentences:
                yield sentences
                sentences = []
    if sentences:
        yield sentences


def default_threads() -> int:
    return max(1, len(os.sched_getaffinity(0)))
