"""Sequence classification on [CLS], GLUE-style: one sentence or a sentence pair;
multi-class, multi-label or regression; metrics as GLUE reports them.

Input: JSON lines, CSV or TSV with a header. The text is the first present of `text`,
`sentence`, `sentence1`, `question`; the pair the first of `text_pair`, `sentence2`,
`passage`; the target `label`. A label that is a list makes the task multi-label
(names: every label seen), a non-integer number makes it regression, anything else is a
class name (multi-class).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from genobird.errors import InputError
from genobird.fileio import require_unique_columns
from genobird.nlp.text import TextTokenizer

TEXT_KEYS = ("text", "sentence", "sentence1", "question")
PAIR_KEYS = ("text_pair", "sentence2", "passage")


@dataclass(frozen=True)
class TextExample:
    text: str
    pair: str | None
    label: object  # class name, list of label names, or a float


def read_examples(path: str | Path) -> list[TextExample]:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: file not found")
    rows = _rows(path)
    examples = []
    for number, row in enumerate(rows, start=1):
        text = next((row[k] for k in TEXT_KEYS if row.get(k) not in (None, "")), None)
        if text is None or not str(text).strip():
            raise InputError(
                f"{path}: record {number} has no text (one of {', '.join(TEXT_KEYS)}); "
                "drop it or fill it in"
            )
        pair = next((row[k] for k in PAIR_KEYS if row.get(k) not in (None, "")), None)
        examples.append(
            TextExample(str(text), None if pair is None else str(pair), row.get("label"))
        )
    if not examples:
        raise InputError(f"{path}: no records")
    return examples


def _rows(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".jsonl", ".json"):
        try:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not JSON lines ({exc})") from exc
    delimiter = "\t" if path.suffix in (".tsv", ".tab") else ","
    reader = csv.DictReader(text.splitlines(), delimiter=delimiter)
    require_unique_columns(reader.fieldnames or [], path)
    return list(reader)


# =========================================================================== labels
@dataclass
class LabelSpace:
    problem: str  # single_label, multi_label or regression
    names: list[str]  # classes, labels, or the one regression target

    @classmethod
    def infer(cls, examples: list[TextExample], problem: str | None = None) -> LabelSpace:
        """From the training labels; `problem` overrides the guess (e.g. "regression"
        for integer scores)."""
        labels = [e.label for e in examples]
        if any(label is None or label == "" for label in labels):
            raise InputError("every training record needs a label")
        if problem == "regression" or (problem is None and _all_fractional(labels)):
            if not all(_is_number(label) for label in labels):
                raise InputError("regression needs a number as every label")
            return cls("regression", ["score"])
        if all(isinstance(label, list) for label in labels):
            return cls("multi_label", sorted({str(x) for label in labels for x in label}))
        if problem == "multi_label":
            raise InputError("multi-label needs a list of label names as every label")
        return cls("single_label", sorted({str(label) for label in labels}, key=_natural))

    def encode(self, label, where: str) -> np.ndarray:
        if self.problem == "regression":
            return np.asarray([float(label)], dtype=np.float32)
        if self.problem == "multi_label":
            unknown = [x for x in label if str(x) not in self.names]
            if unknown:
                raise InputError(f"{where}: labels {unknown} are not among {self.names}")
            return np.asarray([str(n) in map(str, label) for n in self.names], dtype=np.float32)
        if str(label) not in self.names:
            raise InputError(f"{where}: label {label!r} is not among {self.names}")
        return np.asarray(self.names.index(str(label)))


def _all_fractional(labels) -> bool:
    numbers = all(_is_number(x) and not isinstance(x, (list, bool)) for x in labels)
    return numbers and any(float(x) != int(float(x)) for x in labels)


def _is_number(value) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _natural(name: str):
    return (0, float(name)) if _is_number(name) else (1, name)


# =========================================================================== encoding
def encode_pair(tokenizer: TextTokenizer, text: str, pair: str | None, max_tokens: int):
    """(ids, segment ids) of [CLS] text [SEP] (pair [SEP]), longest part truncated first."""
    a, b = tokenizer.encode(text), tokenizer.encode(pair) if pair else []
    room = max_tokens - (3 if pair else 2)
    while len(a) + len(b) > room:  # BERT's longest-first truncation
        if len(a) >= len(b):
            a.pop()
        else:
            b.pop()
    ids = [tokenizer.cls_id, *a, tokenizer.sep_id]
    segments = [0] * len(ids)
    if pair:
        ids += [*b, tokenizer.sep_id]
        segments += [1] * (len(b) + 1)
    return ids, segments


class TextDataset(Dataset):
    def __init__(self, examples, tokenizer, labels: LabelSpace, max_tokens: int, source="input"):
        self.items = []
        for number, example in enumerate(examples, start=1):
            ids, segments = encode_pair(tokenizer, example.text, example.pair, max_tokens)
            target = (
                labels.encode(example.label, f"{source} record {number}")
                if example.label not in (None, "")
                else None
            )
            self.items.append((ids, segments, target))
        self.max_tokens, self.pad_id = max_tokens, tokenizer.pad_id

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        ids, segments, target = self.items[index]
        item = {
            "input_ids": torch.full((self.max_tokens,), self.pad_id, dtype=torch.long),
            "segment_ids": torch.zeros(self.max_tokens, dtype=torch.long),
            "attention_mask": torch.zeros(self.max_tokens, dtype=torch.bool),
        }
        item["input_ids"][: len(ids)] = torch.tensor(ids)
        item["segment_ids"][: len(ids)] = torch.tensor(segments)
        item["attention_mask"][: len(ids)] = True
        if target is not None:
            item["labels"] = torch.as_tensor(target)
        return item


# =========================================================================== metrics
def glue_metrics(problem: str, labels: np.ndarray, outputs: np.ndarray) -> dict[str, float]:
    """GLUE's figures: accuracy, F1 (binary: of class 1; else macro) and Matthews
    correlation for classes; micro/macro F1 and exact-set accuracy for multi-label;
    Pearson and Spearman correlation for regression. `outputs` are logits."""
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    if problem == "regression":
        predicted, truth = outputs[:, 0], labels.reshape(-1)
        return {
            "pearson": float(pearsonr(predicted, truth)[0]),
            "spearman": float(spearmanr(predicted, truth)[0]),
        }
    if problem == "multi_label":
        predicted = (outputs > 0).astype(int)
        truth = labels.astype(int)
        return {
            "subset_accuracy": float(accuracy_score(truth, predicted)),
            "micro_f1": float(f1_score(truth, predicted, average="micro", zero_division=0)),
            "macro_f1": float(f1_score(truth, predicted, average="macro", zero_division=0)),
        }
    predicted = outputs.argmax(axis=1)
    average = "binary" if outputs.shape[1] == 2 else "macro"
    return {
        "accuracy": float(accuracy_score(labels, predicted)),
        "f1": float(f1_score(labels, predicted, average=average, zero_division=0)),
        "mcc": float(matthews_corrcoef(labels, predicted)),
    }
