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
from dataclasses import fields
from pathlib import Path

import torch
import yaml

from genobird.corpus import PretrainingDataset, shard_paths
from genobird.corpus.tokenizer import load_tokenizer
from genobird.errors import ConfigError
from genobird.fileio import atomic_write
from genobird.model import BigBirdConfig, BigBirdForPretraining, save_pretrained
from genobird.training import distributed
from genobird.training.collapse import CollapseWatch, unigram_entropy
from genobird.training.config import TrainingConfig, discard_other_run
from genobird.training.context import TruncatedDataset
from genobird.training.mlm import (
    HELDOUT_SCORING,
    PAPER_BPC,
    evaluate_pretraining,
    pretraining_step,
    require_same_vocabulary,
)
from genobird.training.trainer import Trainer

log = logging.getLogger(__name__)


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
    watch = CollapseWatch.for_run(
        unigram_entropy(shards.paths, shards.special.all()), training.max_steps
    )
    trainer = Trainer(
        model,
        train_set,
        training,
        output,
        pretraining_step,
        eval_set,
        eval_fn,
        run_identity=identity,
        monitor=watch,
    )
    if config.get("restart_changed"):  # a pipeline rerun after its config changed
        discard_other_run(trainer.checkpoint_root, training, identity)
    with torch.random.fork_rng(devices=[]):  # dropout's stream, saved in checkpoints
        torch.manual_seed(training.seed)
        if not config.get("no_resume"):
            trainer.resume()
        trainer.train()
    trainer.collapse = watch.verdict()
    return trainer


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
            config,
            output / "ablation" / f"len-{length}",
            TruncatedDataset(train_set, length),
            TruncatedDataset(eval_set, length),
            tokenizer,
        )
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
    "context_ablation",
    "load_run_config",
    "model_identity",
    "run_pretraining",
    "train_one",
]
