"""NLP task models on the BigBird encoder. Each is saved and loaded like the genomics
models (config.json + model.safetensors): `genobird.model.from_pretrained` knows them.

Shapes: B batch, N tokens, C hidden size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from genobird.errors import ConfigError
from genobird.model.bigbird import BigBirdEncoder, init_weights
from genobird.model.config import BigBirdConfig
from genobird.model.io import register_model_class
from genobird.nlp.etc import GLOBAL_KINDS, GlobalTokenEmbedding


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


@dataclass
class ChoiceOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor  # [B, G]: a score per candidate global token, -inf elsewhere


class BigBirdForMultipleChoice(nn.Module):
    """Multiple choice (WikiHop-style, paper section 4) with ETC global tokens: one global
    token per candidate (and per question token, paragraph, sentence); each candidate's
    score is a linear read-out of its global token's final state."""

    def __init__(self, config: BigBirdConfig):
        super().__init__()
        if config.attention_type != "etc" or config.num_global_tokens < 1:
            raise ConfigError(
                "multiple choice needs attention_type 'etc' with num_global_tokens >= the "
                "candidates (plus question tokens, paragraphs and sentences) per example"
            )
        self.config = config
        self.encoder = BigBirdEncoder(config)
        self.globals = GlobalTokenEmbedding(
            config.hidden_size, self.encoder.embeddings.tokens, config.layer_norm_eps
        )
        self.score = nn.Linear(config.hidden_size, 1)
        init_weights(self, config.initializer_range)

    def head_config(self) -> dict:
        return {}

    def forward(
        self,
        input_ids: torch.Tensor,
        segment_ids: torch.Tensor | None,
        attention_mask: torch.Tensor | None,
        global_kinds: torch.Tensor,
        global_ids: torch.Tensor,
        global_piece_mask: torch.Tensor,
        global_mask: torch.Tensor,
        labels: torch.Tensor | None = None,
    ) -> ChoiceOutput:
        """global_*: from genobird.nlp.etc.collate_globals; labels: long [B], the global
        slot of the right candidate."""
        embedded = self.globals(global_kinds, global_ids, global_piece_mask)
        out = self.encoder(input_ids, segment_ids, attention_mask, embedded, global_mask)
        count = global_kinds.shape[1]
        logits = self.score(out.global_states[:, :count]).squeeze(-1).float()  # [B, G]
        candidate = global_mask & (global_kinds == GLOBAL_KINDS.index("candidate"))
        logits = logits.masked_fill(~candidate, float("-inf"))
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return ChoiceOutput(loss, logits)


register_model_class(BigBirdForMultipleChoice)
