"""A language model that has learnt nothing from its input, said while it trains.

A masked-token model that ignores its input can do no better than the unigram
distribution of its targets: its MLM loss settles at that distribution's entropy. So the
trainer knows that entropy (`unigram_entropy`, in nats, from the tokens of the training
instances: masked positions are drawn uniformly among them), and `CollapseWatch`,
handed each logged row, warns once when the MLM loss still lies within
`COLLAPSE_MARGIN_NATS` of it after `COLLAPSE_AFTER_STEPS` steps (half the run's steps in
a shorter run); `verdict` says at the end whether the run left that level, for
training_summary.json. A 4,096-token model pretrained from scratch once held 8.2 nats
for its whole run against its instances' 8.22 while a 512-token one fell to 6.8: nothing
said so until its held-out bits were found the same at every context length.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import h5py
import numpy as np

log = logging.getLogger(__name__)

# steps after which an MLM loss still at the unigram level is a collapse, not a start:
# human-mini's model was 0.46 nats under its unigram entropy at step 210, the demo's
# 0.45 at step 160
COLLAPSE_AFTER_STEPS = 300
# how near the unigram entropy a collapsed loss stays (the mean of the last few rows)
COLLAPSE_MARGIN_NATS = 0.25
# logged rows averaged, so that one noisy batch neither raises nor hides a warning
ROWS_AVERAGED = 3
# instances read for the entropy: about 250,000 tokens at 512 per instance
ENTROPY_INSTANCES = 512
# held-out bits per bp that agree at every context length to this, the signature of a
# model that reads nothing of its input (the collapsed 4,096-token model: 1.9290 at
# every length, to four digits)
CONTEXT_BLIND_BITS = 5e-4


def context_blind(bits_by_length: dict) -> bool:
    """Whether a model's held-out bits per bp are the same at every context length
    ({tokens: bits}, at least two lengths): it reads nothing of its input."""
    values = [float(v) for v in bits_by_length.values()]
    return len(values) >= 2 and max(values) - min(values) < CONTEXT_BLIND_BITS


def context_blind_note(bits_by_length: dict) -> str:
    """The words a report gives a context-blind model (empty for any other)."""
    if not context_blind(bits_by_length):
        return ""
    lengths = ", ".join(f"{k:,}" for k in sorted(bits_by_length))
    bits = next(iter(bits_by_length.values()))
    return (
        f"The held-out bits per bp are {bits:.4f} at every context length ({lengths} "
        "tokens): the model reads nothing of its input, the signature of a collapsed "
        "pretraining (its MLM loss at the unigram level). Check the training log for the "
        "collapse warning, and the attention kernel."
    )


def unigram_entropy(shard_paths, special_ids, instances: int = ENTROPY_INSTANCES) -> float:
    """The entropy (nats) of the tokens of the first `instances` instances of the
    shards, special tokens left out: the MLM loss of a model that ignores its input."""
    counts = np.zeros(0, dtype=np.int64)
    left = instances
    for path in shard_paths:
        with h5py.File(path, "r") as handle:
            rows = min(left, int(handle["lengths"].shape[0]))
            ids, lengths = handle["input_ids"][:rows], handle["lengths"][:rows]
        tokens = np.concatenate([row[:length] for row, length in zip(ids, lengths, strict=True)])
        found = np.bincount(tokens.astype(np.int64))
        size = max(len(counts), len(found))
        counts = np.pad(counts, (0, size - len(counts))) + np.pad(found, (0, size - len(found)))
        left -= rows
        if left <= 0:
            break
    counts[[i for i in special_ids if i < len(counts)]] = 0
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


@dataclass
class CollapseWatch:
    """Handed each logged training row (Trainer's `monitor`): a warning row, once, when
    the MLM loss is still within `margin` nats of the unigram `entropy` after
    `after_steps` steps."""

    entropy: float
    after_steps: int = COLLAPSE_AFTER_STEPS
    margin: float = COLLAPSE_MARGIN_NATS
    losses: list = field(default_factory=list)
    warned: bool = False

    @classmethod
    def for_run(cls, entropy: float, max_steps: int) -> CollapseWatch:
        return cls(entropy, after_steps=max(1, min(COLLAPSE_AFTER_STEPS, max_steps // 2)))

    def recent(self) -> float | None:
        return float(np.mean(self.losses[-ROWS_AVERAGED:])) if self.losses else None

    def __call__(self, row: dict) -> dict | None:
        if "mlm_loss" not in row:
            return None
        self.losses.append(float(row["mlm_loss"]))
        loss = self.recent()
        if self.warned or row["step"] < self.after_steps or loss < self.entropy - self.margin:
            return None
        self.warned = True
        message = (
            f"the MLM loss is {loss:.3f} nats at step {row['step']}, within "
            f"{self.margin:g} of the {self.entropy:.3f} a model that ignores its input "
            "reaches (the unigram entropy of the training tokens): it has learnt "
            "nothing from its input yet; check the attention kernel, the learning rate "
            "and the warm-up"
        )
        log.warning("%s", message)
        return {"mlm_collapse_warning": message}

    def verdict(self) -> dict:
        """What training_summary.json records: the entropy, the last loss and whether it
        was still within the margin of it at the end."""
        loss = self.recent()
        return {
            "unigram_entropy_nats": round(self.entropy, 4),
            "final_mlm_loss": None if loss is None else round(loss, 4),
            "margin_nats": self.margin,
            "after_steps": self.after_steps,
            "warned": self.warned,
            "collapsed": loss is not None and loss >= self.entropy - self.margin,
        }
