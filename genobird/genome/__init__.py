"""Genome layer: DNA alphabet, reference access, regions and readers, demo reference."""

from genobird.genome.alphabet import (
    acgt_to_deepsea_order,
    deepsea_to_acgt_order,
    normalise_dna,
    one_hot,
    one_hot_to_sequence,
    reverse_complement,
)
from genobird.genome.reference import (
    Reference,
    ReferenceSet,
    contig_aliases,
    open_reference,
    read_chrom_sizes,
)
from genobird.genome.regions import (
    BadRecord,
    Interval,
    SequenceRecord,
    Variant,
    centered_window,
    oriented_window,
    parse_region,
    point_window,
    read_bed,
    read_fasta,
    read_vcf,
)

__all__ = [
    "BadRecord",
    "Interval",
    "Reference",
    "ReferenceSet",
    "SequenceRecord",
    "Variant",
    "acgt_to_deepsea_order",
    "centered_window",
    "contig_aliases",
    "deepsea_to_acgt_order",
    "normalise_dna",
    "one_hot",
    "one_hot_to_sequence",
    "open_reference",
    "oriented_window",
    "parse_region",
    "point_window",
    "read_bed",
    "read_chrom_sizes",
    "read_fasta",
    "read_vcf",
    "reverse_complement",
]
