"""MLM + NSP pretraining on the instance shards (paper appendix F.1), its evaluation,
and the context-length ablation (paper Fig. 8).

Bits per character (BPC), as compared with the paper's Table 5 (SRILM 1.57, BERT at 512
tokens 1.23, BigBird at 4096 tokens 1.12): the masked-token cross-entropy in bits,
divided by the mean number of base pairs per masked token. A token of 8 bp predicted
with 8 bits of loss costs 1 bit per base.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import fields
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
import yaml
from torch.utils.data import DataLoader, Dataset

from genobird.corpus import PretrainingDataset, shard_paths
from genobird.corpus.tokenizer import load_tokenizer
from genobird.device import default_device
from genobird.errors import ConfigError
from genobird.fileio import atomic_write
from genobird.model import BigBirdConfig, BigBirdForPretraining, save_pretrained
from genobird.training import distributed
from genobird.training.collapse import CollapseWatch, unigram_entropy
from genobird.training.config import TrainingConfig, discard_other_run
from genobird.training.trainer import Trainer

log = logging.getLogger(__name__)

PAPER_BPC = {"SRILM": 1.57, "BERT (512 tokens)": 1.23, "BigBird (4096 tokens)": 1.12}
# How held-out masked tokens are scored (hide_scored_tokens), recorded in each
# training_summary.json: a summary without it was written when scoring left BERT's
# unchanged tenth of the scored tokens visible, and its figures are not comparable.
HELDOUT_SCORING = "every scored token shown as [MASK]"


# =========================================================================== task
def _forward(model, batch, with_nsp_loss: bool = True):
    return model(
        batch["input_ids"],
        batch["segment_ids"],
        batch["attention_mask"],
        batch["masked_positions"],
        batch["masked_labels"],
        batch["nsp_labels"] if with_nsp_loss else None,
    )


def pretraining_step(model, batch) -> tuple[torch.Tensor, dict]:
    out = _forward(model, batch)
    metrics = {"mlm_loss": out.mlm_loss.detach()}  # tensors: the trainer reads them when it logs
    if out.nsp_loss is not None:
        metrics["nsp_loss"] = out.nsp_loss.detach()
    return out.loss, metrics


def hide_scored_tokens(batch: dict, mask_id: int) -> dict:
    """The batch with [MASK] at every scored position. BERT masking (mask_tokens) leaves
    10% of the chosen tokens unchanged and replaces 10% with a random piece, which is
    right for training but not for scoring: on the unchanged ones the model reads the
    answer (held-out, human-mini: 0.38 bits per bp on them against 1.87 on the [MASK]ed
    ones), so every evaluation scores predictions from context alone."""
    positions, scored = batch["masked_positions"], batch["masked_labels"] != -100
    input_ids = batch["input_ids"].clone()
    shown = input_ids.gather(1, positions)
    # unscored slots point at position 0 ([CLS]) and write back what is there
    input_ids.scatter_(1, positions, torch.where(scored, mask_id, shown))
    return {**batch, "input_ids": input_ids}


@torch.no_grad()
def masked_token_scores(model, loader, device, mask_id: int) -> dict[str, np.ndarray]:
    """Every masked token of `loader`, in order: its label, whether the model's top piece
    is it, and its loss in nats, each predicted with [MASK] in its place
    (hide_scored_tokens); plus the NSP hits and count over the batches."""
    model.eval()
    labels_seen, hits, losses = [], [], []
    nsp_correct = nsp_total = 0
    for batch in loader:
        batch = hide_scored_tokens({k: v.to(device) for k, v in batch.items()}, mask_id)
        out = _forward(model, batch, with_nsp_loss=False)
        labels = batch["masked_labels"].reshape(-1)
        labels = labels[labels != -100]
        logits = out.mlm_logits.float()
        losses.append(F.cross_entropy(logits, labels, reduction="none").cpu().numpy())
        hits.append((logits.argmax(-1) == labels).cpu().numpy())
        labels_seen.append(labels.cpu().numpy())
        nsp = batch["nsp_labels"]
        keep = nsp != -100
        nsp_correct += int((out.nsp_logits.argmax(-1)[keep] == nsp[keep]).sum())
        nsp_total += int(keep.sum())
    return {
        "labels": _joined(labels_seen, np.int64),
        "correct": _joined(hits, bool),
        "loss_nats": _joined(losses, np.float32),
        "nsp_correct": nsp_correct,
        "nsp_total": nsp_total,
    }


def _joined(parts: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def evaluate_pretraining(model, loader, device, piece_lengths: np.ndarray, mask_id: int) -> dict:
    """Masked-token accuracy and loss, NSP accuracy and bits per character."""
    scores = masked_token_scores(model, loader, device, mask_id)
    metrics = masked_token_metrics(scores, piece_lengths)
    if scores["nsp_total"]:
        metrics["nsp_accuracy"] = scores["nsp_correct"] / scores["nsp_total"]
    return metrics


def masked_token_metrics(scores: dict, piece_lengths: np.ndarray) -> dict:
    """Loss, accuracy and bits per character of `masked_token_scores`."""
    masked = len(scores["labels"])
    if not masked:
        raise ConfigError("the evaluation set has no masked tokens")
    loss_nats = float(scores["loss_nats"].astype(np.float64).sum())
    bp = float(piece_lengths[scores["labels"]].sum())
    return {
        "mlm_loss": loss_nats / masked,
        "mlm_accuracy": float(scores["correct"].mean()),
        "bp_per_masked_token": bp / masked,
        "bits_per_character": loss_nats / math.log(2) / bp,
        "masked_tokens": masked,
    }


class TruncatedDataset(Dataset):
    """Instances cut to their first `length` tokens, for the context-length ablation.
    Masks beyond the cut are dropped, and NSP is left out (B may be cut off), so the
    ablation compares masked-token prediction alone, as the paper's Fig. 8 does."""

    def __init__(self, base: Dataset, length: int):
        self.base, self.length = base, length

    def __len__(self) -> int:
        return len(self.base)

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.base, "set_epoch"):
            self.base.set_epoch(epoch)

    def __getitem__(self, index: int) -> dict:
        item = dict(self.base[index])
        for key in ("input_ids", "segment_ids", "attention_mask"):
            item[key] = item[key][: self.length]
        outside = item["masked_positions"] >= self.length
        item["masked_labels"] = item["masked_labels"].masked_fill(outside, -100)
        item["masked_positions"] = item["masked_positions"].masked_fill(outside, 0)
        item["nsp_labels"] = torch.tensor(-100)
        return item


class CentredContextDataset(Dataset):
    """Held-out instances seen through a window of `length` tokens ([CLS] + length - 1
    instance tokens) centred on a scored stretch of `scored` tokens; only the masks in
    that stretch are scored. Every length scores the same masked tokens, so accuracy
    across lengths measures what more context on both sides adds, nothing else.

    By default each instance gives one window, centred on the instance. With `longest`
    (the longest length compared), the scored stretches tile each instance wherever a
    window of `longest` fits around them: short contexts are then measured on every
    masked token an instance offers, not only on its centre. `max_windows` keeps that
    many windows, evenly spaced over the whole list (the same ones for every length)."""

    def __init__(self, base: Dataset, length: int, scored: int, longest: int | None = None,
                 max_windows: int | None = None):  # fmt: skip
        if scored > length - 1:
            raise ConfigError(f"the scored centre ({scored}) must fit in the window ({length})")
        if longest is not None and longest < length:
            raise ConfigError(f"longest ({longest}) must be at least the length ({length})")
        self.base, self.length, self.scored = base, length, scored
        self.special = base.special  # the vocabulary's [CLS] and [PAD]
        self._last: tuple[int, dict] | None = None
        self.windows = self._windows(longest or 0, max_windows)

    def _instance(self, index: int) -> dict:
        """The base's instance `index`. Consecutive windows mostly share an instance, and
        reading one from its shard costs more than the model's forward pass on a short
        window, so the last one read is kept (callers never modify it)."""
        if self._last is None or self._last[0] != index:
            self._last = (index, self.base[index])
        return self._last[1]

    def _windows(self, longest: int, max_windows: int | None) -> list[tuple[int, int]]:
        """(instance, centre) pairs: centres `scored` apart where a window of `longest`
        fits in the instance, or the instance's centre when none does (or no longest)."""
        windows = []
        for index in range(len(self.base)):
            real = int(self._instance(index)["attention_mask"].sum())
            if not longest:
                windows.append((index, real // 2))
                continue
            span = min(longest - 1, real)
            last = real - span + span // 2
            windows += [(index, centre) for centre in range(span // 2, last + 1, self.scored)]
        if max_windows is not None and len(windows) > max_windows:
            picks = np.linspace(0, len(windows) - 1, max_windows).round().astype(int)
            windows = [windows[i] for i in picks]
        return windows

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, index: int) -> dict:
        instance, centre = self.windows[index]
        item = self._instance(instance)
        real = int(item["attention_mask"].sum())
        span = min(self.length - 1, real)
        start = min(max(0, centre - span // 2), real - span)
        first_scored = centre - self.scored // 2
        out = {
            "input_ids": torch.full((self.length,), self.special.cls, dtype=torch.long),
            "segment_ids": torch.zeros(self.length, dtype=torch.long),
            "attention_mask": torch.zeros(self.length, dtype=torch.bool),
        }
        for key in out:
            out[key][1 : span + 1] = item[key][start : start + span]
        out["input_ids"][span + 1 :] = self.special.pad
        out["attention_mask"][0] = True
        positions, labels = item["masked_positions"], item["masked_labels"]
        keep = (labels != -100) & (positions >= first_scored)
        keep &= (positions < first_scored + self.scored) & (positions >= start)
        keep &= positions < start + span
        out["masked_positions"] = torch.where(keep, positions - start + 1, 0)
        out["masked_labels"] = labels.masked_fill(~keep, -100)
        out["nsp_labels"] = torch.tensor(-100)
        return out


# =========================================================================== run
SECTIONS = {"model", "training", "data", "output", "context_lengths"}
# dynamic_masking: a new mask of the training instances each epoch (also over shards
# written with stored masks, which are undone first): for runs of many epochs
DATA_KEYS = {"train", "eval", "tokenizer", "init", "dynamic_masking"}
# Model fields that change how the model is computed, not what: a run may move between
# kernels (GPU to CPU) and checkpoint its activations or not, and still resume.
COMPUTATION_MODEL_KEYS = {"attention_impl", "gradient_checkpointing"}
# What a continued pretraining (data.init) may change of the model it starts from.
RUNTIME_MODEL_KEYS = {"hidden_dropout", "attention_dropout"} | COMPUTATION_MODEL_KEYS


def load_run_config(path: str | Path, overrides: dict | None = None) -> dict:
    """Read a pretraining YAML and check every key, so a typo fails before training."""
    path = Path(path)
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: config file not found") from exc
    unknown = set(config) - SECTIONS
    if unknown:
        raise ConfigError(
            f"{path}: unknown sections {sorted(unknown)}; allowed: {sorted(SECTIONS)}"
        )
    for section, allowed in (
        ("model", {f.name for f in fields(BigBirdConfig)} - {"vocab_size"}),
        ("training", {f.name for f in fields(TrainingConfig)}),
        ("data", DATA_KEYS),
    ):
        bad = set(config.get(section) or {}) - allowed
        if bad:
            raise ConfigError(f"{path}: unknown {section} keys {sorted(bad)}")
    for dotted, value in (overrides or {}).items():
        section, key = dotted.split(".")
        config.setdefault(section, {})[key] = value
    data = config.get("data") or {}
    if "init" in data:  # continued pretraining: the tokenizer comes with the model
        data.setdefault("tokenizer", data["init"])
    for key in ("train", "tokenizer"):
        if key not in data:
            raise ConfigError(
                f"{path}: data.{key} is required (in the file or on the command line)"
            )
    config.setdefault("output", "results/pretrain")
    return config


def _build_model(
    model_section: dict, pieces: list[str], seed: int, pad_id: int = 0
) -> BigBirdForPretraining:
    # the vocabulary, not the config, decides the size and the [PAD] row
    config = BigBirdConfig(**{**model_section, "vocab_size": len(pieces), "pad_token_id": pad_id})
    # Initialisation draws from the global RNG: fork it so that no global state leaks.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BigBirdForPretraining(config)
    model.encoder.embeddings.set_vocabulary(pieces)
    return model


def _initial_model(model_dir, model_section: dict, tokenizer) -> BigBirdForPretraining:
    """Continued pretraining: the model of `model_dir` (a genobird pretraining model, one
    converted from HuggingFace, ...), with only runtime settings taken from the config,
    and max_position where the model has rotary positions (continued pretraining on
    longer instances than its own)."""
    from genobird.model.io import from_pretrained, read_model_description

    changeable = set(RUNTIME_MODEL_KEYS)
    if read_model_description(model_dir)["config"].get("position_encoding") == "rotary":
        changeable.add("max_position")  # no position table: longer inputs, same weights
    fixed = sorted(set(model_section) - changeable)
    if fixed:
        raise ConfigError(
            f"model.{fixed[0]} is fixed by the initial model {model_dir}; remove it from the "
            f"config (changeable: {sorted(changeable)})"
        )
    model = from_pretrained(model_dir, config_changes=model_section)
    if not isinstance(model, BigBirdForPretraining):
        raise ConfigError(f"{model_dir}: a {type(model).__name__}, not a pretraining model")
    if model.config.vocab_size != tokenizer.vocab_size:
        raise ConfigError(
            f"{model_dir}: {model.config.vocab_size} token embeddings but the tokenizer has "
            f"{tokenizer.vocab_size} pieces; use the model's own tokenizer"
        )
    return model


def model_identity(config) -> dict:
    """The model fields a pretraining checkpoint must share with its resumption."""
    return {k: v for k, v in config.to_dict().items() if k not in COMPUTATION_MODEL_KEYS}


def train_one(config: dict, output: Path, train_set, eval_set, tokenizer, model_overrides=None):
    training = TrainingConfig(**config.get("training", {}))
    model_section = {**config.get("model", {}), **(model_overrides or {})}
    init = config["data"].get("init")
    if init:
        model = _initial_model(init, model_section, tokenizer)
    else:
        model = _build_model(model_section, tokenizer.pieces, training.seed, tokenizer.pad_id)
    lengths = tokenizer.piece_lengths

    def eval_fn(module, loader, device):
        return evaluate_pretraining(module, loader, device, lengths, tokenizer.mask_id)

    identity = {"model": model_identity(model.config)}
    shards = train_set
    while not isinstance(shards, PretrainingDataset):  # a context ablation's cut instances
        shards = shards.base
    watch = CollapseWatch.for_run(unigram_entropy(shards.paths, shards.special.all()),
                                  training.max_steps)  # fmt: skip
    trainer = Trainer(model, train_set, training, output, pretraining_step, eval_set, eval_fn,
                      run_identity=identity, monitor=watch)  # fmt: skip
    if config.get("restart_changed"):  # a pipeline rerun after its config changed
        discard_other_run(trainer.checkpoint_root, training, identity)
    with torch.random.fork_rng(devices=[]):  # dropout's stream, saved in checkpoints
        torch.manual_seed(training.seed)
        if not config.get("no_resume"):
            trainer.resume()
        trainer.train()
    trainer.collapse = watch.verdict()
    return trainer


def require_same_vocabulary(shards: PretrainingDataset, tokenizer, name: str, source) -> None:
    """Instances must use the model's vocabulary: other ids would be scored as garbage."""
    same_pieces = not shards.vocabulary or shards.vocabulary == tokenizer.vocabulary_digest
    same_ids = (shards.special, shards.vocab_size) == (tokenizer.special, tokenizer.vocab_size)
    if not (same_pieces and same_ids):
        raise ConfigError(
            f"{name}: instances built with another vocabulary than {source}; "
            "rebuild them with `genobird corpus instances`"
        )


def run_pretraining(config: dict) -> dict:
    """Train, evaluate and write the model directory; returns the training summary."""
    distributed.init_from_environment()
    data = config["data"]
    if data.get("dynamic_masking") not in (None, True, False):  # "false" would read as true
        raise ConfigError(
            f"data.dynamic_masking must be true or false, got {data['dynamic_masking']!r}"
        )
    tokenizer = load_tokenizer(data["tokenizer"])
    train_set = PretrainingDataset(
        shard_paths(data["train"]),
        dynamic_masking=data.get("dynamic_masking"),
        seed=config["training"].get("seed", 0),
    )
    eval_set = PretrainingDataset(shard_paths(data["eval"])) if data.get("eval") else None
    for name, shards in (("train", train_set), ("eval", eval_set)):
        if shards is not None:
            require_same_vocabulary(shards, tokenizer, f"data.{name}", data["tokenizer"])
    max_position = config.get("model", {}).get("max_position", BigBirdConfig.max_position)
    if train_set.spec.max_seq_length > max_position:
        raise ConfigError(
            f"instances have {train_set.spec.max_seq_length} tokens but model.max_position is "
            f"{max_position}; raise max_position or rebuild the instances shorter"
        )
    output = Path(config["output"])
    trainer = train_one(config, output, train_set, eval_set, tokenizer)
    final = trainer.evaluate() if eval_set is not None else {}
    summary = {
        "steps": trainer.state.step,
        "train_last": trainer.state.history[-1] if trainer.state.history else {},
        "eval": final,
        "heldout_scoring": HELDOUT_SCORING,
        # whether the MLM loss left the level of a model that ignores its input
        "mlm_collapse": trainer.collapse,
        # the run's attention kernel against the reference on its first batch
        "attention_kernel_check": trainer.kernel_check,
        "paper_bits_per_character": PAPER_BPC,
        "bits_per_character_definition": (
            "masked-token cross-entropy in bits / mean bp per masked token"
        ),
    }
    if trainer.is_main:
        model_dir = output / "model"
        save_pretrained(trainer.module, model_dir, extra={"task": "pretraining"})
        tokenizer.save(model_dir)
        with atomic_write(model_dir / "training_summary.json") as handle:
            json.dump(summary, handle, indent=2)
    if config.get("context_lengths"):
        summary["context_ablation"] = context_ablation(
            config, train_set, eval_set, tokenizer, output
        )
    return summary


def context_ablation(config, train_set, eval_set, tokenizer, output: Path) -> list[dict]:
    """Train and evaluate at each maximum length; plot masked-token accuracy vs length."""
    if eval_set is None:
        raise ConfigError("context_lengths needs data.eval (held-out instances)")
    results = []
    for length in sorted(config["context_lengths"]):
        if length > train_set.spec.max_seq_length:
            raise ConfigError(
                f"context length {length} exceeds the instances' {train_set.spec.max_seq_length}"
            )
        trainer = train_one(
            config, output / "ablation" / f"len-{length}",
            TruncatedDataset(train_set, length), TruncatedDataset(eval_set, length), tokenizer,
        )  # fmt: skip
        metrics = trainer.evaluate()
        results.append({"context_length": length, **metrics})
        log.info("context %d: %s", length, metrics)
    if distributed.rank() == 0:
        with atomic_write(output / "context_ablation.json") as handle:
            json.dump(results, handle, indent=2)
        plot_context_ablation(results, output / "mlm_accuracy_vs_context.png")
    return results


def plot_context_ablation(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lengths = [r["context_length"] for r in results]
    accuracy = [100 * r["mlm_accuracy"] for r in results]
    figure, axis = plt.subplots(figsize=(5, 3.5))
    axis.plot(lengths, accuracy, marker="o")
    axis.set_xscale("log", base=2)
    axis.set_xlabel("maximum context length (tokens)")
    axis.set_ylabel("masked-token accuracy (%)")
    axis.set_title("MLM accuracy vs context length (cf. paper Fig. 8)")
    axis.grid(alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    from genobird.fileio import atomic_path

    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=120)
    plt.close(figure)


__all__ = [
    "HELDOUT_SCORING",
    "TruncatedDataset",
    "evaluate_pretraining",
    "evaluate_saved_model",
    "hide_scored_tokens",
    "load_run_config",
    "masked_token_scores",
    "pretraining_step",
    "run_pretraining",
]


SHORT_WINDOW_TOKENS = 512  # tokens per batch of the context ablation's short windows


def saved_model_and_instances(model_dir, instances_dir):
    """(model in eval mode on the default device, a GPU where there is one; its tokenizer;
    the instances), the instances checked against the model's vocabulary. A model with
    rotary positions (no position table) reads instances longer than it was pretrained
    on: its max_position grows to theirs, so how it extrapolates can be measured."""
    from genobird.model.io import from_pretrained, read_model_description

    tokenizer = load_tokenizer(model_dir)
    dataset = PretrainingDataset(shard_paths(instances_dir))
    require_same_vocabulary(dataset, tokenizer, str(instances_dir), model_dir)
    config = read_model_description(model_dir)["config"]
    changes = {}
    instance_length = len(dataset[0]["input_ids"]) if len(dataset) else 0
    if config.get("position_encoding") == "rotary" and instance_length > config["max_position"]:
        changes["max_position"] = instance_length
    model = from_pretrained(model_dir, default_device(), changes).eval()
    return model, tokenizer, dataset


def evaluate_saved_model(model_dir, instances_dir, batch_size: int = 8) -> dict:
    """Held-out masked-token metrics of a saved pretrained model, scored the way this
    version scores (a training_summary.json written by an older one may differ)."""
    model, tokenizer, dataset = saved_model_and_instances(model_dir, instances_dir)
    loader = DataLoader(dataset, batch_size=batch_size)
    device = next(model.parameters()).device
    return evaluate_pretraining(model, loader, device, tokenizer.piece_lengths, tokenizer.mask_id)


def mlm_accuracy_by_context(model_dir, instances_dir, lengths, batch_size: int = 8,
                            max_windows: int = 4000) -> list[dict]:  # fmt: skip
    """Masked-token accuracy of a pretrained model on held-out instances seen through
    centred windows of each length (no retraining: how much the trained model gains from
    more context on both sides). Every length scores the same masked tokens: those in
    stretches of half the shortest length, tiled over each instance wherever the longest
    window fits around them (CentredContextDataset; at most `max_windows` windows).
    Lengths beyond the instances or the model's max_position are left out.

    Since the tokens are the same, each length after the first also gets its gain over
    the previous one, paired token by token, with a 95% interval (mean +- 1.96 standard
    errors of the per-token differences): `accuracy_gain` (in accuracy) and `bits_gain`
    (bits per bp saved; positive = the longer context predicts better)."""
    model, tokenizer, dataset = saved_model_and_instances(model_dir, instances_dir)
    piece_lengths = tokenizer.piece_lengths
    longest = min(model.config.max_position, len(dataset[0]["input_ids"]))
    lengths = sorted(length for length in set(lengths) if 8 <= length <= longest)
    if not lengths:
        return []
    scored = lengths[0] // 2
    device = next(model.parameters()).device
    rows, previous = [], None
    for length in lengths:
        windows = CentredContextDataset(dataset, length, scored, lengths[-1], max_windows)
        # short windows in bigger batches: per-batch overhead, not tokens, costs there
        loader = DataLoader(windows, batch_size=max(batch_size, SHORT_WINDOW_TOKENS // length))
        scores = masked_token_scores(model, loader, device, tokenizer.mask_id)
        row = {"context_length": length, **masked_token_metrics(scores, piece_lengths)}
        row["windows"] = len(windows)
        if previous is not None:
            row.update(paired_context_gain(previous, scores, piece_lengths))
        rows.append(row)
        previous = scores
    return rows


def paired_context_gain(shorter: dict, longer: dict, piece_lengths: np.ndarray) -> dict:
    """What the longer context adds on the same masked tokens: the mean per-token
    difference and its 95% interval, for accuracy and for bits per bp."""
    if not np.array_equal(shorter["labels"], longer["labels"]):
        raise ConfigError("context lengths must score the same masked tokens to be compared")
    bp_per_token = float(piece_lengths[shorter["labels"]].mean())
    accuracy = longer["correct"].astype(np.float64) - shorter["correct"]
    # bits per bp saved, per token, scaled so that their mean is the BPC difference
    bits = (shorter["loss_nats"].astype(np.float64) - longer["loss_nats"]) / math.log(2)
    bits /= bp_per_token
    out = {}
    for name, values in (("accuracy_gain", accuracy), ("bits_gain", bits)):
        half = 1.96 * float(values.std(ddof=1)) / math.sqrt(len(values)) if len(values) > 1 else 0.0
        out[name] = float(values.mean())
        out[name + "_ci95"] = [float(values.mean()) - half, float(values.mean()) + half]
    return out
