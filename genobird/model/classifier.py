"""BigBird as a sequence classifier: the encoder, a pooled vector (or one per bin),
optional base readers beside it, and a linear head (genobird's fine-tuning), or
HuggingFace BigBird's head for converted and exported classifiers.

Shapes: B batch, N tokens, C hidden size, F outputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from genobird.errors import ConfigError
from genobird.model.base_readers import (
    BASE_CNNS,
    BaseKmers,
    BaseSpeller,
    base_kmer_lengths,
    check_base_reader,
    reverse_complement_bases,
)
from genobird.model.bigbird import BigBirdEncoder, EncoderOutput, activation, init_weights
from genobird.model.config import BigBirdConfig


class ClassificationHead(nn.Module):
    """Dropout and a linear layer on the pooled vector: F logits."""

    def __init__(self, config: BigBirdConfig, num_outputs: int, extra_inputs: int = 0):
        super().__init__()
        self.dropout = nn.Dropout(config.hidden_dropout)
        self.linear = nn.Linear(config.hidden_size + extra_inputs, num_outputs)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.linear(self.dropout(pooled))


class HFClassificationHead(nn.Module):
    """HuggingFace BigBird's classification head, on the [CLS] token's final state (no
    tanh pooler): dropout, dense, the config's activation, dropout, F outputs."""

    def __init__(self, config: BigBirdConfig, num_outputs: int):
        super().__init__()
        self.dropout = nn.Dropout(config.hidden_dropout)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = activation(config.hidden_act)
        self.linear = nn.Linear(config.hidden_size, num_outputs)

    def forward(self, cls_state: torch.Tensor) -> torch.Tensor:
        hidden = self.activation(self.dense(self.dropout(cls_state)))
        return self.linear(self.dropout(hidden))


@dataclass
class ClassificationOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor  # [B, F]


class BigBirdForSequenceClassification(nn.Module):
    """Encoder + a [CLS] head with `num_labels` outputs.

    problem "single_label": softmax cross-entropy over classes (labels long [B]);
    "multi_label": independent sigmoids with BCE (labels float [B, F], NaN where a label
    is unknown: left out of the loss), `pos_weight` up-weighting positives (the paper's
    chromatin head uses 8); "regression": mean squared
    error of the outputs (labels float [B, F]; GLUE's STS-B).

    pooling "cls": the pooler's tanh(dense([CLS])), as BERT and the paper; "mean": the
    mean of the real tokens' final states (no pooler), for short DNA inputs where [CLS]
    has little context to gather (docs/experiments); "hf": HuggingFace BigBird's
    head on the [CLS] state (`HFClassificationHead`), for classifiers converted from or
    exported to transformers; "centre": the mean of the central `centre_fraction` of the
    real tokens' states (a chromatin bin read with its context); "profile": one such
    mean for each of `profile_bins` adjacent bins of `centre_fraction` each, centred, all
    read by the same head (a profile head: labels [B, K, F] train every bin from one
    pass; `logits` are the middle bin's, the window's own, so that evaluation and
    scoring read a profile model as any other).
    """

    task = "classification"
    PROBLEMS = ("single_label", "multi_label", "regression")
    POOLINGS = ("cls", "mean", "hf", "centre", "profile")
    BASE_STRANDS = ("one", "both")

    def __init__(
        self,
        config: BigBirdConfig,
        num_labels: int,
        problem: str = "single_label",
        pos_weight: float = 1.0,
        pooling: str = "cls",
        centre_fraction: float = 1.0,
        base_cnn_channels: int = 0,
        base_cnn_architecture: str = "cnn",
        base_kmers: int = 0,
        base_markers: bool = False,
        profile_bins: int = 0,
        base_strands: str = "one",
    ):
        super().__init__()
        if problem not in self.PROBLEMS:
            raise ConfigError(f"problem must be one of {self.PROBLEMS}, got {problem!r}")
        if pooling not in self.POOLINGS:
            raise ConfigError(f"pooling must be one of {self.POOLINGS}, got {pooling!r}")
        if not 0 < centre_fraction <= 1:
            raise ConfigError(f"centre_fraction must be in (0, 1], got {centre_fraction}")
        if pooling == "profile" and (
            profile_bins < 1 or profile_bins % 2 == 0 or profile_bins * centre_fraction > 1 + 1e-9
        ):
            raise ConfigError(
                f"pooling profile needs an odd number of bins that fit in the "
                f"window, got {profile_bins} of {centre_fraction:g} of "
                "it"
            )
        self.profile_bins = profile_bins if pooling == "profile" else 0
        # "centre": the mean of the central `centre_fraction` of each input's real tokens
        # (a chromatin bin's 200 bp of an 8 kb window: 0.025), whose states attention has
        # filled with the context around them
        self.centre_fraction = centre_fraction
        if num_labels < 1:
            raise ConfigError(f"num_labels must be >= 1, got {num_labels}")
        self.config = config
        self.num_labels, self.problem, self.pos_weight = num_labels, problem, pos_weight
        # on the model's device from the start: a tensor made per step from the float
        # would be a host-to-device copy that waits for the GPU (not saved: the config is)
        self.register_buffer(
            "pos_weight_on_device", torch.tensor(float(pos_weight)), persistent=False
        )
        self.pooling = pooling
        self.encoder = BigBirdEncoder(config)
        # base readers: a CNN and k-mer counts on the bases the tokens spell, read by the
        # head beside the encoder's vector (columns: encoder, base CNN, k-mers)
        self.base_cnn_channels, self.base_kmers = base_cnn_channels, base_kmers
        # the readers read the window's bases alone, as the baselines do (a token without
        # bases takes no position); True: one all-zero position for each ([CLS], [SEP]),
        # as classifiers fine-tuned before the start was made exact were trained to read
        self.base_markers = base_markers
        # "one": each base reader reads the strand of the input it is given (a model that
        # reads both strands averages the two inputs' probabilities, as the encoder's);
        # "both": each reads the input and its reverse complement and averages its
        # features (the CNN's pooled features, the k-mer counts), so that its share of
        # every logit is the same on either strand: a CNN baseline that averages its
        # logits over strands, and a k-mer LR fitted on both strands' counts, exactly
        if base_strands not in self.BASE_STRANDS:
            raise ConfigError(
                f"base_strands must be one of {self.BASE_STRANDS}, got {base_strands!r}"
            )
        self.base_strands = base_strands
        self.base_cnn = self.base_kmer_counts = self.base_speller = None
        self.base_cnn_architecture = base_cnn_architecture
        if base_cnn_architecture not in BASE_CNNS:
            raise ConfigError(
                f"base_cnn_architecture must be one of {list(BASE_CNNS)}, "
                f"got {base_cnn_architecture!r}"
            )
        if base_cnn_channels:
            check_base_reader(pooling, "base_cnn_channels", base_cnn_channels)
            self.base_cnn = BASE_CNNS[base_cnn_architecture](
                base_cnn_channels, config.hidden_dropout
            )
        if base_kmers:
            check_base_reader(pooling, "base_kmers", base_kmers)
            self.base_kmer_counts = BaseKmers(base_kmer_lengths(base_kmers))
        if (base_cnn_channels or base_kmers) and not config.base_conv_channels:
            # the encoder spells no bases (a converted checkpoint): a table of its own
            self.base_speller = BaseSpeller(config.vocab_size, config.base_conv_max_piece_length)
        if pooling == "hf":
            self.head = HFClassificationHead(config, num_labels)
        else:
            extra = sum(reader.output_size for reader in self.base_readers())
            self.head = ClassificationHead(config, num_labels, extra)
        init_weights(self, config.initializer_range)

    def head_config(self) -> dict:
        head = {
            "num_labels": self.num_labels,
            "problem": self.problem,
            "pos_weight": self.pos_weight,
            "pooling": self.pooling,
        }
        if self.pooling in ("centre", "profile"):
            head["centre_fraction"] = self.centre_fraction
        if self.profile_bins:
            head["profile_bins"] = self.profile_bins
        if self.base_cnn_channels:
            head["base_cnn_channels"] = self.base_cnn_channels
        if self.base_cnn_channels and self.base_cnn_architecture != "cnn":
            head["base_cnn_architecture"] = self.base_cnn_architecture
        if self.base_kmers:
            head["base_kmers"] = self.base_kmers
        if self.base_readers():
            head["base_markers"] = self.base_markers
        if self.base_readers() and self.base_strands != "one":
            head["base_strands"] = self.base_strands
        return head

    @staticmethod
    def saved_head(head: dict) -> dict:
        """The head settings of a saved config.json: one with base readers saved without
        `base_markers` was trained to read a marker position for [CLS] and [SEP], and
        keeps doing so (its start was not its baselines' logits: refit to get that)."""
        if (head.get("base_cnn_channels") or head.get("base_kmers")) and "base_markers" not in head:
            return {**head, "base_markers": True}
        return head

    def speller(self) -> BaseSpeller:
        """What writes the input out base by base for the base readers: the encoder's base
        convolution, or the classifier's own table where the encoder has none."""
        speller = self.base_speller or self.encoder.embeddings.base_conv
        speller.check_pieces()
        return speller

    def base_readers(self) -> list[nn.Module]:
        """The base CNN and the k-mer counts, those the model has, in the head's order."""
        return [r for r in (self.base_cnn, self.base_kmer_counts) if r is not None]

    def base_reader_columns(self) -> dict:
        """{base reader: (first, last)}: the head's input columns that read each base
        reader's features (the encoder's vector comes first)."""
        columns, first = {}, self.config.hidden_size
        for reader in self.base_readers():
            columns[reader] = (first, first + reader.output_size)
            first += reader.output_size
        return columns

    def set_output_bias(self, bias) -> None:
        """Start each output at a given logit (e.g. its training base rate's log-odds)."""
        with torch.no_grad():
            self.head.linear.bias.copy_(torch.as_tensor(bias, dtype=torch.float32))

    def start_from_baselines(
        self, cnn: nn.Module | None = None, kmer_lr=None, cnn_weight=1.0
    ) -> None:
        """Start from trained baselines: a one-hot CNN (baselines.cnn.SmallCNN of the base
        CNN's width), whose tower becomes the base CNN, and/or a k-mer LR (`kmer_lr`: its
        weights [F, K] on the scaled counts, biases [F] and the scale [K], as
        baselines.kmer.KmerLR.linear gives them). The head's weights on the encoder's
        vector are zero; with both, output f is w_f x the CNN's logit + (1 - w_f) x the
        k-mer LR's (`cnn_weight`: one w for every output, or one per output). The
        classifier then gives the baselines' logits (up to dropout) plus
        `start_logit_shift`, and fine-tuning adds what the encoder sees to what they know."""
        for name, given, reader in (
            ("a CNN", cnn, self.base_cnn),
            ("a k-mer LR", kmer_lr, self.base_kmer_counts),
        ):
            if given is not None and reader is None:
                raise ConfigError(f"this classifier has no base reader to start from {name}")
        if cnn is None and kmer_lr is None:
            raise ConfigError("start_from_baselines needs a CNN, a k-mer LR or both")
        weight = torch.as_tensor(cnn_weight, dtype=torch.float32)
        if weight.dim() > 1 or (weight.dim() == 1 and len(weight) != self.num_labels):
            raise ConfigError(
                f"cnn_weight must be one number or one per output "
                f"({self.num_labels}), got shape {tuple(weight.shape)}"
            )
        if not ((weight >= 0) & (weight <= 1)).all():
            raise ConfigError(f"cnn_weight must be in [0, 1], got {cnn_weight}")
        # each baseline's share of each output's start (a column): the blend's when both
        weight = weight.expand(self.num_labels)
        cnn_share = weight if kmer_lr is not None else torch.ones_like(weight)
        kmer_share = 1.0 - weight if cnn is not None else torch.ones_like(weight)
        if cnn is not None and cnn.out.weight.shape != (self.num_labels, self.base_cnn.output_size):
            raise ConfigError(
                f"a CNN of {cnn.out.weight.shape[1] // 2} filters and "
                f"{cnn.out.weight.shape[0]} outputs cannot start a base CNN of "
                f"{self.base_cnn_channels} filters and {self.num_labels} outputs"
            )
        if kmer_lr is not None:
            coefficients, intercepts, scale = (
                torch.as_tensor(part, dtype=torch.float32) for part in kmer_lr
            )
            if coefficients.shape != (self.num_labels, self.base_kmer_counts.output_size):
                raise ConfigError(
                    f"a k-mer LR of {coefficients.shape[1]} features and {coefficients.shape[0]} "
                    f"outputs cannot start base k-mers of {self.base_kmer_counts.output_size} "
                    f"features and {self.num_labels} outputs"
                )
        linear = self.head.linear
        reader_columns = self.base_reader_columns()
        with torch.no_grad():
            linear.weight.zero_()
            linear.bias.zero_()
            if cnn is not None:
                self.base_cnn.start_from(cnn)
                first, last = reader_columns[self.base_cnn]
                linear.weight[:, first:last].copy_(cnn_share[:, None] * cnn.out.weight)
                linear.bias.add_(cnn_share * cnn.out.bias)
            if kmer_lr is not None:
                self.base_kmer_counts.set_scale(scale)
                first, last = reader_columns[self.base_kmer_counts]
                linear.weight[:, first:last].copy_(kmer_share[:, None] * coefficients)
                linear.bias.add_(kmer_share * intercepts)
            linear.bias.add_(self.start_logit_shift())

    def start_logit_shift(self) -> float:
        """What a start from baselines adds to their logits: log(pos_weight) with BCE. The
        baselines are fitted without weights; with positives weighted w, the loss's
        optimum for a window of probability p is the logit log(w p / (1 - p)), theirs +
        log w, so the start sits at fine-tuning's optimum for the baselines' own
        probabilities instead of where every step first raises all logits. The shift is
        the same for every window: the start ranks windows as the baselines do."""
        return math.log(self.pos_weight) if self.problem == "multi_label" else 0.0

    def pool(self, encoded: EncoderOutput, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """One [B, C] vector per input (with pooling "profile", [B, K, C]: one per bin),
        read by the head."""
        if self.pooling == "cls":
            return encoded.pooled
        if self.pooling == "hf":
            return encoded.sequence[:, 0]
        states = encoded.sequence  # "mean": the average of the real tokens' states
        real = (
            attention_mask
            if attention_mask is not None
            else torch.ones(states.shape[:2], dtype=torch.bool, device=states.device)
        )
        if self.pooling == "profile":
            weights = profile_tokens(real, self.centre_fraction, self.profile_bins).to(states.dtype)
            return torch.einsum("bnk,bnc->bkc", weights, states) / weights.sum(1)[..., None].clamp(
                min=1
            )
        if self.pooling == "centre":
            real = central_tokens(real, self.centre_fraction)
        weights = real.to(states.dtype)[..., None]
        return (states * weights).sum(1) / weights.sum(1).clamp(min=1)

    def forward(
        self,
        input_ids: torch.Tensor,
        segment_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> ClassificationOutput:
        encoded = self.encoder(input_ids, segment_ids, attention_mask)
        pooled = self.pool(encoded, attention_mask)
        if readers := self.base_readers():
            spelled, _ = self.speller().spelled_bases(
                input_ids, attention_mask, markers=self.base_markers
            )
            features = [reader(spelled) for reader in readers]
            if self.base_strands == "both":
                other = reverse_complement_bases(spelled, BaseSpeller.NOTHING)
                features = [
                    (f + reader(other)) / 2 for f, reader in zip(features, readers, strict=True)
                ]
            features = [f.to(pooled.dtype) for f in features]
            if self.profile_bins:  # the window's base features, beside each bin's vector
                features = [f[:, None].expand(-1, self.profile_bins, -1) for f in features]
            pooled = torch.cat([pooled, *features], dim=-1)
        logits = self.head(pooled)
        profile = None
        if self.profile_bins:
            profile, logits = logits, logits[:, self.profile_bins // 2]
        loss = None
        if labels is not None:
            if self.problem == "single_label":
                loss = F.cross_entropy(logits.float(), labels)
            elif self.problem == "regression":
                loss = F.mse_loss(logits.float(), labels.float().view_as(logits))
            else:  # a profile's labels [B, K, F] train every bin; [B, F] the middle one
                scored = profile if profile is not None and labels.dim() == 3 else logits
                loss = masked_bce(scored.float(), labels.float(), self.pos_weight_on_device)
        return ClassificationOutput(loss, logits)


def central_tokens(real: torch.Tensor, fraction: float) -> torch.Tensor:
    """bool [B, N]: the central `fraction` of each row's real tokens (at least one), for
    inputs whose real tokens come first ([CLS] ... [SEP], then padding). Computed on the
    device from the mask alone, without reading lengths back to the host."""
    length = real.sum(1, keepdim=True).to(torch.float32)  # [B, 1]
    position = torch.arange(real.shape[1], device=real.device, dtype=torch.float32)[None]
    centre = (length - 1) / 2
    half = torch.clamp(length * fraction, min=1.0) / 2
    return real & ((position - centre).abs() < half)


def profile_tokens(real: torch.Tensor, fraction: float, bins: int) -> torch.Tensor:
    """bool [B, N, K]: for each of `bins` adjacent bins of `fraction` of the real tokens
    each, centred on the window's middle (as `central_tokens` centres one), the tokens
    that fall in it; inputs' real tokens come first. Computed on the device from the mask
    alone."""
    length = real.sum(1, keepdim=True).to(torch.float32)  # [B, 1]
    position = torch.arange(real.shape[1], device=real.device, dtype=torch.float32)[None]
    width = torch.clamp(length * fraction, min=1.0)
    # offset from the middle in bins, shifted so that bin 0 is the leftmost
    slot = torch.floor((position - (length - 1) / 2) / width + 0.5 + bins // 2)
    index = torch.arange(bins, device=real.device, dtype=torch.float32)
    return real[..., None] & (slot[..., None] == index)


def masked_bce(logits: torch.Tensor, labels: torch.Tensor, pos_weight: torch.Tensor):
    """BCE with logits averaged over the known labels only: a NaN label (a feature not
    assayed there) adds nothing to the loss or its gradient. Computed without reading a
    count back to the host, so a CUDA step stays free of synchronisation."""
    known = ~torch.isnan(labels)
    losses = F.binary_cross_entropy_with_logits(
        logits, torch.where(known, labels, 0.0), pos_weight=pos_weight, reduction="none"
    )
    return (losses * known).sum() / known.sum().clamp(min=1)
