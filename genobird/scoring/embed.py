"""Embeddings out of a genobird model, for users' own models (`genobird embed`,
`genobird.Embedder`).

Three levels, from any layer of the encoder (or the mean of the last k):
  pooled  one vector per sequence: the mean of its pieces' vectors, or its [CLS] state
  token   one vector per BPE piece, with the bases it spells (start, end in the sequence)
  base    each piece's vector spread over the bases it spells: arrays that line up with
          the sequence base for base, whatever the tokenizer's cuts
With `rc_average`, the reverse complement is embedded too and its vectors laid back onto
the forward bases (base level: position i of the forward strand with position L-1-i of
the other) before the two are averaged; pooled vectors are averaged as they are. Pieces
are cut per strand, so the token level reads the given strand only.

A sequence longer than the model's input is read in windows of its longest input, each
between [CLS] and [SEP]; records are embedded a chunk at a time (CHUNK_RECORDS records or
CHUNK_BP bases, whichever ends it first), so a large BED streams through in bounded memory
whatever its records' lengths (records over MAX_RECORD_BP are rejected with the advice to
tile them).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from genobird.corpus.tokenizer import load_tokenizer
from genobird.device import resolve_device
from genobird.errors import ConfigError, SequenceError
from genobird.genome.alphabet import reverse_complement
from genobird.inputs import model_padding, pad_ids, scorable_sequences
from genobird.model.io import from_pretrained
from genobird.model.precision import autocast, autocast_dtype
from genobird.scoring.options import ScoringOptions
from genobird.scoring.windows import chunked

LEVELS = ("pooled", "token", "base")
POOLINGS = ("mean", "cls")
# a record's bases at the base level cost 4 x hidden size bytes each: 100 kb of a 768-wide
# model is 300 MB; tile longer regions (bedtools makewindows)
MAX_RECORD_BP = 100_000


@dataclass
class TokenVectors:
    """One sequence at the token level: a vector per piece, its id, and the bases it
    spells (0-based, half-open, in the sequence)."""

    vectors: np.ndarray  # float32 [T, C]
    ids: np.ndarray  # int64 [T]
    spans: np.ndarray  # int64 [T, 2]


class Embedder:
    """A genobird model directory (pretrained, fine-tuned, or converted from HuggingFace)
    as an embedding function of DNA."""

    def __init__(
        self,
        model_dir,
        options: ScoringOptions | None = None,
        *,
        layer: int = -1,
        mean_last: int = 1,
        **given,
    ):
        """`options` (scoring.options), or its fields as keywords (`device`,
        `batch_size`, `rc_average`: one strand unless True, `num_workers`, `precision`);
        `layer` and `mean_last`: the layers whose states are averaged."""
        from genobird.scoring.windows import default_workers

        options = self.options = ScoringOptions.of(options, **given)
        self.model_dir = Path(model_dir)
        self.device = resolve_device(options.device)
        # processes that tokenise the next chunks of a file while the model embeds this one
        # (`write_embeddings`; default as `score`: up to 8 on CUDA, none on CPU)
        workers = options.num_workers
        self.num_workers = default_workers(self.device) if workers is None else workers
        self.autocast_dtype = autocast_dtype(options.precision, self.device)
        self.tokenizer = load_tokenizer(self.model_dir)
        model = from_pretrained(self.model_dir, self.device).eval()
        if not hasattr(model, "encoder"):
            raise ConfigError(
                f"{self.model_dir}: a {type(model).__name__} has no encoder to embed with"
            )
        self.model, self.config = model, model.config
        self.layers = chosen_layers(self.config.num_layers, layer, mean_last)
        self.rc_average = options.strands_for("embed")
        self.batch_size = options.batch_for("embed")
        self.window = self.config.max_position - 2  # [CLS] window [SEP]
        self.hidden_size = self.config.hidden_size

    # ------------------------------------------------------------------ public
    def embed(self, sequences: list[str], level: str = "pooled", pooling: str = "mean"):
        """The embeddings of a list of DNA strings: pooled: float32 [N, C]; token: a
        `TokenVectors` per sequence; base: float32 [L_i, C] per sequence."""
        check_level(level, pooling, self.rc_average)
        sequences = scorable_sequences(sequences)
        for index, sequence in enumerate(sequences):
            if len(sequence) > MAX_RECORD_BP:
                raise SequenceError(
                    f"sequence {index} is {len(sequence):,} bp, over the "
                    f"{MAX_RECORD_BP:,} bp a record may have: tile it"
                )
        return self._embed(
            sequences, level, pooling, strand_pieces(self.tokenizer, sequences, self.rc_average)
        )

    def _embed(self, sequences: list[str], level: str, pooling: str, pieces: tuple):
        """`embed` of sequences already checked and cut into pieces (`strand_pieces`)."""
        forward = self._strand(sequences, pieces[0])
        if level == "token":
            return [tokens for tokens, _ in forward]
        if level == "pooled":
            pooled = [pool(tokens, cls, pooling) for tokens, cls in forward]
            if self.rc_average:
                other = self._strand([reverse_complement(s) for s in sequences], pieces[1])
                pooled = [
                    (a + pool(t, c, pooling)) / 2 for a, (t, c) in zip(pooled, other, strict=True)
                ]
            return np.stack(pooled).astype(np.float32)
        bases = [spread(tokens) for tokens, _ in forward]
        if self.rc_average:
            other = self._strand([reverse_complement(s) for s in sequences], pieces[1])
            bases = [(a + spread(t)[::-1]) / 2 for a, (t, _) in zip(bases, other, strict=True)]
        return [b.astype(np.float32) for b in bases]

    # ------------------------------------------------------------------ internals
    def _strand(self, sequences: list[str], pieces: list) -> list[tuple[TokenVectors, np.ndarray]]:
        """(TokenVectors, [CLS] vectors [W, C] of its windows) of each sequence, read as
        given and cut into `pieces`."""
        for index, (sequence, ids) in enumerate(zip(sequences, pieces, strict=True)):
            spelled = int(self.tokenizer.piece_lengths[np.asarray(ids, dtype=np.int64)].sum())
            if spelled != len(sequence):
                raise SequenceError(
                    f"sequence {index}: its pieces spell {spelled} of its {len(sequence)} bp "
                    "(the vocabulary has no piece for some of its characters, read as [UNK])"
                )
        windows = [
            (row, first, ids[first : first + self.window])
            for row, ids in enumerate(pieces)
            for first in range(0, len(ids), self.window)
        ]
        states = self._window_states([ids for _, _, ids in windows])
        tokens = [[] for _ in sequences]
        cls = [[] for _ in sequences]
        for (row, _, _), state in zip(windows, states, strict=True):
            tokens[row].append(state[1:-1])
            cls[row].append(state[0])
        out = []
        for row, ids in enumerate(pieces):
            ids = np.asarray(ids, dtype=np.int64)
            spans = self.tokenizer.token_offsets(ids)
            vectors = np.concatenate(tokens[row]).astype(np.float32)
            out.append((TokenVectors(vectors, ids, spans), np.stack(cls[row])))
        return out

    @torch.no_grad()
    def _window_states(self, windows: list[list[int]]) -> list[np.ndarray]:
        """Each window's states [n + 2, C] ([CLS], pieces, [SEP]) at the chosen layers,
        in batches of alike lengths."""
        padding = model_padding(self.model)
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        out: list[np.ndarray | None] = [None] * len(windows)
        tokenizer = self.tokenizer
        for first in range(0, len(order), self.batch_size):
            chunk = order[first : first + self.batch_size]
            rows = [np.asarray([tokenizer.cls_id, *windows[i], tokenizer.sep_id]) for i in chunk]
            ids = pad_ids(rows, pad_id=tokenizer.pad_id, **padding).to(self.device)
            with autocast(self.device, self.autocast_dtype):
                encoded = self.model.encoder(ids, None, ids != tokenizer.pad_id, all_layers=True)
            chosen = torch.stack([encoded.layers[k].float() for k in self.layers]).mean(0)
            chosen = chosen.cpu().numpy()
            for row, index in enumerate(chunk):
                out[index] = chosen[row, : len(rows[row])]
        return out


def strand_pieces(tokenizer, sequences: list[str], both_strands: bool) -> tuple:
    """(the forward strands' piece ids, the reverse complements' or None): the tokenising
    that `write_embeddings` hands to worker processes."""
    forward = tokenizer.encode_batch(sequences)
    if not both_strands:
        return forward, None
    return forward, tokenizer.encode_batch([reverse_complement(s) for s in sequences])


_WORKER_TOKENIZER = None


def _load_worker_tokenizer(model_dir: str) -> None:
    global _WORKER_TOKENIZER
    _WORKER_TOKENIZER = load_tokenizer(Path(model_dir))


def _worker_pieces(sequences: list[str], both_strands: bool) -> tuple:
    return strand_pieces(_WORKER_TOKENIZER, sequences, both_strands)


def tokenised_chunks(embedder: Embedder, chunks: Iterator[list]) -> Iterator[tuple[list, tuple]]:
    """(chunk, its `strand_pieces`) for each chunk of (ids, sequence) records, tokenised
    `embedder.num_workers` chunks ahead in worker processes while the model embeds (in
    this process when there are none)."""
    if not embedder.num_workers:
        for chunk in chunks:
            sequences = [sequence for _, sequence in chunk]
            yield chunk, strand_pieces(embedder.tokenizer, sequences, embedder.rc_average)
        return
    import multiprocessing
    from collections import deque
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")  # no forked copy of torch's threads
    with ProcessPoolExecutor(
        embedder.num_workers,
        mp_context=context,
        initializer=_load_worker_tokenizer,
        initargs=(str(embedder.model_dir),),
    ) as pool:
        pending: deque = deque()
        for chunk in chunks:
            sequences = [sequence for _, sequence in chunk]
            pending.append((chunk, pool.submit(_worker_pieces, sequences, embedder.rc_average)))
            if len(pending) > embedder.num_workers:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()


def chosen_layers(num_layers: int, layer: int, mean_last: int) -> list[int]:
    """Indices into `EncoderOutput.layers` (0: the embeddings, num_layers: the last layer):
    `layer` alone (negative counts from the last), or the last `mean_last` layers."""
    if mean_last < 1 or mean_last > num_layers:
        raise ConfigError(
            f"mean of the last k layers: k must be in 1-{num_layers}, got {mean_last}"
        )
    if mean_last > 1:
        if layer != -1:
            raise ConfigError("give --layer or --mean-last, not both")
        return list(range(num_layers + 1 - mean_last, num_layers + 1))
    index = layer if layer >= 0 else num_layers + 1 + layer
    if not 0 <= index <= num_layers:
        raise ConfigError(
            f"layer must be in {-num_layers - 1}..{num_layers} (0: the "
            f"embeddings, {num_layers}: the last layer), got {layer}"
        )
    return [index]


def check_level(level: str, pooling: str, rc_average: bool) -> None:
    if level not in LEVELS:
        raise ConfigError(f"level must be one of {LEVELS}, got {level!r}")
    if pooling not in POOLINGS:
        raise ConfigError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    if level == "token" and rc_average:
        raise ConfigError(
            "the token level reads one strand (each strand is cut into its own "
            "pieces): drop --rc-average, or average at the base level"
        )


def pool(tokens: TokenVectors, cls: np.ndarray, pooling: str) -> np.ndarray:
    """A sequence's vector: the mean of its pieces' vectors, or of its windows' [CLS]."""
    return tokens.vectors.mean(0) if pooling == "mean" else cls.mean(0)


def spread(tokens: TokenVectors) -> np.ndarray:
    """[L, C]: each piece's vector repeated over the bases it spells."""
    lengths = tokens.spans[:, 1] - tokens.spans[:, 0]
    return np.repeat(tokens.vectors, lengths, axis=0)


# =========================================================================== files
FORMAT = "genobird-embeddings/1"
# a chunk of records embedded at once ends at this many records or bases: what embedding
# holds in memory (at the base level, 4 x hidden size bytes per base and strand: 1 Mb of a
# 128-wide model is 512 MB), whatever the records' lengths
CHUNK_RECORDS = 256
CHUNK_BP = 1_000_000


@dataclass
class EmbedSummary:
    embedded: int = 0
    rejected: int = 0
    outputs: list = None


def write_embeddings(
    embedder: Embedder,
    kind: str,
    source,
    out: Path,
    level: str,
    pooling: str = "mean",
    reference=None,
    window_bp: int | None = None,
    progress: bool = False,
) -> EmbedSummary:
    """Embed the records of `source` (kind: fasta, bed, vcf) into OUT.h5 chunk by chunk:
    `rows/<id>` for each record's ids, then by level `pooled` [N, C]; `token` [T, C] with
    `token_ids`, `token_spans` (bp in the record) and `token_offsets` [N + 1] (record i's
    pieces are rows token_offsets[i]:token_offsets[i + 1]); `base` [B, C] with
    `base_offsets`. Records that cannot be embedded go to OUT.rejected.tsv; the file
    appears only when every record was read."""
    from tqdm import tqdm

    from genobird.scoring.tables import H5_SUFFIXES, H5Output, write_rejected
    from genobird.scoring.windows import check_source

    check_source(kind, reference)
    check_level(level, pooling, embedder.rc_average)
    out = Path(out)
    if out.suffix.lower() not in H5_SUFFIXES:
        raise ConfigError(
            f"--out {out}: embeddings are written as HDF5; name it .h5, e.g. "
            f"{out.with_suffix('.h5')}"
        )
    summary, rejected = EmbedSummary(outputs=[]), []
    records = embed_records(kind, source, reference, window_bp, rejected)
    bar = tqdm(unit="records", desc="embed", disable=not progress)
    with H5Output(out) as handle:
        handle.attrs.update(
            format=FORMAT,
            model=str(embedder.model_dir),
            level=level,
            pooling=pooling,
            layers=embedder.layers,
            rc_average=embedder.rc_average,
            hidden_size=embedder.hidden_size,
        )
        offsets = [0]
        chunks = (chunk for chunk, _ in chunked(records, CHUNK_RECORDS, bases=CHUNK_BP))
        for chunk, pieces in tokenised_chunks(embedder, chunks):
            sequences = [sequence for _, sequence in chunk]
            vectors = embedder._embed(sequences, level, pooling, pieces)
            for column in chunk[0][0]:
                values = np.asarray([ids[column] for ids, _ in chunk])
                if values.dtype.kind in "OU":
                    values = values.astype(str).astype(object)
                handle.append(f"rows/{column}", values)
            if level == "pooled":
                handle.append("pooled", vectors)
            elif level == "token":
                handle.append("token", np.concatenate([t.vectors for t in vectors]))
                handle.append("token_ids", np.concatenate([t.ids for t in vectors]))
                handle.append("token_spans", np.concatenate([t.spans for t in vectors]))
                offsets += list(offsets[-1] + np.cumsum([len(t.ids) for t in vectors]))
            else:
                handle.append("base", np.concatenate(vectors))
                offsets += list(offsets[-1] + np.cumsum([len(b) for b in vectors]))
            summary.embedded += len(chunk)
            bar.update(len(chunk))
        bar.close()
        if level != "pooled":
            handle.put(f"{level}_offsets", np.asarray(offsets, dtype=np.int64))
        if not summary.embedded:  # the reasons are kept, as `score` keeps them
            where = f"; reasons in {write_rejected(out, rejected)}" if rejected else ""
            raise SequenceError(
                f"{source}: no record could be embedded ({len(rejected)} rejected{where})"
            )
    summary.outputs.append(out)
    summary.rejected = len(rejected)
    if rejected:
        summary.outputs.append(write_rejected(out, rejected))
    return summary


def embed_records(
    kind: str, source, reference, window_bp: int | None, rejected: list
) -> Iterator[tuple[dict, str]]:
    """(ids, normalised sequence) of each record to embed, read by the record source
    (scoring.source); the rest go to `rejected` with their reason. FASTA records and BED
    regions are read as they are (BED on its own strand; with `window_bp`, each centred
    and resized to it); a VCF variant gives two records, its REF and ALT windows of
    `window_bp` (1,000 by default) centred on it."""
    from genobird.scoring.options import VARIANT_WINDOW_BP
    from genobird.scoring.source import WindowPolicy, records, variant_records

    if kind != "vcf":
        # --window-bp resizes BED regions; a FASTA record is read as it is
        length = window_bp if kind == "bed" else None
        policy = WindowPolicy(length, max_record_bp=MAX_RECORD_BP)
        for record in records(kind, source, policy, rejected, reference):
            yield {column: record.value(field) for column, field in COLUMNS[kind]}, record.sequence
        return
    for record in variant_records(source, reference, window_bp or VARIANT_WINDOW_BP, rejected):
        variant = record.variant
        for allele, sequence in (("ref", record.ref), ("alt", record.alt)):
            ids = {
                "chrom": variant.chrom,
                "pos": variant.pos,
                "id": variant.id,
                "ref": variant.ref,
                "alt": variant.alt,
                "allele": allele,
                "line": variant.line,
            }
            yield ids, sequence


# the id columns of an embedded FASTA record and BED region: (column, the record's field)
COLUMNS = {
    "fasta": (("name", "name"), ("line", "line")),
    "bed": (
        ("chrom", "chrom"),
        ("start", "window_start"),
        ("end", "window_end"),
        ("name", "name"),
        ("strand", "read_strand"),
        ("line", "line"),
    ),
}
