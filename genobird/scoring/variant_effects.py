"""Zero-shot variant effects (`genobird likelihood --vcf`): how much less likely the
pretrained language model finds the ALT allele than the REF one, in bits, as GPN and the
Nucleotide Transformer score variants.

Each allele is read in a window of `window_bp` centred on the variant. Both windows are
cut into pieces; the pieces they share at either end (the same ids from the start, and
from the end) are context, and the pieces between, those that differ between the
alleles (an SNV can re-cut a few pieces around it), are masked together and scored:
the bits the model needs for them given the rest of the window. The score is
log2 P(ALT) - log2 P(REF) = bits(REF pieces) - bits(ALT pieces), averaged over both
strands (each strand cut and masked on its own); negative: the model finds ALT less
likely. The same score of an order-k Markov model (`genobird baseline markov --vcf`) is
the yardstick: its bits of the whole REF window minus the ALT window's.

A variant is rejected, with the reason in OUT.rejected.tsv, when its REF is not the
reference's bases there, an allele is longer than MAX_ALLELE_BP, its windows are more than
half N, or its contig is not in the reference (a record of several ALT alleles gives one
row per ALT). Windows past a contig's ends are N-padded there, as `score --vcf` pads them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from genobird.errors import ConfigError
from genobird.genome.alphabet import reverse_complement
from genobird.genome.regions import BadRecord, Variant
from genobird.scoring.options import VARIANT_WINDOW_BP, ScoringOptions

# SNVs and short indels: a longer allele changes more than a local likelihood can say
MAX_ALLELE_BP = 20
ID_COLUMNS = ("chrom", "pos", "id", "ref", "alt", "line", "window_start", "window_end")
SCORE_COLUMNS = ("llr_bits", "ref_bits", "alt_bits", "ref_pieces", "alt_pieces")


@dataclass
class AlleleWindows:
    """A variant's REF and ALT windows and where the REF window lies (0-based)."""

    variant: Variant
    ref: str
    alt: str
    start: int
    end: int

    def ids(self) -> dict:
        v = self.variant
        return {
            "chrom": v.chrom,
            "pos": v.pos,
            "id": v.id,
            "ref": v.ref,
            "alt": v.alt,
            "line": v.line,
            "window_start": self.start,
            "window_end": self.end,
        }


def check_window(window_bp: int) -> None:
    """An allele window must hold the longest allele scored, with context either side."""
    if window_bp < 2 * MAX_ALLELE_BP:
        raise ConfigError(f"--window-bp must be at least {2 * MAX_ALLELE_BP}, got {window_bp}")


def allele_windows(
    path, reference, window_bp: int, rejected: list[BadRecord], chromosomes=None
) -> Iterator[AlleleWindows]:
    """The variants of a VCF that can be scored, as allele windows (each ALT of a record
    on its own); the others (and the VCF's bad lines) go to `rejected` with their reason:
    `scoring.windows.variant_problem`'s, as `score --vcf` rejects them, and an allele longer than
    `MAX_ALLELE_BP`. A window past its contig's ends is N-padded there, as `score --vcf`
    pads it (window_start and window_end may then lie outside the contig)."""
    from genobird.scoring.source import variant_records

    check_window(window_bp)
    for record in variant_records(
        path, reference, window_bp, rejected, chromosomes, max_allele_bp=MAX_ALLELE_BP
    ):
        yield AlleleWindows(record.variant, record.ref, record.alt, record.start, record.end)


def differing_pieces(ref_ids: list[int], alt_ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the pieces of each allele's window that are not shared at either end:
    the pieces with the same ids from the start, and from the end, spell the same bases
    in both windows and are context; the rest are scored."""
    shortest = min(len(ref_ids), len(alt_ids))
    prefix = 0
    while prefix < shortest and ref_ids[prefix] == alt_ids[prefix]:
        prefix += 1
    suffix = 0
    while suffix < shortest - prefix and ref_ids[-1 - suffix] == alt_ids[-1 - suffix]:
        suffix += 1
    return (np.arange(prefix, len(ref_ids) - suffix), np.arange(prefix, len(alt_ids) - suffix))


class VariantEffectScorer:
    """A pretraining model directory as a zero-shot scorer of variants: a VCF scorer
    of `write_scores` (scoring.tables), one table of SCORE_COLUMNS per chunk."""

    feature_names: ClassVar[list[str]] = list(SCORE_COLUMNS)
    # the tables a VCF is written as: the effects, in OUT (TSV) or one HDF5 dataset
    variant_tables: ClassVar[dict] = {"tsv": ("effects",), "h5": ("effects",)}
    variant_rows_numbered = True

    def __init__(
        self,
        model_dir,
        options: ScoringOptions | None = None,
        *,
        window_bp: int = VARIANT_WINDOW_BP,
        chunk_size: int = 256,
        **given,
    ):
        """`options` (scoring.options), or its fields as keywords (`device`,
        `batch_size`, `rc_average`: both strands unless False); `window_bp`: each
        allele's window, centred on the variant."""
        from genobird.scoring.likelihood import LikelihoodScorer

        check_window(window_bp)  # before the model is loaded
        options = self.options = ScoringOptions.of(options, **given)
        self.window_bp, self.chunk_size = window_bp, chunk_size
        self.both_strands = options.strands_for("variant_effects")
        self.language_model = LikelihoodScorer(
            model_dir,
            options,
            rc_average=self.both_strands,
            batch_size=options.batch_for("variant_effects"),
        )

    def iter_variants(self, path, reference, chromosomes=None) -> Iterator[tuple[dict, list]]:
        """Chunks of ({"effects": ids and SCORE_COLUMNS}, the variants set aside with
        their reason), as `write_scores` streams them."""
        from genobird.genome import open_reference
        from genobird.scoring.windows import chunked

        rejected: list[BadRecord] = []
        windows = allele_windows(
            path, open_reference(reference), self.window_bp, rejected, chromosomes
        )
        for chunk, set_aside in chunked(windows, self.chunk_size, rejected):
            yield {"effects": self.table(chunk)}, set_aside

    def table(self, windows: list[AlleleWindows]) -> pd.DataFrame:
        """The variants' ids (ID_COLUMNS) and SCORE_COLUMNS."""
        ids = pd.DataFrame([w.ids() for w in windows], columns=list(ID_COLUMNS))
        scores = self.score(windows) if windows else pd.DataFrame(columns=list(SCORE_COLUMNS))
        return pd.concat([ids, scores], axis=1)

    def score(self, windows: list[AlleleWindows]) -> pd.DataFrame:
        """SCORE_COLUMNS of each variant (bits averaged over the strands read)."""
        strands = [(False,), (False, True)][self.both_strands]
        totals = np.zeros((len(windows), 4))  # ref bits, alt bits, ref pieces, alt pieces
        for reverse in strands:
            totals += self._strand(windows, reverse)
        totals /= len(strands)
        return pd.DataFrame(
            {
                "llr_bits": totals[:, 0] - totals[:, 1],
                "ref_bits": totals[:, 0],
                "alt_bits": totals[:, 1],
                "ref_pieces": totals[:, 2],
                "alt_pieces": totals[:, 3],
            }
        )

    def _strand(self, windows: list[AlleleWindows], reverse: bool) -> np.ndarray:
        from genobird.inputs import model_padding
        from genobird.scoring.likelihood import masked_batch_at, masked_bits

        lm = self.language_model
        texts = [text for w in windows for text in (w.ref, w.alt)]
        if reverse:
            texts = [reverse_complement(text) for text in texts]
        pieces = lm.tokenizer.encode_batch(texts)
        if any(len(ids) > lm.window for ids in pieces):
            raise ConfigError(
                f"a {len(windows[0].ref)} bp window is more pieces than the model "
                f"reads ({lm.window}); give a smaller --window-bp"
            )
        scored = []
        for index in range(0, len(pieces), 2):
            scored += differing_pieces(pieces[index], pieces[index + 1])
        bits = np.zeros(len(pieces))
        padding = model_padding(lm.model)
        for first in range(0, len(pieces), lm.batch_size):
            rows = slice(first, first + lm.batch_size)
            batch = masked_batch_at(pieces[rows], scored[rows], lm.tokenizer, padding)
            values, done = masked_bits(lm.model, batch, lm.device), 0
            for offset, picked in enumerate(scored[rows]):
                bits[first + offset] = values[done : done + len(picked)].sum()
                done += len(picked)
        counts = np.array([len(picked) for picked in scored], dtype=float)
        return np.stack([bits[0::2], bits[1::2], counts[0::2], counts[1::2]], axis=1)


def markov_variant_effects(
    counts, order: int, alpha: float, windows: list[AlleleWindows], both_strands: bool = True
) -> np.ndarray:
    """An order-k Markov model's log2 P(ALT) - log2 P(REF) of each variant: its bits of the
    REF window minus the ALT window's, averaged over both strands."""
    from genobird.baselines.markov import dna_codes, sequence_bits

    def bits(text: str) -> float:
        strands = [text, reverse_complement(text)] if both_strands else [text]
        return float(np.mean([sequence_bits(counts, dna_codes(s), order, alpha) for s in strands]))

    return np.array([bits(w.ref) - bits(w.alt) for w in windows])
