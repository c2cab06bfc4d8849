"""ETC-style global tokens for structured inputs (paper section 4, appendix E.2: "we add
one global token per question token, paragraph, sentence or candidate").

A global token stands for a piece of the input: its embedding is the embedding of its
kind plus the mean token embedding of the piece it stands for. The encoder prepends the
global tokens (ETC attention: they attend to everything and everything attends to them;
the long tokens otherwise attend within the block-sparse pattern) and returns their
final states, which task heads read (multiple choice: one score per candidate token).

Shapes: B batch, G global tokens, T tokens per global piece, C hidden size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

GLOBAL_KINDS = ("question_token", "paragraph", "sentence", "candidate")


@dataclass(frozen=True)
class GlobalToken:
    kind: str  # one of GLOBAL_KINDS
    token_ids: tuple[int, ...]  # the tokens of the piece it stands for


def structured_globals(question_ids, paragraphs, candidates=()) -> list[GlobalToken]:
    """One global token per question token, per paragraph, per sentence of each paragraph
    and per candidate. `paragraphs`: [[sentence token ids, ...], ...]."""
    tokens = [GlobalToken("question_token", (int(i),)) for i in question_ids]
    for sentences in paragraphs:
        tokens.append(GlobalToken("paragraph", tuple(i for s in sentences for i in s)))
        tokens += [GlobalToken("sentence", tuple(s)) for s in sentences]
    tokens += [GlobalToken("candidate", tuple(c)) for c in candidates]
    return tokens


def collate_globals(batch: list[list[GlobalToken]], count: int, piece_tokens: int = 16):
    """Tensors for GlobalTokenEmbedding: kinds long [B, G], piece ids long [B, G, T],
    piece mask bool [B, G, T], global mask bool [B, G] (G = count; pieces truncated to T)."""
    kinds = torch.zeros(len(batch), count, dtype=torch.long)
    ids = torch.zeros(len(batch), count, piece_tokens, dtype=torch.long)
    piece_mask = torch.zeros(len(batch), count, piece_tokens, dtype=torch.bool)
    global_mask = torch.zeros(len(batch), count, dtype=torch.bool)
    for row, tokens in enumerate(batch):
        for column, token in enumerate(tokens[:count]):
            piece = token.token_ids[:piece_tokens]
            kinds[row, column] = GLOBAL_KINDS.index(token.kind)
            ids[row, column, : len(piece)] = torch.tensor(piece, dtype=torch.long)
            piece_mask[row, column, : len(piece)] = True
            global_mask[row, column] = True
    return kinds, ids, piece_mask, global_mask


class GlobalTokenEmbedding(nn.Module):
    """LayerNorm(kind embedding + mean token embedding of the piece) ([B, G, C]).

    The norm puts global tokens on the scale of the long tokens (which leave the encoder's
    embeddings LayerNorm-ed): raw embeddings are ~50x smaller at init, so a candidate's
    identity would be washed out by the first attention residual."""

    def __init__(self, hidden_size: int, token_embedding: nn.Embedding, eps: float = 1e-12):
        super().__init__()
        self.kinds = nn.Embedding(len(GLOBAL_KINDS), hidden_size)
        self.token_embedding = token_embedding  # shared with the encoder, not a copy
        self.norm = nn.LayerNorm(hidden_size, eps=eps)

    def forward(self, kinds, piece_ids, piece_mask) -> torch.Tensor:
        pieces = self.token_embedding(piece_ids) * piece_mask[..., None]  # [B, G, T, C]
        mean = pieces.sum(dim=2) / piece_mask.sum(dim=2, keepdim=True).clamp(min=1)
        return self.norm(self.kinds(kinds) + mean)
