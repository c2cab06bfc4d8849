"""Motifs in MEME's motif format (minimal MEME, version 4), which MEME-suite tools,
memelite and `genobird motifs --known` read: each motif's ID, name and letter-probability
matrix, bases A, C, G, T."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from genobird.fileio import atomic_write


def write_meme(path: Path, motifs) -> None:
    """`motifs`: (id, name, probability matrix [4, W], sites) each, written whole or not
    at all."""
    with atomic_write(path) as handle:
        handle.write("MEME version 4\n\nALPHABET= ACGT\n\nstrands: + -\n\n")
        handle.write("Background letter frequencies\nA 0.25 C 0.25 G 0.25 T 0.25\n\n")
        for motif_id, name, ppm, sites in motifs:
            handle.write(f"MOTIF {motif_id} {name}\n")
            handle.write(
                f"letter-probability matrix: alength= 4 w= {ppm.shape[1]} nsites= {sites} E= 0\n"
            )
            for column in np.asarray(ppm).T:
                handle.write(" ".join(f"{value:.6f}" for value in column) + "\n")
            handle.write("\n")


def consensus_matrix(consensus: str, share: float = 0.94) -> np.ndarray:
    """The probability matrix [4, W] of a consensus sequence: `share` on its base at each
    position, the rest spread over the other three."""
    ppm = np.full((4, len(consensus)), (1 - share) / 3)
    for position, base in enumerate(consensus.upper()):
        ppm["ACGT".index(base), position] = share
    return ppm
