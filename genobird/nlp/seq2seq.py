"""Encoder-decoder summarisation (paper section 4.1): the block-sparse BigBird encoder
reads the long document; a decoder with full causal self-attention and cross-attention
writes the summary (summaries are short, so full attention costs little there).

Token and position embeddings are shared by encoder, decoder and output layer. With
`share_weights`, decoder layer i also reuses encoder layer i's self-attention and
feed-forward weights (as in Rothe et al.'s BERT2BERT, which the paper's summariser starts
from); its cross-attention is always its own. Decoding: [CLS] starts a summary, [SEP]
ends it. Generation is beam search with GNMT's length penalty; beam 1 is greedy decoding.

Shapes: B batch, N source tokens, T target tokens, C hidden size, K beams.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from genobird.errors import ConfigError
from genobird.model.bigbird import BigBirdEncoder, FeedForward, init_weights
from genobird.model.config import BigBirdConfig
from genobird.model.io import register_model_class


class FullAttention(nn.Module):
    """Multi-head attention of queries over keys (self or cross), optional causal mask."""

    def __init__(self, config: BigBirdConfig):
        super().__init__()
        self.heads, self.dim = config.num_heads, config.head_dim
        self.q = nn.Linear(config.hidden_size, config.hidden_size)
        self.kv = nn.Linear(config.hidden_size, 2 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = config.attention_dropout

    def forward(self, x, memory, key_mask=None, causal: bool = False) -> torch.Tensor:
        batch, length, hidden = x.shape
        q = self.q(x).view(batch, length, self.heads, self.dim).transpose(1, 2)
        k, v = (
            self.kv(memory)
            .view(batch, memory.shape[1], 2, self.heads, self.dim)
            .permute(2, 0, 3, 1, 4)
        )
        mask = None
        if key_mask is not None:
            mask = key_mask[:, None, None, :]  # [B, 1, 1, N]
        if causal:
            future = torch.ones(length, memory.shape[1], dtype=torch.bool, device=x.device).tril()
            mask = future if mask is None else mask & future
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0
        )
        return self.out(out.transpose(1, 2).reshape(batch, length, hidden))


class SharedSelfAttention(nn.Module):
    """Causal self-attention through an encoder layer's own qkv/out projections."""

    def __init__(self, encoder_attention: nn.Module, config: BigBirdConfig):
        super().__init__()
        self.encoder_attention = encoder_attention  # the same module: shared weights
        self.heads, self.dim = config.num_heads, config.head_dim

    def forward(self, x, memory, key_mask=None, causal: bool = True) -> torch.Tensor:
        batch, length, hidden = x.shape
        qkv = self.encoder_attention.qkv(x).view(batch, length, 3, self.heads, self.dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.encoder_attention.out(out.transpose(1, 2).reshape(batch, length, hidden))


class DecoderLayer(nn.Module):
    """Post-LayerNorm: causal self-attention, cross-attention, feed-forward."""

    def __init__(self, config: BigBirdConfig, shared_encoder_layer: nn.Module | None = None):
        super().__init__()
        if shared_encoder_layer is None:
            self.self_attention = FullAttention(config)
            self.feed_forward = FeedForward(config)
        else:
            self.self_attention = SharedSelfAttention(shared_encoder_layer.attention, config)
            self.feed_forward = shared_encoder_layer.feed_forward
        self.cross_attention = FullAttention(config)
        self.norms = nn.ModuleList(
            nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) for _ in range(3)
        )
        self.dropout = nn.Dropout(config.hidden_dropout)

    def forward(self, x, target_mask, memory, memory_mask) -> torch.Tensor:
        x = self.norms[0](x + self.dropout(self.self_attention(x, x, target_mask, causal=True)))
        x = self.norms[1](x + self.dropout(self.cross_attention(x, memory, memory_mask)))
        return self.norms[2](x + self.dropout(self.feed_forward(x)))


@dataclass
class Seq2SeqOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor  # [B, T, V]


class BigBirdForSummarization(nn.Module):
    def __init__(
        self,
        config: BigBirdConfig,
        decoder_layers: int = 2,
        share_weights: bool = False,
        max_target_tokens: int = 256,
    ):
        super().__init__()
        if share_weights and decoder_layers > config.num_layers:
            raise ConfigError(
                f"share_weights needs decoder_layers <= encoder layers ({config.num_layers})"
            )
        if config.position_encoding != "absolute":
            raise ConfigError(
                "summarisation needs position_encoding 'absolute': its decoder reads the "
                "encoder's position table"
            )
        self.config = config
        self.decoder_layers, self.share_weights = decoder_layers, share_weights
        self.max_target_tokens = max_target_tokens
        if max_target_tokens > config.max_position:
            raise ConfigError(
                f"max_target_tokens {max_target_tokens} exceeds max_position {config.max_position}"
            )
        self.encoder = BigBirdEncoder(config)
        self.target_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.ModuleList(
            DecoderLayer(config, self.encoder.layers[i] if share_weights else None)
            for i in range(decoder_layers)
        )
        self.output_bias = nn.Parameter(torch.zeros(config.vocab_size))
        init_weights(self, config.initializer_range)

    def head_config(self) -> dict:
        return {
            "decoder_layers": self.decoder_layers,
            "share_weights": self.share_weights,
            "max_target_tokens": self.max_target_tokens,
        }

    def encode(self, input_ids, attention_mask) -> torch.Tensor:
        return self.encoder(input_ids, None, attention_mask).sequence  # [B, N, C]

    def decode(self, target_ids, target_mask, memory, memory_mask) -> torch.Tensor:
        """Next-token logits [B, T, V] for every target position."""
        length = target_ids.shape[1]
        if length > self.max_target_tokens:
            raise ConfigError(f"{length} target tokens; the model takes {self.max_target_tokens}")
        positions = torch.arange(length, device=target_ids.device)
        tokens = self.encoder.embeddings.tokens
        # The encoder's position table, shared: copying and aligning source and summary
        # positions is then a matter of equal vectors, not of learning a map between two
        # tables (a 2-layer model did not learn to copy in 400 steps without it).
        x = tokens(target_ids) + self.encoder.embeddings.positions(positions)[None]
        x = self.target_norm(x)
        for layer in self.decoder:
            x = layer(x, target_mask, memory, memory_mask)
        return x @ tokens.weight.T + self.output_bias  # tied output layer

    def forward(self, input_ids, attention_mask, target_ids, target_mask, labels=None):
        """Teacher forcing: target_ids are [CLS] + summary; labels the summary + [SEP]
        (pad positions -100, ignored)."""
        memory = self.encode(input_ids, attention_mask)
        logits = self.decode(target_ids, target_mask, memory, attention_mask)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(
                logits.float().flatten(0, 1), labels.flatten(), ignore_index=-100
            )
        return Seq2SeqOutput(loss, logits)


register_model_class(BigBirdForSummarization)


# =========================================================================== generation
def length_penalty(length: int, alpha: float) -> float:
    """GNMT's ((5 + length) / 6) ** alpha; scores are divided by it (alpha 0: none)."""
    return ((5 + length) / 6) ** alpha


@torch.no_grad()
def greedy_decode(model, input_ids, attention_mask, start_id: int, end_id: int, max_length: int):
    """Token lists, one per batch row, always taking the most likely next token."""
    memory = model.encode(input_ids, attention_mask)
    batch = input_ids.shape[0]
    target = torch.full((batch, 1), start_id, dtype=torch.long, device=input_ids.device)
    done = torch.zeros(batch, dtype=torch.bool, device=input_ids.device)
    for _ in range(max_length):
        logits = model.decode(target, None, memory, attention_mask)[:, -1]
        token = logits.argmax(dim=-1).masked_fill(done, end_id)
        target = torch.cat([target, token[:, None]], dim=1)
        done |= token == end_id
        if done.all():
            break
    return [_strip(row.tolist()[1:], end_id) for row in target]


@torch.no_grad()
def beam_search(
    model,
    input_ids,
    attention_mask,
    start_id: int,
    end_id: int,
    max_length: int,
    beams: int = 4,
    alpha: float = 0.6,
):
    """Token lists, one per batch row: the finished hypothesis with the best log
    probability / length_penalty(length, alpha). Beam 1 equals greedy decoding."""
    results = []
    for row in range(input_ids.shape[0]):
        memory = model.encode(input_ids[row : row + 1], attention_mask[row : row + 1])
        results.append(
            _beam_one(
                model,
                memory,
                attention_mask[row : row + 1],
                start_id,
                end_id,
                max_length,
                beams,
                alpha,
            )
        )
    return results


def _beam_one(model, memory, memory_mask, start_id, end_id, max_length, beams, alpha):
    device = memory.device
    hypotheses = torch.full((1, 1), start_id, dtype=torch.long, device=device)  # [K, t]
    scores = torch.zeros(1, device=device)  # summed log probabilities
    finished: list[tuple[float, list[int]]] = []
    for step in range(max_length):
        count = hypotheses.shape[0]
        logits = model.decode(
            hypotheses, None, memory.expand(count, -1, -1), memory_mask.expand(count, -1)
        )[:, -1]
        candidates = (scores[:, None] + logits.float().log_softmax(dim=-1)).flatten()
        top_scores, top = candidates.topk(min(2 * beams, candidates.numel()))
        vocab = logits.shape[-1]
        next_hypotheses, next_scores = [], []
        for score, index in zip(top_scores.tolist(), top.tolist(), strict=True):
            parent, token = divmod(index, vocab)
            sequence = [*hypotheses[parent].tolist()[1:], token]
            if token == end_id:
                finished.append((score / length_penalty(len(sequence), alpha), sequence[:-1]))
            else:
                next_hypotheses.append([*hypotheses[parent].tolist(), token])
                next_scores.append(score)
            if len(next_hypotheses) == beams:
                break
        best_finished = max((s for s, _ in finished), default=float("-inf"))
        if not next_hypotheses or (
            len(finished) >= beams
            and best_finished >= max(next_scores) / length_penalty(step + 1, alpha)
        ):
            break
        hypotheses = torch.tensor(next_hypotheses, device=device)
        scores = torch.tensor(next_scores, device=device)
    if not finished:  # nothing ended within max_length: take the best open hypothesis
        finished = [
            (s / length_penalty(len(h) - 1, alpha), h[1:])
            for s, h in zip(scores.tolist(), hypotheses.tolist(), strict=True)
        ]
    return max(finished, key=lambda item: item[0])[1]


def _strip(tokens: list[int], end_id: int) -> list[int]:
    return tokens[: tokens.index(end_id)] if end_id in tokens else tokens
