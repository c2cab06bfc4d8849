"""Predictors users import: load a fine-tuned model directory and score DNA.

    from genobird import load_predictor
    pred = load_predictor("models/chromatin", device="auto")
    pred.feature_names, pred.input_length_bp
    scores = pred.predict(["ACGT...", ...])          # np.ndarray [N, F], probabilities
    table = pred.score_bed("regions.bed", reference="hg19.fa")
    table = pred.score_fasta("seqs.fa")
    tables = pred.score_variants("variants.vcf", reference="hg19.fa")

Windows: BED intervals are centred on their midpoint and resized to the model's input
length; FASTA records shorter than it are N-padded on both sides and longer ones
centre-cropped (or scored in tiles); windows past a contig end are N-padded. Every row
says how much of its window is N (`n_fraction`; BED rows also `contains_N`), and a
window more than half N (`inputs.MAX_N_FRACTION`: an assembly gap, a short record's
padding) is not scored: it is rejected with its share, as `predict` refuses it.
Variants get a reference and an alternative window centred on the variant; per feature
the alt - ref difference, its absolute value and the log-odds difference are reported,
with `ref_match` telling whether REF agrees with the genome.

Everything is processed in chunks (`chunk_size` records), so a BED of millions of
lines streams through in bounded memory; the `iter_*` methods yield per-chunk tables
for callers (like `genobird score`) that write as they go.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import torch

from genobird.corpus.tokenizer import TokenizerBase, load_tokenizer
from genobird.device import resolve_device
from genobird.errors import CheckpointError, ConfigError, SequenceError
from genobird.fileio import require_unique_names
from genobird.genome import centered_window
from genobird.genome.regions import BadRecord, Interval
from genobird.inputs import (
    fit_window,
    model_padding,
    mostly_n,
    mostly_n_reason,
    n_fraction,
    scorable_sequences,
    token_limit,
    window_views,
)
from genobird.model.io import from_pretrained, read_model_description
from genobird.model.precision import autocast, autocast_dtype
from genobird.scoring.options import ScoringOptions
from genobird.scoring.source import (
    BED_IDS,
    FASTA_IDS,
    ScoreResult,
    WindowPolicy,
    scored_records,
    variant_records,
)
from genobird.scoring.windows import WindowInputs, chunked, collate_views, default_workers

LOG_ODDS_EPSILON = 1e-6
VARIANT_SCORES = ("diff", "abs_diff", "log_odds_diff")


class Predictor:
    """A fine-tuned genobird model directory, ready to score sequences."""

    # the tables a VCF is written as (scoring.tables.VariantScorer): TSV holds the
    # differences, HDF5 the alleles' probabilities too
    variant_tables: ClassVar[dict] = {"tsv": VARIANT_SCORES, "h5": (*VARIANT_SCORES, "ref", "alt")}
    variant_rows_numbered = False

    def __init__(
        self,
        model_dir,
        options: ScoringOptions | None = None,
        *,
        segmentations: int | None = None,
        chunk_size: int = 1024,
        **given,
    ):
        """`options` (scoring.options), or its fields as keywords (`device`,
        `batch_size`, `rc_average`, `num_workers`, `precision`); `segmentations`: the
        sampled cuts averaged per strand (default: as the model was evaluated)."""
        options = self.options = ScoringOptions.of(options, **given)
        self.model_dir = Path(model_dir)
        description = read_model_description(self.model_dir)
        info = description.get("task_info")
        if not info:
            pretrained = description.get("model_class") == "BigBirdForPretraining"
            hint = "fine-tune it with `genobird finetune` first"
            if pretrained:
                hint = (
                    "it is a pretrained language model: score how expected each sequence "
                    f"is with `genobird likelihood`, or {hint}"
                )
            raise CheckpointError(
                f"{self.model_dir} is not a fine-tuned predictor (no task_info in "
                f"config.json); {hint}"
            )
        self.task = info["task"]
        self.feature_names: list[str] = list(info["feature_names"])
        require_unique_names(
            self.feature_names,
            "feature names",
            self.model_dir / "config.json",
            "a score table needs one column per feature; rename them",
        )
        self.categories: list[str] = list(info.get("categories") or [])
        self.input_length_bp: int = int(info["window_bp"])
        self.max_tokens: int = int(info["max_tokens"])
        self.device = resolve_device(options.device)
        # bf16 autocast on CUDA by default (as in training); fp32 on CPU.
        self.autocast_dtype = autocast_dtype(options.precision, self.device)
        self.tokenizer = self._load_tokenizer(description)
        self.model = from_pretrained(self.model_dir, self.device).eval()
        self.batch_size, self.chunk_size = options.batch_for("predict"), chunk_size
        workers = options.num_workers
        self.num_workers = default_workers(self.device) if workers is None else workers
        # By default both strands when the model was evaluated on both (recorded at
        # fine-tuning; older models: chromatin only).
        recorded = info.get("rc_average", self.task == "chromatin")
        self.rc_average = options.strands_for("predict", recorded)
        self.segmentations, self.bpe_dropout = self._segmentations(info, segmentations)

    def _load_tokenizer(self, description: dict) -> TokenizerBase:
        tokenizer = load_tokenizer(self.model_dir)  # a one-line error when there is none
        expected = description["config"]["vocab_size"]
        if tokenizer.vocab_size != expected:
            raise CheckpointError(
                f"{tokenizer.path} has {tokenizer.vocab_size} pieces but the model expects "
                f"{expected}; "
                "it is not the tokenizer this model was trained with"
            )
        return tokenizer

    def _segmentations(self, info: dict, asked: int | None) -> tuple[int, float]:
        """(BPE-dropout cuts averaged per strand, their dropout): by default those the
        model was evaluated with (recorded at fine-tuning; older models: none)."""
        cuts = int(info.get("segmentations", 0)) if asked is None else asked
        dropout = float(info.get("bpe_dropout", 0.0))
        if cuts < 0:
            raise ConfigError(f"segmentations must be 0 or more, got {cuts}")
        if cuts and not dropout:
            raise CheckpointError(
                f"{self.model_dir} was fine-tuned without BPE-dropout, so it has no "
                "segmentations to average; score it with segmentations 0"
            )
        return cuts, dropout

    def _views(self):
        """A window's DNA to the id rows whose predictions are averaged. Sampled cuts
        are longer than the tokenizer's (about 1.2x at 0.1), so they may use every
        position the model has, as they did in training."""
        max_tokens = token_limit(
            self.max_tokens, self.model.config.max_position, sampled_cuts=bool(self.segmentations)
        )
        return functools.partial(
            window_views,
            self.tokenizer,
            max_tokens=max_tokens,
            both_strands=self.rc_average,
            cuts=self.segmentations,
            dropout=self.bpe_dropout,
        )

    # ------------------------------------------------------------------ core
    def _probabilities(self, windows: list) -> np.ndarray:
        """Probabilities [N, F] of already sized windows (normalised DNA strings); NaN rows
        for windows too much N to score."""
        return self._score_windows(windows)[0]

    @torch.no_grad()
    def _score_windows(self, windows: list, reference=None) -> tuple[np.ndarray, list[float]]:
        """(probabilities [N, F], each window's N share): a window more than half N
        (`inputs.mostly_n`) is not scored, its row NaN. Windows are fetched and tokenised
        by a DataLoader (in `num_workers` worker processes when > 0, with pinned memory on
        CUDA), so the main process only moves batches and runs the model; both views
        (strands, segmentations) of a batch are scored together when averaging them."""
        out = np.full((len(windows), len(self.feature_names)), np.nan, dtype=np.float32)
        if not windows:
            return out, []
        inputs = WindowInputs(windows, reference, self._views())
        loader = torch.utils.data.DataLoader(
            inputs,
            batch_size=self.batch_size,
            collate_fn=functools.partial(
                collate_views, pad_id=self.tokenizer.pad_id, **model_padding(self.model)
            ),
            # workers start per call: only worth it when there is more than one batch
            num_workers=self.num_workers if len(windows) > self.batch_size else 0,
            pin_memory=self.device.type == "cuda",
        )
        shares: list[float] = []
        for views, batch_shares, scored in loader:
            rows = len(shares) + np.flatnonzero(scored)
            if len(rows):
                total = 0.0
                for ids in views:
                    ids = ids.to(self.device, non_blocking=True)
                    with autocast(self.device, self.autocast_dtype):
                        logits = self.model(ids, None, ids != self.tokenizer.pad_id).logits.float()
                    total = total + self._scores(logits).cpu().numpy()
                out[rows] = total / len(views)
            shares += batch_shares
        return out, shares

    def _scores(self, logits: torch.Tensor) -> torch.Tensor:
        """Per-feature probabilities of a multi-label model (genobird's fine-tuning), class
        probabilities of a single-label one, values of a regression."""
        problem = getattr(self.model, "problem", "multi_label")
        if problem == "single_label":
            return torch.softmax(logits, dim=-1)
        return logits if problem == "regression" else torch.sigmoid(logits)

    def predict(self, sequences: list[str]) -> np.ndarray:
        """Probabilities [N, F] for a list of DNA strings (normalised, then centre-cropped
        or N-padded to the model's window, as `score` fits FASTA records). A bare string,
        an empty sequence, or one whose window is more than half N (all N, or much shorter
        than the model's window) is refused, as `score` rejects them."""
        windows = [fit_window(s, self.input_length_bp) for s in scorable_sequences(sequences)]
        for index, window in enumerate(windows):
            if mostly_n(window):
                reason = mostly_n_reason(n_fraction(window), len(window))
                raise SequenceError(
                    f"sequence {index}: {reason}; give at "
                    f"least {self.min_bases_bp:,} bp of A/C/G/T, or leave it "
                    "out"
                )
        return self._probabilities(windows)

    @property
    def min_bases_bp(self) -> int:
        """The fewest A/C/G/T bases a record needs for its window to be scored."""
        return self.policy().min_bases_bp

    def _table(self, ids: dict, probabilities: np.ndarray) -> pd.DataFrame:
        table = pd.DataFrame(ids)
        scores = pd.DataFrame(probabilities.astype(np.float64), columns=self.feature_names)
        return pd.concat([table.reset_index(drop=True), scores], axis=1)

    # ------------------------------------------------------------------ records
    def policy(self, tiles: bool = False) -> WindowPolicy:
        """`genobird score`'s windows: the model's input length (a FASTA record fitted to
        it, or read as its tiles; a BED region's window centred on it, on its strand)."""
        return WindowPolicy(self.input_length_bp, tiles)

    # each output's id columns: (column, the record's field it holds)
    COLUMNS: ClassVar[dict] = {
        "fasta": tuple((name, name) for name in FASTA_IDS),
        "bed": tuple((name, name) for name in (*BED_IDS, "contains_N", "n_fraction")),
    }

    def score_table(self, sequences: list[str]) -> pd.DataFrame:
        """One column per feature: the probabilities of windows of the model's length."""
        probabilities = (
            self._probabilities(sequences) if sequences else np.zeros((0, len(self.feature_names)))
        )
        return pd.DataFrame(probabilities.astype(np.float64), columns=self.feature_names)

    def iter_fasta(self, path, tiles: bool = False) -> Iterator[ScoreResult]:
        """Chunks of scores of the FASTA's records: each row names its record (`name`,
        and `line`, its header's line), the bases of the record it read (`first_bp`,
        `last_bp`: 0-based, half-open) and whether its window was `cropped` from a longer
        record or `padded` with N to the model's window, and the share of that window that
        is N (`n_fraction`). A window more than half N (a record without an A/C/G/T base,
        or much shorter than the model's window) is rejected, as `predict` refuses it."""
        return scored_records(self, "fasta", path, tiles=tiles)

    def score_fasta(self, path, tiles: bool = False) -> pd.DataFrame:
        return _collect(self.iter_fasta(path, tiles))

    def iter_bed(self, path, reference, chromosomes=None) -> Iterator[ScoreResult]:
        """Chunks of scores of the BED's regions (only those on `chromosomes` if given):
        each read as the model's window centred on it, on its own strand (+ when it has
        none), N-padded past a contig's ends; a window more than half N (an assembly gap,
        a contig's end) is rejected with its share."""
        return scored_records(self, "bed", path, reference=reference, chromosomes=chromosomes)

    def score_regions(self, intervals: list[Interval], reference) -> tuple[np.ndarray, list]:
        """(probabilities [N, F], each window's N share) of regions on an open
        reference: each read as the model's window centred on it, on its own strand (+
        when it has none), N-padded past a contig's ends, fetched where it is tokenised
        (a genome track's bins: scoring.tracks)."""
        windows = []
        for interval in intervals:
            window = centered_window(interval, self.input_length_bp)
            strand = interval.strand if interval.strand in ("+", "-") else "+"
            windows.append(Interval(window.chrom, window.start, window.end, strand=strand))
        return self._score_windows(windows, reference)

    def score_bed(self, path, reference, chromosomes=None) -> pd.DataFrame:
        return _collect(self.iter_bed(path, reference, chromosomes))

    # ------------------------------------------------------------------ VCF
    def iter_variants(
        self, path, reference, chromosomes=None
    ) -> Iterator[tuple[dict, list[BadRecord]]]:
        """Chunks of {score name: table} (only variants on `chromosomes` if given); a
        variant the policy of `variant_problem` refuses goes to the rejected records."""
        rejected: list[BadRecord] = []
        variants = variant_records(path, reference, self.input_length_bp, rejected, chromosomes)
        for chunk, set_aside in chunked(variants, self.chunk_size, rejected):
            yield self._variant_chunk(chunk), set_aside

    def _variant_chunk(self, chunk: list) -> dict:
        """The tables of a chunk of variants' windows (source.VariantRecord)."""
        ids = {k: [] for k in ("chrom", "pos", "id", "ref", "alt", "ref_match", "line")}
        for record in chunk:
            variant = record.variant
            values = (
                variant.chrom,
                variant.pos,
                variant.id,
                variant.ref,
                variant.alt,
                record.ref_match,
                variant.line,
            )
            for key, value in zip(ids, values, strict=True):
                ids[key].append(value)
        empty = np.zeros((0, len(self.feature_names)))
        ref = self._probabilities([record.ref for record in chunk]) if chunk else empty
        alt = self._probabilities([record.alt for record in chunk]) if chunk else empty
        diff = alt.astype(np.float64) - ref
        log_odds = logit(alt) - logit(ref)
        scores = {
            "diff": diff,
            "abs_diff": np.abs(diff),
            "log_odds_diff": log_odds,
            "ref": ref,
            "alt": alt,
        }
        return {name: self._table(ids, values) for name, values in scores.items()}

    def score_variants(
        self, path, reference, score: str = "diff", chromosomes=None
    ) -> pd.DataFrame:
        """One row per ALT: chrom, pos, id, ref, alt, ref_match, then one column per feature
        holding `score`: "diff" (alt - ref), "abs_diff", "log_odds_diff", "ref" or "alt"."""
        if score not in (*VARIANT_SCORES, "ref", "alt"):
            raise ConfigError(
                f"score must be one of {(*VARIANT_SCORES, 'ref', 'alt')}, got {score!r}"
            )
        return self.score_variant_tables(path, reference, chromosomes)[score]

    def score_variant_tables(self, path, reference, chromosomes=None) -> dict[str, pd.DataFrame]:
        """All five variant tables at once ({"diff", "abs_diff", "log_odds_diff", "ref",
        "alt"}), from one pass over the VCF; rejected records in each table's attrs."""
        parts: dict[str, list] = {}
        rejected: list[str] = []
        for tables, problems in self.iter_variants(path, reference, chromosomes):
            rejected += [str(problem) for problem in problems]
            for name, table in tables.items():
                parts.setdefault(name, []).append(table)
        result = {name: pd.concat(tables, ignore_index=True) for name, tables in parts.items()}
        for table in result.values():
            table.attrs["rejected"] = rejected
        return result


def logit(probabilities: np.ndarray) -> np.ndarray:
    clipped = np.clip(probabilities.astype(np.float64), LOG_ODDS_EPSILON, 1 - LOG_ODDS_EPSILON)
    return np.log(clipped) - np.log1p(-clipped)


def _collect(results: Iterator[ScoreResult]) -> pd.DataFrame:
    """One table; records that could not be scored are in table.attrs["rejected"]."""
    tables, rejected = [], []
    for result in results:
        tables.append(result.table)
        rejected.extend(result.rejected)
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    table.insert(0, "index", range(len(table)))
    table.attrs["rejected"] = [str(problem) for problem in rejected]
    return table


class PromoterPredictor(Predictor):
    """Probability that a window is a promoter (one output, 'promoter')."""


class ChromatinPredictor(Predictor):
    """Probabilities of the chromatin features (DeepSEA's 919, or your own)."""


PREDICTORS = {"promoter": PromoterPredictor, "chromatin": ChromatinPredictor}


def load_predictor(model_dir, options: ScoringOptions | None = None, **given) -> Predictor:
    """The predictor for a fine-tuned model directory, of the class its task calls for
    (`options` or their fields as keywords, and `segmentations`, as `Predictor` takes)."""
    task = (read_model_description(model_dir).get("task_info") or {}).get("task")
    return PREDICTORS.get(task, Predictor)(model_dir, options, **given)


__all__ = ["ChromatinPredictor", "Predictor", "PromoterPredictor", "load_predictor"]
