"""What a predictor reads in many windows: per-base attributions (`genobird attribute`).

In-silico mutagenesis is the exact reference: every base of every window is changed to
each other base and scored through the predictor, mutants of many windows batched
together. A base's effect is on the logit scale (logit(alt) - logit(ref) of the chosen
feature): a probability near 0 or 1 changes by almost nothing whatever the base, its
logit does not. Each position's four effects are centred on their mean, which gives the
hypothetical contribution of every base there (TF-MoDISco's `hypothetical_contribs`);
the reference base's contribution is the one the window holds.

A span of each window (`span`: bases [start, end)) may be attributed instead of all of
it: a promoter model reading 3 kb windows is asked about the bases around the TSS, at a
fraction of the cost (every mutant is still scored as the whole window).

The file (HDF5) holds the arrays modisco-lite reads, bases in A, C, G, T order:
    one_hot        float32 [N, 4, L]   L: the span's length (the window's, without one)
    attributions   float32 [N, 4, L]   hypothetical contributions
    ids            S [N]               the windows' names
    attrs: format, model, feature, method, score, window_bp (the window the model reads),
           start (the span's first base in it)
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from genobird.errors import ConfigError, InputError
from genobird.genome.alphabet import one_hot
from genobird.genome.regions import BadRecord
from genobird.inputs import fit_window, mostly_n, mostly_n_reason, n_fraction
from genobird.scoring.mutagenesis import BASES, mutants
from genobird.scoring.predict import logit
from genobird.scoring.tables import H5Output

FORMAT = "genobird-attributions-1"
METHODS = ("ism",)
BATCH_BP = 32_768


@dataclass
class Attributions:
    """Per-base attributions of N windows of L bp for one feature of a model."""

    ids: list[str]
    one_hot: np.ndarray  # float32 [N, 4, L]
    attributions: np.ndarray  # float32 [N, 4, L]
    model: str
    feature: str
    method: str = "ism"
    score: str = "logit"
    start: int = 0  # the span's first base in the window the model reads
    input_bp: int | None = None  # that window's length (None: the span is the window)

    @property
    def window_bp(self) -> int:
        """The length of the window the model reads."""
        return self.input_bp or self.span_bp

    @property
    def span_bp(self) -> int:
        """The bases attributed in each window."""
        return self.one_hot.shape[2]

    @property
    def span_words(self) -> str:
        """ ", bases START-END attributed" where a span of the window was, else ""."""
        if self.span_bp == self.window_bp:
            return ""
        return f", bases {self.start}-{self.start + self.span_bp} attributed"

    @property
    def contributions(self) -> np.ndarray:
        """The reference bases' contributions [N, 4, L] (0 at the other bases)."""
        return self.attributions * self.one_hot

    def write(self, path: Path) -> Path:
        """The HDF5 file (module docstring), written whole or not at all."""
        with H5Output(Path(path)) as handle:
            handle.attrs.update(
                format=FORMAT,
                model=self.model,
                feature=self.feature,
                method=self.method,
                score=self.score,
                window_bp=self.window_bp,
                start=self.start,
            )
            handle.put("one_hot", self.one_hot.astype(np.float32))
            handle.put("attributions", self.attributions.astype(np.float32))
            handle.put("ids", np.asarray(self.ids, dtype=object).astype("S"))
        return Path(path)

    @classmethod
    def read(cls, path) -> Attributions:
        """Attributions written by `write`, refused in one line when they are not."""
        path = Path(path)
        try:
            handle = h5py.File(path, "r")
        except OSError as exc:
            raise InputError(f"{path}: not an HDF5 file of attributions ({exc})") from exc
        with handle:
            if handle.attrs.get("format") != FORMAT:
                raise InputError(
                    f"{path}: not written by `genobird attribute` (format "
                    f"{handle.attrs.get('format')!r}); make it with genobird attribute"
                )
            found = cls(
                [name.decode() for name in handle["ids"][:]],
                handle["one_hot"][:],
                handle["attributions"][:],
                str(handle.attrs["model"]),
                str(handle.attrs["feature"]),
                str(handle.attrs["method"]),
                str(handle.attrs["score"]),
                int(handle.attrs.get("start", 0)),
                int(handle.attrs["window_bp"]),
            )
        if found.one_hot.shape != found.attributions.shape or found.one_hot.shape[1] != 4:
            raise InputError(
                f"{path}: one_hot {found.one_hot.shape} and attributions "
                f"{found.attributions.shape} must both be [N, 4, L]"
            )
        return found


def feature_index(predictor, feature: str | None) -> int:
    """The output attributed: `feature` by name, or the model's only one."""
    names = list(predictor.feature_names)
    if feature is None:
        if len(names) > 1:
            raise ConfigError(
                f"the model has {len(names)} features; name one with --feature (e.g. {names[0]!r})"
            )
        return 0
    if feature not in names:
        raise ConfigError(f"--feature {feature!r}: the model has no such feature; it has {names}")
    return names.index(feature)


def windows_to_attribute(
    predictor, given, rejected: list, feature: str | None = None, limit: int | None = None
) -> tuple[list[str], list[str]]:
    """(ids, windows of the predictor's input length) to attribute: a data set's split
    (`given.data`, `given.split`; only its windows of `given.label` for the feature where
    given), or FASTA records and BED regions read as `genobird score` reads them (the
    record source; what it cannot read goes to `rejected`). At most `limit`, the first."""
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    if given.data is None:
        from genobird.scoring.source import records
        from genobird.scoring.windows import check_source

        kind, path = ("bed", given.bed) if given.bed is not None else ("fasta", given.fasta)
        check_source(kind, given.reference)
        read = records(kind, path, predictor.policy(), rejected, given.reference)
        chosen = list(itertools.islice(read, limit))
        return [r.name if kind == "fasta" else _place(r) for r in chosen], [
            r.sequence for r in chosen
        ]
    from genobird.datasets.windows import read_metadata, read_split

    meta = read_metadata(given.data)
    sequences, labels = read_split(given.data, given.split)
    column = feature_index(predictor, feature)
    name = predictor.feature_names[column]
    if name not in meta["feature_names"]:
        raise ConfigError(
            f"{given.data} has no labels of {name!r} (its features: {meta['feature_names']}); "
            "give the data set the model was fine-tuned on"
        )
    rows = np.arange(len(sequences))
    if given.label is not None:
        rows = rows[labels[:, meta["feature_names"].index(name)] == given.label]
    ids, windows, length = [], [], predictor.input_length_bp
    for row in rows:
        # read as the model reads a record of another length, and set aside as every
        # command sets aside a window more than half N (an assembly gap)
        window, where = fit_window(sequences[row], length), f"{given.split}/{row}"
        if mostly_n(window):
            reason = mostly_n_reason(n_fraction(window), length, f"window {where}")
            rejected.append(BadRecord(str(given.data), int(row), reason, where))
            continue
        ids.append(where)
        windows.append(window)
        if limit is not None and len(ids) == limit:
            break
    if not ids:
        label = f" with label {given.label}" if given.label is not None else ""
        raise InputError(f"{given.data}: no {given.split} window{label} of {name!r} to attribute")
    return ids, windows


def _place(record) -> str:
    region = record.region
    return region.name if region.name else f"{region.chrom}:{region.start}-{region.end}"


def check_span(span: tuple[int, int] | None, length: int) -> tuple[int, int]:
    """(start, end) of the bases attributed in windows of `length` (all without `span`)."""
    if span is None:
        return 0, length
    start, end = span
    if not 0 <= start < end <= length:
        raise ConfigError(
            f"--span {start}-{end}: the span must lie in the model's window of {length:,} bp "
            "(0-based, end excluded), e.g. 0-" + str(length)
        )
    return start, end


def ism_attributions(
    predictor,
    ids: list[str],
    sequences: list[str],
    feature: str | None = None,
    span: tuple[int, int] | None = None,
) -> Attributions:
    """Hypothetical contributions of every base of each window (of the predictor's input
    length), or of its `span` (bases [start, end)), to `feature`'s logit, by in-silico
    mutagenesis (module docstring)."""
    column = feature_index(predictor, feature)
    length = predictor.input_length_bp
    start, end = check_span(span, length)
    wrong = [i for i, s in enumerate(sequences) if len(s) != length]
    if wrong:
        raise InputError(
            f"window {ids[wrong[0]]!r} is {len(sequences[wrong[0]]):,} bp, the model reads "
            f"{length:,}; give windows of the model's length"
        )
    if crowded := [i for i, s in enumerate(sequences) if mostly_n(s)]:
        share = n_fraction(sequences[crowded[0]])
        raise InputError(mostly_n_reason(share, length, f"window {ids[crowded[0]]!r}"))
    effects = np.zeros((len(sequences), len(BASES), end - start), dtype=np.float32)
    # short windows are scored in batches of about BATCH_BP bases (at least the
    # predictor's own batch): 16 windows of 101 bp keep two cores a third as busy
    saved = predictor.batch_size
    predictor.batch_size = max(saved, BATCH_BP // length)
    try:
        reference = logit(predictor.predict(sequences)[:, column])
        # mutants of many windows scored together: full batches, bounded memory
        batch = predictor.batch_size * 16
        changes = _all_mutants(sequences, start, end - start)
        while part := list(itertools.islice(changes, batch)):
            alt = logit(predictor.predict([sequence for *_, sequence in part])[:, column])
            rows = np.array([row for row, *_ in part])
            positions = np.array([position for _, position, *_ in part])
            bases = np.array([base for _, _, base, _ in part])
            effects[rows, bases, positions] = alt - reference[rows]
    finally:
        predictor.batch_size = saved
    hypothetical = effects - effects.mean(axis=1, keepdims=True)
    encoded = np.stack([one_hot(s[start:end]).T for s in sequences]).astype(np.float32)
    return Attributions(
        list(ids),
        encoded,
        hypothetical,
        str(predictor.model_dir),
        predictor.feature_names[column],
        start=start,
        input_bp=length,
    )


def _all_mutants(
    sequences: list[str], first: int, span: int
) -> Iterator[tuple[int, int, int, str]]:
    """(window, position in the span, base index, mutated window) of every single-base
    change of the `span` bases from `first`."""
    for row, sequence in enumerate(sequences):
        for position, base, mutated in mutants(sequence, first, span):
            yield row, position, base, mutated
