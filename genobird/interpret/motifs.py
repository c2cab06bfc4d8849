"""Motifs with names (`genobird motifs`): the patterns a model reads across many windows,
found by TF-MoDISco (modisco-lite) in their attributions (interpret.attributions), each
matched by TOMTOM (memelite) against JASPAR (pyjaspar, which ships the database).

A pattern's query is its position probability matrix trimmed to the positions that
carry at least 30% of its largest contribution (modisco-lite's own reports trim so).
TOMTOM's p-value of each JASPAR matrix is turned into a q-value over all the matrices
the query was compared with (Benjamini-Hochberg), as MEME's Tomtom reports it; a match
is called at q < `MATCH_Q`.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field

import numpy as np

from genobird.errors import ConfigError, InputError
from genobird.interpret import JASPAR_RELEASE, JASPAR_TAXON
from genobird.interpret.attributions import Attributions

log = logging.getLogger(__name__)

BASES = "ACGT"
# modisco-lite's own reports trim a pattern to the positions carrying this share of its
# largest contribution before TOMTOM
TRIM_SHARE = 0.3
MATCH_Q = 0.05
TOP_MATCHES = 3
# a query of less information than this, in bits per position, is not matched: TOMTOM
# gives a flat matrix tiny p-values against JASPAR's long, flank-heavy matrices (a
# uniform 15-column query "matches" CTCF's 33-column MA1930 at p 5e-15), and a pattern
# that says nothing about its bases names no factor
MIN_BITS_PER_POSITION = 0.5


@dataclass
class Match:
    """A JASPAR matrix a pattern matches: its ID, TF name, TOMTOM p- and q-value."""

    matrix_id: str
    name: str
    p: float
    q: float


@dataclass
class Pattern:
    """A pattern TF-MoDISco found: its sign (+: raises the feature, -: lowers it), its
    seqlets' count and where they sit (their centres, bp from each window's start), its
    probability matrix and contribution-weighted matrix [4, W] (trimmed), and its best
    JASPAR matches, best first."""

    name: str
    sign: str
    seqlets: int
    ppm: np.ndarray
    cwm: np.ndarray
    centres: np.ndarray
    matches: list[Match] = field(default_factory=list)
    known: Match | None = None  # its best match among known motifs (match_known)

    @property
    def consensus(self) -> str:
        return "".join(BASES[i] for i in self.ppm.argmax(axis=0))

    @property
    def bits_per_position(self) -> float:
        """The probability matrix's mean information, in bits per position."""
        return float(information(self.ppm).sum(axis=0).mean())

    @property
    def named(self) -> bool:
        """Whether its best match is called (q < MATCH_Q)."""
        return bool(self.matches) and self.matches[0].q < MATCH_Q


def discover(attributions: Attributions, max_seqlets: int = 20_000) -> list[Pattern]:
    """The patterns modisco-lite finds in the attributions, most seqlets first."""
    from modiscolite.tfmodisco import TFMoDISco

    one_hot = np.ascontiguousarray(attributions.one_hot.transpose(0, 2, 1), dtype=np.float32)
    hypothetical = np.ascontiguousarray(
        attributions.attributions.transpose(0, 2, 1), dtype=np.float32
    )
    window, windows = attributions.span_bp, len(attributions.ids)
    sliding, flank = min(21, max(5, window // 4)), min(10, max(2, window // 10))
    # modisco-lite's defaults want 100 seqlets of a sign before clustering them, 20 to
    # keep a pattern: fewer in a few hundred windows, where a motif may sit in one in five
    least = min(100, max(20, windows // 5))
    positive, negative = TFMoDISco(
        one_hot=one_hot,
        hypothetical_contribs=hypothetical,
        sliding_window_size=sliding,
        flank_size=flank,
        max_seqlets_per_metacluster=max_seqlets,
        trim_to_window_size=min(30, window),
        initial_flank_to_add=min(10, flank),
        min_metacluster_size=least,
        final_min_cluster_size=min(20, least),
    )
    patterns = []
    for sign, found in (("+", positive), ("-", negative)):
        for index, pattern in enumerate(found or ()):
            name = f"{'pos' if sign == '+' else 'neg'}_{index}"
            patterns.append(_pattern(name, sign, pattern, attributions.start))
    return sorted(patterns, key=lambda p: -p.seqlets)


def _pattern(name: str, sign: str, pattern, start: int) -> Pattern:
    """A modisco-lite pattern, its seqlets' centres in the window the model reads (the
    attributed span starting at `start`)."""
    ppm, cwm = np.asarray(pattern.sequence).T, np.asarray(pattern.contrib_scores).T
    weight = np.abs(cwm).sum(axis=0)
    kept = np.flatnonzero(weight >= TRIM_SHARE * weight.max())
    cut = slice(kept.min(), kept.max() + 1)
    centres = np.array([start + (s.start + s.end) // 2 for s in pattern.seqlets])
    return Pattern(name, sign, len(pattern.seqlets), ppm[:, cut], cwm[:, cut], centres)


@dataclass(frozen=True)
class Jaspar:
    """The JASPAR matrices a pattern is matched against: IDs, TF names, PPMs [4, W]."""

    release: int
    taxon: str
    ids: tuple
    names: tuple
    ppms: tuple

    @classmethod
    @functools.cache
    def load(cls, release: int = JASPAR_RELEASE, taxon: str = JASPAR_TAXON) -> Jaspar:
        """The CORE collection's latest matrix versions of a JASPAR release and taxon
        (pyjaspar's database, offline), refused in one line when there is no such."""
        from pyjaspar import jaspardb

        releases = jaspardb().get_releases()
        name = f"JASPAR{release}"
        if name not in releases:
            known = ", ".join(r.removeprefix("JASPAR") for r in releases)
            raise ConfigError(f"--jaspar-release {release}: pyjaspar has {known}")
        motifs = jaspardb(release=name).fetch_motifs(collection="CORE", tax_group=[taxon])
        if not motifs:
            raise ConfigError(
                f"--taxon {taxon!r}: JASPAR {release} CORE has no matrix of that taxon; "
                "give vertebrates, plants, insects, nematodes, fungi or urochordates"
            )
        ppms = []
        for motif in motifs:
            counts = np.array([motif.counts[base] for base in BASES], dtype=np.float64)
            ppms.append(counts / counts.sum(axis=0, keepdims=True))
        ids = tuple(m.matrix_id for m in motifs)
        return cls(release, taxon, ids, tuple(m.name for m in motifs), tuple(ppms))


@dataclass(frozen=True)
class KnownMotifs:
    """Motifs a user knows, from a MEME file (`--known`): IDs, names, PPMs [4, W]. The
    demo genome's reference writes those it plants in promoters (promoter_motifs.meme)."""

    path: str
    ids: tuple
    names: tuple
    ppms: tuple

    @classmethod
    def read(cls, path) -> KnownMotifs:
        """The motifs of a MEME file, refused in one line where it holds none."""
        from memelite.io import read_meme

        try:
            found = read_meme(str(path))
        except (OSError, ValueError, AttributeError, IndexError) as exc:
            raise InputError(f"{path}: not a MEME motif file ({exc})") from exc
        if not found:
            raise InputError(f"{path}: no MOTIF in it; give motifs in MEME's format")
        keys = list(found)
        ids = tuple(key.split()[0] for key in keys)
        names = tuple(key.split()[-1] for key in keys)
        ppms = tuple(found[key] / found[key].sum(axis=0, keepdims=True) for key in keys)
        return cls(str(path), ids, names, ppms)


def name_patterns(patterns: list[Pattern], jaspar: Jaspar, top: int = TOP_MATCHES) -> None:
    """Each pattern's best JASPAR matches by TOMTOM (memelite), with q-values over
    every matrix compared (module docstring), set in place."""
    for pattern, p_values, q_values in _compare(patterns, jaspar.ppms):
        best = np.argsort(p_values, kind="stable")[:top]
        pattern.matches = [
            Match(jaspar.ids[i], jaspar.names[i], float(p_values[i]), float(q_values[i]))
            for i in best
        ]


def match_known(patterns: list[Pattern], known: KnownMotifs, jaspar: Jaspar) -> None:
    """Each pattern's best match among `known`, set in place as `Pattern.known`. The
    known motifs are compared together with JASPAR's matrices, and q-values run over all
    of them: TOMTOM takes its p-values' background from the targets' columns, which a
    handful of known motifs alone would skew."""
    first = len(jaspar.ppms)
    for pattern, p_values, q_values in _compare(patterns, jaspar.ppms + known.ppms):
        i = int(np.argmin(p_values[first:]))
        pattern.known = Match(
            known.ids[i], known.names[i], float(p_values[first + i]), float(q_values[first + i])
        )


def _compare(patterns: list[Pattern], targets) -> list[tuple[Pattern, np.ndarray, np.ndarray]]:
    """(pattern, TOMTOM p-values against each of `targets`, their Benjamini-Hochberg
    q-values) of each pattern with the information to be matched
    (MIN_BITS_PER_POSITION)."""
    informative = [p for p in patterns if p.bits_per_position >= MIN_BITS_PER_POSITION]
    if not informative:
        return []
    from memelite import tomtom

    queries = [pattern.ppm for pattern in informative]
    p_values = tomtom(queries, list(targets), n_jobs=1)[0]
    return [
        (pattern, row, benjamini_hochberg(row))
        for pattern, row in zip(informative, p_values, strict=True)
    ]


def information(ppm: np.ndarray) -> np.ndarray:
    """A probability matrix [4, W] as letter heights of information (bits)."""
    clipped = np.clip(ppm, 1e-9, 1)
    bits = 2 + (clipped * np.log2(clipped)).sum(axis=0)
    return ppm * bits


def benjamini_hochberg(p_values: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg q-values of a family of p-values."""
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p)
    ranked = p[order] * len(p) / np.arange(1, len(p) + 1)
    q = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty_like(q)
    out[order] = np.minimum(q, 1.0)
    return out
