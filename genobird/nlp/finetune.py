"""Fine-tuning and prediction for the NLP heads, through the shared Trainer.

A model comes from a pretraining model directory with a text tokenizer (`--pretrained`),
or starts fresh from a text tokenizer (`--from-scratch --tokenizer`). The fine-tuned
model directory is like the genomics ones: config.json, model.safetensors,
tokenizer.model, plus `task.json` (the task and its settings) so `predict` needs nothing
else.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from genobird.errors import CheckpointError, ConfigError
from genobird.fileio import atomic_write
from genobird.model import from_pretrained, save_pretrained
from genobird.model.task_model import build_task_model, task_config
from genobird.nlp import qa
from genobird.nlp.models import BigBirdForQuestionAnswering
from genobird.nlp.recipe import ENCODER_LAYERS, NLPRecipe
from genobird.nlp.text import TextTokenizer
from genobird.training import Trainer, TrainingConfig

log = logging.getLogger(__name__)
TASK_FILE = "task.json"


# =========================================================================== model
def load_tokenizer(pretrained: Path | None, tokenizer_path: Path | None) -> TextTokenizer:
    if pretrained is not None:
        return TextTokenizer(Path(pretrained) / "tokenizer.model")
    if tokenizer_path is None:
        raise ConfigError("give --pretrained DIR, or --from-scratch with --tokenizer MODEL")
    return TextTokenizer(tokenizer_path)


def build_model(
    model_class,
    pretrained: Path | None,
    spec: NLPRecipe,
    vocab_size: int,
    attention: dict | None = None,
    **head,
):
    """The task model: encoder from `pretrained` (head fresh), or all fresh. `attention`
    overrides config fields the task needs (ETC: attention_type, num_global_tokens)."""
    shape = {**spec.fresh_shape, "seed": spec.optim.seed}
    config = task_config(pretrained, shape, spec.data.max_tokens, vocab_size)
    if attention:
        config = config.replace(**attention)
    return build_task_model(model_class, config, pretrained, spec.optim.seed, **head)


def training_config(spec: NLPRecipe) -> TrainingConfig:
    """The Trainer's settings of a recipe: its optimiser branch (the encoder's layers at
    their own rate, where --encoder-lr-scale asks) and its checkpoints."""
    optim = spec.optim
    scales = {ENCODER_LAYERS: optim.encoder_lr_scale} if optim.encoder_lr_scale != 1 else {}
    return TrainingConfig(
        seed=optim.seed,
        max_steps=optim.max_steps,
        batch_size=optim.batch_size,
        effective_batch_size=optim.effective_batch_size or optim.batch_size,
        learning_rate=optim.learning_rate,
        warmup_steps=optim.warmup_steps,
        learning_rate_scales=scales,
        checkpoint_every=spec.output.checkpoint_every,
        eval_every=0,
        progress=spec.progress,
    )


def train(model, dataset: Dataset, spec: NLPRecipe, output: Path, step_fn) -> Trainer:
    training = training_config(spec)
    trainer = Trainer(model, dataset, training, output, step_fn)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(training.seed)
        trainer.resume()  # rerunning an interrupted run continues it
        trainer.train()
    return trainer


def warn_truncated(dataset, what: str, option: str) -> None:
    """Say how much input a model will not see (it trains on what fits, silently otherwise)."""
    if dataset.truncated:
        log.warning(
            "%d of %d %s were cut to fit the model; raise %s to keep more",
            dataset.truncated,
            len(dataset),
            what,
            option,
        )


def save_model(model, tokenizer: TextTokenizer, directory: Path, task: dict) -> None:
    save_pretrained(model, directory)
    tokenizer.save(directory)
    with atomic_write(directory / TASK_FILE) as handle:
        json.dump(task, handle, indent=2)


def load_task(directory: str | Path) -> dict:
    """The task settings of a fine-tuned NLP model directory."""
    task_path = Path(directory) / TASK_FILE
    if not task_path.is_file():
        raise CheckpointError(f"{directory}: no {TASK_FILE}; not an NLP model directory")
    return json.loads(task_path.read_text())


def load_model(directory: str | Path, device: str = "auto"):
    """(model, tokenizer, task settings) of a fine-tuned NLP model directory, on `device`
    ("auto": the GPU where there is one, as every genobird command)."""
    from genobird.device import resolve_device

    task = load_task(directory)
    model = from_pretrained(directory, device=resolve_device(device)).eval()
    return model, TextTokenizer(Path(directory) / "tokenizer.model"), task


# =========================================================================== QA
class QADataset(Dataset):
    """Windows padded to one length, as tensors (the Trainer's loader stacks them)."""

    def __init__(self, windows: list[qa.QAWindow], length: int, pad_id: int):
        self.windows, self.length, self.pad_id = windows, length, pad_id

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        batch = qa.collate_windows([self.windows[index]], self.pad_id, self.length)
        return {key: value[0] for key, value in batch.items()}


def qa_step(model, batch):
    out = model(
        batch["input_ids"],
        batch["segment_ids"],
        batch["attention_mask"],
        batch["start_positions"],
        batch["end_positions"],
    )
    return out.loss, {}


@torch.no_grad()
def qa_logits(model, windows, length: int, pad_id: int, batch_size: int = 8):
    """Per window: (start logits, end logits) over its own tokens."""
    device = next(model.parameters()).device
    model.eval()
    starts, ends = [], []
    for first in range(0, len(windows), batch_size):
        chunk = windows[first : first + batch_size]
        batch = qa.collate_windows(chunk, pad_id, length)
        out = model(*(batch[k].to(device) for k in ("input_ids", "segment_ids", "attention_mask")))
        for row, window in enumerate(chunk):
            n = len(window.input_ids)
            starts.append(out.start_logits[row, :n].cpu().numpy())
            ends.append(out.end_logits[row, :n].cpu().numpy())
    return starts, ends


def answer_questions(
    model,
    tokenizer,
    questions,
    window: qa.QAWindowSpec,
    max_answer_tokens: int,
    batch_size: int = 8,
) -> dict[str, dict]:
    windows = qa.make_windows(questions, tokenizer, window)
    starts, ends = qa_logits(model, windows, window.max_tokens, tokenizer.pad_id, batch_size)
    return qa.decode_answers(questions, windows, starts, ends, max_answer_tokens)


def finetune_qa(
    train_path,
    output,
    spec: NLPRecipe,
    valid_path=None,
    pretrained=None,
    tokenizer_path=None,
    stride: int | None = None,
    max_answer_tokens: int = 30,
    max_question_tokens: int = 64,
) -> dict:
    """Fine-tune extractive QA; returns (and writes to OUT/report/metrics.json) exact match
    and F1 on `valid_path` when given."""
    output = Path(output)
    tokenizer = load_tokenizer(pretrained, tokenizer_path)
    window = qa.QAWindowSpec(
        spec.data.max_tokens, stride or spec.data.max_tokens // 2, max_question_tokens
    )
    questions = qa.read_squad(train_path)
    windows = qa.make_windows(questions, tokenizer, window)
    log.info("%d questions -> %d windows", len(questions), len(windows))
    model = build_model(BigBirdForQuestionAnswering, pretrained, spec, tokenizer.vocab_size)
    trainer = train(
        model, QADataset(windows, spec.data.max_tokens, tokenizer.pad_id), spec, output, qa_step
    )
    report = {"task": "qa", "train_questions": len(questions), "train_windows": len(windows)}
    if valid_path is not None:
        valid = qa.read_squad(valid_path)
        answers = answer_questions(trainer.module, tokenizer, valid, window, max_answer_tokens)
        report.update(qa.squad_metrics(valid, answers))
    if trainer.is_main:
        task = {"task": "qa", "window": asdict(window), "max_answer_tokens": max_answer_tokens}
        save_model(trainer.module, tokenizer, output / "model", task)
        write_report(output, report)
    return report


def predict_qa(model_dir, input_path, batch_size: int = 8, device: str = "auto") -> dict:
    model, tokenizer, task = load_model(model_dir, device)
    questions = qa.read_squad(input_path)
    window = qa.QAWindowSpec(**task["window"])
    return answer_questions(
        model, tokenizer, questions, window, task["max_answer_tokens"], batch_size
    )


def write_report(output: Path, report: dict) -> None:
    (output / "report").mkdir(parents=True, exist_ok=True)
    with atomic_write(output / "report" / "metrics.json") as handle:
        json.dump(report, handle, indent=2, default=_json_number)


def _json_number(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value)}")


# =========================================================================== classification
def classify_step(model, batch):
    out = model(batch["input_ids"], batch["segment_ids"], batch["attention_mask"], batch["labels"])
    return out.loss, {}


@torch.no_grad()
def classify_outputs(model, dataset, batch_size: int = 16) -> np.ndarray:
    """Logits [examples, outputs] of a TextDataset."""
    from torch.utils.data import DataLoader

    device = next(model.parameters()).device
    model.eval()
    outputs = []
    for batch in DataLoader(dataset, batch_size=batch_size):
        inputs = (batch[k].to(device) for k in ("input_ids", "segment_ids", "attention_mask"))
        outputs.append(model(*inputs).logits.float().cpu().numpy())
    return np.concatenate(outputs)


def finetune_classify(
    train_path,
    output,
    spec: NLPRecipe,
    valid_path=None,
    pretrained=None,
    tokenizer_path=None,
    problem=None,
) -> dict:
    """Fine-tune [CLS] classification (GLUE-style); GLUE metrics on `valid_path`."""
    from genobird.model import BigBirdForSequenceClassification
    from genobird.nlp.classify import LabelSpace, TextDataset, glue_metrics, read_examples

    output = Path(output)
    tokenizer = load_tokenizer(pretrained, tokenizer_path)
    examples = read_examples(train_path)
    labels = LabelSpace.infer(examples, problem)
    dataset = TextDataset(examples, tokenizer, labels, spec.data.max_tokens, str(train_path))
    model = build_model(
        BigBirdForSequenceClassification,
        pretrained,
        spec,
        tokenizer.vocab_size,
        num_labels=len(labels.names),
        problem=labels.problem,
    )
    trainer = train(model, dataset, spec, output, classify_step)
    report = {
        "task": "classify",
        "problem": labels.problem,
        "labels": labels.names,
        "train_examples": len(examples),
    }
    if valid_path is not None:
        valid = TextDataset(
            read_examples(valid_path), tokenizer, labels, spec.data.max_tokens, str(valid_path)
        )
        targets = np.stack([item[2] for item in valid.items])
        report.update(
            glue_metrics(labels.problem, targets, classify_outputs(trainer.module, valid))
        )
        report["valid_examples"] = len(valid)
    if trainer.is_main:
        task = {
            "task": "classify",
            "problem": labels.problem,
            "labels": labels.names,
            "max_tokens": spec.data.max_tokens,
        }
        save_model(trainer.module, tokenizer, output / "model", task)
        write_report(output, report)
    return report


def predict_classify(model_dir, input_path, batch_size: int = 16, device: str = "auto"):
    """(rows of {label or score: value}, GLUE metrics when the input has labels)."""
    from genobird.nlp.classify import LabelSpace, TextDataset, glue_metrics, read_examples

    model, tokenizer, task = load_model(model_dir, device)
    labels = LabelSpace(task["problem"], task["labels"])
    examples = read_examples(input_path)
    dataset = TextDataset(examples, tokenizer, labels, task["max_tokens"], str(input_path))
    outputs = classify_outputs(model, dataset, batch_size)
    rows = [_prediction(labels, row) for row in outputs]
    metrics = {}
    if all(item[2] is not None for item in dataset.items):
        targets = np.stack([item[2] for item in dataset.items])
        metrics = glue_metrics(labels.problem, targets, outputs)
    return rows, metrics


def _prediction(labels, logits: np.ndarray) -> dict:
    if labels.problem == "regression":
        return {"score": float(logits[0])}
    if labels.problem == "multi_label":
        probabilities = 1 / (1 + np.exp(-logits))
        return {
            "labels": [n for n, p in zip(labels.names, probabilities, strict=True) if p > 0.5],
            "probabilities": dict(zip(labels.names, map(float, probabilities), strict=True)),
        }
    probabilities = np.exp(logits - logits.max())
    probabilities /= probabilities.sum()
    return {
        "label": labels.names[int(logits.argmax())],
        "probabilities": dict(zip(labels.names, map(float, probabilities), strict=True)),
    }


# =========================================================================== multiple choice
def choice_step(model, batch):
    return model(**_choice_inputs(batch), labels=batch["labels"]).loss, {}


def _choice_inputs(batch) -> dict:
    names = (
        "input_ids",
        "attention_mask",
        "global_kinds",
        "global_ids",
        "global_piece_mask",
        "global_mask",
    )
    return {"segment_ids": None, **{name: batch[name] for name in names}}


@torch.no_grad()
def choice_logits(model, dataset, batch_size: int = 8) -> np.ndarray:
    """Scores [examples, global slots]; candidate i of an example is slot i."""
    from torch.utils.data import DataLoader

    device = next(model.parameters()).device
    model.eval()
    logits = []
    for batch in DataLoader(dataset, batch_size=batch_size):
        inputs = {
            k: (v.to(device) if v is not None else None) for k, v in _choice_inputs(batch).items()
        }
        logits.append(model(**inputs).logits.cpu().numpy())
    return np.concatenate(logits)


def finetune_multiple_choice(
    train_path,
    output,
    spec: NLPRecipe,
    valid_path=None,
    pretrained=None,
    tokenizer_path=None,
    max_globals: int = 64,
) -> dict:
    """Fine-tune multiple choice with ETC global tokens; accuracy on `valid_path`."""
    from genobird.nlp import multiple_choice as mc
    from genobird.nlp.models import BigBirdForMultipleChoice

    output = Path(output)
    tokenizer = load_tokenizer(pretrained, tokenizer_path)
    examples = mc.read_choices(train_path)
    dataset = mc.ChoiceDataset(examples, tokenizer, spec.data.max_tokens, max_globals)
    warn_truncated(dataset, "training examples", "--max-tokens or --max-globals")
    etc = {"attention_type": "etc", "num_global_tokens": max_globals}
    model = build_model(BigBirdForMultipleChoice, pretrained, spec, tokenizer.vocab_size, etc)
    trainer = train(model, dataset, spec, output, choice_step)
    report = {
        "task": "multiple_choice",
        "train_examples": len(examples),
        "train_truncated": dataset.truncated,
    }
    if valid_path is not None:
        valid = mc.read_choices(valid_path)
        valid_set = mc.ChoiceDataset(valid, tokenizer, spec.data.max_tokens, max_globals)
        logits = choice_logits(trainer.module, valid_set)
        report.update(
            accuracy=mc.accuracy(valid, logits),
            valid_examples=len(valid),
            valid_truncated=valid_set.truncated,
        )
    if trainer.is_main:
        task = {
            "task": "multiple_choice",
            "max_tokens": spec.data.max_tokens,
            "max_globals": max_globals,
        }
        save_model(trainer.module, tokenizer, output / "model", task)
        write_report(output, report)
    return report


def predict_multiple_choice(model_dir, input_path, batch_size: int = 8, device: str = "auto"):
    """(rows of {"id", "answer", "scores"}, accuracy when the input has answers)."""
    from genobird.nlp import multiple_choice as mc

    model, tokenizer, task = load_model(model_dir, device)
    examples = mc.read_choices(input_path)
    dataset = mc.ChoiceDataset(examples, tokenizer, task["max_tokens"], task["max_globals"])
    logits = choice_logits(model, dataset, batch_size)
    rows = []
    for example, scores in zip(examples, logits, strict=True):
        own = scores[: len(example.candidates)]
        scores_by_candidate = dict(zip(example.candidates, map(float, own), strict=True))
        best = example.candidates[int(own.argmax())]
        rows.append({"id": example.id, "answer": best, "scores": scores_by_candidate})
    metrics = {}
    if all(example.answer is not None for example in examples):
        metrics["accuracy"] = mc.accuracy(examples, logits)
    return rows, metrics
