"""DeepSEA's chromatin-profile data (paper section 5, appendix F.3).

DeepSEA's bundle: train.mat is HDF5 (MATLAB v7.3) with `trainxdata` (1000, 4, N) and
`traindata` (919, N); valid.mat and test.mat are MATLAB v5 with `validxdata` /
`testxdata` (N, 4, 1000) and `validdata` / `testdata` (N, 919). One-hot channels are
A, G, C, T (N is all zero); each split holds its forward samples first, then their
reverse complements. The paper feeds BigBird 8 kb of context: the 200 bp bin's centre
+/- 4000 bp from the reference, taken from the published 0-based hg19 bin coordinates.
Split as the paper: test = chr8 and chr9; validation = chr7:30,508,751-35,296,850;
the other autosomes train.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

from genobird.datasets.windows import WindowSet
from genobird.errors import ConfigError, InputError
from genobird.fileio import duplicated, read_small_tsv
from genobird.genome import one_hot_to_sequence, open_reference, point_window, read_bed
from genobird.genome.alphabet import DEEPSEA_ORDER

DEEPSEA_VALID_REGION = ("chr7", 30_508_750, 35_296_850)  # chr7:30,508,751-35,296,850, 1-based
DEEPSEA_TEST_CHROMOSOMES = ("chr8", "chr9")


def read_deepsea_split(path: str | Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(one-hot uint8 [N, 4, 1000] in DeepSEA's A,G,C,T order, labels uint8 [N, 919])."""
    path = Path(path)
    if split not in ("train", "valid", "test"):
        raise ConfigError(f"split must be train, valid or test, got {split!r}")
    x_key, y_key = f"{split}xdata", f"{split}data"
    if h5py.is_hdf5(path):  # MATLAB v7.3 (train.mat): stored transposed
        with h5py.File(path, "r") as handle:
            _require(handle, (x_key, y_key), path)
            x = np.transpose(handle[x_key][:], (2, 1, 0))  # (L, 4, N) -> (N, 4, L)
            y = np.transpose(handle[y_key][:], (1, 0))  # (F, N) -> (N, F)
    else:  # MATLAB v5 (valid.mat, test.mat)
        from scipy.io import loadmat

        contents = loadmat(path)
        _require(contents, (x_key, y_key), path)
        x, y = contents[x_key], contents[y_key]
    if x.ndim != 3 or x.shape[1] != 4 or x.shape[0] != y.shape[0]:
        raise InputError(f"{path}: unexpected shapes {x.shape} and {y.shape} for DeepSEA {split}")
    return x.astype(np.uint8), y.astype(np.uint8)


def _require(container, keys, path) -> None:
    missing = [key for key in keys if key not in container]
    if missing:
        raise InputError(f"{path}: missing {missing}; is this DeepSEA's file for that split?")


def deepsea_sequences(x: np.ndarray, forward_only: bool = True) -> list[str]:
    """DNA of DeepSEA one-hot samples; by default only the forward first half."""
    count = len(x) // 2 if forward_only else len(x)
    return [one_hot_to_sequence(x[i].T, order=DEEPSEA_ORDER) for i in range(count)]


def deepsea_split_of(chrom: str, start: int, end: int) -> str | None:
    """The paper's split of a bin; None for sex chromosomes and others left out."""
    name = "chr" + chrom.removeprefix("chr")
    if name in DEEPSEA_TEST_CHROMOSOMES:
        return "test"
    valid_chrom, valid_start, valid_end = DEEPSEA_VALID_REGION
    if name == valid_chrom and start < valid_end and valid_start < end:
        return "valid"
    autosome = name.removeprefix("chr").isdigit() and 1 <= int(name.removeprefix("chr")) <= 22
    return "train" if autosome else None


def check_label_width(labels: np.ndarray, feature_names: list[str], source: str) -> None:
    if labels.shape[1] != len(feature_names):
        raise InputError(
            f"{source}: the label matrix has {labels.shape[1]} columns but the feature list "
            f"has {len(feature_names)} names; they must match one to one, in order"
        )


def add_deepsea_windows(windows: WindowSet, bins, labels: np.ndarray, reference, context):
    """8 kb windows around DeepSEA's bins (bin centre +/- context/2), with their labels;
    each window goes to the paper's split of its bin (bins outside it are left out)."""
    for interval, row in zip(bins, labels, strict=True):
        split = deepsea_split_of(interval.chrom, interval.start, interval.end)
        if split is None:
            continue
        window = point_window(interval.chrom, interval.start + interval.width // 2, context)
        sequence = reference.fetch(window.chrom, window.start, window.end, pad=True)
        windows.add(sequence, row, window.chrom, window.start, window.end, "+", split)


# DeepSEA's output order: 125 DNase, then 690 TF, then 104 histone-mark features.
DEEPSEA_CATEGORY_COUNTS = (("DNase", 125), ("TF", 690), ("Histone", 104))


def default_deepsea_features() -> tuple[list[str], list[str]]:
    """Placeholder names (deepsea_0 .. deepsea_918) with the categories of DeepSEA's
    fixed output order, for when the 919-feature table is not at hand."""
    categories = [name for name, count in DEEPSEA_CATEGORY_COUNTS for _ in range(count)]
    return [f"deepsea_{i}" for i in range(len(categories))], categories


def read_deepsea_features(path: str | Path) -> tuple[list[str], list[str]]:
    """Names and categories of DeepSEA's 919 features, in output order, from a table with
    columns index, category, cell_type, target, treatment. A name is
    "cell_type|target|treatment"; DeepSEA has 55 such triples more than once (one per
    lab's peak file), and those names end in "#index" so every output has its own name."""
    header, rows = read_small_tsv(path)
    needed = {"index", "category", "cell_type", "target", "treatment"}
    if not needed <= set(header):
        raise InputError(f"{path}: needs columns {sorted(needed)}; has {header}")
    rows.sort(key=lambda row: int(row["index"]))
    names = [f"{r['cell_type']}|{r['target']}|{r['treatment']}" for r in rows]
    repeated = set(duplicated(names))
    names = [f"{n}#{r['index']}" if n in repeated else n for n, r in zip(names, rows, strict=True)]
    return names, [r["category"] for r in rows]


def _split_bins(bins: list, split: str, expected: int, coordinates, mat_path) -> list:
    """The bins of one split: all of them when the BED is that split's own list, else the
    genome-wide list's bins in the paper's region of that split (in file order)."""
    if len(bins) == expected:
        return bins
    selected = [b for b in bins if deepsea_split_of(b.chrom, b.start, b.end) == split]
    if len(selected) != expected:
        raise InputError(
            f"{coordinates} has {len(bins)} bins ({len(selected)} in the paper's {split} "
            f"region) but {mat_path} holds "
            f"{expected} forward samples; give the coordinate file of that split (or the "
            "genome-wide bin list), in the .mat file's order"
        )
    return selected


def import_deepsea(mats: dict, coordinates, fasta, out_path, features_table=None, context=8000):
    """DeepSEA's labels, {split: .mat path}, with BigBird's longer context from the
    reference, written to one HDF5 holding every split given.

    `coordinates` lists the bins as 0-based hg19 BED rows in each .mat file's order of
    forward samples: either exactly one split's bins, or a genome-wide list from which
    each split's bins are taken by the paper's split; a count mismatch is an error."""
    if features_table is None:
        names, categories = default_deepsea_features()
    else:
        names, categories = read_deepsea_features(features_table)
    bins = list(read_bed(coordinates))
    reference = open_reference(fasta)
    windows = WindowSet("chromatin", list(names), list(categories))
    for split, mat_path in mats.items():
        _, labels = read_deepsea_split(mat_path, split)
        check_label_width(labels, names, str(mat_path))
        forward = labels[: len(labels) // 2]  # the second half repeats them, reverse-complemented
        split_bins = _split_bins(bins, split, len(forward), coordinates, mat_path)
        add_deepsea_windows(windows, split_bins, forward, reference, context)
    windows.write(out_path)
    return windows
