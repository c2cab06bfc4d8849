"""The pretraining task: MLM + NSP on instance batches (paper appendix F.1) and how
masked tokens are scored: every scored token shown as [MASK], its loss, accuracy and
bits per character (the masked-token cross-entropy in bits over the bp it spells)."""

from __future__ import annotations

import logging
import math

import numpy as np
import torch
import torch.nn.functional as F

from genobird.corpus import PretrainingDataset
from genobird.errors import ConfigError

log = logging.getLogger(__name__)

PAPER_BPC = {"SRILM": 1.57, "BERT (512 tokens)": 1.23, "BigBird (4096 tokens)": 1.12}


# How held-out masked tokens are scored (hide_scored_tokens), recorded in each
# training_summary.json: a summary without it was written when scoring left BERT's
# unchanged tenth of the scored tokens visible, and its figures are not comparable.
HELDOUT_SCORING = "every scored token shown as [MASK]"


# =========================================================================== task
def _forward(model, batch, with_nsp_loss: bool = True):
    return model(
        batch["input_ids"],
        batch["segment_ids"],
        batch["attention_mask"],
        batch["masked_positions"],
        batch["masked_labels"],
        batch["nsp_labels"] if with_nsp_loss else None,
    )


def pretraining_step(model, batch) -> tuple[torch.Tensor, dict]:
    out = _forward(model, batch)
    metrics = {"mlm_loss": out.mlm_loss.detach()}  # tensors: the trainer reads them when it logs
    if out.nsp_loss is not None:
        metrics["nsp_loss"] = out.nsp_loss.detach()
    return out.loss, metrics


def hide_scored_tokens(batch: dict, mask_id: int) -> dict:
    """The batch with [MASK] at every scored position. BERT masking (mask_tokens) leaves
    10% of the chosen tokens unchanged and replaces 10% with a random piece, which is
    right for training but not for scoring: on the unchanged ones the model reads the
    answer (held-out, human-mini: 0.38 bits per bp on them against 1.87 on the [MASK]ed
    ones), so every evaluation scores predictions from context alone."""
    positions, scored = batch["masked_positions"], batch["masked_labels"] != -100
    input_ids = batch["input_ids"].clone()
    shown = input_ids.gather(1, positions)
    # unscored slots point at position 0 ([CLS]) and write back what is there
    input_ids.scatter_(1, positions, torch.where(scored, mask_id, shown))
    return {**batch, "input_ids": input_ids}


@torch.no_grad()
def masked_token_scores(model, loader, device, mask_id: int) -> dict[str, np.ndarray]:
    """Every masked token of `loader`, in order: its label, whether the model's top piece
    is it, and its loss in nats, each predicted with [MASK] in its place
    (hide_scored_tokens); plus the NSP hits and count over the batches."""
    model.eval()
    labels_seen, hits, losses = [], [], []
    nsp_correct = nsp_total = 0
    for batch in loader:
        batch = hide_scored_tokens({k: v.to(device) for k, v in batch.items()}, mask_id)
        out = _forward(model, batch, with_nsp_loss=False)
        labels = batch["masked_labels"].reshape(-1)
        labels = labels[labels != -100]
        logits = out.mlm_logits.float()
        losses.append(F.cross_entropy(logits, labels, reduction="none").cpu().numpy())
        hits.append((logits.argmax(-1) == labels).cpu().numpy())
        labels_seen.append(labels.cpu().numpy())
        nsp = batch["nsp_labels"]
        keep = nsp != -100
        nsp_correct += int((out.nsp_logits.argmax(-1)[keep] == nsp[keep]).sum())
        nsp_total += int(keep.sum())
    return {
        "labels": _joined(labels_seen, np.int64),
        "correct": _joined(hits, bool),
        "loss_nats": _joined(losses, np.float32),
        "nsp_correct": nsp_correct,
        "nsp_total": nsp_total,
    }


def _joined(parts: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def evaluate_pretraining(model, loader, device, piece_lengths: np.ndarray, mask_id: int) -> dict:
    """Masked-token accuracy and loss, NSP accuracy and bits per character."""
    scores = masked_token_scores(model, loader, device, mask_id)
    metrics = masked_token_metrics(scores, piece_lengths)
    if scores["nsp_total"]:
        metrics["nsp_accuracy"] = scores["nsp_correct"] / scores["nsp_total"]
    return metrics


def masked_token_metrics(scores: dict, piece_lengths: np.ndarray) -> dict:
    """Loss, accuracy and bits per character of `masked_token_scores`."""
    masked = len(scores["labels"])
    if not masked:
        raise ConfigError("the evaluation set has no masked tokens")
    loss_nats = float(scores["loss_nats"].astype(np.float64).sum())
    bp = float(piece_lengths[scores["labels"]].sum())
    return {
        "mlm_loss": loss_nats / masked,
        "mlm_accuracy": float(scores["correct"].mean()),
        "bp_per_masked_token": bp / masked,
        "bits_per_character": loss_nats / math.log(2) / bp,
        "masked_tokens": masked,
    }


def require_same_vocabulary(shards: PretrainingDataset, tokenizer, name: str, source) -> None:
    """Instances must use the model's vocabulary: other ids would be scored as garbage."""
    same_pieces = not shards.vocabulary or shards.vocabulary == tokenizer.vocabulary_digest
    same_ids = (shards.special, shards.vocab_size) == (tokenizer.special, tokenizer.vocab_size)
    if not (same_pieces and same_ids):
        raise ConfigError(
            f"{name}: instances built with another vocabulary than {source}; "
            "rebuild them with `genobird corpus instances`"
        )
