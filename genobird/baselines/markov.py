"""Order-k Markov models of DNA: the bits-per-base baseline of a DNA language model.

`genobird baseline markov` fits, on training DNA, the counts of every (k+1)-mer for all
orders 0..K at once, chooses the order k and the add-alpha smoothing on a validation
part of the training DNA, refits on all of it, and reports bits per base on held-out
DNA. Every A/C/G/T base of the held-out DNA is scored: a base fewer than k bases after
the start of a sequence or an N uses the longest context it has (order i < k), so the
figure covers the same bases whatever k is. N bases are neither scored nor used as
context.

Sequences come from genobird documents (each document is one contiguous genome slice)
or FASTA (plain, gzipped or bgzipped; soft-masked bases count as bases).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from genobird.errors import InputError
from genobird.fileio import open_text

log = logging.getLogger(__name__)

# A=0 C=1 G=2 T=3; anything else (N) = 4. Lowercase (soft-masked) bases are bases.
_CODES = np.full(256, 4, dtype=np.uint8)
for _index, _base in enumerate("ACGT"):
    _CODES[ord(_base)] = _CODES[ord(_base.lower())] = _index

ALPHAS = (16.0, 8.0, 4.0, 2.0, 1.0, 0.5, 0.1, 0.01)
MAX_ORDER = 12  # 4^13 counts of int64 = 537 MB: the largest table that stays reasonable


def dna_codes(sequence: str) -> np.ndarray:
    """uint8 codes of a DNA string: A C G T -> 0 1 2 3, anything else -> 4."""
    return _CODES[np.frombuffer(sequence.encode("ascii", "replace"), dtype=np.uint8)]


def reverse_complement_codes(codes: np.ndarray) -> np.ndarray:
    out = codes[::-1].copy()
    bases = out < 4
    out[bases] = 3 - out[bases]
    return out


def acgt_runs(codes: np.ndarray) -> Iterator[np.ndarray]:
    """The maximal stretches of `codes` without N."""
    is_n = np.concatenate(([True], codes >= 4, [True]))
    edges = np.flatnonzero(np.diff(is_n.astype(np.int8)))
    for start, end in zip(edges[::2], edges[1::2], strict=True):
        yield codes[start:end]


def kmer_indices(run: np.ndarray, k: int) -> np.ndarray:
    """Index in [0, 4^k) of every k-mer of an N-free run (first base most significant)."""
    if len(run) < k:
        return np.zeros(0, dtype=np.int64)
    if k == 0:
        return np.zeros(len(run) + 1, dtype=np.int64)
    index = np.zeros(len(run) - k + 1, dtype=np.int64)
    for offset in range(k):
        index = index * 4 + run[offset : len(run) - k + 1 + offset]
    return index


@dataclass
class MarkovCounts:
    """Counts of (context, next base) for every order 0..max_order."""

    max_order: int
    tables: list[np.ndarray] = field(default_factory=list)  # order k: int64 [4^k, 4]

    def __post_init__(self):
        if not 0 <= self.max_order <= MAX_ORDER:
            raise InputError(f"Markov orders must lie in 0..{MAX_ORDER}, got {self.max_order}")
        if not self.tables:
            self.tables = [np.zeros((4**k, 4), dtype=np.int64) for k in range(self.max_order + 1)]

    def add(self, codes: np.ndarray) -> None:
        for run in acgt_runs(codes):
            for k, table in enumerate(self.tables):
                if len(run) > k:
                    joint = kmer_indices(run, k + 1)
                    table += np.bincount(joint, minlength=4 ** (k + 1)).reshape(4**k, 4)

    @property
    def bases(self) -> int:
        return int(self.tables[0].sum())


def base_counts(counts: MarkovCounts, codes: np.ndarray, order: int):
    """For every A/C/G/T base of `codes`: how often the training DNA had that base after
    the same context, and how often it had that context (int64 arrays of equal length).
    Bases near a run start use the context they have (orders below `order`). These do
    not depend on the smoothing, so choosing alpha reuses them."""
    hits, seen = [], []
    for run in acgt_runs(codes):
        for position in range(min(order, len(run))):  # short contexts at the run start
            context = kmer_indices(run[:position], position)[:1] if position else np.zeros(1, int)
            table = counts.tables[position]
            hits.append(table[context, run[position : position + 1]])
            seen.append(table[context].sum(axis=1))
        if len(run) > order:
            joint = kmer_indices(run, order + 1)
            table = counts.tables[order]
            hits.append(table[joint >> 2, joint & 3])
            seen.append(table.sum(axis=1)[joint >> 2])
    empty = np.zeros(0, dtype=np.int64)
    return (np.concatenate(hits) if hits else empty), (np.concatenate(seen) if seen else empty)


def base_bits(hits: np.ndarray, seen: np.ndarray, alpha: float) -> np.ndarray:
    """Bits of each base with these counts under add-`alpha` smoothing."""
    return -np.log2((hits + alpha) / (seen + 4 * alpha))


def smoothed_bits(hits: np.ndarray, seen: np.ndarray, alpha: float) -> float:
    """Total bits of bases with these counts under add-`alpha` smoothing."""
    return float(base_bits(hits, seen, alpha).sum())


def sequence_bits(counts: MarkovCounts, codes: np.ndarray, order: int, alpha: float) -> float:
    """Total bits to encode the A/C/G/T bases of `codes` under the order-`order` model
    with add-`alpha` smoothing; bases near a run start use the context they have."""
    return smoothed_bits(*base_counts(counts, codes, order), alpha)


def base_count(codes_list: Iterable[np.ndarray]) -> int:
    return int(sum(int((codes < 4).sum()) for codes in codes_list))


@dataclass
class MarkovResult:
    order: int
    alpha: float
    bits_per_bp: float
    heldout_bp: int
    train_bp: int
    validation: dict  # "k,alpha" -> validation bits per bp
    both_strands: bool

    def to_dict(self) -> dict:
        return {
            "model": "markov",
            "order": self.order,
            "alpha": self.alpha,
            "bits_per_bp": self.bits_per_bp,
            "heldout_bp": self.heldout_bp,
            "train_bp": self.train_bp,
            "both_strands": self.both_strands,
            "validation_bits_per_bp": self.validation,
        }


def fit_counts(sequences: list[np.ndarray], max_order: int, both_strands: bool) -> MarkovCounts:
    """Counts of every order up to `max_order` over the sequences (and over their reverse
    complements too with `both_strands`)."""
    counts = MarkovCounts(max_order)
    for codes in sequences:
        counts.add(codes)
        if both_strands:
            counts.add(reverse_complement_codes(codes))
    return counts


def split_validation(sequences: list[np.ndarray], fraction: float):
    """(fit, validation): the last `fraction` of every training sequence validates."""
    fit, valid = [], []
    for codes in sequences:
        cut = len(codes) - round(len(codes) * fraction)
        fit.append(codes[:cut])
        valid.append(codes[cut:])
    return fit, valid


def markov_baseline(
    train: list[np.ndarray],
    heldout: list[np.ndarray],
    orders: range,
    both_strands: bool = True,
    valid_fraction: float = 0.1,
) -> MarkovResult:
    """Choose (order, alpha) on validation DNA cut from `train`, refit on all of `train`,
    and return bits per base on `heldout`."""
    train_bp, heldout_bp = base_count(train), base_count(heldout)
    if not train_bp:
        raise InputError("the training DNA has no A/C/G/T base")
    if not heldout_bp:
        raise InputError("the held-out DNA has no A/C/G/T base")
    fit, valid = split_validation(train, valid_fraction)
    valid_bp = base_count(valid)
    if not base_count(fit) or not valid_bp:
        raise InputError(
            f"{train_bp} training bases are too few to cut a validation part of "
            f"{valid_fraction:.0%}; give more training DNA"
        )
    counts = fit_counts(fit, max(orders), both_strands)
    scores = {}
    for k in orders:  # the counts of an order serve every alpha
        per_sequence = [base_counts(counts, codes, k) for codes in valid]
        hits = np.concatenate([h for h, _ in per_sequence])
        seen = np.concatenate([n for _, n in per_sequence])
        scores.update({(k, alpha): smoothed_bits(hits, seen, alpha) / valid_bp for alpha in ALPHAS})
    order, alpha = min(scores, key=scores.get)
    log.info("Markov order %d, alpha %g chosen on %d validation bases", order, alpha, valid_bp)
    counts = fit_counts(train, order, both_strands)
    bits = sum(sequence_bits(counts, codes, order, alpha) for codes in heldout)
    return MarkovResult(
        order,
        alpha,
        bits / heldout_bp,
        heldout_bp,
        train_bp,
        {f"{k},{a}": round(v, 5) for (k, a), v in scores.items()},
        both_strands,
    )


def parse_orders(text: str) -> range:
    """'0-10' or '4' -> a range of orders."""
    try:
        low, _, high = text.partition("-")
        orders = range(int(low), int(high or low) + 1)
    except ValueError:
        raise InputError(f"--orders must look like 0-10 or 4, got {text!r}") from None
    if not orders or orders.start < 0 or orders.stop - 1 > MAX_ORDER:
        raise InputError(f"--orders must lie in 0-{MAX_ORDER}, got {text!r}")
    return orders


def read_dna(path: str | Path) -> list[np.ndarray]:
    """Code arrays of every sequence of a FASTA file or of every genobird document."""
    path = Path(path)
    with open_text(path) as handle:
        first = next((line for line in handle if line.strip()), "")
    sequences = _fasta_codes(path) if first.startswith(">") else _document_codes(path)
    if not sequences:
        raise InputError(f"{path}: no DNA sequence (expected FASTA or genobird documents)")
    return sequences


def _fasta_codes(path: Path) -> list[np.ndarray]:
    """Streams the records (plain or gzipped FASTA alike); unusable ones are logged."""
    from genobird.genome import read_fasta

    problems: list = []
    codes = [dna_codes(record.sequence) for record in read_fasta(path, problems=problems)]
    for problem in problems:
        log.warning("skipped: %s", problem)
    return codes


def _document_codes(path: Path) -> list[np.ndarray]:
    """Each document's DNA; of a corpus cut in several passes, the first pass only: the
    others repeat the same DNA from other offsets, which would leak the validation tail
    of one document into the training part of another."""
    from genobird.corpus.documents import index_path_for, read_documents

    passes = None
    if index_path_for(path).is_file():
        index = json.loads(index_path_for(path).read_text())
        passes = [row[index["columns"].index("pass")] for row in index["documents"]]
    documents = read_documents(path)
    if passes is None:
        return [dna_codes("".join(document)) for document in documents]
    first = min(passes, default=0)
    return [
        dna_codes("".join(document))
        for document, pass_index in zip(documents, passes, strict=False)
        if pass_index == first
    ]
