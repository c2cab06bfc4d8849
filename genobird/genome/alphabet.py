"""The DNA alphabet: normalisation at the boundary, reverse complement, one-hot encoding.

Inside genobird, DNA is a `str` over A, C, G, T, N. Every sequence that enters from a
file or a user is normalised once by `normalise_dna`: uppercase, U -> T, IUPAC ambiguity
codes -> N. Any other character is an error naming the record and the 0-based position.
"""

from __future__ import annotations

import numpy as np

from genobird.errors import SequenceError

BASES = "ACGT"
ALPHABET = "ACGTN"
IUPAC_AMBIGUITY = "RYSWKMBDHVN"

# One-hot channel order used everywhere in genobird: A, C, G, T (alphabetical, as most
# sequence models use). N is an all-zero column. DeepSEA's files use A, G, C, T instead.
ONE_HOT_ORDER = "ACGT"
DEEPSEA_ORDER = "AGCT"
# Swapping channels 1 and 2 converts in both directions (the permutation is its own inverse).
_ACGT_AGCT_PERMUTATION = np.array([0, 2, 1, 3])

_NORMALISE_TABLE = bytes.maketrans(
    b"acgtnuU" + IUPAC_AMBIGUITY.lower().encode() + IUPAC_AMBIGUITY.encode(),
    b"ACGTNTT" + b"N" * (2 * len(IUPAC_AMBIGUITY)),
)
_COMPLEMENT_TABLE = str.maketrans(
    "ACGTNacgtnRYSWKMBDHVryswkmbdhv",
    "TGCANtgcanYRSWMKVHDByrswmkvhdb",
)
_BASE_INDEX = np.full(256, -1, dtype=np.int64)
for _i, _base in enumerate(ONE_HOT_ORDER):
    _BASE_INDEX[ord(_base)] = _i


def normalise_dna(sequence: str, record: str = "sequence", offset: int = 0) -> str:
    """Return `sequence` as uppercase A/C/G/T/N (U -> T, IUPAC ambiguity codes -> N).

    Whitespace is not accepted here: readers strip line ends before calling this.
    `record` and `offset` only shape the error message: the position reported is
    `offset` + the 0-based index of the first bad character.

    Raises SequenceError naming the record, the position and the character.
    """
    try:
        raw = sequence.encode("ascii")
    except UnicodeEncodeError as exc:
        _raise_bad_character(sequence, exc.start, record, offset)
    normalised = raw.translate(_NORMALISE_TABLE)
    leftovers = normalised.translate(None, b"ACGTN")
    if leftovers:
        _raise_bad_character(sequence, normalised.index(leftovers[:1]), record, offset)
    return normalised.decode("ascii")


def _raise_bad_character(sequence: str, index: int, record: str, offset: int) -> None:
    char = sequence[index]
    raise SequenceError(
        f"{record}: invalid DNA character {char!r} at 0-based position {offset + index}; "
        f"allowed are A, C, G, T, U, N and the IUPAC codes {IUPAC_AMBIGUITY} (read as N)"
    )


def reverse_complement(sequence: str) -> str:
    """Reverse complement, keeping case; IUPAC codes map to their complements (R <-> Y, ...)."""
    return sequence.translate(_COMPLEMENT_TABLE)[::-1]


def gc_fraction(sequence: str) -> float:
    """Fraction of G+C among the non-N bases (0.0 for a sequence with no called base)."""
    upper = sequence.upper()
    called = len(upper) - upper.count("N")
    return (upper.count("G") + upper.count("C")) / called if called else 0.0


def one_hot(sequence: str, dtype=np.float32) -> np.ndarray:
    """Encode normalised DNA as an [L, 4] array, channels A, C, G, T; N is all zero."""
    codes = _BASE_INDEX[np.frombuffer(sequence.encode("ascii"), dtype=np.uint8)]
    encoded = np.zeros((len(sequence), 4), dtype=dtype)
    called = codes >= 0
    encoded[np.nonzero(called)[0], codes[called]] = 1
    return encoded


def one_hot_to_sequence(encoded: np.ndarray, order: str = ONE_HOT_ORDER) -> str:
    """Decode an [L, 4] one-hot array (channel `order`) to DNA; all-zero columns give N.

    Raises SequenceError when a position has more than one channel set.
    """
    encoded = np.asarray(encoded)
    if encoded.ndim != 2 or encoded.shape[1] != 4:
        raise SequenceError(f"one-hot array must have shape [L, 4], got {list(encoded.shape)}")
    hot = encoded > 0.5
    counts = hot.sum(axis=1)
    if (counts > 1).any():
        position = int(np.argmax(counts > 1))
        raise SequenceError(f"one-hot array: position {position} has more than one base set")
    letters = np.frombuffer(order.encode("ascii"), dtype=np.uint8)[hot.argmax(axis=1)]
    letters = np.where(counts == 0, ord("N"), letters).astype(np.uint8)
    return letters.tobytes().decode("ascii")


def acgt_to_deepsea_order(encoded: np.ndarray, axis: int = -1) -> np.ndarray:
    """Reorder one-hot channels from genobird's A,C,G,T to DeepSEA's A,G,C,T along `axis`."""
    return np.take(encoded, _ACGT_AGCT_PERMUTATION, axis=axis)


def deepsea_to_acgt_order(encoded: np.ndarray, axis: int = -1) -> np.ndarray:
    """Reorder one-hot channels from DeepSEA's A,G,C,T to genobird's A,C,G,T along `axis`."""
    return np.take(encoded, _ACGT_AGCT_PERMUTATION, axis=axis)
