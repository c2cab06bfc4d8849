"""MLM + NSP pretraining instances written as HDF5 shards (BERT's procedure, for DNA).

Each instance is `[CLS] A [SEP] B [SEP]` of at most `max_seq_length` tokens. A is one
or more consecutive sentences of a document; half the time B is the sentences that
follow A, otherwise B comes from another document. 15% of the non-special tokens are
selected for prediction (at most `max_predictions`): 80% become [MASK], 10% a random
regular token, 10% stay. With probability `short_seq_prob` an instance is shorter.

Genomic detail: documents of different passes over one chromosome overlap, so a
"random" document could hold the true continuation of A. A random B is therefore only
taken from a document that neither overlaps nor touches A's document on the genome.

Work is split into chunks of documents; each chunk has its own generator seeded by
(seed, chunk index) and draws its random B documents from within the chunk, so the
output is the same for any number of worker processes and memory is bounded by the
chunk size. Each instance records the corpus index of its A and B documents.

Shard layout (one HDF5 file per chunk; row-chunked for fast random reads):
    input_ids uint16 [n, L]   segment_ids uint8 [n, L]   lengths int32 [n]
    is_next uint8 [n] (1: B follows A)   a_document, b_document int32 [n]
    masked_positions uint16 [n, P]   masked_labels uint16 [n, P]   num_masked int16 [n]
    (the masked_* datasets are absent with dynamic masking: the loader masks instead)
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import h5py
import numpy as np

from genobird.corpus.documents import read_documents, read_index
from genobird.corpus.tokenizer import GENOBIRD_SPECIAL_IDS, SpecialIds, load_tokenizer
from genobird.errors import ConfigError, InputError
from genobird.fileio import atomic_path, atomic_write, file_digest

log = logging.getLogger(__name__)

FORMAT = "genobird-instances/1"
ROW_CHUNK = 16  # rows per HDF5 chunk: a random read touches one small chunk


@dataclass(frozen=True)
class InstanceSpec:
    max_seq_length: int = 4096
    max_predictions: int | None = None  # default: ceil(masked_lm_prob * max_seq_length)
    masked_lm_prob: float = 0.15
    dupe_factor: int = 1  # the 10 document passes already give 10 views of each base
    short_seq_prob: float = 0.1
    random_next_prob: float = 0.5
    documents_per_chunk: int = 2000
    dynamic_masking: bool = False
    seed: int = 0

    @property
    def predictions(self) -> int:
        if self.max_predictions is not None:
            return self.max_predictions
        return int(np.ceil(self.masked_lm_prob * self.max_seq_length))

    def validate(self) -> None:
        if self.max_seq_length < 8:
            raise ConfigError(f"max_seq_length must be >= 8, got {self.max_seq_length}")
        if self.max_seq_length > 65535:
            raise ConfigError("max_seq_length above 65535 does not fit the uint16 positions")
        if not 0 < self.masked_lm_prob < 1:
            raise ConfigError(f"masked_lm_prob must be in (0, 1), got {self.masked_lm_prob}")
        if self.dupe_factor < 1 or self.documents_per_chunk < 2:
            raise ConfigError("dupe_factor must be >= 1 and documents_per_chunk >= 2")


@dataclass
class Instance:
    tokens: np.ndarray  # int [T]
    segments: np.ndarray  # uint8 [T]
    is_next: bool
    a_document: int
    b_document: int
    masked_positions: np.ndarray | None = None
    masked_labels: np.ndarray | None = None


# =========================================================================== masking
def mask_tokens(
    tokens: np.ndarray,
    rng,
    vocab_size: int,
    spec: InstanceSpec,
    special: SpecialIds = GENOBIRD_SPECIAL_IDS,
):
    """BERT masking: returns (masked tokens, sorted positions, original labels). Special
    tokens are never chosen; random replacements are DNA pieces."""
    candidates = np.nonzero(~np.isin(tokens, special.all()))[0]
    count = min(spec.predictions, max(1, round(len(tokens) * spec.masked_lm_prob)))
    count = min(count, len(candidates))
    positions = np.sort(rng.permutation(candidates)[:count])
    labels = tokens[positions].copy()
    masked = tokens.copy()
    roll = rng.random(count)
    masked[positions[roll < 0.8]] = special.mask
    random_slots = positions[roll >= 0.9]
    regular = special.regular(vocab_size)
    masked[random_slots] = regular[rng.integers(0, len(regular), size=len(random_slots))]
    return masked, positions, labels


# =========================================================================== instances
def _touches(a: tuple, b: tuple) -> bool:
    """Whether two (chrom, start, end) spans overlap or are adjacent on the genome."""
    return a[0] == b[0] and a[1] <= b[2] and b[1] <= a[2]


def _random_document(rng, documents, spans, current: int, tries: int = 20) -> int | None:
    for _ in range(tries):
        other = int(rng.integers(0, len(documents)))
        if other != current and not _touches(spans[other], spans[current]):
            return other
    return None


def _truncate_pair(a: list, b: list, max_tokens: int, rng) -> None:
    """BERT: trim the longer side, from the front or the back at random, until they fit."""
    while len(a) + len(b) > max_tokens:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def document_instances(
    documents,
    spans,
    index: int,
    rng,
    spec: InstanceSpec,
    vocab_size: int,
    fallbacks=None,
    special: SpecialIds = GENOBIRD_SPECIAL_IDS,
):
    """Instances of one document (lists of sentence token ids), BERT's procedure.
    `fallbacks` (a one-element list) counts random-B draws that found no document apart
    from A's and kept the true next segment instead."""
    document = documents[index]
    max_tokens = spec.max_seq_length - 3
    target = max_tokens
    if rng.random() < spec.short_seq_prob:
        target = int(rng.integers(2, max_tokens + 1))
    chunk, length, i = [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            a_end = 1 if len(chunk) < 2 else int(rng.integers(1, len(chunk)))
            tokens_a = [t for sentence in chunk[:a_end] for t in sentence]
            random_next = len(chunk) == 1 or rng.random() < spec.random_next_prob
            b_document = index
            other = _random_document(rng, documents, spans, index) if random_next else None
            if other is not None:
                tokens_b = _random_segment(rng, documents[other], target - len(tokens_a))
                b_document = other
                i -= len(chunk) - a_end  # the unused sentences start the next instance
            else:
                if random_next and fallbacks is not None:
                    fallbacks[0] += 1
                random_next = False
                tokens_b = [t for sentence in chunk[a_end:] for t in sentence]
            if tokens_a and tokens_b:
                _truncate_pair(tokens_a, tokens_b, max_tokens, rng)
                yield _assemble(
                    tokens_a,
                    tokens_b,
                    not random_next,
                    index,
                    b_document,
                    rng,
                    spec,
                    vocab_size,
                    special,
                )
            chunk, length = [], 0
        i += 1


def _random_segment(rng, document, wanted: int) -> list[int]:
    start = int(rng.integers(0, len(document)))
    tokens: list[int] = []
    for sentence in document[start:]:
        tokens.extend(sentence)
        if len(tokens) >= wanted:
            break
    return tokens


def _assemble(a, b, is_next, a_doc, b_doc, rng, spec, vocab_size, special) -> Instance:
    tokens = np.array([special.cls, *a, special.sep, *b, special.sep], dtype=np.int64)
    segments = np.zeros(len(tokens), dtype=np.uint8)
    segments[len(a) + 2 :] = 1
    instance = Instance(tokens, segments, is_next, a_doc, b_doc)
    if not spec.dynamic_masking:
        instance.tokens, instance.masked_positions, instance.masked_labels = mask_tokens(
            tokens, rng, vocab_size, spec, special
        )
    return instance


# =========================================================================== shards
def write_shard(
    path: Path,
    instances: list[Instance],
    spec: InstanceSpec,
    vocab_size: int,
    special: SpecialIds = GENOBIRD_SPECIAL_IDS,
    vocabulary: str = "",
) -> None:
    """One HDF5 shard, written atomically; padding holds the vocabulary's [PAD];
    `vocabulary` is the tokenizer's `vocabulary_digest`."""
    n, width, predictions = len(instances), spec.max_seq_length, spec.predictions
    ids = np.full((n, width), special.pad, dtype=np.uint16)
    segments = np.zeros((n, width), dtype=np.uint8)
    for row, instance in enumerate(instances):
        ids[row, : len(instance.tokens)] = instance.tokens
        segments[row, : len(instance.segments)] = instance.segments
    columns = {
        "input_ids": ids,
        "segment_ids": segments,
        "lengths": np.array([len(i.tokens) for i in instances], dtype=np.int32),
        "is_next": np.array([i.is_next for i in instances], dtype=np.uint8),
        "a_document": np.array([i.a_document for i in instances], dtype=np.int32),
        "b_document": np.array([i.b_document for i in instances], dtype=np.int32),
    }
    if not spec.dynamic_masking:
        positions = np.zeros((n, predictions), dtype=np.uint16)
        labels = np.zeros((n, predictions), dtype=np.uint16)
        for row, instance in enumerate(instances):
            positions[row, : len(instance.masked_positions)] = instance.masked_positions
            labels[row, : len(instance.masked_labels)] = instance.masked_labels
        columns["masked_positions"] = positions
        columns["masked_labels"] = labels
        columns["num_masked"] = np.array([len(i.masked_positions) for i in instances], np.int16)
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as handle:
        for name, values in columns.items():
            chunks = (min(max(n, 1), ROW_CHUNK), *values.shape[1:]) if n else None
            handle.create_dataset(
                name, data=values, chunks=chunks, compression="lzf" if n else None
            )
        handle.attrs.update(
            format=FORMAT,
            max_seq_length=width,
            max_predictions=predictions,
            vocab_size=vocab_size,
            dynamic_masking=spec.dynamic_masking,
            instances=n,
            special_ids=json.dumps(special.to_dict()),
            vocabulary=vocabulary,
        )


def _chunk_job(job):
    chunk_index, sentences_per_doc, spans, first_document, tokenizer_path, spec, out_path = job
    tokenizer = load_tokenizer(tokenizer_path)
    flat = [s for document in sentences_per_doc for s in document]
    encoded = tokenizer.encode_batch(flat)
    documents, cursor = [], 0
    for document in sentences_per_doc:
        documents.append(encoded[cursor : cursor + len(document)])
        cursor += len(document)
    rng = np.random.default_rng([spec.seed, chunk_index])
    instances, fallbacks, vocab = [], [0], tokenizer.vocab_size
    for _ in range(spec.dupe_factor):
        for index in range(len(documents)):
            for instance in document_instances(
                documents, spans, index, rng, spec, vocab, fallbacks, tokenizer.special
            ):
                instance.a_document += first_document
                instance.b_document += first_document
                instances.append(instance)
    write_shard(
        Path(out_path),
        instances,
        spec,
        tokenizer.vocab_size,
        tokenizer.special,
        tokenizer.vocabulary_digest,
    )
    bp = sum(len(s) for s in flat)
    return out_path, len(instances), bp, fallbacks[0]


def _chunks(documents_text, spans_all, spec: InstanceSpec):
    batch, spans, first = [], [], 0
    for number, document in enumerate(read_documents(documents_text)):
        batch.append(document)
        spans.append(tuple(spans_all[number][:3]))
        if len(batch) == spec.documents_per_chunk:
            yield batch, spans, first
            first += len(batch)
            batch, spans = [], []
    if batch:
        yield batch, spans, first


def write_instances(
    documents_text: str | Path,
    tokenizer_path: str | Path,
    outdir: str | Path,
    spec: InstanceSpec = InstanceSpec(),
    threads: int = 1,
    progress: bool = True,
) -> dict:
    """Build the shards of a documents file into `outdir`; returns the manifest."""
    from tqdm import tqdm

    spec.validate()
    tokenizer = load_tokenizer(tokenizer_path)
    if tokenizer.vocab_size > 65535:
        raise ConfigError("vocabularies above 65535 pieces do not fit the uint16 shards")
    index = read_index(documents_text)
    spans_all = index["documents"]
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    jobs = (
        (
            number,
            batch,
            spans,
            first,
            str(tokenizer.path),
            spec,
            str(outdir / f"shard-{number:05d}.h5"),
        )
        for number, (batch, spans, first) in enumerate(_chunks(documents_text, spans_all, spec))
    )
    results = []
    bar = tqdm(unit="chunk", disable=not progress, desc="instances")
    if threads <= 1:
        for job in jobs:
            results.append(_chunk_job(job))
            bar.update()
    else:
        with multiprocessing.get_context("spawn").Pool(threads) as pool:
            for result in pool.imap(_chunk_job, jobs):
                results.append(result)
                bar.update()
    bar.close()
    if not results:
        raise InputError(f"{documents_text}: no documents, so no instances")
    seconds = time.perf_counter() - started
    bp = sum(r[2] for r in results)
    fallbacks = sum(r[3] for r in results)
    if fallbacks > 0.05 * sum(r[1] for r in results):
        log.warning(
            "%d random-B draws found no document apart from A's (documents overlap: few "
            "chromosomes or large chunks) and used the true next segment: NSP is skewed "
            "towards is_next; raise --documents-per-chunk or add chromosomes",
            fallbacks,
        )
    manifest = {
        "format": FORMAT,
        "spec": asdict(spec) | {"max_predictions": spec.predictions},
        "tokenizer": str(tokenizer.path),
        "vocab_size": tokenizer.vocab_size,
        "documents": str(documents_text),
        "shards": [
            {"file": Path(path).name, "instances": count, "sha256": file_digest(path)}
            for path, count, _, _ in results
        ],
        "instances": sum(r[1] for r in results),
        "random_b_fallbacks": fallbacks,
        "bp": bp,
        "seconds": round(seconds, 3),
    }
    with atomic_write(outdir / "manifest.json") as handle:
        json.dump(manifest, handle, indent=2)
    log.info(
        "instances: %d in %d shards from %.1f Mbp in %.1f s (%.2f Mbp/s)",
        manifest["instances"],
        len(results),
        bp / 1e6,
        seconds,
        bp / 1e6 / seconds,
    )
    return manifest
