"""Where scored windows come from, one policy for every scorer (predictors, likelihood,
embeddings, ISM, variant effects): BED regions and VCF variants are read against the
reference alike (`reference_regions`, `reference_variants`: unknown contigs and ends
past a contig set aside with their line), a window's DNA is fetched (BED intervals
centred and N-padded past contig ends, FASTA records cropped or N-padded by `inputs.fit_window`,
variants as a reference and an alternative window), a window more than half N is not
scored (`inputs.MAX_N_FRACTION`), and DataLoader workers tokenise windows into the
views whose predictions are averaged."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator

import numpy as np
import torch

from genobird.errors import ConfigError, GenobirdError
from genobird.genome import Reference, read_bed, read_vcf
from genobird.genome.regions import MAX_VCF_ALLELE_BP, BadRecord, Interval, Variant
from genobird.inputs import (
    MAX_N_FRACTION,
    fit_window,
    mostly_n,
    mostly_n_reason,
    n_fraction,
    pad_ids,
)


def default_workers(device: torch.device) -> int:
    """DataLoader workers that fetch and tokenise: on CUDA, enough to keep the GPU fed
    (up to 8, leaving a core to the main process: on an H200 a small model scored 8 kb
    windows 1.4x faster with 8 than with 4, a base-sized one 5% slower, and 14 helped
    neither); on CPU none, since workers would take cores from the model itself."""
    if device.type != "cuda":
        return 0
    return max(0, min(8, (os.cpu_count() or 1) - 1))


class WindowInputs(torch.utils.data.Dataset):
    """Model inputs of windows: each is fetched (an Interval) and tokenised here into the
    views whose predictions are averaged (`views`: a window's DNA to its list of id rows,
    a `window_views` partial), so that DataLoader workers do it off the main process."""

    def __init__(self, windows: list, reference, views):
        self.windows, self.reference, self.views = windows, reference, views

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, index: int) -> tuple[list[np.ndarray] | None, float]:
        """(the window's views, or None where it is too much N to score; its N share)."""
        window = self.windows[index]
        if isinstance(window, Interval):
            window = self.reference.fetch(
                window.chrom, window.start, window.end, window.strand, pad=True
            )
        share = n_fraction(window)
        return (None if mostly_n(window) else self.views(window)), share


def collate_views(items: list, block_size: int, pad_id: int, dense_length: int = 0) -> tuple:
    """([ids of every scored window's view k, padded (`padded_length`)] for each view,
    every window's N share, whether each window is scored)."""
    scored = [ids for ids, _ in items if ids is not None]
    padded = functools.partial(
        pad_ids, block_size=block_size, pad_id=pad_id, dense_length=dense_length
    )
    views = [padded([ids[k] for ids in scored]) for k in range(len(scored[0]))] if scored else []
    return views, [share for _, share in items], [ids is not None for ids, _ in items]


def check_source(kind: str, reference=None, chromosomes=None) -> None:
    """The one check of what a scoring command reads, before any model is loaded: BED
    regions and VCF variants are cut from a reference, and --chromosomes chooses among
    them, not among FASTA records."""
    if kind != "fasta" and reference is None:
        raise ConfigError(f"--{kind} needs --reference FASTA to cut the windows from")
    if kind == "fasta" and chromosomes:
        raise ConfigError("--chromosomes selects BED regions or VCF variants, not FASTA records")


def variant_windows(variant, reference, length: int) -> tuple[str, str, bool]:
    """(reference window, alternative window, whether REF is the reference's bases
    there): `length` bp centred on the variant, the alternative with ALT in REF's place
    (an indel's re-centred and refitted to `length`), N-padded past contig ends."""
    centre = variant.start + len(variant.ref) // 2
    start = centre - length // 2
    ref_window = reference.fetch(variant.chrom, start, start + length, pad=True)
    ref_match = reference.fetch(variant.chrom, variant.start, variant.end, pad=True) == variant.ref
    left = ref_window[: variant.start - start]
    right = ref_window[variant.start - start + len(variant.ref) :]
    alt_window = left + variant.alt + right
    if len(alt_window) != length:  # indels: re-centre on the variant and refit
        flank = (length - len(variant.alt)) // 2 + 1
        left_bp = reference.fetch(variant.chrom, variant.start - flank, variant.start, pad=True)
        right_bp = reference.fetch(variant.chrom, variant.end, variant.end + flank, pad=True)
        alt_window = fit_window(left_bp + variant.alt + right_bp, length)
    return ref_window, alt_window, ref_match


def variant_problem(variant, ref_window: str, alt_window: str, ref_match: bool) -> str | None:
    """Why a variant is not scored (None: it is), the one policy of `score --vcf` and
    `likelihood --vcf`: its REF is not the reference's bases there (another genome build,
    or another strand: an effect would set ALT against bases the VCF does not name), or
    its window is more than half N (`inputs.MAX_N_FRACTION`). An ALT equal to REF is
    refused when the VCF is read (`read_vcf`); a record of several ALTs gives one variant
    per ALT, each scored on its own row."""
    if not ref_match:
        return (
            f"REF {variant.ref} is not the reference's bases at {variant.chrom}:"
            f"{variant.pos:,} (another genome build, or another strand?); nothing is "
            "scored"
        )
    share = max(n_fraction(ref_window), n_fraction(alt_window))
    if share > MAX_N_FRACTION:
        return mostly_n_reason(share, len(ref_window), f"the window of {variant.label}")
    return None


def chunked(
    items, size: int, rejected: list[BadRecord] | None = None, bases: int | None = None
) -> Iterator[tuple[list, list[BadRecord]]]:
    """The one chunking loop of scoring (score, likelihood, embed, variant effects,
    tracks): lists of `items` closed at `size` items, or with `bases` (items that are
    (ids, sequence) pairs) once their sequences' lengths add up to that, each with the
    records set aside while they were read (`taken` from `rejected`). A last list, perhaps
    empty, carries what was set aside after the last full one, so that none is lost."""
    rejected = [] if rejected is None else rejected
    chunk, held = [], 0
    for item in items:
        chunk.append(item)
        if bases is not None:
            held += len(item[1])
        if len(chunk) == size or (bases is not None and held >= bases):
            yield chunk, taken(rejected)
            chunk, held = [], 0
    if chunk or rejected:
        yield chunk, taken(rejected)


def taken(rejected: list[BadRecord]) -> list[BadRecord]:
    """The records set aside so far, the list emptied in place: a chunked scorer hands
    these on with its chunk while the readers (`read_fasta`, `reference_regions`, ...)
    keep appending to the same list, so none found after the first chunk is lost."""
    records = list(rejected)
    rejected.clear()
    return records


def reference_regions(
    path, reference: Reference, rejected: list[BadRecord], chromosomes=None
) -> Iterator[Interval]:
    """A BED's regions as every scorer reads them: on the reference's contigs (aliases
    resolved, the contig spelt as the BED spells it, which the table writes back), ends
    past a contig and unknown contigs set aside in `rejected` with their line; only
    those on `chromosomes` where given."""
    wanted = wanted_contigs(reference, chromosomes)
    for interval in read_bed(
        path, contigs=reference.lengths, problems=rejected, keep_spelling=True
    ):
        if wanted is None or reference.resolve(interval.chrom) in wanted:
            yield interval


def reference_variants(
    path,
    reference: Reference,
    rejected: list[BadRecord],
    chromosomes=None,
    max_allele_length: int = MAX_VCF_ALLELE_BP,
) -> Iterator[Variant]:
    """A VCF's variants (one per ALT, `read_vcf`) as every scorer reads them: a variant
    on a contig the reference lacks is set aside in `rejected` with its line and the
    reference's close names; only those on `chromosomes` where given. What a scorer
    then refuses of a variant's windows is `variant_problem`'s."""
    wanted = wanted_contigs(reference, chromosomes)
    for variant in read_vcf(path, problems=rejected, max_allele_length=max_allele_length):
        try:
            contig = reference.resolve(variant.chrom)
        except GenobirdError as exc:
            rejected.append(
                BadRecord(
                    str(path), variant.line, f"{variant.chrom}:{variant.pos}: {exc}", variant.label
                )
            )
            continue
        if wanted is None or contig in wanted:
            yield variant


def wanted_contigs(reference: Reference, chromosomes) -> set[str] | None:
    """The reference's names for `chromosomes` (aliases resolved; an unknown one is an
    error naming close names), or None for all."""
    if chromosomes is None:
        return None
    return {reference.resolve(chrom) for chrom in chromosomes}
