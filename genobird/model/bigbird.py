"""The BigBird encoder and its pretraining model, in dependency order: attention, layer,
encoder, the masked-LM head, then the pretraining model (embeddings in model.embeddings,
the sequence classifier in model.classifier).

Shapes: B batch, N tokens, C hidden size, H heads, D head dim, F outputs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from genobird.attention import BlockLayout, attention, bigbird_layout, hf_bigbird_layout
from genobird.attention.layouts import etc_padded_global_count
from genobird.errors import ConfigError
from genobird.model.config import BigBirdConfig
from genobird.model.embeddings import Embeddings


def activation(name: str):
    """The feed-forward activation of a config's `hidden_act`."""
    if name == "gelu_new":  # tanh approximation (HuggingFace's "gelu_new")
        return functools.partial(F.gelu, approximate="tanh")
    return F.gelu


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
                length,
                c.block_size,
                c.num_random_blocks,
                c.num_heads,
                self.layer_index,
                c.max_position,
            ).to(device)
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

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x [B, N, C] -> q, k, v [B, H, N, D] (q and k rotated by position with rotary
        positions): what the attention kernel is handed."""
        batch, length, _ = x.shape
        heads, dim = self.config.num_heads, self.config.head_dim
        # [B, N, 3C] -> 3 x [B, H, N, D]
        q, k, v = self.qkv(x).view(batch, length, 3, heads, dim).permute(2, 0, 3, 1, 4)
        if self.config.position_encoding == "rotary":
            q, k = rotate_by_position(q), rotate_by_position(k)
        return q, k, v

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None) -> torch.Tensor:
        batch, length, hidden = x.shape
        q, k, v = self.project(x)
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
