"""Multiple choice, WikiHop-style: a query, supporting documents and candidates; the
answer is one of the candidates.

Input: WikiHop's JSON (a list of {"id", "query", "supports", "candidates", "answer"}) or
JSON lines of the same. The long input is `[CLS] query [SEP] support [SEP] support ...`,
cut at the model's length (deviation: no sliding windows; the paper's 4,096 tokens hold
most WikiHop examples). Global tokens, candidates first so that truncation never drops
one: each candidate, each query token, each support (paragraph) and its sentences.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from genobird.errors import InputError
from genobird.nlp.etc import GlobalToken, collate_globals, structured_globals
from genobird.nlp.text import TextTokenizer

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class ChoiceExample:
    id: str
    query: str
    supports: tuple[str, ...]
    candidates: tuple[str, ...]
    answer: str | None


def read_choices(path: str | Path) -> list[ChoiceExample]:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: file not found")
    text = path.read_text(encoding="utf-8")
    try:
        records = json.loads(text)
        records = records if isinstance(records, list) else [records]
    except json.JSONDecodeError:
        try:
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: neither JSON nor JSON lines ({exc})") from exc
    examples = [_example(record, number, path) for number, record in enumerate(records, 1)]
    if not examples:
        raise InputError(f"{path}: no examples")
    return examples


def _example(record: dict, number: int, path: Path) -> ChoiceExample:
    eid = str(record.get("id", number))
    supports = tuple(s for s in record.get("supports", []) if str(s).strip())
    candidates = tuple(str(c) for c in record.get("candidates", []))
    if not supports:
        raise InputError(f"{path}: example {eid}: no supporting documents (empty 'supports')")
    if not candidates:
        raise InputError(f"{path}: example {eid}: no candidates")
    answer = record.get("answer")
    if answer is not None and str(answer) not in candidates:
        raise InputError(
            f"{path}: example {eid}: answer {answer!r} is not among its candidates "
            f"{list(candidates)[:5]}"
        )
    return ChoiceExample(
        eid,
        str(record.get("query", "")),
        supports,
        candidates,
        None if answer is None else str(answer),
    )


def example_globals(example: ChoiceExample, tokenizer: TextTokenizer) -> list[GlobalToken]:
    candidates = [tokenizer.encode(c) or [tokenizer.unk_id] for c in example.candidates]
    paragraphs = [
        [tokenizer.encode(s) for s in SENTENCE_END.split(support) if s.strip()]
        for support in example.supports
    ]
    rest = structured_globals(tokenizer.encode(example.query), paragraphs)
    return structured_globals([], [], candidates) + rest  # candidates first


def long_input(example: ChoiceExample, tokenizer: TextTokenizer) -> list[int]:
    """`[CLS] query [SEP] support [SEP] ...`, whole (the dataset cuts it)."""
    ids = [tokenizer.cls_id, *tokenizer.encode(example.query), tokenizer.sep_id]
    for support in example.supports:
        ids += [*tokenizer.encode(support), tokenizer.sep_id]
    return ids


class ChoiceDataset(Dataset):
    """Fixed-size tensors per example (tokenised once): long input, global tokens, the
    answer's slot. `truncated` counts examples whose long input was cut at max_tokens or
    whose global tokens (beyond the candidates) did not all fit."""

    def __init__(
        self,
        examples,
        tokenizer: TextTokenizer,
        max_tokens: int,
        max_globals: int,
        piece_tokens: int = 8,
    ):
        self.truncated = 0
        self.items = [
            self._encode(example, tokenizer, max_tokens, max_globals, piece_tokens)
            for example in examples
        ]

    def _encode(self, example, tokenizer, max_tokens, max_globals, piece_tokens) -> dict:
        if len(example.candidates) > max_globals:
            raise InputError(
                f"example {example.id} has {len(example.candidates)} candidates but the "
                f"model has {max_globals} global tokens; raise --max-globals"
            )
        whole = long_input(example, tokenizer)
        global_tokens = example_globals(example, tokenizer)
        self.truncated += len(whole) > max_tokens or len(global_tokens) > max_globals
        ids = whole[:max_tokens]
        item = {
            "input_ids": torch.full((max_tokens,), tokenizer.pad_id, dtype=torch.long),
            "attention_mask": torch.zeros(max_tokens, dtype=torch.bool),
        }
        item["input_ids"][: len(ids)] = torch.tensor(ids)
        item["attention_mask"][: len(ids)] = True
        kinds, pieces, piece_mask, global_mask = collate_globals(
            [global_tokens], max_globals, piece_tokens
        )
        item.update(
            global_kinds=kinds[0],
            global_ids=pieces[0],
            global_piece_mask=piece_mask[0],
            global_mask=global_mask[0],
        )
        if example.answer is not None:
            item["labels"] = torch.tensor(example.candidates.index(example.answer))
        return item

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return self.items[index]


def accuracy(examples: list[ChoiceExample], logits: np.ndarray) -> float:
    """Share of examples whose best-scoring candidate is the answer."""
    chosen = logits.argmax(axis=1)
    right = [example.candidates.index(example.answer) for example in examples]
    return float(np.mean(chosen == np.asarray(right)))
