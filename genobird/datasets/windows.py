"""Labelled sequence windows for fine-tuning, stored as HDF5, and their torch Dataset.

One format serves the promoter, chromatin and generic classification tasks:

    sequences  S{L} [N]     the window, 5'->3' on its strand (A/C/G/T/N)
    labels     uint8 [N, F] one column per feature (F = 1 for promoters): 1 positive,
                            0 negative, 255 unknown (`MISSING_LABEL`: a feature not
                            assayed there, ignored by the loss, the metrics and baselines)
    chrom S, start int64, end int64, strand S1 [N]   0-based half-open window
    split      S5 [N]       "train", "valid" or "test"
    attrs: format, task, feature_names (JSON), categories (JSON), window_bp, scales
           (JSON, where the feature tables give a scale column), and provenance (JSON:
           the `genobird dataset` command and options that built it, which a model
           card reads)

and, in a chromatin data set built with profile bins (`dataset chromatin --profile-bins`):

    profile_labels uint8 [N, K, F]  the labels of the K bins centred on each window's bin
                            (its own in the middle), read 5'->3' like the window; 255
                            where a bin lies off its chromosome
    attrs: profile_bins (K), profile_bin_bp (each bin's width)

Windows are tokenised when read. A window longer than the model's input keeps its
central tokens, so the TSS or bin centre stays in the middle of what the model sees.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np
import torch

from genobird.corpus.tokenizer import Tokenizer
from genobird.errors import InputError
from genobird.fileio import atomic_path, require_unique_names
from genobird.genome.alphabet import reverse_complement
from genobird.inputs import central, framed_ids, padded_length, sampled_cut

log = logging.getLogger(__name__)

PROVENANCE = "provenance"  # the attribute that says how a data set was built
FORMAT = "genobird-sequences/1"
SPLITS = ("train", "valid", "test")
# A label that was not measured (e.g. a feature assayed on some chromosomes only): read
# as NaN by `WindowDataset`, masked by the loss, left out of every metric.
MISSING_LABEL = 255


def known_labels(labels: np.ndarray) -> np.ndarray:
    """bool, where a uint8 label (or a float one, NaN for unknown) was measured."""
    labels = np.asarray(labels)
    if labels.dtype.kind == "f":
        return ~np.isnan(labels)
    return labels != MISSING_LABEL


def label_values(labels: np.ndarray) -> np.ndarray:
    """float32 labels with NaN where unknown: what models and metrics read."""
    values = np.asarray(labels).astype(np.float32)
    values[~known_labels(labels)] = np.nan
    return values


@dataclass
class WindowSet:
    """Windows being collected for one HDF5 file."""

    task: str
    feature_names: list[str]
    categories: list[str] = field(default_factory=list)
    # each feature's scale where its table gives one (e.g. local or broad), else empty
    scales: list[str] = field(default_factory=list)
    sequences: list[str] = field(default_factory=list)
    labels: list[np.ndarray] = field(default_factory=list)
    chroms: list[str] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    strands: list[str] = field(default_factory=list)
    splits: list[str] = field(default_factory=list)
    # with profile_bins: each window's [K, F] profile labels, K bins of profile_bin_bp
    profile_bins: int = 0
    profile_bin_bp: int = 0
    profiles: list[np.ndarray] = field(default_factory=list)

    def __post_init__(self):
        # One model output per name: scores, metrics and tables are keyed by it.
        require_unique_names(
            self.feature_names,
            "feature names",
            f"the {self.task} data set",
            "each feature needs its own name",
        )

    def add(self, sequence, labels, chrom, start, end, strand, split, profile=None) -> None:
        labels = np.asarray(labels, dtype=np.uint8).reshape(-1)
        if len(labels) != len(self.feature_names):
            raise InputError(
                f"{chrom}:{start}-{end}: {len(labels)} labels for {len(self.feature_names)} "
                "features; the label matrix must have one column per feature name"
            )
        if self.profile_bins:
            profile = np.asarray(profile, dtype=np.uint8)
            if profile.shape != (self.profile_bins, len(self.feature_names)):
                raise InputError(
                    f"{chrom}:{start}-{end}: profile labels of shape "
                    f"{profile.shape}, expected ({self.profile_bins}, "
                    f"{len(self.feature_names)})"
                )
            self.profiles.append(profile)
        self.sequences.append(sequence)
        self.labels.append(labels)
        self.chroms.append(chrom)
        self.starts.append(start)
        self.ends.append(end)
        self.strands.append(strand)
        self.splits.append(split)

    def __len__(self) -> int:
        return len(self.sequences)

    def write(self, path: str | Path) -> Path:
        if not self.sequences:
            raise InputError(f"no windows to write to {path}")
        width = max(len(s) for s in self.sequences)
        name_width = max(len(c) for c in self.chroms)
        with window_writer(
            path,
            self.task,
            self.feature_names,
            self.categories,
            len(self),
            width,
            name_width,
            self.scales,
        ) as writer:
            writer.write(
                self.sequences,
                np.stack(self.labels),
                self.chroms,
                self.starts,
                self.ends,
                self.strands,
                self.splits,
            )
            if self.profile_bins:
                writer.handle.create_dataset(
                    "profile_labels", data=np.stack(self.profiles), compression="lzf"
                )
                writer.handle.attrs.update(
                    profile_bins=self.profile_bins, profile_bin_bp=self.profile_bin_bp
                )
        return Path(path)


class _SliceWriter:
    """Fills preallocated datasets of `count` windows, a slice at a time."""

    def __init__(self, handle: h5py.File, count: int):
        self.handle, self.count, self.rows = handle, count, 0

    def write(self, sequences, labels, chroms, starts, ends, strands, splits) -> None:
        end = self.rows + len(sequences)
        if end > self.count:
            raise InputError(f"{end} windows for a data set declared with {self.count}")
        columns = {
            "sequences": sequences,
            "labels": labels,
            "chrom": chroms,
            "start": starts,
            "end": ends,
            "strand": strands,
            "split": splits,
        }
        for name, values in columns.items():
            dataset = self.handle[name]
            dataset[self.rows : end] = np.asarray(values, dtype=dataset.dtype)
        self.rows = end


@contextlib.contextmanager
def window_writer(
    path,
    task: str,
    feature_names: list[str],
    categories: list[str],
    count: int,
    width: int,
    name_width: int,
    scales: list[str] | None = None,
) -> Iterator[_SliceWriter]:
    """A data set of `count` windows (sequences of at most `width` bp, names of at most
    `name_width` characters) written slice by slice, so millions of 8 kb windows need not
    be held in memory; the file appears only when all `count` rows were written."""
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as handle:
        handle.create_dataset("sequences", (count,), dtype=f"S{width}", compression="lzf")
        handle.create_dataset(
            "labels", (count, len(feature_names)), dtype=np.uint8, compression="lzf"
        )
        handle.create_dataset("chrom", (count,), dtype=f"S{max(name_width, 1)}")
        for name in ("start", "end"):
            handle.create_dataset(name, (count,), dtype=np.int64)
        handle.create_dataset("strand", (count,), dtype="S1")
        handle.create_dataset("split", (count,), dtype="S5")
        handle.attrs.update(
            format=FORMAT,
            task=task,
            feature_names=json.dumps(feature_names),
            categories=json.dumps(categories),
            window_bp=width,
        )
        if any(scales or []):
            handle.attrs["scales"] = json.dumps(list(scales))
        writer = _SliceWriter(handle, count)
        yield writer
        if writer.rows != count:
            raise InputError(f"{path}: {writer.rows} windows written of the {count} declared")


def read_metadata(path: str | Path) -> dict:
    with h5py.File(path, "r") as handle:
        if handle.attrs.get("format") != FORMAT:
            raise InputError(f"{path}: not a genobird sequence data set")
        splits = handle["split"][:].astype(str)
        names = json.loads(handle.attrs["feature_names"])
        require_unique_names(
            names, "feature names", path, "rebuild the data set: genobird names each feature once"
        )
        labels = handle["labels"][:]
        return {
            "task": str(handle.attrs["task"]),
            "feature_names": names,
            "categories": json.loads(handle.attrs["categories"]),
            "scales": json.loads(handle.attrs.get("scales", "[]")),
            "window_bp": int(handle.attrs["window_bp"]),
            "profile_bins": int(handle.attrs.get("profile_bins", 0)),
            "profile_bin_bp": int(handle.attrs.get("profile_bin_bp", 0)),
            "counts": {split: int((splits == split).sum()) for split in SPLITS},
            "positives": (labels == 1).sum(axis=0).tolist(),
            "positives_by_split": {
                split: (labels[splits == split] == 1).sum(axis=0).tolist() for split in SPLITS
            },
            "missing_labels": int((labels == MISSING_LABEL).sum()),
            "provenance": json.loads(handle.attrs.get(PROVENANCE, "{}")),
        }


def record_provenance(path: str | Path, provenance: dict) -> None:
    """Record how a data set was built (`genobird dataset`'s command and options) in its
    attributes, for the model cards of the models fine-tuned on it."""
    with h5py.File(path, "a") as handle:
        handle.attrs[PROVENANCE] = json.dumps(provenance)


def split_sources(path: str | Path) -> dict[str, dict[str, int]]:
    """Each split's windows by where they come from (the chrom column: a contig, or a
    record file's name for sequences given without coordinates), most first."""
    with h5py.File(path, "r") as handle:
        splits = handle["split"][:].astype(str)
        sources = np.array(
            [
                name.decode().rsplit(":", 1)[0] if b":" in name else name.decode()
                for name in handle["chrom"][:]
            ]
        )
    found = {}
    for split in SPLITS:
        names, counts = np.unique(sources[splits == split], return_counts=True)
        order = np.argsort(-counts, kind="stable")
        found[split] = {str(names[i]): int(counts[i]) for i in order}
    return found


def read_split(path: str | Path, split: str) -> tuple[list[str], np.ndarray]:
    """(sequences, labels uint8 [N, F]) of one split, for models that read DNA directly
    (the baselines)."""
    if split not in SPLITS:
        raise InputError(f"split must be one of {SPLITS}, got {split!r}")
    with h5py.File(path, "r") as handle:
        if handle.attrs.get("format") != FORMAT:
            raise InputError(f"{path}: not a genobird sequence data set")
        rows = np.nonzero(handle["split"][:].astype(str) == split)[0]
        sequences = [s.decode("ascii") for s in handle["sequences"][:][rows]]
        labels = handle["labels"][:][rows]
    return sequences, labels


def split_fingerprint(path: str | Path, split: str, rows_per_read: int = 65_536) -> str:
    """SHA-256 of one split's sequences and labels, in file order: two predictors' test
    predictions can be compared example by example only where their fingerprints match.
    Read in slices, so a DeepSEA-sized file is never held whole."""
    digests = {"sequences": hashlib.sha256(), "labels": hashlib.sha256()}
    with h5py.File(path, "r") as handle:
        in_split = handle["split"][:].astype(str) == split
        for start in range(0, len(in_split), rows_per_read):
            chosen = in_split[start : start + rows_per_read]
            if chosen.any():
                for name, digest in digests.items():
                    digest.update(handle[name][start : start + len(chosen)][chosen].tobytes())
    both = b"".join(digest.digest() for digest in digests.values())
    return hashlib.sha256(both).hexdigest()


# Bases of a data set tokenised to size its inputs: every window up to this many (about
# 20 s on 2 cores), else the first windows of each split up to it.
MAX_TOKENS_SCAN_BP = 300_000_000


def default_max_tokens(
    path,
    tokenizer: Tokenizer,
    block_size: int,
    limit: int | None,
    window_bp: int | None = None,
    threads: int = 2,
) -> int:
    """The input length a data set needs: its longest tokenised window (its central
    `window_bp` bases, where given) in every split, plus [CLS] and [SEP], in whole blocks,
    at most `limit` (None: no limit). Every window is read whole, so the base readers of
    a classifier see every base its baselines see: a 70 bp promoter window is cut into 4
    to 25 pieces, and a limit taken from some windows cut others. Data sets of more than
    MAX_TOKENS_SCAN_BP bases are sized from their first windows of each split (logged)."""
    with h5py.File(path, "r") as handle:
        splits = handle["split"][:].astype(str)
        width = min(int(handle.attrs["window_bp"]), window_bp or int(handle.attrs["window_bp"]))
        per_split = max(1, MAX_TOKENS_SCAN_BP // max(1, width) // len(SPLITS))
        rows = np.concatenate([np.nonzero(splits == split)[0][:per_split] for split in SPLITS])
        if len(rows) < len(splits):
            log.info(
                "max_tokens sized from %d of %d windows (the first of each split)",
                len(rows),
                len(splits),
            )
        longest, chunk = 0, 20_000
        rows = np.sort(rows)
        for first in range(0, len(rows), chunk):
            sequences = handle["sequences"][rows[first : first + chunk]]
            windows = [central(s.decode("ascii"), window_bp) for s in sequences]
            pieces = tokenizer.encode_batch(windows, threads=threads)
            longest = max(longest, max(map(len, pieces), default=0))
    needed = padded_length(longest + 2, block_size)
    if limit is not None and needed > limit:
        log.warning(
            "the longest window needs %d tokens, the model reads at most %d: longer "
            "windows are read as their central tokens (and base readers see those "
            "tokens' bases only)",
            needed,
            limit,
        )
        return limit
    return needed


class WindowDataset(torch.utils.data.Dataset):
    """One split of a sequence data set as model inputs, unpadded (`collate_windows`
    pads each batch). With `reverse_complement`, every window is read on the other
    strand (for strand averaging at evaluation). With `rc_augment_seed`, each window is
    read on a strand drawn from (seed, epoch, index): reverse-complement augmentation
    that a resumed run repeats exactly. With `bpe_dropout` > 0, each window is cut into
    pieces with BPE-dropout, the draws fixed by (`bpe_seed`, epoch, index) likewise
    (genobird.corpus.bpe_dropout: the same cut in every process), or with `cut` given,
    the window's `cut`-th sampled cut (`sampled_cut`: the cuts evaluation averages over).
    With `window_bp`, each window is read as its central `window_bp` bases (`central`).
    With `profile_bins` k, its labels are the central k of the window's profile labels
    [k, F] (in reverse bin order where the window is read on the other strand), not its
    own bin's [F]."""

    def __init__(
        self,
        path,
        split: str,
        tokenizer: Tokenizer,
        max_tokens: int,
        reverse_complement: bool = False,
        rc_augment_seed: int | None = None,
        bpe_dropout: float = 0.0,
        bpe_seed: int = 0,
        cut: int | None = None,
        window_bp: int | None = None,
        profile_bins: int = 0,
    ):
        if split not in SPLITS:
            raise InputError(f"split must be one of {SPLITS}, got {split!r}")
        self.path, self.tokenizer, self.max_tokens = Path(path), tokenizer, max_tokens
        self.window_bp = window_bp
        self.reverse = reverse_complement
        self.rc_augment_seed, self.epoch = rc_augment_seed, 0
        self.bpe_dropout, self.bpe_seed, self.cut = bpe_dropout, bpe_seed, cut
        self.labels = "profile_labels" if profile_bins else "labels"
        with h5py.File(self.path, "r") as handle:
            if handle.attrs.get("format") != FORMAT:
                raise InputError(f"{path}: not a genobird sequence data set")
            if self.labels not in handle:
                raise InputError(
                    f"{path}: no profile labels; rebuild it with `genobird "
                    "dataset chromatin --profile-bins K`"
                )
            stored = int(handle.attrs.get("profile_bins", 0))
            if profile_bins and (profile_bins % 2 == 0 or profile_bins > stored):
                raise InputError(
                    f"{path}: {profile_bins} central profile bins asked for, "
                    f"the data set has {stored}; give an odd number up to "
                    f"{stored}"
                )
            # the central profile_bins of the stored ones: the window's bin stays the middle
            first = (stored - profile_bins) // 2
            self.profile_rows = slice(first, first + profile_bins) if profile_bins else None
            self.rows = np.nonzero(handle["split"][:].astype(str) == split)[0]
        self._handle = None

    def __len__(self) -> int:
        return len(self.rows)

    def __getstate__(self):
        return {**self.__dict__, "_handle": None}

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _flip(self, index: int) -> bool:
        if self.rc_augment_seed is None:
            return self.reverse
        coin = np.random.default_rng([self.rc_augment_seed, self.epoch, index]).random()
        return bool(coin < 0.5)

    def _token_ids(self, sequence: str, index: int) -> list[int]:
        """The window's pieces: the tokenizer's own, its `cut`-th sampled cut, or a
        BPE-dropout cut drawn from (bpe_seed, epoch, index)."""
        if not self.bpe_dropout:
            return self.tokenizer.encode(sequence, normalise=False)
        if self.cut is not None:
            return sampled_cut(self.tokenizer, sequence, self.bpe_dropout, self.cut)
        draw = np.random.default_rng([self.bpe_seed, self.epoch, index, 1])
        seed = int(draw.integers(1 << 31))
        return self.tokenizer.encode_sampled(sequence, self.bpe_dropout, seed)

    def sequence(self, index: int) -> str:
        """Window `index`'s bases as read (its central `window_bp`), on its own strand."""
        if self._handle is None:
            self._handle = h5py.File(self.path, "r")
        row = int(self.rows[index])
        return central(self._handle["sequences"][row].decode("ascii"), self.window_bp)

    def __getitem__(self, index: int) -> dict:
        sequence = self.sequence(index)
        row = int(self.rows[index])
        labels = self._handle[self.labels][row]
        labels = label_values(labels if self.profile_rows is None else labels[self.profile_rows])
        if self._flip(index):
            sequence = reverse_complement(sequence)
            if labels.ndim == 2:  # the profile's bins, read from the other end
                labels = np.ascontiguousarray(labels[::-1])
        ids = self._token_ids(sequence, index)
        return {"input_ids": framed_ids(self.tokenizer, ids, self.max_tokens), "labels": labels}


def chromosome_split(chrom: str, valid: tuple[str, ...], test: tuple[str, ...]) -> str:
    """'test', 'valid' or 'train' by chromosome name (chr1 and 1 are the same)."""
    names = {chrom, chrom.removeprefix("chr"), "chr" + chrom.removeprefix("chr")}
    if names & set(test):
        return "test"
    return "valid" if names & set(valid) else "train"
