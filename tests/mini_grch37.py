"""A GRCh37-shaped stand-in for the download pipeline, served from file:// URLs.

It has what reference/grch37.yaml's data sets have, in their published formats: a gzipped
FASTA with hg19 chromosome names, an EPDnew BED, DeepSEA's bundle (train.mat as MATLAB
v7.3 HDF5, valid/test.mat as MATLAB v5, inside deepsea_train/) and its genome-wide bin
list (allTFs.pos.bed). The sequence comes from the demo genome: chr1, chr2 and chr8 are
demo chromosomes; chr7 is N up to DeepSEA's validation region, then a demo chromosome, so
that every DeepSEA split has bins.
"""

from __future__ import annotations

import gzip
import hashlib
import tarfile
from pathlib import Path

import h5py
import numpy as np
import scipy.io
import yaml

from genobird.genome import Reference
from genobird.genome.alphabet import acgt_to_deepsea_order, one_hot, reverse_complement

VALID_OFFSET = 30_508_800  # chr7 bases before the demo sequence: inside DeepSEA's valid region
CHROMOSOMES = {"chr1": "chr1", "chr2": "chr2", "chr7": "chrX", "chr8": "chr3"}  # mini <- demo
FEATURES = 919
BINS_PER_CHROMOSOME = 12


def _offset(chrom: str) -> int:
    return VALID_OFFSET if chrom == "chr7" else 0


def _write_genome(demo: Reference, path: Path) -> dict[str, str]:
    sequences = {
        chrom: "N" * _offset(chrom) + demo.fetch(source, 0, demo.lengths[source])
        for chrom, source in CHROMOSOMES.items()
    }
    with gzip.open(path, "wt", compresslevel=1) as handle:
        for chrom, sequence in sequences.items():
            handle.write(f">{chrom}\n")
            for start in range(0, len(sequence), 60):
                handle.write(sequence[start : start + 60] + "\n")
    return sequences


def _write_promoters(demo_tss: Path, path: Path) -> None:
    renamed = {source: chrom for chrom, source in CHROMOSOMES.items()}
    lines = []
    for line in demo_tss.read_text().splitlines():
        fields = line.split("\t")
        if fields[0] not in renamed:
            continue
        chrom = renamed[fields[0]]
        for column in (1, 2, 6, 7):  # start, end, thickStart, thickEnd
            fields[column] = str(int(fields[column]) + _offset(chrom))
        lines.append("\t".join([chrom, *fields[1:]]))
    path.write_text("\n".join(lines) + "\n")


def _bins(sequences: dict[str, str]) -> list[tuple[str, int, int]]:
    bins = []
    for chrom, sequence in sequences.items():
        first = _offset(chrom) + 2000
        step = (len(sequence) - 2000 - first) // BINS_PER_CHROMOSOME
        bins += [
            (chrom, first + i * step, first + i * step + 200) for i in range(BINS_PER_CHROMOSOME)
        ]
    return bins


def _samples(sequences, bins) -> tuple[np.ndarray, np.ndarray]:
    """DeepSEA's layout: 1000 bp one-hot (A,G,C,T) forward samples, then their reverse
    complements; labels repeated for both halves."""
    windows = [sequences[chrom][start - 400 : end + 400] for chrom, start, end in bins]
    windows += [reverse_complement(window) for window in windows]
    x = np.stack([acgt_to_deepsea_order(one_hot(w, np.uint8)).T for w in windows])
    labels = np.random.default_rng(len(bins)).integers(0, 2, (len(bins), FEATURES))
    return x, np.concatenate([labels, labels]).astype(np.uint8)


def _write_deepsea(sequences, folder: Path) -> tuple[Path, Path]:
    from genobird.datasets.deepsea import deepsea_split_of

    bins = _bins(sequences)
    staging = folder / "deepsea_train"
    staging.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        x, y = _samples(sequences, [b for b in bins if deepsea_split_of(*b) == split])
        if split == "train":  # MATLAB v7.3: HDF5, stored transposed
            with h5py.File(staging / "train.mat", "w") as handle:
                handle["trainxdata"] = np.transpose(x, (2, 1, 0))
                handle["traindata"] = y.T
        else:
            scipy.io.savemat(staging / f"{split}.mat", {f"{split}xdata": x, f"{split}data": y})
    bundle = folder / "deepsea_train_bundle.v0.9.tar.gz"
    with tarfile.open(bundle, "w:gz") as archive:
        archive.add(staging, arcname="deepsea_train")
    bed = folder / "allTFs.pos.bed"
    bed.write_text("".join(f"{c}\t{s}\t{e}\n" for c, s, e in bins))
    coordinates = folder / "allTFs.pos.bed.tar.gz"
    with tarfile.open(coordinates, "w:gz") as archive:
        archive.add(bed, arcname="allTFs.pos.bed")
    return bundle, coordinates


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_mini_grch37(demo_reference: Path, folder: Path) -> Path:
    """Writes the data sets and their manifest into `folder`; returns the manifest path."""
    folder.mkdir(parents=True, exist_ok=True)
    demo = Reference(demo_reference / "genome.fa")
    genome = folder / "hg19.fa.gz"
    sequences = _write_genome(demo, genome)
    promoters = folder / "Hs_EPDnew_006_hg19.bed"
    _write_promoters(demo_reference / "tss.bed", promoters)
    bundle, coordinates = _write_deepsea(sequences, folder / "staging")
    entries = {
        "hg19": {"url": genome.as_uri(), "sha256": _sha256(genome), "post": "bgzip", "index": True},
        "epdnew": {
            "url": promoters.as_uri(),
            "md5": hashlib.md5(promoters.read_bytes()).hexdigest(),
        },
        "deepsea-bundle": {"url": bundle.as_uri(), "post": "untar"},  # recorded on first download
        "deepsea-coordinates": {"url": coordinates.as_uri(), "post": "untar"},
    }
    manifest = folder / "manifest.yaml"
    manifest.write_text(yaml.safe_dump({"name": "mini-grch37", "entries": entries}))
    return manifest
