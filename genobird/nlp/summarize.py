"""Summarisation data and ROUGE (paper section 4.1: arXiv, PubMed, BigPatent).

Input: JSON lines (or CSV/TSV with a header) with the document in the first present of
`document`, `article`, `text`, and the summary in `summary`, `highlights` or `abstract`.
ROUGE-1/2/L F-measures come from Google's rouge-score package (the reference
implementation's behaviour, with stemming), averaged over documents, in percent.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from genobird.errors import InputError
from genobird.nlp.classify import _rows
from genobird.nlp.text import TextTokenizer

DOCUMENT_KEYS = ("document", "article", "text")
SUMMARY_KEYS = ("summary", "highlights", "abstract")


@dataclass(frozen=True)
class SummaryExample:
    document: str
    summary: str | None


def read_summaries(path: str | Path) -> list[SummaryExample]:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: file not found")
    examples = []
    for number, row in enumerate(_rows(path), start=1):
        document = next((row[k] for k in DOCUMENT_KEYS if row.get(k)), "")
        if not str(document).strip():
            raise InputError(
                f"{path}: record {number}: empty document (one of {', '.join(DOCUMENT_KEYS)})"
            )
        summary = next((row[k] for k in SUMMARY_KEYS if row.get(k)), None)
        examples.append(SummaryExample(str(document), None if summary is None else str(summary)))
    if not examples:
        raise InputError(f"{path}: no records")
    return examples


class SummaryDataset(Dataset):
    """Source [CLS] document [SEP] (cut to max_tokens); target [CLS] summary, labels
    summary [SEP] (cut to max_target_tokens); pads and ignored labels fill the rest.
    `truncated` counts examples whose document or summary was cut."""

    def __init__(self, examples, tokenizer: TextTokenizer, max_tokens: int, max_target: int):
        self.items = []
        self.truncated = 0
        for number, example in enumerate(examples, start=1):
            if example.summary is None:
                raise InputError(f"record {number}: no summary to train on")
            self.items.append(self._encode(example, tokenizer, max_tokens, max_target))

    def _encode(self, example, tokenizer, max_tokens, max_target) -> dict:
        document, summary = tokenizer.encode(example.document), tokenizer.encode(example.summary)
        self.truncated += len(document) > max_tokens - 2 or len(summary) > max_target - 1
        source = framed_source(document, tokenizer, max_tokens)
        summary = summary[: max_target - 1]
        target = [tokenizer.cls_id, *summary]
        labels = [*summary, tokenizer.sep_id]
        item = {
            "input_ids": torch.full((max_tokens,), tokenizer.pad_id, dtype=torch.long),
            "attention_mask": torch.zeros(max_tokens, dtype=torch.bool),
            "target_ids": torch.full((max_target,), tokenizer.pad_id, dtype=torch.long),
            "target_mask": torch.zeros(max_target, dtype=torch.bool),
            "labels": torch.full((max_target,), -100, dtype=torch.long),
        }
        item["input_ids"][: len(source)] = torch.tensor(source)
        item["attention_mask"][: len(source)] = True
        item["target_ids"][: len(target)] = torch.tensor(target)
        item["target_mask"][: len(target)] = True
        item["labels"][: len(labels)] = torch.tensor(labels)
        return item

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return self.items[index]


def source_ids(document: str, tokenizer: TextTokenizer, max_tokens: int) -> list[int]:
    return framed_source(tokenizer.encode(document), tokenizer, max_tokens)


def framed_source(tokens: list[int], tokenizer: TextTokenizer, max_tokens: int) -> list[int]:
    """[CLS] tokens [SEP], the tokens cut to fit max_tokens."""
    return [tokenizer.cls_id, *tokens[: max_tokens - 2], tokenizer.sep_id]


def rouge(predictions: list[str], references: list[str]) -> dict[str, float]:
    """Mean ROUGE-1/2/L F-measure in percent (rouge-score, Porter stemming)."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    scores = [scorer.score(ref, pred) for pred, ref in zip(predictions, references, strict=True)]
    return {
        name: 100 * float(np.mean([s[name].fmeasure for s in scores]))
        for name in ("rouge1", "rouge2", "rougeL")
    }
