"""Convolutional baselines on one-hot DNA: what a DNA language model must beat.

`SmallCNN` ("cnn"): three convolution blocks (128 filters of widths 15, 9, 5, batch norm,
ReLU, max-pooling), global max- and mean-pooling, and a linear layer: one logit per
output. `DeepSEACNN` ("deepsea-cnn"): DeepSEA's own architecture (Zhou and Troyanskaya,
2015), the chromatin predictor BigBird's Table 7 is set beside: three convolutions of
8 bp (320, 480, 960 filters there) with max-pooling of 4 after the first two, dropout
0.2 / 0.2 / 0.5, then a fully connected layer over every position and the output layer
(batch norm after each convolution is a deviation).

Both read windows as codes (`encode`: A C G T N, then `PAD` past a window's end in a
batch of longer ones). With `rc_average` the logits are the mean over both strands, in
training and prediction, so the model scores a sequence and its reverse complement
alike. SmallCNN's tower leaves padding out (model.base_readers.cnn_tower), so a window's
logits do not depend on the batch it is read in, and a classifier's base CNN started
from it gives its logits. Trained with AdamW on
BCE (unknown labels left out) for whole epochs; after each epoch the validation AUROC
decides whether to keep the weights, and training stops after `patience` epochs without
improvement or at `max_epochs`: budgets in epochs, so that the same seed gives the same
model on any machine (the seed draws the weights, the order of the windows and dropout).
`max_minutes` is a cap a user may ask for, which makes the model depend on the machine's
speed; the details say what stopped the run (`stopped_by`). With `window_bp`, each window
is read as its central `window_bp` bases, so one data set of 8 kb windows gives the 1 kb
baseline too.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from genobird.baselines.data import BaselineData, validation_auroc
from genobird.baselines.markov import dna_codes
from genobird.datasets.windows import label_values
from genobird.errors import ConfigError
from genobird.inputs import central
from genobird.model.base_readers import DeepSEATower, cnn_tower, reverse_complement_bases
from genobird.model.classifier import masked_bce

log = logging.getLogger(__name__)

# past a window's end in a batch of longer ones (N is 4)
PAD = 5
# code -> one-hot row: A C G T, and all zeros for N and for padding past the end
_ONE_HOT = torch.cat([torch.eye(4), torch.zeros(2, 4)])


@dataclass
class CNNSpec:
    # "cnn" (SmallCNN) or "deepsea-cnn" (DeepSEACNN)
    architecture: str = "cnn"
    channels: int = 128
    dropout: float = 0.2
    learning_rate: float = 1e-3
    weight_decay: float = 1e-2
    batch_size: int = 64
    max_epochs: int = 30  # finetuning.recipe.CNN_MAX_EPOCHS (a test holds them equal)
    patience: int = 3
    # a wall-clock cap a user asks for (None: none; the budget is max_epochs)
    max_minutes: float | None = None
    rc_average: bool = True
    window_bp: int | None = None
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

    def strand_logits(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, L] (`encode`) -> logits [B, F]."""
        inside = (codes != PAD)[:, None].to(torch.float32)  # [B, 1, L]
        return self.out(cnn_tower(self.blocks, self.dropout, one_hot(codes), inside))

    def forward(self, codes: torch.Tensor, rc_average: bool) -> torch.Tensor:
        logits = self.strand_logits(codes)
        if rc_average:
            logits = (logits + self.strand_logits(reverse_complement_codes(codes))) / 2
        return logits


class DeepSEACNN(nn.Module):
    """DeepSEA's convolutional network: its tower (model.base_readers.DeepSEATower: three
    8 bp convolutions, max-pooling, the fully connected layer over at most 53 positions)
    and the output layer. Its channels (320, 480, 960) and its 925-unit fully connected
    layer were sized for 4.4 M training windows of 919 features; a data set a thousand
    times smaller takes `channels` as the width of the first layer (the tower says how
    the rest follow)."""

    def __init__(self, num_outputs: int, channels: int = 128, dropout: float = 0.2):
        super().__init__()
        self.tower = DeepSEATower(channels, dropout)
        self.out = nn.Linear(self.tower.output_size, num_outputs)

    def strand_logits(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, L] (`encode`) -> logits [B, F]."""
        return self.out(self.tower(one_hot(codes)))

    def forward(self, codes: torch.Tensor, rc_average: bool) -> torch.Tensor:
        logits = self.strand_logits(codes)
        if rc_average:
            logits = (logits + self.strand_logits(reverse_complement_codes(codes))) / 2
        return logits


ARCHITECTURES = {"cnn": SmallCNN, "deepsea-cnn": DeepSEACNN}


def encode(sequences: list[str]) -> torch.Tensor:
    """uint8 codes [N, Lmax]: A C G T = 0-3, N = 4, `PAD` past each window's end."""
    length = max(len(s) for s in sequences)
    codes = np.full((len(sequences), length), PAD, dtype=np.uint8)
    for row, sequence in enumerate(sequences):
        codes[row, : len(sequence)] = dna_codes(sequence)
    return torch.from_numpy(codes)


def one_hot(codes: torch.Tensor) -> torch.Tensor:
    return _ONE_HOT.to(codes.device)[codes.long()].transpose(1, 2)  # [B, 4, L]


def reverse_complement_codes(codes: torch.Tensor) -> torch.Tensor:
    """Each row's window reverse-complemented in place, its padding left at the end: the
    codes `encode` gives for the reverse-complemented windows."""
    return reverse_complement_bases(codes, PAD)


@torch.no_grad()
def predict(model: nn.Module, codes: torch.Tensor, rc_average: bool, batch: int = 256):
    """Probabilities [N, F] of windows `codes` (on the CPU), read on the model's device."""
    model.eval()
    device = next(model.parameters()).device
    out = [
        torch.sigmoid(model(codes[i : i + batch].to(device), rc_average)).cpu()
        for i in range(0, len(codes), batch)
    ]
    return torch.cat(out).numpy()


def cnn_baseline(data: BaselineData, spec: CNNSpec | None = None, device="cpu"):
    """(test probabilities, validation probabilities, details, the trained model, on the
    CPU) of the CNN, trained on `device`."""
    spec = spec or CNNSpec()
    model, details = train_cnn(data, spec, device)
    test_codes, valid_codes = (
        encode([central(s, spec.window_bp) for s in split.sequences])
        for split in (data.test, data.valid)
    )
    test = predict(model, test_codes, spec.rc_average)
    return test, predict(model, valid_codes, spec.rc_average), details, model


def train_cnn(data: BaselineData, spec: CNNSpec, device="cpu") -> tuple[nn.Module, dict]:
    """The CNN of `spec` trained on the training split on `device` (the windows stay on
    the CPU, each batch moved), with the weights of its best validation epoch, returned
    on the CPU, and how it was trained (details). Every random draw (weights, order,
    dropout) comes from `spec.seed` and leaves the caller's random streams as they were.
    The device is not part of what the CNN is (`saved.cnn_identity`): on CUDA the same
    settings train the same model up to floating-point order."""
    device = torch.device(device)
    if spec.architecture not in ARCHITECTURES:
        raise ConfigError(
            f"architecture must be one of {list(ARCHITECTURES)}, got {spec.architecture!r}"
        )
    started = time.perf_counter()
    train_codes = encode([central(s, spec.window_bp) for s in data.train.sequences])
    valid_codes = encode([central(s, spec.window_bp) for s in data.valid.sequences])
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(spec.seed)
        model = ARCHITECTURES[spec.architecture](data.num_outputs, spec.channels, spec.dropout)
        with torch.no_grad():  # sizes DeepSEA's fully connected layer (LazyLinear)
            model(train_codes[:1], rc_average=False)
        model.to(device)
        history, stopped_by = _train_epochs(
            model, data, spec, train_codes, valid_codes, device, started
        )
    model.cpu()
    details = {
        "model": spec.architecture,
        **asdict(spec),
        "parameters": sum(p.numel() for p in model.parameters()),
        "epochs": len(history),
        "best_epoch": int(np.argmax(history)) + 1,
        "stopped_by": stopped_by,
        "validation_auroc_by_epoch": history,
        "seconds": round(time.perf_counter() - started, 1),
        "device": str(device),
    }
    return model.eval(), details


def _train_epochs(
    model, data, spec: CNNSpec, train_codes, valid_codes, device, started: float
) -> tuple[list, str]:
    """Whole epochs until `patience` epochs without a better validation AUROC, or
    `max_epochs`, or the user's `max_minutes`; leaves `model` with its best epoch's
    weights. Returns the validation AUROC of each epoch and what stopped training."""
    generator = torch.Generator().manual_seed(spec.seed)
    labels = torch.from_numpy(label_values(data.train.labels))  # NaN where unknown
    pos_weight = torch.tensor(1.0, device=device)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=spec.learning_rate, weight_decay=spec.weight_decay
    )
    best, best_state, history, stale, stopped_by = -np.inf, None, [], 0, "max_epochs"
    for epoch in range(spec.max_epochs):
        model.train()
        order = torch.randperm(len(train_codes), generator=generator)
        for first in range(0, len(order), spec.batch_size):
            rows = order[first : first + spec.batch_size]
            logits = model(train_codes[rows].to(device), spec.rc_average)
            loss = masked_bce(logits, labels[rows].to(device), pos_weight)
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
        if stale >= spec.patience:
            stopped_by = "patience"
            break
        if spec.max_minutes and time.perf_counter() - started > spec.max_minutes * 60:
            stopped_by = "max_minutes"
            log.info("CNN stopped after epoch %d: the %g-minute cap", epoch + 1, spec.max_minutes)
            break
    model.load_state_dict(best_state)
    return history, stopped_by
