"""Zero-shot scoring with a pretrained language model (`genobird likelihood`): how many bits
the model needs to predict each sequence from its own context.

Every piece of a sequence is scored once, with [MASK] in its place, and pieces `stride`
apart are masked together, so a sequence takes `stride` passes. Stride 7 (the default)
masks about the 15% of pieces that pretraining masks, as `genobird pretrain` scores its
held-out bits per bp; a stride at least a sequence's piece count masks one piece at a
time (the pseudo-log-likelihood of Salazar et al., 2020). Summed over the sequence the
bits are its pseudo-log-likelihood; per bp they are comparable with the held-out bits per
bp of pretraining and with a Markov model's (`genobird baseline markov`).

DNA is read on both strands and the two scores averaged, unless told one strand (BED
regions are then read on their own strand). Non-A/C/G/T bases (N) are not scored: each
A/C/G/T run between them is cut into pieces and scored on its own, in windows of the
model's longest input, and `bp` counts the bases scored. A record with none is rejected,
and so is one more than half N (`inputs.MAX_N_FRACTION`), as every scorer rejects it.

    from genobird.scoring.likelihood import LikelihoodScorer
    scorer = LikelihoodScorer("results/demo/pretrain/model")
    scorer.score(["ACGT...", ...])   # DataFrame: bp, pieces, bits, bits_per_bp
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from genobird.corpus.tokenizer import TokenizerBase, load_tokenizer
from genobird.device import resolve_device
from genobird.errors import CheckpointError, ConfigError
from genobird.genome.alphabet import reverse_complement
from genobird.inputs import model_padding, pad_ids, scorable_sequences
from genobird.model.io import from_pretrained, read_model_description
from genobird.scoring.options import BATCH_SIZES, ScoringOptions
from genobird.scoring.source import ScoreResult, WindowPolicy, scored_records

DEFAULT_STRIDE = 7  # about the 15% of pieces masked in pretraining
COLUMNS = ["bp", "pieces", "bits", "bits_per_bp"]
_ACGT_RUN = re.compile("[ACGT]+")


def masked_batch(
    windows: list[list[int]], offset: int, stride: int, tokenizer, padding: dict
) -> tuple[dict, list[np.ndarray]]:
    """Windows of piece ids as one batch between [CLS] and [SEP], every `stride`-th piece
    from `offset` replaced by [MASK] and labelled; and, per window, the indices (in the
    window) of the pieces scored. `padding`: `model_padding` of the model."""
    scored = [np.arange(offset, len(ids), stride) for ids in windows]
    return masked_batch_at(windows, scored, tokenizer, padding), scored


def masked_batch_at(
    windows: list[list[int]], scored: list[np.ndarray], tokenizer, padding: dict
) -> dict:
    """`masked_batch` with the pieces to mask given: `scored[i]` indexes window i."""
    rows = [np.asarray([tokenizer.cls_id, *ids, tokenizer.sep_id]) for ids in windows]
    input_ids = pad_ids(rows, pad_id=tokenizer.pad_id, **padding)
    slots = max(len(s) for s in scored)
    positions = torch.zeros((len(windows), slots), dtype=torch.long)  # unused: [CLS]
    labels = torch.full((len(windows), slots), -100, dtype=torch.long)
    for row, (ids, picked) in enumerate(zip(windows, scored, strict=True)):
        positions[row, : len(picked)] = torch.from_numpy(picked + 1)
        labels[row, : len(picked)] = torch.as_tensor([ids[i] for i in picked])
        input_ids[row, picked + 1] = tokenizer.mask_id
    batch = {
        "input_ids": input_ids,
        "segment_ids": torch.zeros_like(input_ids),
        "attention_mask": input_ids != tokenizer.pad_id,
        "masked_positions": positions,
        "masked_labels": labels,
    }
    return batch


def check_stride(stride: int) -> None:
    """Stride 0 would run no pass and score every piece 0 bits."""
    if stride < 1:
        raise ConfigError(f"stride must be at least 1, got {stride}")


@torch.no_grad()
def masked_bits(model, batch: dict, device) -> np.ndarray:
    """Bits of each masked piece of a `masked_batch_at` batch, row by row in the order of
    the labels (float64)."""
    batch = {k: v.to(device) for k, v in batch.items()}
    out = model(
        batch["input_ids"],
        batch["segment_ids"],
        batch["attention_mask"],
        batch["masked_positions"],
        batch["masked_labels"],
    )
    labels = batch["masked_labels"].reshape(-1)
    labels = labels[labels != -100]  # the order of out.mlm_logits' rows
    nats = F.cross_entropy(out.mlm_logits.float(), labels, reduction="none")
    return (nats / math.log(2)).cpu().numpy().astype(np.float64)


@torch.no_grad()
def piece_bits(
    model,
    tokenizer,
    windows: list[list[int]],
    stride: int = DEFAULT_STRIDE,
    batch_size: int = BATCH_SIZES["likelihood"],
    device="cpu",
) -> list[np.ndarray]:
    """Bits of every piece of every window, each predicted with [MASK] in its place and
    the pieces `stride` apart from it masked too (float64 arrays, one per window)."""
    check_stride(stride)
    model.eval()
    padding = model_padding(model)
    bits = [np.zeros(len(ids)) for ids in windows]
    order = sorted(range(len(windows)), key=lambda i: len(windows[i]))  # alike lengths batch
    for offset in range(stride):
        rows = [i for i in order if len(windows[i]) > offset]
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            batch, scored = masked_batch(
                [windows[i] for i in chunk], offset, stride, tokenizer, padding
            )
            values = masked_bits(model, batch, device)
            done = 0
            for index, picked in zip(chunk, scored, strict=True):
                bits[index][picked] = values[done : done + len(picked)]
                done += len(picked)
    return bits


@dataclass
class _Cut:
    """One window of a sequence's piece ids: `owner` is the sequence's row, `bp` the
    bases its pieces spell."""

    owner: int
    ids: list[int]
    bp: int


class LikelihoodScorer:
    """A pretraining model directory as a zero-shot scorer of DNA sequences."""

    feature_names = COLUMNS

    def __init__(
        self,
        model_dir,
        options: ScoringOptions | None = None,
        *,
        stride: int | None = None,
        chunk_size: int = 1024,
        **given,
    ):
        """`options` (scoring.options), or its fields as keywords (`device`,
        `batch_size`, `rc_average`: both strands unless False); `stride`: the bases
        between scored windows of a long sequence."""
        options = self.options = ScoringOptions.of(options, **given)
        stride = DEFAULT_STRIDE if stride is None else stride
        check_stride(stride)  # before the model is read
        model_dir = Path(model_dir)
        description = read_model_description(model_dir)
        if description.get("model_class") != "BigBirdForPretraining":
            raise CheckpointError(
                f"{model_dir} is a {description.get('model_class')} model, which has no "
                "language-model head; give a pretraining model directory (pretrain/model)"
            )
        self.device = resolve_device(options.device)
        self.model = from_pretrained(model_dir, self.device).eval()
        self.tokenizer: TokenizerBase = load_tokenizer(model_dir)
        self.stride, self.both_strands = stride, options.strands_for("likelihood")
        self.batch_size, self.chunk_size = options.batch_for("likelihood"), chunk_size
        self.window = self.model.config.max_position - 2  # [CLS] window [SEP]

    def score(self, sequences: list[str]) -> pd.DataFrame:
        """bp scored, pieces, bits and bits per bp of each sequence in a list (normalised
        here, as every scorer normalises: soft-masked lowercase and RNA's U count as
        bases). A bare string, an empty sequence or one without an A/C/G/T base is
        refused, as `genobird likelihood` refuses them (`inputs.scorable_sequences`)."""
        return self._score(scorable_sequences(sequences))

    def _score(self, sequences: list[str]) -> pd.DataFrame:
        """`score` of normalised sequences, NaN bits where one has no A/C/G/T base."""
        strands = [sequences]
        if self.both_strands:
            strands.append([reverse_complement(s) for s in sequences])
        results = [self._score_strand(texts) for texts in strands]
        bits = np.mean([bits for bits, _, _ in results], axis=0)
        pieces = np.mean([pieces for _, pieces, _ in results], axis=0)
        bp = results[0][2]
        per_bp = np.where(bp > 0, bits / np.maximum(bp, 1), np.nan)
        return pd.DataFrame(
            {
                "bp": bp,
                "pieces": pieces,
                "bits": np.where(bp > 0, bits, np.nan),
                "bits_per_bp": per_bp,
            }
        )

    def _score_strand(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cuts = [cut for row, text in enumerate(texts) for cut in self._cuts(row, text)]
        window_bits = piece_bits(
            self.model,
            self.tokenizer,
            [c.ids for c in cuts],
            self.stride,
            self.batch_size,
            self.device,
        )
        bits, pieces, bp = (np.zeros(len(texts)) for _ in range(3))
        for cut, values in zip(cuts, window_bits, strict=True):
            bits[cut.owner] += values.sum()
            pieces[cut.owner] += len(cut.ids)
            bp[cut.owner] += cut.bp
        return bits, pieces, bp

    def _cuts(self, row: int, text: str) -> Iterator[_Cut]:
        lengths = self.tokenizer.piece_lengths
        for run in _ACGT_RUN.findall(text):
            ids = self.tokenizer.encode(run, normalise=False)
            for start in range(0, len(ids), self.window):
                window = ids[start : start + self.window]
                yield _Cut(row, window, int(lengths[window].sum()))

    # The streaming interface of `genobird score` (scoring.write_scores)
    # ------------------------------------------------------------------ records
    def policy(self, tiles: bool = False) -> WindowPolicy:
        """`genobird likelihood`'s windows: each FASTA record and BED region as it is (BED
        on its own strand; `tiles` is `score`'s option, a record is not cut)."""
        return WindowPolicy()

    # each output's id columns: (column, the record's field it holds)
    COLUMNS: ClassVar[dict] = {
        "fasta": (("name", "name"), ("line", "line")),
        "bed": tuple((name, name) for name in ("chrom", "start", "end", "name", "strand", "line")),
    }

    def score_table(self, sequences: list[str]) -> pd.DataFrame:
        """bp, pieces, bits and bits per bp of normalised sequences."""
        return self._score(sequences)

    def iter_fasta(self, path, tiles: bool = False) -> Iterator[ScoreResult]:
        """FASTA records scored whole (`tiles` is `score`'s option; a record is not cut)."""
        return scored_records(self, "fasta", path)

    def iter_bed(self, path, reference, chromosomes=None) -> Iterator[ScoreResult]:
        """BED regions as they are (not resized): on their own strand with one strand."""
        return scored_records(self, "bed", path, reference=reference, chromosomes=chromosomes)
