"""Token embeddings of the BigBird encoder: each piece composed from its bases
(`ComposedTokenEmbedding`), a base convolution that writes the input out base by base
(`BaseConvolution`), positions, and the `Embeddings` layer that sums them.

Shapes: B batch, N tokens, C hidden size.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from genobird.errors import ConfigError
from genobird.model.base_readers import BaseSpeller
from genobird.model.config import BigBirdConfig

# =========================================================================== embeddings
DNA_BASES = "ACGT"


class ComposedTokenEmbedding(nn.Module):
    """Embeddings of DNA pieces composed from their bases, plus a per-piece residual.

    A free table learns each of V pieces only from that piece's own occurrences, so a
    small model on a short budget stays on the unigram plateau (demo: 2.00 bits per bp
    after 150 steps, docs/experiments). Here piece v's vector is

        residual[v] + sum over its first L bases of table[offset from its start, base]
                    + sum over its last L bases of table[offset from its end, base]

    so pieces that share bases share parameters, and the tied MLM decoder scores a
    candidate piece base by base. Non-DNA pieces (special tokens) have no terms: the
    residual alone. The sum is not normalised per piece: with Adam, a multiplier below 1
    on the terms would slow the composition down (measured: 1/sqrt(terms) cost 0.04 bits
    per bp on the demo); instead `set_pieces` scales the freshly drawn table so that a
    piece of average length starts at `std`. The residual starts at zero.

    `weight` is an ordinary [V, C] matrix, so exporting it as a plain embedding table is
    exact. The composition (`piece_terms`) is set from the vocabulary once and saved with
    the weights, so a loaded model needs no tokenizer.
    """

    def __init__(self, vocab_size: int, hidden_size: int, piece_length: int, std: float):
        super().__init__()
        self.piece_length = piece_length
        self.padding_term = 2 * piece_length * len(DNA_BASES)  # the table's zero row
        self.residual = nn.Parameter(torch.zeros(vocab_size, hidden_size))
        self.table = nn.Parameter(torch.randn(self.padding_term + 1, hidden_size) * std)
        with torch.no_grad():
            self.table[self.padding_term].zero_()
        terms = torch.full((vocab_size, 2 * piece_length), self.padding_term, dtype=torch.long)
        self.register_buffer("piece_terms", terms)
        self.has_pieces = False
        self._composed = None  # (the parts' storage and versions, the weight): `weight`

    def set_pieces(self, pieces: list[str]) -> None:
        """Compose each piece from its bases (case-insensitive A/C/G/T; anything else,
        such as [CLS] or a piece holding N, is left to its residual). For a fresh model:
        it also scales the initial table."""
        if self.has_pieces:
            raise ConfigError("the pieces of composed token embeddings are set only once")
        if len(pieces) != len(self.piece_terms):
            raise ConfigError(
                f"the vocabulary has {len(pieces)} pieces, the embedding {len(self.piece_terms)}"
            )
        terms = torch.full_like(self.piece_terms, self.padding_term, device="cpu")
        counts = []
        for index, piece in enumerate(pieces):
            codes = [DNA_BASES.find(base) for base in piece.upper()]
            if not codes or min(codes) < 0:
                continue
            first = codes[: self.piece_length]
            last = codes[::-1][: self.piece_length]
            from_start = [4 * offset + code for offset, code in enumerate(first)]
            from_end = [4 * (self.piece_length + offset) + code for offset, code in enumerate(last)]
            terms[index, : len(first) + len(last)] = torch.tensor(from_start + from_end)
            counts.append(len(first) + len(last))
        self.piece_terms.copy_(terms)
        if counts:
            with torch.no_grad():
                self.table.mul_((sum(counts) / len(counts)) ** -0.5)
        self.has_pieces = True

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        if prefix + "piece_terms" in state_dict:  # (a tied decoder visits under its own name)
            self.has_pieces = True

    @property
    def weight(self) -> torch.Tensor:
        """The [V, C] matrix (the tied MLM decoder reads all of it on every call). In eval
        mode without gradients it is composed once and reused until a tensor it is made
        of changes in place (loaded weights, an edit) or moves, or the module's mode
        changes: scoring reads it for every batch, and composing it was 7% of the demo
        report's time. Training mode never reuses it: a fused optimiser (AdamW's fused
        kernel) updates the parts without bumping their version counters, and a stale
        decoder would score every held-out check after the first."""
        self._require_pieces()
        parts = (self.residual, self.table, self.piece_terms)
        if torch.is_grad_enabled() or self.training:
            return composed_weight(*parts)
        key = tuple((part.data_ptr(), part._version) for part in parts)
        if self._composed is None or self._composed[0] != key:
            self._composed = (key, composed_weight(*parts))
        return self._composed[1]

    def train(self, mode: bool = True):
        self._composed = None  # the mode changes around optimiser steps: compose afresh
        return super().train(mode)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Only the rows of the pieces in the batch are composed: a batch of short
        windows meets a few hundred of the V pieces, and composing all V rows (and their
        gradient) took a third of a fine-tuning step on GUE-sized inputs."""
        self._require_pieces()
        pieces, rows = torch.unique(input_ids, return_inverse=True)
        weight = composed_weight(self.residual[pieces], self.table, self.piece_terms[pieces])
        return F.embedding(rows, weight)

    def _require_pieces(self) -> None:
        if not self.has_pieces:
            raise ConfigError(
                "composed token embeddings need the vocabulary's pieces: build the model "
                "with its tokenizer (set_pieces) or load its saved weights"
            )


def composed_weight(residual, table, piece_terms) -> torch.Tensor:
    """The [V, C] embedding matrix of a ComposedTokenEmbedding's tensors (also used to
    export one as a plain table)."""
    padding = len(table) - 1
    return residual + F.embedding_bag(piece_terms, table, mode="sum", padding_idx=padding)


class BaseConvolution(BaseSpeller):
    """Per-token features from a convolution over the bases that the tokens spell.

    A BPE piece's bases reach the encoder only through its embedding, so a binding motif
    that straddles two pieces, or sits at a different offset inside its piece in every
    sequence, has to be put back together by attention. Here the input is written out
    base by base (A C G T N, and one marker position for each token without bases, such
    as [CLS], [SEP] or [MASK], so a masked piece's bases are never seen), convolved with
    `channels` filters of `width` bases (ReLU), and each token takes the maximum of every
    filter over its own bases: the first layer of a CNN on one-hot DNA, pooled back to
    tokens and added to their embeddings. Padding tokens take no positions, so a real
    token's features never depend on how far its batch was padded. The pieces' bases are
    BaseSpeller's table.
    """

    CHANNELS_IN = 6

    def __init__(
        self, vocab_size: int, hidden_size: int, channels: int, width: int, max_piece_length: int
    ):
        super().__init__(vocab_size, max_piece_length)
        self.conv = nn.Conv1d(self.CHANNELS_IN, channels, width, padding=width // 2)
        self.project = nn.Linear(channels, hidden_size)

    def _convolve(self, base_codes: torch.Tensor) -> torch.Tensor:
        """self.conv over the one-hot bases, computed as one matrix product of each
        position's window [B, L, width x 6] with the filters: the output comes out as
        [B, L, K], the layout the pooling reads (conv1d's [B, K, L] cost a transposing
        copy as long as the convolution itself on CPU)."""
        width = self.conv.kernel_size[0]
        padded = F.pad(base_codes, (width // 2, width // 2), value=self.NOTHING)
        windows = F.one_hot(padded.unfold(1, width, 1), self.CHANNELS_IN + 1)  # [B, L, W, 7]
        windows = windows[..., : self.CHANNELS_IN].flatten(2).to(self.conv.weight.dtype)
        filters = self.conv.weight.permute(2, 1, 0).reshape(-1, self.conv.out_channels)
        return windows @ filters + self.conv.bias

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """input_ids: long [B, N] -> features [B, N, C] (the projection's bias alone for
        padding tokens)."""
        self.check_pieces()
        base_codes, owner = self.spelled_bases(input_ids, attention_mask)
        filters = F.relu(self._convolve(base_codes))  # [B, L, K]
        return self.project(max_per_token(filters, owner, input_ids.shape[1]))


def max_per_token(filters: torch.Tensor, owner: torch.Tensor, tokens: int) -> torch.Tensor:
    """filters [B, L, K], owner [B, L] (the token of each position; `tokens` past the end)
    -> each token's maximum over its own positions [B, N, K] (0 for a token without any).

    Each row's positions belong to tokens 0..N-1 in order, then to N, so the flattened
    rows are B * (N + 1) contiguous segments, some empty. The maximum comes from
    segment_reduce, several times faster than scatter_reduce on CPU; the gradient goes to
    the winning positions, split evenly among ties as torch.amax does (repeats make ties:
    a poly-A piece has many equal windows), through index_add, because segment_reduce's
    own backward does not split ties evenly."""
    batch = filters.shape[0]
    segment = torch.arange(batch, device=owner.device)[:, None] * (tokens + 1) + owner
    segment = segment.reshape(-1)
    flat = filters.reshape(-1, filters.shape[-1])  # [B * L, K]
    with torch.no_grad():
        lengths = torch.bincount(segment, minlength=batch * (tokens + 1))
        best = torch.segment_reduce(flat, "max", lengths=lengths, unsafe=True)
        winners = (flat == best[segment]).to(flat.dtype)
        ties = torch.zeros_like(best).index_add_(0, segment, winners)
        share = winners / ties[segment]
    pooled = torch.zeros_like(best).index_add(0, segment, flat * share)  # [B * (N + 1), K]
    return pooled.view(batch, tokens + 1, -1)[:, :tokens]


def sinusoidal_positions(length: int, hidden_size: int) -> torch.Tensor:
    """The Transformer's sin/cos position code [length, hidden], unit variance per entry.
    Used as the *initial* value of the learned position table: the dot product of two
    positions then depends on their distance alone, so attention to neighbouring tokens
    is learnable from the first step (a random table must discover locality)."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    frequency = torch.exp(torch.arange(0, hidden_size, 2) * (-math.log(10_000.0) / hidden_size))
    code = torch.zeros(length, hidden_size)
    code[:, 0::2] = torch.sin(position * frequency)
    code[:, 1::2] = torch.cos(position * frequency)[:, : hidden_size // 2]
    return code * math.sqrt(2.0)


class Embeddings(nn.Module):
    """Token + learned position + segment embeddings, then LayerNorm and dropout."""

    def __init__(self, config: BigBirdConfig):
        super().__init__()
        if config.composed_token_embeddings:
            self.tokens = ComposedTokenEmbedding(
                config.vocab_size,
                config.hidden_size,
                config.composed_piece_length,
                config.initializer_range,
            )
        else:
            self.tokens = nn.Embedding(config.vocab_size, config.hidden_size, config.pad_token_id)
        self.base_conv = None
        if config.base_conv_channels:
            self.base_conv = BaseConvolution(
                config.vocab_size,
                config.hidden_size,
                config.base_conv_channels,
                config.base_conv_width,
                config.base_conv_max_piece_length,
            )
        self.positions = None  # rotary positions enter in every layer's attention instead
        if config.position_encoding == "absolute":
            self.positions = nn.Embedding(config.max_position, config.hidden_size)
        self.segments = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout)
        self.max_position = config.max_position
        self.position_init = config.position_init
        self.token_scale = config.hidden_size**0.5 if config.rescale_embeddings else 1.0

    def set_vocabulary(self, pieces: list[str]) -> None:
        """Give composed token embeddings and the base convolution their pieces (nothing
        to do for a free table alone)."""
        if isinstance(self.tokens, ComposedTokenEmbedding):
            self.tokens.set_pieces(pieces)
        if self.base_conv is not None:
            self.base_conv.set_pieces(pieces)

    def init_positions(self, std: float) -> None:
        if self.positions is not None and self.position_init == "sinusoidal":
            code = sinusoidal_positions(*self.positions.weight.shape)
            with torch.no_grad():
                self.positions.weight.copy_(code * std)

    def forward(
        self,
        input_ids: torch.Tensor,
        segment_ids: torch.Tensor | None,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        length = input_ids.shape[1]
        if length > self.max_position:
            raise ConfigError(
                f"input of {length} tokens is longer than max_position {self.max_position}"
            )
        x = self.tokens(input_ids) * self.token_scale
        if self.positions is not None:
            x = x + self.positions(torch.arange(length, device=input_ids.device))[None]
        if self.base_conv is not None:
            x = x + self.base_conv(input_ids, attention_mask)
        if segment_ids is not None:
            x = x + self.segments(segment_ids)
        else:
            x = x + self.segments.weight[0]
        return self.dropout(self.norm(x))
