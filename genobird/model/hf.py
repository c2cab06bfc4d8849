"""HuggingFace BigBird (`model_type: big_bird`) weights and configs, both ways.

The encoder, the [CLS] pooler and the MLM / NSP heads map one to one onto transformers'
`BigBirdForPreTraining` names (`bert.*`, `cls.predictions.*`, `cls.seq_relationship`):
the only reshaping is genobird's fused query-key-value projection, split into HF's
`query`, `key` and `value` (rows [q | k | v], each in head-major order as both
models view them). The MLM decoder is tied to the word embeddings on both sides.

What genobird cannot represent is refused with one line naming the key (another model
type, relative positions, a decoder, projections without bias), never approximated.
Block-sparse patterns: an imported `block_sparse` model gets attention_type "hf", which
reproduces transformers' pattern and random plan layer by layer (attention.hf_plan), so
it computes what it was trained with (tested against transformers in training mode;
transformers' eval mode swaps the random blocks for block 0, genobird keeps them). A
genobird ITC model exports as `block_sparse` too, the nearest HF has: its outputs equal
transformers' only where both attend everything (inputs of at most 5 + 2r blocks).
"""

from __future__ import annotations

import torch

from genobird.errors import CheckpointError
from genobird.model.config import BigBirdConfig
from genobird.model.embeddings import composed_weight

# HF config key -> BigBirdConfig field (same meaning, same value).
SAME_VALUE = {
    "vocab_size": "vocab_size",
    "hidden_size": "hidden_size",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "intermediate_size": "intermediate_size",
    "max_position_embeddings": "max_position",
    "type_vocab_size": "type_vocab_size",
    "block_size": "block_size",
    "num_random_blocks": "num_random_blocks",
    "hidden_dropout_prob": "hidden_dropout",
    "attention_probs_dropout_prob": "attention_dropout",
    "layer_norm_eps": "layer_norm_eps",
    "initializer_range": "initializer_range",
    "pad_token_id": "pad_token_id",
    "hidden_act": "hidden_act",
    "rescale_embeddings": "rescale_embeddings",
}
# HF settings genobird has no counterpart for, with the only value it can take.
REQUIRED = {
    "model_type": "big_bird",
    "position_embedding_type": "absolute",
    "is_decoder": False,
    "add_cross_attention": False,
    "use_bias": True,
}
# HF attention_type -> genobird's; "itc" models export as block_sparse too (nearest; the
# outputs agree with transformers only where both compute full attention).
ATTENTION_TYPES = {"block_sparse": "hf", "original_full": "dense"}
EXPORTED_ATTENTION = {"hf": "block_sparse", "itc": "block_sparse", "dense": "original_full"}


def config_from_hf(hf: dict, source: str = "config.json") -> BigBirdConfig:
    """A BigBirdConfig computing what the HF config describes; unsupported keys are
    one-line CheckpointErrors naming the key."""
    for key, value in REQUIRED.items():
        if hf.get(key, value) != value:
            raise CheckpointError(
                f"{source}: {key} = {hf[key]!r} is not supported (genobird needs {value!r})"
            )
    attention = hf.get("attention_type", "block_sparse")
    if attention not in ATTENTION_TYPES:
        raise CheckpointError(f"{source}: attention_type = {attention!r} is not supported")
    values = {ours: hf[theirs] for theirs, ours in SAME_VALUE.items() if theirs in hf}
    values.setdefault("hidden_act", "gelu_new")  # HF BigBird's default
    if attention == "block_sparse":
        # transformers' block-sparse attention drops nothing from its probabilities (only
        # original_full applies attention_probs_dropout_prob): 0 trains the same function,
        # and lets CUDA take the fused FlexAttention kernel, which has no dropout
        values["attention_dropout"] = 0.0
    # HF BigBird: 2 global blocks (first, last) and a window of 3 blocks, fixed
    values.update(
        attention_type=ATTENTION_TYPES[attention], num_global_blocks=2, num_window_blocks=3
    )
    try:
        return BigBirdConfig(**values)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{source}: {exc}") from exc


def config_to_hf(config: BigBirdConfig, architecture: str) -> dict:
    """config.json for transformers, describing `config` exactly (or refusing)."""
    if config.attention_type == "etc":
        raise CheckpointError("attention_type 'etc' has no HuggingFace BigBird counterpart")
    if config.base_conv_channels:
        raise CheckpointError(
            "this model adds a base convolution to its token embeddings "
            "(base_conv_channels), which HuggingFace BigBird has no room for; export a "
            "model trained without it"
        )
    if (config.position_encoding, config.layer_norm) != ("absolute", "post"):
        raise CheckpointError(
            f"this model uses position_encoding {config.position_encoding!r} and "
            f"layer_norm {config.layer_norm!r}; HuggingFace BigBird has only a learned "
            "position table ('absolute') and post-LayerNorm layers ('post')"
        )
    if (config.num_global_blocks, config.num_window_blocks) != (2, 3):
        raise CheckpointError(
            "HuggingFace BigBird fixes 2 global blocks and a window of 3 blocks; this model "
            f"has {config.num_global_blocks} and {config.num_window_blocks}"
        )
    values = {theirs: getattr(config, ours) for theirs, ours in SAME_VALUE.items()}
    return {
        **values,
        **REQUIRED,
        "architectures": [architecture],
        "attention_type": EXPORTED_ATTENTION[config.attention_type],
        "tie_word_embeddings": True,
    }


def _layer_names(index: int) -> dict[str, str]:
    """genobird name -> HF name inside encoder layer `index` (qkv handled apart)."""
    ours, theirs = f"encoder.layers.{index}.", f"bert.encoder.layer.{index}."
    pairs = {
        "attention.out": "attention.output.dense",
        "attention_norm": "attention.output.LayerNorm",
        "feed_forward.up": "intermediate.dense",
        "feed_forward.down": "output.dense",
        "output_norm": "output.LayerNorm",
    }
    return {
        ours + a + suffix: theirs + b + suffix
        for a, b in pairs.items()
        for suffix in (".weight", ".bias")
    }


def _names(num_layers: int) -> dict[str, str]:
    """genobird name -> HF name of every tensor but the fused qkv and the tied decoder."""
    names = {
        "encoder.embeddings.tokens.weight": "bert.embeddings.word_embeddings.weight",
        "encoder.embeddings.positions.weight": "bert.embeddings.position_embeddings.weight",
        "encoder.embeddings.segments.weight": "bert.embeddings.token_type_embeddings.weight",
        "encoder.embeddings.norm.weight": "bert.embeddings.LayerNorm.weight",
        "encoder.embeddings.norm.bias": "bert.embeddings.LayerNorm.bias",
        "encoder.pooler.weight": "bert.pooler.weight",
        "encoder.pooler.bias": "bert.pooler.bias",
        "mlm.bias": "cls.predictions.bias",
        "mlm.transform.weight": "cls.predictions.transform.dense.weight",
        "mlm.transform.bias": "cls.predictions.transform.dense.bias",
        "mlm.norm.weight": "cls.predictions.transform.LayerNorm.weight",
        "mlm.norm.bias": "cls.predictions.transform.LayerNorm.bias",
        "nsp.weight": "cls.seq_relationship.weight",
        "nsp.bias": "cls.seq_relationship.bias",
        # a classifier with pooling "hf" (BigBirdForSequenceClassification's head)
        "head.dense.weight": "classifier.dense.weight",
        "head.dense.bias": "classifier.dense.bias",
        "head.linear.weight": "classifier.out_proj.weight",
        "head.linear.bias": "classifier.out_proj.bias",
    }
    for index in range(num_layers):
        names.update(_layer_names(index))
    return names


QKV = ("query", "key", "value")


COMPOSED = "encoder.embeddings.tokens."
COMPOSED_TENSORS = ("residual", "table", "piece_terms")


def with_plain_token_table(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`state` with composed token embeddings (residual + base table) replaced by the
    [V, C] table they compute, which is all HF BigBird has room for (and exact)."""
    if COMPOSED + "table" not in state:
        return state
    parts = [state[COMPOSED + name] for name in COMPOSED_TENSORS]
    plain = {k: v for k, v in state.items() if not k.startswith(COMPOSED)}
    with torch.no_grad():
        plain[COMPOSED + "weight"] = composed_weight(*parts)
    return plain


def state_dict_to_hf(state: dict[str, torch.Tensor], num_layers: int) -> dict[str, torch.Tensor]:
    """A genobird model's tensors under HF's names (BigBirdForPreTraining's for a
    pretraining model, BigBirdForSequenceClassification's for an "hf"-pooling classifier),
    the tied MLM decoder included."""
    state = with_plain_token_table(state)
    out = {theirs: state[ours] for ours, theirs in _names(num_layers).items() if ours in state}
    for index in range(num_layers):
        prefix = f"encoder.layers.{index}.attention.qkv."
        for suffix in ("weight", "bias"):
            for name, part in zip(QKV, state[prefix + suffix].chunk(3), strict=True):
                out[f"bert.encoder.layer.{index}.attention.self.{name}.{suffix}"] = part
    if "cls.predictions.bias" in out:
        out["cls.predictions.decoder.weight"] = out["bert.embeddings.word_embeddings.weight"]
        out["cls.predictions.decoder.bias"] = out["cls.predictions.bias"]
    return {name: tensor.contiguous() for name, tensor in out.items()}


def state_dict_from_hf(
    hf: dict[str, torch.Tensor], num_layers: int, source: str = "weights"
) -> dict[str, torch.Tensor]:
    """genobird tensors from HF BigBird ones (ForPreTraining or ForMaskedLM names; a bare
    BigBirdModel's lack the `bert.` prefix). Heads absent from the file are left out, so
    the caller keeps its fresh initialisation for them."""
    if not any(name.startswith("bert.") for name in hf):
        hf = {f"bert.{name}": tensor for name, tensor in hf.items()}
    out = {ours: hf[theirs] for ours, theirs in _names(num_layers).items() if theirs in hf}
    for index in range(num_layers):
        for suffix in ("weight", "bias"):
            parts = [f"bert.encoder.layer.{index}.attention.self.{n}.{suffix}" for n in QKV]
            missing = [p for p in parts if p not in hf]
            if missing:
                raise CheckpointError(f"{source}: missing {missing[0]}; not a BigBird checkpoint")
            out[f"encoder.layers.{index}.attention.qkv.{suffix}"] = torch.cat(
                [hf[p] for p in parts]
            )
    return out
