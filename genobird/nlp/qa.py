"""Extractive question answering (paper section 4: Natural Questions, HotpotQA, TriviaQA,
WikiHop; SQuAD-style JSON here).

Documents longer than the model are read in sliding windows (the paper: 4,096 tokens,
stride 2,048): each window is `[CLS] question [SEP] context piece [SEP]`, and holds the
answer's token span when the whole answer lies inside it, else points at [CLS]. At
prediction time the best span (start <= end, at most `max_answer_tokens` long, inside the
context) over all windows of a question wins, and is returned as character offsets of
the original context.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from genobird.errors import ConfigError, InputError
from genobird.nlp.text import TextTokenizer


# =========================================================================== input
@dataclass(frozen=True)
class Question:
    id: str
    question: str
    context: str
    answers: tuple[tuple[int, str], ...]  # (character start, text); empty when unknown


def read_squad(path: str | Path) -> list[Question]:
    """SQuAD v1/v2 JSON ({"data": [{"paragraphs": [{"context", "qas"}]}]}) or JSON lines
    of {"id", "question", "context", "answers": [{"text", "answer_start"}]}. Answers are
    checked against their context: a bad offset is an error naming the question."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise InputError(f"{path}: file not found") from exc
    records = _squad_records(text, path)
    questions = [_question(record, path) for record in records]
    if not questions:
        raise InputError(f"{path}: no questions found")
    return questions


def _squad_records(text: str, path: Path) -> list[dict]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        try:
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: neither SQuAD JSON nor JSON lines ({exc})") from exc
    if isinstance(document, dict) and "data" in document:
        return [
            {**qa, "context": paragraph.get("context", "")}
            for article in document["data"]
            for paragraph in article.get("paragraphs", [])
            for qa in paragraph.get("qas", [])
        ]
    return document if isinstance(document, list) else [document]


def _question(record: dict, path: Path) -> Question:
    qid = str(record.get("id", "?"))
    context, question = record.get("context", ""), record.get("question", "")
    if not context.strip():
        raise InputError(f"{path}: question {qid}: empty context; drop it or give its document")
    if not question.strip():
        raise InputError(f"{path}: question {qid}: empty question")
    answers = []
    for answer in record.get("answers", []):
        start, answer_text = int(answer["answer_start"]), answer["text"]
        if not 0 <= start <= len(context) - len(answer_text) or not answer_text:
            raise InputError(
                f"{path}: question {qid}: answer_start {start} + {len(answer_text)} characters "
                f"lies outside its context of {len(context)}; fix the offset"
            )
        if context[start : start + len(answer_text)] != answer_text:
            raise InputError(
                f"{path}: question {qid}: the context at {start} reads "
                f"{context[start : start + len(answer_text)]!r}, not the answer "
                f"{answer_text!r}; fix answer_start"
            )
        answers.append((start, answer_text))
    return Question(qid, question, context, tuple(answers))


# =========================================================================== windows
@dataclass
class QAWindowSpec:
    max_tokens: int = 4096  # paper: 4,096
    stride: int = 2048  # paper: 2,048 (context tokens between window starts)
    max_question_tokens: int = 64

    def check(self) -> None:
        if self.max_tokens < self.max_question_tokens + 4:
            raise ConfigError(
                f"max_tokens {self.max_tokens} leaves no room for context after a "
                f"question of up to {self.max_question_tokens} tokens"
            )
        if self.stride < 1:
            raise ConfigError(f"stride must be at least 1, got {self.stride}")


@dataclass
class QAWindow:
    question_index: int
    input_ids: np.ndarray  # [N]
    segment_ids: np.ndarray  # [N]: 0 question, 1 context
    offsets: np.ndarray  # [N, 2] character span in the context; -1 outside the context
    start: int  # answer's first token, 0 ([CLS]) when not inside this window
    end: int


def make_windows(questions: list[Question], tokenizer: TextTokenizer, spec: QAWindowSpec):
    """Every question's windows, in order (one question may have several)."""
    spec.check()
    windows = []
    for index, question in enumerate(questions):
        windows += _question_windows(index, question, tokenizer, spec)
    return windows


def _question_windows(index, question, tokenizer, spec) -> list[QAWindow]:
    question_ids = tokenizer.encode(question.question)[: spec.max_question_tokens]
    context_ids, context_offsets = tokenizer.encode_with_offsets(question.context)
    room = spec.max_tokens - len(question_ids) - 3  # [CLS] q [SEP] ... [SEP]
    answer = _answer_tokens(question, context_offsets)
    prefix = [tokenizer.cls_id, *question_ids, tokenizer.sep_id]
    windows = []
    for first in range(0, max(len(context_ids), 1), spec.stride):
        last = min(first + room, len(context_ids))  # exclusive
        ids = prefix + list(context_ids[first:last]) + [tokenizer.sep_id]
        offsets = np.full((len(ids), 2), -1, dtype=np.int64)
        offsets[len(prefix) : len(prefix) + last - first] = context_offsets[first:last]
        start = end = 0
        if answer is not None and first <= answer[0] and answer[1] < last:
            start, end = (position - first + len(prefix) for position in answer)
        segments = np.r_[np.zeros(len(prefix)), np.ones(len(ids) - len(prefix))]
        windows.append(
            QAWindow(index, np.asarray(ids), segments.astype(np.int64), offsets, start, end)
        )
        if last == len(context_ids):
            break
    return windows


def _answer_tokens(question: Question, offsets: np.ndarray) -> tuple[int, int] | None:
    """First and last context token of the first answer (tokens overlapping it)."""
    if not question.answers or not len(offsets):
        return None
    start, text = question.answers[0]
    end = start + len(text)
    inside = np.nonzero((offsets[:, 1] > start) & (offsets[:, 0] < end))[0]
    return (int(inside[0]), int(inside[-1])) if len(inside) else None


def collate_windows(
    windows: list[QAWindow], pad_id: int = 0, length: int | None = None
) -> dict[str, torch.Tensor]:
    """Tensors of the windows padded to `length` (default: the longest)."""
    length = length or max(len(w.input_ids) for w in windows)
    batch = {
        "input_ids": torch.full((len(windows), length), pad_id, dtype=torch.long),
        "segment_ids": torch.zeros((len(windows), length), dtype=torch.long),
        "attention_mask": torch.zeros((len(windows), length), dtype=torch.bool),
    }
    for row, window in enumerate(windows):
        n = len(window.input_ids)
        batch["input_ids"][row, :n] = torch.from_numpy(window.input_ids)
        batch["segment_ids"][row, :n] = torch.from_numpy(window.segment_ids)
        batch["attention_mask"][row, :n] = True
    batch["start_positions"] = torch.tensor([w.start for w in windows])
    batch["end_positions"] = torch.tensor([w.end for w in windows])
    return batch


# =========================================================================== decoding
def best_span(
    start_logits: np.ndarray, end_logits: np.ndarray, allowed: np.ndarray, max_answer_tokens: int
) -> tuple[int, int, float] | None:
    """(start, end, score) maximising start + end logit with start <= end,
    end - start < max_answer_tokens, both in `allowed` (bool [N]); None if none is."""
    best = None
    length = len(start_logits)
    for width in range(min(max_answer_tokens, length)):  # all spans of `width` + 1 tokens
        starts = np.arange(length - width)
        ok = allowed[starts] & allowed[starts + width]
        if not ok.any():
            continue
        scores = np.where(ok, start_logits[starts] + end_logits[starts + width], -np.inf)
        top = int(np.argmax(scores))
        if best is None or scores[top] > best[2]:
            best = (top, top + width, float(scores[top]))
    return best


def decode_answers(
    questions: list[Question],
    windows: list[QAWindow],
    start_logits: list[np.ndarray],
    end_logits: list[np.ndarray],
    max_answer_tokens: int = 30,
) -> dict[str, dict]:
    """{question id: {"text", "start", "end", "score"}}: the best span of all windows of
    each question, as character offsets of its context ("" when no span is allowed)."""
    best: dict[int, tuple] = {}
    for window, start, end in zip(windows, start_logits, end_logits, strict=True):
        allowed = window.offsets[:, 0] >= 0
        found = best_span(start, end, allowed, max_answer_tokens)
        if found and (
            window.question_index not in best or found[2] > best[window.question_index][0]
        ):
            first, last = window.offsets[found[0]][0], window.offsets[found[1]][1]
            best[window.question_index] = (found[2], int(first), int(last))
    answers = {}
    for index, question in enumerate(questions):
        score, first, last = best.get(index, (float("-inf"), 0, 0))
        answers[question.id] = {
            "text": question.context[first:last],
            "start": first,
            "end": last,
            "score": score,
        }
    return answers


# =========================================================================== metrics
def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str, truths: list[str]) -> float:
    return float(any(normalize_answer(prediction) == normalize_answer(t) for t in truths))


def token_f1(prediction: str, truths: list[str]) -> float:
    def f1(truth: str) -> float:
        predicted, gold = normalize_answer(prediction).split(), normalize_answer(truth).split()
        common = sum((Counter(predicted) & Counter(gold)).values())
        if not predicted or not gold:
            return float(predicted == gold)
        if common == 0:
            return 0.0
        precision, recall = common / len(predicted), common / len(gold)
        return 2 * precision * recall / (precision + recall)

    return max((f1(t) for t in truths), default=0.0)


def squad_metrics(questions: list[Question], answers: dict[str, dict]) -> dict[str, float]:
    """Exact match and F1 in percent over questions with gold answers (SQuAD's script)."""
    scored = [q for q in questions if q.answers]
    if not scored:
        return {"exact_match": float("nan"), "f1": float("nan"), "questions": 0}
    em = [exact_match(answers[q.id]["text"], [t for _, t in q.answers]) for q in scored]
    f1 = [token_f1(answers[q.id]["text"], [t for _, t in q.answers]) for q in scored]
    return {
        "exact_match": 100 * float(np.mean(em)),
        "f1": 100 * float(np.mean(f1)),
        "questions": len(scored),
    }
