"""A small CNN on one-hot DNA: the supervised baseline a DNA language model must beat.

Three convolution blocks (128 filters of widths 15, 9, 5, batch norm, ReLU, max-pooling), global
max- and mean-pooling, and a linear layer: one logit per output. With `rc_average` the
logits are the mean over both strands, in training and prediction, so the model scores
a sequence and its reverse complement alike. Trained with AdamW on BCE for whole epochs;
after each epoch the validation AUROC decides whether to keep the weights, and training
stops after `patience` epochs without improvement (or at `max_minutes`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from genobird.baselines.data import BaselineData, validation_auroc
from genobird.baselines.markov import dna_codes

log = logging.getLogger(__name__)

# code -> one-hot row: A C G T, and all zeros for N and for padding past the end
_ONE_HOT = torch.cat([torch.eye(4), torch.zeros(1, 4)])


@dataclass
class CNNSpec:
    channels: int = 128
    dropout: float = 0.2
    learning_rate: float = 1e-3
    weight_decay: float = 1e-2
    batch_size: int = 64
    max_epochs: int = 30
    patience: int = 3
    max_minutes: float = 10.0
    rc_average: bool = True
    seed: int = 0


class SmallCNN(nn.Module):
    def __init__(self, num_outputs: int, channels: int = 128, dropout: float = 0.2):
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(
                nn.Conv1d(4 if i == 0 else channels, channels, width, padding=width // 2),
                nn.BatchNorm1d(channels),  # with it a planted motif is learned in 2-3 epochs
            )
            for i, width in enumerate((15, 9, 5))
        )
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(2 * channels, num_outputs)

    def strand_logits(self, x: torch.Tensor) -> torch.Tensor:
        """x: one-hot [B, 4, L] -> logits [B, F]."""
        for index, conv in enumerate(self.blocks):
            x = F.relu(conv(x))
            if index < len(self.blocks) - 1 and x.shape[-1] >= 8:
                x = F.max_pool1d(x, 4, ceil_mode=True)
            x = self.dropout(x)
        pooled = torch.cat([x.amax(dim=-1), x.mean(dim=-1)], dim=1)  # [B, 2C]
        return self.out(pooled)

    def forward(self, x: torch.Tensor, rc_average: bool) -> torch.Tensor:
        logits = self.strand_logits(x)
        if rc_average:  # reverse complement of A C G T one-hot: flip channels and length
            logits = (logits + self.strand_logits(x.flip(1, 2))) / 2
        return logits


def encode(sequences: list[str]) -> torch.Tensor:
    """uint8 codes [N, Lmax]: A C G T = 0-3; N and padding = 4."""
    length = max(len(s) for s in sequences)
    codes = np.full((len(sequences), length), 4, dtype=np.uint8)
    for row, sequence in enumerate(sequences):
        codes[row, : len(sequence)] = dna_codes(sequence)
    return torch.from_numpy(codes)


def one_hot(codes: torch.Tensor) -> torch.Tensor:
    return _ONE_HOT[codes.long()].transpose(1, 2)  # [B, 4, L]


@torch.no_grad()
def predict(model: SmallCNN, codes: torch.Tensor, rc_average: bool, batch: int = 256):
    model.eval()
    out = [
        torch.sigmoid(model(one_hot(codes[i : i + batch]), rc_average))
        for i in range(0, len(codes), batch)
    ]
    return torch.cat(out).numpy()


def cnn_baseline(data: BaselineData, spec: CNNSpec | None = None):
    """(test probabilities, validation probabilities, details) of the CNN."""
    spec = spec or CNNSpec()
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(spec.seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        model = SmallCNN(data.num_outputs, spec.channels, spec.dropout)
    train_codes, labels = encode(data.train.sequences), torch.from_numpy(data.train.labels).float()
    valid_codes = encode(data.valid.sequences)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=spec.learning_rate, weight_decay=spec.weight_decay
    )
    best, best_state, history, stale = -np.inf, None, [], 0
    for epoch in range(spec.max_epochs):
        model.train()
        order = torch.randperm(len(train_codes), generator=generator)
        for first in range(0, len(order), spec.batch_size):
            rows = order[first : first + spec.batch_size]
            loss = F.binary_cross_entropy_with_logits(
                model(one_hot(train_codes[rows]), spec.rc_average), labels[rows]
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        score = validation_auroc(data, predict(model, valid_codes, spec.rc_average))
        history.append(round(score, 5))
        log.info("CNN epoch %d: validation AUROC %.4f", epoch + 1, score)
        if score > best:
            best, stale = score, 0
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
        else:
            stale += 1
        out_of_time = time.perf_counter() - started > spec.max_minutes * 60
        if stale >= spec.patience or out_of_time:
            break
    model.load_state_dict(best_state)
    details = {
        "model": "cnn",
        **asdict(spec),
        "parameters": sum(p.numel() for p in model.parameters()),
        "epochs": len(history),
        "best_epoch": int(np.argmax(history)) + 1,
        "validation_auroc_by_epoch": history,
        "seconds": round(time.perf_counter() - started, 1),
    }
    test = predict(model, encode(data.test.sequences), spec.rc_average)
    return test, predict(model, valid_codes, spec.rc_average), details
