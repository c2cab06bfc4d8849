"""NLP task models on the BigBird encoder. Each is saved and loaded like the genomics
models (config.json + model.safetensors): `genobird.model.from_pretrained` knows them.

Shapes: B batch, N tokens, C hidden size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from genobird.model.bigbird import BigBirdEncoder, init_weights
from genobird.model.config import BigBirdConfig
from genobird.model.io import register_model_class


@dataclass
class SpanOutput:
    loss: torch.Tensor | None
    start_logits: torch.Tensor  # [B, N], -inf on padding
    end_logits: torch.Tensor  # [B, N]


class BigBirdForQuestionAnswering(nn.Module):
    """Extractive QA: a start and an end logit per token (BERT's SQuAD head)."""

    def __init__(self, config: BigBirdConfig):
        super().__init__()
        self.config = config
        self.encoder = BigBirdEncoder(config)
        self.span = nn.Linear(config.hidden_size, 2)
        init_weights(self, config.initializer_range)

    def head_config(self) -> dict:
        return {}

    def forward(
        self,
        input_ids: torch.Tensor,
        segment_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
    ) -> SpanOutput:
        """start/end_positions: long [B], the answer's first and last token (0, [CLS],
        where the answer is not in this window)."""
        hidden = self.encoder(input_ids, segment_ids, attention_mask).sequence
        start, end = self.span(hidden).float().unbind(-1)  # [B, N] each
        if attention_mask is not None:
            start = start.masked_fill(~attention_mask.bool(), float("-inf"))
            end = end.masked_fill(~attention_mask.bool(), float("-inf"))
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = (
                F.cross_entropy(start, start_positions) + F.cross_entropy(end, end_positions)
            ) / 2
        return SpanOutput(loss, start, end)


register_model_class(BigBirdForQuestionAnswering)
