"""The BigBird encoder and its heads, in dependency order: embeddings, attention, layer,
encoder, pooler, heads, then the task models that combine them.

Shapes: B batch, N tokens, C hidden size, H heads, D head dim, F outputs.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from genobird.attention import BlockLayout, attention, bigbird_layout, hf_bigbird_layout
from genobird.attention.layouts import etc_padded_global_count
from genobird.errors import ConfigError
from genobird.model.base_readers import (
    BaseCNN,
    BaseKmers,
    BaseSpeller,
    base_kmer_lengths,
    check_base_reader,
)
from genobird.model.config import BigBirdConfig


def activation(name: str):
    """The feed-forward activation of a config's `hidden_act`."""
    if name == "gelu_new":  # tanh approximation (HuggingFace's "gelu_new")
        return functools.partial(F.gelu, approximate="tanh")
    return F.gelu


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

    def __init__(self, vocab_size: int, hidden_size: int, channels: int, width: int,
                 max_piece_length: int):  # fmt: skip
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
                config.vocab_size, config.hidden_size, config.composed_piece_length,
                config.initializer_range,
            )  # fmt: skip
        else:
            self.tokens = nn.Embedding(config.vocab_size, config.hidden_size, config.pad_token_id)
        self.base_conv = None
        if config.base_conv_channels:
            self.base_conv = BaseConvolution(
                config.vocab_size, config.hidden_size, config.base_conv_channels,
                config.base_conv_width, config.base_conv_max_piece_length,
            )  # fmt: skip
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

    def forward(self, input_ids: torch.Tensor, segment_ids: torch.Tensor | None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
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


# =========================================================================== attention
@functools.lru_cache(maxsize=16)
def rotary_angles(length: int, head_dim: int, device: torch.device, dtype: torch.dtype):
    """cos and sin [N, D] of RoFormer's rotation: dimension pair (i, i + D/2) of the token
    at position p is turned by p * 10000^(-2i/D) (GPT-NeoX's half-split pairing). The
    angles are computed in fp64: in fp32, p * frequency at p = 4,000 is off by 2e-4 rad."""
    frequency = 10_000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angle = torch.arange(length, dtype=torch.float64)[:, None] * frequency  # [N, D/2]
    angle = torch.cat([angle, angle], dim=-1)
    return angle.cos().to(device, dtype), angle.sin().to(device, dtype)


def rotate_by_position(x: torch.Tensor) -> torch.Tensor:
    """Queries or keys [B, H, N, D] rotated by their position (in fp32 at least, as
    softmax statistics): the dot product of a rotated query and key depends on their
    positions only through their distance."""
    dtype = torch.promote_types(x.dtype, torch.float32)
    cos, sin = rotary_angles(x.shape[2], x.shape[3], x.device, dtype)
    first, second = x.to(dtype).chunk(2, dim=-1)
    turned = torch.cat([-second, first], dim=-1)
    return (x.to(dtype) * cos + turned * sin).to(x.dtype)


class SelfAttention(nn.Module):
    """Multi-head self-attention over the layer's BigBird layout.

    The layout depends only on (sequence length, config, layer index), so it is built on
    first use for each length and cached: the same plan in train and eval, on recompute
    and on every data-parallel rank. A sequence too short for the pattern gets a layout
    that covers every block, which `attention` computes as full attention for that call.
    """

    def __init__(self, config: BigBirdConfig, layer_index: int):
        super().__init__()
        self.config = config
        self.layer_index = layer_index
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)
        self._layouts: dict[tuple[int, str], BlockLayout | None] = {}

    def layout_for(self, length: int, device: torch.device) -> BlockLayout | None:
        key = (length, str(device))
        if key not in self._layouts:
            self._layouts[key] = self._build_layout(length, device)
        return self._layouts[key]

    def _build_layout(self, length: int, device: torch.device) -> BlockLayout | None:
        c = self.config
        if c.attention_type == "dense":
            return None
        if c.attention_type == "hf":
            return hf_bigbird_layout(
                length, c.block_size, c.num_random_blocks, c.num_heads, self.layer_index,
                c.max_position,
            ).to(device)  # fmt: skip
        global_blocks = None
        if c.attention_type == "etc":  # the prepended global segment fills whole blocks
            global_blocks = list(
                range(etc_padded_global_count(c.num_global_tokens, c.block_size) // c.block_size)
            )
        layout = bigbird_layout(
            length,
            block_size=c.block_size,
            num_global_blocks=c.num_global_blocks,
            num_window_blocks=c.num_window_blocks,
            num_random_blocks=c.num_random_blocks,
            num_heads=c.num_heads,
            seed=c.seed,
            layer=self.layer_index,
            global_blocks=global_blocks,
        )
        return layout.to(device)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None) -> torch.Tensor:
        batch, length, hidden = x.shape
        heads, dim = self.config.num_heads, self.config.head_dim
        # [B, N, 3C] -> 3 x [B, H, N, D]
        q, k, v = self.qkv(x).view(batch, length, 3, heads, dim).permute(2, 0, 3, 1, 4)
        if self.config.position_encoding == "rotary":
            q, k = rotate_by_position(q), rotate_by_position(k)
        out = attention(
            q,
            k,
            v,
            self.layout_for(length, x.device),
            key_padding_mask,
            impl=self.config.attention_impl,
            dropout_p=self.config.attention_dropout if self.training else 0.0,
        )
        return self.out(out.transpose(1, 2).reshape(batch, length, hidden))  # [B, N, C]


# =========================================================================== layer
class FeedForward(nn.Module):
    def __init__(self, config: BigBirdConfig):
        super().__init__()
        self.up = nn.Linear(config.hidden_size, config.intermediate_size)
        self.down = nn.Linear(config.intermediate_size, config.hidden_size)
        self.activation = activation(config.hidden_act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(self.activation(self.up(x)))


class EncoderLayer(nn.Module):
    """BERT's post-LayerNorm block, as BigBird's released models use, or (layer_norm
    "pre") each sublayer reading a LayerNorm-ed copy of the residual stream."""

    def __init__(self, config: BigBirdConfig, layer_index: int):
        super().__init__()
        self.attention = SelfAttention(config, layer_index)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.feed_forward = FeedForward(config)
        self.output_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout)
        self.pre_norm = config.layer_norm == "pre"

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None) -> torch.Tensor:
        if self.pre_norm:
            x = x + self.dropout(self.attention(self.attention_norm(x), key_padding_mask))
            return x + self.dropout(self.feed_forward(self.output_norm(x)))
        x = self.attention_norm(x + self.dropout(self.attention(x, key_padding_mask)))
        return self.output_norm(x + self.dropout(self.feed_forward(x)))


# =========================================================================== encoder
@dataclass
class EncoderOutput:
    sequence: torch.Tensor  # [B, N, C], one vector per input token
    pooled: torch.Tensor  # [B, C], tanh(dense([CLS]))
    global_states: torch.Tensor | None = None  # [B, G, C], ETC global tokens
    # with `all_layers`: the states entering the first layer and leaving each layer (the
    # last after `final_norm`, equal to `sequence`), num_layers + 1 of [B, N, C]
    layers: list[torch.Tensor] | None = None


class BigBirdEncoder(nn.Module):
    """Embeddings, `num_layers` encoder layers and the [CLS] pooler."""

    def __init__(self, config: BigBirdConfig):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(EncoderLayer(config, i) for i in range(config.num_layers))
        # pre-LayerNorm layers leave the residual stream unnormalised: one LayerNorm at the top
        self.final_norm = None
        if config.layer_norm == "pre":
            self.final_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size)
        if config.attention_type == "etc":
            self.global_tokens = nn.Embedding(config.num_global_tokens, config.hidden_size)

    def dense_input_length(self) -> int:
        """The longest input, in whole blocks, that every layer attends as full attention
        (its layout covers every block): a batch that short needs no padding to whole
        blocks. With 2 global, 3 window and 3 random blocks of 64 that is 448 tokens.
        ETC inputs are lengthened by their global segment, so only one block counts."""
        c = self.config
        length = c.block_size
        if c.attention_type == "etc":
            return length
        while length + c.block_size <= c.max_position and self._attends_densely(
            length + c.block_size
        ):
            length += c.block_size
        return length

    def _attends_densely(self, length: int) -> bool:
        cpu = torch.device("cpu")  # the layouts' pattern, wherever the model runs
        for layer in self.layers:
            layout = layer.attention.layout_for(length, cpu)
            if layout is not None and not layout.is_dense:
                return False
        return True

    def forward(
        self,
        input_ids: torch.Tensor,
        segment_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        global_embeddings: torch.Tensor | None = None,
        global_mask: torch.Tensor | None = None,
        all_layers: bool = False,
    ) -> EncoderOutput:
        """input_ids, segment_ids: long [B, N]; attention_mask: bool [B, N], True for real
        tokens (None: all real). ETC only: `global_embeddings` [B, G, C] (G at most
        num_global_tokens) and `global_mask` bool [B, G] replace the learned global
        tokens with input-dependent ones (one per question token, paragraph, candidate...)."""
        mask = attention_mask.bool() if attention_mask is not None else None
        x = self.embeddings(input_ids, segment_ids, mask)
        slots = 0
        if self.config.attention_type == "etc":
            x, mask, slots = self._prepend_global_tokens(x, mask, global_embeddings, global_mask)
        elif global_embeddings is not None:
            raise ConfigError("global_embeddings need attention_type 'etc'")
        layers = [x[:, slots:]] if all_layers else None
        for layer in self.layers:
            if self.config.gradient_checkpointing and self.training:
                x = checkpoint(layer, x, mask, use_reentrant=False)
            else:
                x = layer(x, mask)
            if all_layers:
                layers.append(x[:, slots:])
        if self.final_norm is not None:
            x = self.final_norm(x)
            if all_layers:
                layers[-1] = x[:, slots:]
        sequence = x[:, slots:]
        pooled = torch.tanh(self.pooler(sequence[:, 0]))
        global_states = x[:, : self.config.num_global_tokens] if slots else None  # [B, G, C]
        return EncoderOutput(sequence, pooled, global_states, layers)

    def _prepend_global_tokens(self, x, mask, global_embeddings=None, global_mask=None):
        """ETC: global tokens in front (learned, or the given ones), padded to whole
        blocks; padding slots are masked."""
        batch = x.shape[0]
        count = self.config.num_global_tokens
        slots = etc_padded_global_count(count, self.config.block_size)
        if global_embeddings is None:
            globals_ = self.global_tokens.weight[None].expand(batch, -1, -1)
            given = torch.ones(batch, count, dtype=torch.bool, device=x.device)
        else:
            if global_embeddings.shape[1] > count:
                raise ConfigError(
                    f"{global_embeddings.shape[1]} global tokens but num_global_tokens is {count}"
                )
            globals_ = global_embeddings.to(x.dtype)
            given = (
                global_mask.bool()
                if global_mask is not None
                else torch.ones(globals_.shape[:2], dtype=torch.bool, device=x.device)
            )
        filler = x.new_zeros(batch, slots - globals_.shape[1], x.shape[2])
        x = torch.cat([globals_, filler, x], dim=1)
        real = torch.zeros(batch, slots, dtype=torch.bool, device=x.device)
        real[:, : given.shape[1]] = given
        tokens = (
            mask
            if mask is not None
            else torch.ones(batch, x.shape[1] - slots, dtype=torch.bool, device=x.device)
        )
        return x, torch.cat([real, tokens], dim=1), slots


# =========================================================================== heads
class MaskedLMHead(nn.Module):
    """dense -> GELU -> LayerNorm -> vocabulary logits, decoder tied to the token embedding."""

    def __init__(self, config: BigBirdConfig, token_embedding: nn.Module):
        super().__init__()
        self.transform = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.token_embedding = token_embedding  # tied: the same Parameter, not a copy
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.activation = activation(config.hidden_act)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        hidden = self.norm(self.activation(self.transform(hidden)))
        return hidden @ self.token_embedding.weight.T + self.bias


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


# =========================================================================== task models
def init_weights(module: nn.Module, std: float) -> None:
    """BERT's initialisation: N(0, std) weights, zero biases, unit LayerNorm."""
    for sub in module.modules():
        if isinstance(sub, (nn.Linear, nn.Embedding)):
            nn.init.normal_(sub.weight, mean=0.0, std=std)
            if isinstance(sub, nn.Linear) and sub.bias is not None:
                nn.init.zeros_(sub.bias)
            if isinstance(sub, nn.Embedding) and sub.padding_idx is not None:
                with torch.no_grad():
                    sub.weight[sub.padding_idx].zero_()
        elif isinstance(sub, nn.LayerNorm):
            nn.init.ones_(sub.weight)
            nn.init.zeros_(sub.bias)
    for sub in module.modules():  # after the loop above has drawn the position tables
        if isinstance(sub, Embeddings):
            sub.init_positions(std)


@dataclass
class PretrainingOutput:
    loss: torch.Tensor | None
    mlm_loss: torch.Tensor | None
    nsp_loss: torch.Tensor | None
    slot_logits: torch.Tensor  # [B*P, V] at every prediction slot, unused ones included
    slot_used: torch.Tensor | None  # bool [B*P], False on unused slots; None: all used
    nsp_logits: torch.Tensor  # [B, 2]

    @property
    def mlm_logits(self) -> torch.Tensor:
        """[M, V] at the masked positions only (M = predictions in the batch), in slot
        order. Selecting them reads M back from the device, which a training step never
        needs: its loss is computed over the slots."""
        return self.slot_logits if self.slot_used is None else self.slot_logits[self.slot_used]


class BigBirdForPretraining(nn.Module):
    """Encoder + MLM + NSP (paper appendix F.1)."""

    task = "pretraining"

    def __init__(self, config: BigBirdConfig):
        super().__init__()
        self.config = config
        self.encoder = BigBirdEncoder(config)
        self.mlm = MaskedLMHead(config, self.encoder.embeddings.tokens)
        self.nsp = nn.Linear(config.hidden_size, 2)
        init_weights(self, config.initializer_range)

    def head_config(self) -> dict:
        return {}

    def forward(
        self,
        input_ids: torch.Tensor,
        segment_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        masked_positions: torch.Tensor | None = None,
        masked_labels: torch.Tensor | None = None,
        nsp_labels: torch.Tensor | None = None,
    ) -> PretrainingOutput:
        """masked_positions, masked_labels: long [B, P], label -100 on unused slots
        (padding of the per-sequence prediction list); nsp_labels: long [B], 1 = B is
        the true next segment. MLM logits are computed only where predictions are made."""
        encoded = self.encoder(input_ids, segment_ids, attention_mask)
        if masked_positions is None:
            masked_positions = torch.zeros(
                input_ids.shape[0], 0, dtype=torch.long, device=input_ids.device
            )
        picked = torch.gather(
            encoded.sequence,
            1,
            masked_positions[..., None].expand(-1, -1, encoded.sequence.shape[-1]),
        )  # [B, P, C]
        # Every slot goes through the head, unused ones too: picking the used rows first
        # would make a CUDA step wait to learn how many there are. The slots are ~15% of
        # the tokens and mostly used, so the extra rows cost little.
        slot_logits = self.mlm(picked.reshape(-1, picked.shape[-1]))  # [B*P, V]
        nsp_logits = self.nsp(encoded.pooled)
        slot_used = mlm_loss = nsp_loss = None
        if masked_labels is not None:
            slot_used = masked_labels.reshape(-1) != -100
            mlm_loss = _mean_over_labelled(slot_logits, masked_labels.reshape(-1))
        if nsp_labels is not None:
            # -100 leaves a sequence out of NSP (the context ablation truncates B away)
            nsp_loss = _mean_over_labelled(nsp_logits, nsp_labels)
        parts = [part for part in (mlm_loss, nsp_loss) if part is not None]
        loss = sum(parts) if parts else None
        return PretrainingOutput(loss, mlm_loss, nsp_loss, slot_logits, slot_used, nsp_logits)


def _mean_over_labelled(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy averaged over the labels that are not -100, without reading their
    count back from the device; 0 (not NaN) when there are none, still on the graph."""
    total = F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="sum")
    return total / (labels != -100).sum().clamp(min=1)


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
    exported to transformers.
    """

    task = "classification"
    PROBLEMS = ("single_label", "multi_label", "regression")
    POOLINGS = ("cls", "mean", "hf", "centre")

    def __init__(
        self,
        config: BigBirdConfig,
        num_labels: int,
        problem: str = "single_label",
        pos_weight: float = 1.0,
        pooling: str = "cls",
        centre_fraction: float = 1.0,
        base_cnn_channels: int = 0,
        base_kmers: int = 0,
        base_markers: bool = False,
    ):
        super().__init__()
        if problem not in self.PROBLEMS:
            raise ConfigError(f"problem must be one of {self.PROBLEMS}, got {problem!r}")
        if pooling not in self.POOLINGS:
            raise ConfigError(f"pooling must be one of {self.POOLINGS}, got {pooling!r}")
        if not 0 < centre_fraction <= 1:
            raise ConfigError(f"centre_fraction must be in (0, 1], got {centre_fraction}")
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
        self.register_buffer("pos_weight_on_device", torch.tensor(float(pos_weight)),
                             persistent=False)  # fmt: skip
        self.pooling = pooling
        self.encoder = BigBirdEncoder(config)
        # base readers: a CNN and k-mer counts on the bases the tokens spell, read by the
        # head beside the encoder's vector (columns: encoder, base CNN, k-mers)
        self.base_cnn_channels, self.base_kmers = base_cnn_channels, base_kmers
        # the readers read the window's bases alone, as the baselines do (a token without
        # bases takes no position); True: one all-zero position for each ([CLS], [SEP]),
        # as classifiers fine-tuned before the start was made exact were trained to read
        self.base_markers = base_markers
        self.base_cnn = self.base_kmer_counts = self.base_speller = None
        if base_cnn_channels:
            check_base_reader(pooling, "base_cnn_channels", base_cnn_channels)
            self.base_cnn = BaseCNN(base_cnn_channels, config.hidden_dropout)
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
        if self.pooling == "centre":
            head["centre_fraction"] = self.centre_fraction
        if self.base_cnn_channels:
            head["base_cnn_channels"] = self.base_cnn_channels
        if self.base_kmers:
            head["base_kmers"] = self.base_kmers
        if self.base_readers():
            head["base_markers"] = self.base_markers
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

    def set_output_bias(self, bias) -> None:
        """Start each output at a given logit (e.g. its training base rate's log-odds)."""
        with torch.no_grad():
            self.head.linear.bias.copy_(torch.as_tensor(bias, dtype=torch.float32))

    def start_from_baselines(self, cnn: nn.Module | None = None, kmer_lr=None,
                             cnn_weight: float = 1.0) -> None:  # fmt: skip
        """Start from trained baselines: a one-hot CNN (baselines.cnn.SmallCNN of the base
        CNN's width), whose tower becomes the base CNN, and/or a k-mer LR (`kmer_lr`: its
        weights [F, K] on the scaled counts, biases [F] and the scale [K], as
        baselines.kmer.KmerLR.linear gives them). The head's weights on the encoder's
        vector are zero; with both, the output is cnn_weight x the CNN's logit + (1 -
        cnn_weight) x the k-mer LR's. The classifier then gives the baselines' logits (up
        to dropout), and fine-tuning adds what the encoder sees to what they know."""
        for name, given, reader in (("a CNN", cnn, self.base_cnn),
                                    ("a k-mer LR", kmer_lr, self.base_kmer_counts)):  # fmt: skip
            if given is not None and reader is None:
                raise ConfigError(f"this classifier has no base reader to start from {name}")
        if cnn is None and kmer_lr is None:
            raise ConfigError("start_from_baselines needs a CNN, a k-mer LR or both")
        if not 0 <= cnn_weight <= 1:
            raise ConfigError(f"cnn_weight must be in [0, 1], got {cnn_weight}")
        # each baseline's share of the start: the blend's when both are given
        cnn_share = cnn_weight if kmer_lr is not None else 1.0
        kmer_share = 1.0 - cnn_weight if cnn is not None else 1.0
        if cnn is not None and cnn.out.weight.shape != (self.num_labels, self.base_cnn.output_size):
            raise ConfigError(
                f"a CNN of {cnn.out.weight.shape[1] // 2} filters and "
                f"{cnn.out.weight.shape[0]} outputs cannot start a base CNN of "
                f"{self.base_cnn_channels} filters and {self.num_labels} outputs"
            )
        if kmer_lr is not None:
            coefficients, intercepts, scale = (torch.as_tensor(part, dtype=torch.float32)
                                               for part in kmer_lr)  # fmt: skip
            if coefficients.shape != (self.num_labels, self.base_kmer_counts.output_size):
                raise ConfigError(
                    f"a k-mer LR of {coefficients.shape[1]} features and {coefficients.shape[0]} "
                    f"outputs cannot start base k-mers of {self.base_kmer_counts.output_size} "
                    f"features and {self.num_labels} outputs"
                )
        linear = self.head.linear
        reader_columns, first = {}, self.config.hidden_size  # the encoder's come first
        for reader in self.base_readers():
            reader_columns[reader] = (first, first + reader.output_size)
            first += reader.output_size
        with torch.no_grad():
            linear.weight.zero_()
            linear.bias.zero_()
            if cnn is not None:
                self.base_cnn.blocks.load_state_dict(cnn.blocks.state_dict())
                first, last = reader_columns[self.base_cnn]
                linear.weight[:, first:last].copy_(cnn_share * cnn.out.weight)
                linear.bias.add_(cnn_share * cnn.out.bias)
            if kmer_lr is not None:
                self.base_kmer_counts.set_scale(scale)
                first, last = reader_columns[self.base_kmer_counts]
                linear.weight[:, first:last].copy_(kmer_share * coefficients)
                linear.bias.add_(kmer_share * intercepts)

    def pool(self, encoded: EncoderOutput, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """One [B, C] vector per input, read by the head."""
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
            spelled, _ = self.speller().spelled_bases(input_ids, attention_mask,
                                                      markers=self.base_markers)  # fmt: skip
            features = [reader(spelled).to(pooled.dtype) for reader in readers]
            pooled = torch.cat([pooled, *features], dim=1)
        logits = self.head(pooled)
        loss = None
        if labels is not None:
            if self.problem == "single_label":
                loss = F.cross_entropy(logits.float(), labels)
            elif self.problem == "regression":
                loss = F.mse_loss(logits.float(), labels.float().view_as(logits))
            else:
                loss = masked_bce(logits.float(), labels.float(), self.pos_weight_on_device)
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


def masked_bce(logits: torch.Tensor, labels: torch.Tensor, pos_weight: torch.Tensor):
    """BCE with logits averaged over the known labels only: a NaN label (a feature not
    assayed there) adds nothing to the loss or its gradient. Computed without reading a
    count back to the host, so a CUDA step stays free of synchronisation."""
    known = ~torch.isnan(labels)
    losses = F.binary_cross_entropy_with_logits(
        logits, torch.where(known, labels, 0.0), pos_weight=pos_weight, reduction="none"
    )
    return (losses * known).sum() / known.sum().clamp(min=1)


def count_parameters(model: nn.Module) -> int:
    """Parameters counted once even when tied."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def model_flops_per_token(config: BigBirdConfig, seq_len: int) -> float:
    """Forward FLOPs per token of the encoder (matmuls only), for utilisation figures:
    2 * (4 C^2 + 2 C I) per layer for projections and feed-forward, plus attention's
    4 * C * (attended keys per query). Training costs about 3x this."""
    c = config
    dense_part = 2 * (4 * c.hidden_size**2 + 2 * c.hidden_size * c.intermediate_size)
    if c.attention_type == "dense":
        attended = seq_len
    else:
        blocks = c.num_global_blocks + c.num_window_blocks + c.num_random_blocks
        attended = min(seq_len, blocks * c.block_size)
    return c.num_layers * (dense_part + 4 * c.hidden_size * attended)
