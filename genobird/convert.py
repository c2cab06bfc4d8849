"""`genobird convert`: HuggingFace BigBird directories in and out.

`from_hf` reads a transformers directory (config.json with model_type big_bird; weights
from model.safetensors, a sharded index or pytorch_model.bin, loaded weights-only so no
code runs; tokenizer.json or a genobird sentencepiece model) and writes a genobird model
directory that `finetune`, `score`, `pretrain` (data.init) and `load_predictor` take as
they take genobird's own. BigBirdForPreTraining / ForMaskedLM / BigBirdModel become a
pretraining model (heads the file lacks start fresh, and are named); a
ForSequenceClassification becomes a classifier with HF's head (pooling "hf").

`to_hf` writes what `transformers.BigBirdForMaskedLM.from_pretrained` (a pretraining
model) or `BigBirdForSequenceClassification.from_pretrained` (an "hf"-pooling
classifier) loads with no missing or unexpected tensor, and a tokenizer that
`AutoTokenizer.from_pretrained` loads and that gives genobird's ids.

Both write into a fresh folder beside the target and rename it at the end: an
interrupted conversion leaves nothing half-written.
"""

from __future__ import annotations

import json
import shutil
from contextlib import contextmanager
from pathlib import Path

import safetensors.torch
import torch

from genobird.corpus.hf_export import write_hf_tokenizer
from genobird.corpus.tokenizer import TokenizerBase, load_tokenizer
from genobird.errors import CheckpointError, ConfigError
from genobird.fileio import atomic_write, staging_folder
from genobird.finetuning.card import CARD_FILE
from genobird.model import BigBirdForPretraining
from genobird.model.classifier import BigBirdForSequenceClassification
from genobird.model.hf import config_from_hf, config_to_hf, state_dict_from_hf, state_dict_to_hf
from genobird.model.io import from_pretrained, read_model_description, save_pretrained

CLASSIFIER = "BigBirdForSequenceClassification"
PRETRAINING_ARCHITECTURES = ("BigBirdForPreTraining", "BigBirdForMaskedLM", "BigBirdModel")
HF_PROBLEMS = {
    "single_label_classification": "single_label",
    "multi_label_classification": "multi_label",
    "regression": "regression",
}
# Tensors transformers ties or does not keep in a BigBirdForMaskedLM file.
NOT_WRITTEN = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")
NSP_TENSORS = ("cls.seq_relationship.weight", "cls.seq_relationship.bias")


# =========================================================================== reading HF
def read_hf_config(hf_dir: Path) -> dict:
    path = hf_dir / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{hf_dir}: no config.json; not a HuggingFace model directory")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc})") from exc


def read_hf_weights(hf_dir: Path) -> dict[str, torch.Tensor]:
    """model.safetensors, the shards of model.safetensors.index.json, or pytorch_model.bin
    (unpickled weights-only: tensors and plain containers, never code)."""
    index = hf_dir / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return {k: v for shard in shards for k, v in _read_safetensors(hf_dir / shard).items()}
    if (hf_dir / "model.safetensors").is_file():
        return _read_safetensors(hf_dir / "model.safetensors")
    pickle = hf_dir / "pytorch_model.bin"
    if pickle.is_file():
        try:
            return torch.load(pickle, map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises UnpicklingError, RuntimeError, ...
            raise CheckpointError(
                f"{pickle}: cannot read it weights-only ({str(exc).splitlines()[0]})"
            ) from exc
    raise CheckpointError(
        f"{hf_dir}: no model.safetensors or pytorch_model.bin; download the weights too"
    )


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    try:
        return safetensors.torch.load_file(str(path))
    except (safetensors.SafetensorError, OSError) as exc:
        raise CheckpointError(f"{path}: cannot read weights ({exc})") from exc


def read_hf_tokenizer(hf_dir: Path) -> TokenizerBase:
    if not any((hf_dir / name).is_file() for name in ("tokenizer.json", "tokenizer.model")):
        raise CheckpointError(
            f"{hf_dir}: no tokenizer.json (or genobird tokenizer.model); download the "
            "tokenizer with the model"
        )
    return load_tokenizer(hf_dir)


# =========================================================================== building
def _architecture(hf: dict, source: str) -> str:
    architecture = (hf.get("architectures") or ["BigBirdForPreTraining"])[0]
    if architecture not in (*PRETRAINING_ARCHITECTURES, CLASSIFIER):
        raise CheckpointError(
            f"{source}: architectures = {architecture!r} is not supported (genobird reads "
            f"{[*PRETRAINING_ARCHITECTURES, CLASSIFIER]})"
        )
    return architecture


def _label_names(hf: dict) -> list[str]:
    labels = hf.get("id2label") or {}
    count = hf.get("num_labels", len(labels) or 2)
    return [str(labels.get(str(i), labels.get(i, f"LABEL_{i}"))) for i in range(count)]


def _classifier_problem(hf: dict) -> str:
    """transformers' rule: problem_type if set, else regression for a single label."""
    if hf.get("problem_type"):
        return HF_PROBLEMS[hf["problem_type"]]
    return "regression" if len(_label_names(hf)) == 1 else "single_label"


def _build(architecture: str, hf: dict, config):
    if architecture == CLASSIFIER:
        names = _label_names(hf)
        return BigBirdForSequenceClassification(
            config, num_labels=len(names), problem=_classifier_problem(hf), pooling="hf"
        )
    with torch.random.fork_rng(devices=[]):  # heads missing from the file start seeded
        torch.manual_seed(0)
        return BigBirdForPretraining(config)


def _load(model, weights: dict, config, source: str) -> list[str]:
    """Load the mapped tensors; return the heads that start fresh (absent from the file)."""
    state = state_dict_from_hf(weights, config.num_layers, source)
    result = model.load_state_dict(state, strict=False)
    fresh = [name for name in result.missing_keys if name != "mlm.token_embedding.weight"]
    not_heads = [name for name in fresh if name.startswith(("encoder.", "head."))]
    if not_heads:
        raise CheckpointError(f"{source}: missing the tensor for {not_heads[0]}")
    return sorted({name.split(".")[0] for name in fresh})


def _task_info(hf: dict, window_bp: int | None, config, source: str) -> dict:
    if window_bp is None:
        raise ConfigError(
            f"{source}: a classifier needs --window-bp, the length in bp of the sequences "
            "it was fine-tuned on (scoring fits every input to it)"
        )
    names = _label_names(hf)
    return {
        "task": "classify",
        "feature_names": names,
        "categories": [],
        "window_bp": window_bp,
        "max_tokens": config.max_position,
    }


@contextmanager
def _fresh_directory(target: Path):
    """A temporary folder beside `target`, renamed to it when the block succeeds."""
    target = Path(target)
    if target.exists() and any(target.iterdir()):
        raise ConfigError(f"{target} exists and is not empty; give a new output folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    work = staging_folder(target)
    try:
        yield work
        if target.exists():
            target.rmdir()
        work.rename(target)
    finally:
        if work.exists():
            shutil.rmtree(work)


def from_hf(hf_dir, out_dir, window_bp: int | None = None) -> dict:
    """Convert a transformers BigBird directory into a genobird model directory."""
    hf_dir = Path(hf_dir)
    hf = read_hf_config(hf_dir)
    source = str(hf_dir / "config.json")
    architecture = _architecture(hf, source)
    config = config_from_hf(hf, source)
    tokenizer = read_hf_tokenizer(hf_dir)
    if tokenizer.vocab_size != config.vocab_size:
        raise CheckpointError(
            f"{hf_dir}: the tokenizer has {tokenizer.vocab_size} pieces, the model "
            f"{config.vocab_size} token embeddings; they do not belong together"
        )
    task_info = _task_info(hf, window_bp, config, source) if architecture == CLASSIFIER else None
    model = _build(architecture, hf, config)
    fresh = _load(model, read_hf_weights(hf_dir), config, str(hf_dir))
    origin = {"converted_from": str(hf_dir), "architecture": architecture, "fresh_heads": fresh}
    extra = {"task_info": task_info} if task_info else {"task": "pretraining"}
    with _fresh_directory(out_dir) as work:
        save_pretrained(model, work, extra={**extra, "origin": origin})
        tokenizer.save(work)
    return {
        "architecture": architecture,
        "model_class": type(model).__name__,
        "attention_type": config.attention_type,
        "fresh_heads": fresh,
    }


# =========================================================================== writing HF
def _hf_config(model, description: dict, tokenizer: TokenizerBase) -> dict:
    if isinstance(model, BigBirdForPretraining):
        config = config_to_hf(model.config, "BigBirdForMaskedLM")
    elif isinstance(model, BigBirdForSequenceClassification) and model.base_readers():
        raise ConfigError(
            "a classifier with a base CNN or base k-mers (base_cnn_channels, base_kmers) has "
            "no HuggingFace counterpart; fine-tune with --base-cnn-channels 0 --base-kmers 0, "
            "or with --pooling hf, to export"
        )
    elif isinstance(model, BigBirdForSequenceClassification) and model.pooling == "hf":
        config = config_to_hf(model.config, CLASSIFIER)
        names = (description.get("task_info") or {}).get("feature_names") or [
            f"LABEL_{i}" for i in range(model.num_labels)
        ]
        inverse = {value: key for key, value in HF_PROBLEMS.items()}
        config.update(
            num_labels=model.num_labels,
            problem_type=inverse[model.problem],
            id2label=dict(enumerate(names)),
            label2id={name: i for i, name in enumerate(names)},
        )
    elif isinstance(model, BigBirdForSequenceClassification):
        raise ConfigError(
            f"pooling {model.pooling!r} has no HuggingFace counterpart (its classifier reads "
            "[CLS] through dense + activation); fine-tune with --pooling hf to export"
        )
    else:
        raise ConfigError(f"a {type(model).__name__} has no HuggingFace BigBird counterpart")
    special = tokenizer.special
    config.update(
        pad_token_id=special.pad,
        sep_token_id=special.sep,
        bos_token_id=special.cls,
        eos_token_id=special.sep,
    )
    return config


def hf_card(card: str, model_dir: Path) -> str:
    """A genobird model card for its transformers directory: the library is transformers,
    and how to load it there is said first; the rest (data, recipe, figures, limits) is
    the model's own."""
    body = card.split("---\n", 2)[2] if card.startswith("---\n") else card
    front = (
        "---\nlibrary_name: transformers\ntags:\n- genomics\n- dna\n- bigbird\n- genobird\n---\n"
    )
    loading = (
        f"\nConverted from the genobird model directory `{model_dir}` (`genobird convert "
        "to-hf`): load it with `transformers.BigBirdForSequenceClassification."
        "from_pretrained(THIS_DIR)` and its tokenizer with `AutoTokenizer`; inputs are "
        "tokenised as genobird tokenises them (the same pieces, [CLS] "
        "first).\n"
    )
    title, _, rest = body.partition("\n")
    return front + title + "\n" + loading + rest


def to_hf(model_dir, out_dir) -> dict:
    """Write a genobird model directory as a transformers BigBird directory."""
    model_dir = Path(model_dir)
    description = read_model_description(model_dir)
    model = from_pretrained(model_dir)
    tokenizer = load_tokenizer(model_dir)
    config = _hf_config(model, description, tokenizer)
    state = state_dict_to_hf(model.state_dict(), model.config.num_layers)
    state = {k: v for k, v in state.items() if k not in (*NOT_WRITTEN, *NSP_TENSORS)}
    with _fresh_directory(out_dir) as work:
        safetensors.torch.save_file(
            state, str(work / "model.safetensors"), metadata={"format": "pt"}
        )
        with atomic_write(work / "config.json") as handle:
            json.dump(config, handle, indent=2)
            handle.write("\n")
        write_hf_tokenizer(tokenizer, work, model.config.max_position)
        if (card := model_dir / CARD_FILE).is_file():
            with atomic_write(work / CARD_FILE) as handle:
                handle.write(hf_card(card.read_text(), model_dir))
    result = {
        "architecture": config["architectures"][0],
        "attention_type": config["attention_type"],
        "tensors": len(state),
    }
    if model.config.attention_type == "itc":
        result["note"] = (
            "genobird's ITC random blocks are not transformers' plan: outputs agree for "
            f"inputs of at most {5 + 2 * model.config.num_random_blocks} blocks "
            "(transformers computes those with full attention)"
        )
    return result
