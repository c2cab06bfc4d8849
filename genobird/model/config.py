"""`BigBirdConfig`: every architectural choice of a model, saved as JSON beside its weights."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from genobird.errors import ConfigError

ATTENTION_TYPES = ("itc", "etc", "dense", "hf")
ACTIVATIONS = ("gelu", "gelu_new")
POSITION_INITS = ("normal", "sinusoidal")
POSITION_ENCODINGS = ("absolute", "rotary")
LAYER_NORMS = ("post", "pre")


@dataclass
class BigBirdConfig:
    # Vocabulary: 32k sentencepiece BPE pieces for DNA in the paper (appendix F.1).
    vocab_size: int = 32_000
    # BERT-base widths, as the paper's genomics model (Table 21: 12 layers x 768).
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    # Longest input in tokens; the paper pretrains DNA at 4096 (about 36 kb at 8.78 bp/token).
    max_position: int = 4096
    # Segments A and B of next-sentence prediction.
    type_vocab_size: int = 2
    # Attention block size b: 64 in the paper; FlexAttention uses the same blocks.
    block_size: int = 64
    # ITC global blocks (first and last by default), attended by all and attending all.
    num_global_blocks: int = 2
    # Sliding window in blocks, centred on the query block (3 = itself and each neighbour).
    num_window_blocks: int = 3
    # Random key blocks per query block, drawn per layer and head from `seed`.
    num_random_blocks: int = 3
    # "itc": global blocks from the sequence itself; "etc": extra global tokens prepended
    # (`num_global_tokens`); "dense": full attention (the BERT baseline of the paper);
    # "hf": HuggingFace BigBird's own pattern and random plan (attention.hf_plan), for
    # models imported from transformers (2 global blocks, a window of 3, fixed there).
    attention_type: str = "itc"
    num_global_tokens: int = 0
    # How to compute sparse attention: "auto" (FlexAttention on CUDA when attention
    # dropout is off, else the PyTorch block-sparse kernel), "block_sparse", "flex", "dense".
    attention_impl: str = "auto"
    # Feed-forward and MLM-transform activation: "gelu" (the exact erf form, genobird's
    # own models) or "gelu_new" (the tanh approximation, HuggingFace BigBird's default and
    # GENA-LM's), so that an imported model computes what it was trained with.
    hidden_act: str = "gelu"
    # Token embeddings times sqrt(hidden_size) before positions and segments are added
    # (HuggingFace BigBird's `rescale_embeddings`; off in BigBird's released models).
    rescale_embeddings: bool = False
    # Token embeddings composed from each DNA piece's bases plus a per-piece residual
    # (model.bigbird.ComposedTokenEmbedding), counting `composed_piece_length` offsets
    # from each end of a piece, instead of a free table. Off in BigBird and in imported
    # models; genobird's pipelines turn it on (docs/experiments, "Learning real DNA").
    composed_token_embeddings: bool = False
    composed_piece_length: int = 16
    # A convolution over the bases the tokens spell, max-pooled to each token and added
    # to its embedding (model.bigbird.BaseConvolution): `base_conv_channels` filters of
    # `base_conv_width` bases (0 channels: off, as in BigBird and imported models).
    # Pieces may hold up to `base_conv_max_piece_length` bases (genobird's vocabularies
    # cap pieces at 64).
    base_conv_channels: int = 0
    base_conv_width: int = 9
    base_conv_max_piece_length: int = 64
    # Initial position table: "normal" (BERT's N(0, initializer_range)) or "sinusoidal"
    # (the Transformer's sin/cos code at the same scale, still learned afterwards).
    position_init: str = "normal"
    # Where positions enter: "absolute", a learned table added to the token embeddings
    # (BERT, BigBird); or "rotary", queries and keys rotated by their position in every
    # layer (RoFormer's RoPE, no table), so attention scores depend on the distance
    # between tokens from the first step. A deviation from the paper; ITC and dense only.
    position_encoding: str = "absolute"
    # "post": BERT's post-LayerNorm block, as BigBird's released models; "pre": LayerNorm
    # before each sublayer and once after the last layer (a deviation from the paper).
    layer_norm: str = "post"
    # BERT's dropouts and initialisation.
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02
    # Recompute each layer in the backward pass: less activation memory, about 1/3 more time.
    gradient_checkpointing: bool = False
    # Token id of [PAD]; its embedding row is kept at zero.
    pad_token_id: int = 0
    # Seeds the random attention plan (and nothing else), so it is fixed by the config.
    seed: int = 0

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        positive = ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size")
        for name in (*positive, "max_position", "block_size"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        if self.hidden_size % self.num_heads:
            raise ConfigError(
                f"hidden_size {self.hidden_size} must be divisible by num_heads {self.num_heads}"
            )
        if self.attention_type not in ATTENTION_TYPES:
            raise ConfigError(
                f"attention_type must be one of {ATTENTION_TYPES}, got {self.attention_type!r}"
            )
        if self.attention_type == "hf" and (self.num_global_blocks, self.num_window_blocks) != (
            2,
            3,
        ):
            raise ConfigError(
                "attention_type 'hf' fixes 2 global blocks and a window of 3 blocks, got "
                f"{self.num_global_blocks} and {self.num_window_blocks}"
            )
        if self.attention_type == "etc" and self.num_global_tokens < 1:
            raise ConfigError("attention_type 'etc' needs num_global_tokens >= 1")
        if self.hidden_act not in ACTIVATIONS:
            raise ConfigError(f"hidden_act must be one of {ACTIVATIONS}, got {self.hidden_act!r}")
        if self.position_init not in POSITION_INITS:
            raise ConfigError(
                f"position_init must be one of {POSITION_INITS}, got {self.position_init!r}"
            )
        if self.position_encoding not in POSITION_ENCODINGS:
            raise ConfigError(
                f"position_encoding must be one of {POSITION_ENCODINGS}, "
                f"got {self.position_encoding!r}"
            )
        if self.position_encoding == "rotary" and self.attention_type == "etc":
            raise ConfigError(
                "position_encoding 'rotary' is not supported with attention_type 'etc' "
                "(its prepended global tokens have no position); use 'absolute'"
            )
        if self.position_encoding == "rotary" and self.head_dim % 2:
            raise ConfigError(f"rotary positions need an even head dim, got {self.head_dim}")
        if self.layer_norm not in LAYER_NORMS:
            raise ConfigError(f"layer_norm must be one of {LAYER_NORMS}, got {self.layer_norm!r}")
        if self.composed_piece_length < 1:
            raise ConfigError(
                f"composed_piece_length must be positive, got {self.composed_piece_length}"
            )
        if self.base_conv_channels < 0:
            raise ConfigError(f"base_conv_channels must be >= 0, got {self.base_conv_channels}")
        if self.base_conv_width < 1 or self.base_conv_width % 2 == 0:
            raise ConfigError(f"base_conv_width must be odd, got {self.base_conv_width}")
        if self.base_conv_max_piece_length < 1:
            raise ConfigError(
                f"base_conv_max_piece_length must be positive, got "
                f"{self.base_conv_max_piece_length}"
            )
        if self.num_window_blocks < 1 or self.num_window_blocks % 2 == 0:
            raise ConfigError(f"num_window_blocks must be odd, got {self.num_window_blocks}")
        for name in ("hidden_dropout", "attention_dropout"):
            if not 0 <= getattr(self, name) < 1:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict, source: str = "config") -> BigBirdConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown BigBirdConfig fields {unknown}")
        return cls(**values)

    def save(self, path: str | Path) -> None:
        from genobird.fileio import atomic_write

        with atomic_write(path) as handle:
            json.dump(self.to_dict(), handle, indent=2)
            handle.write("\n")

    @classmethod
    def load(cls, path: str | Path) -> BigBirdConfig:
        path = Path(path)
        try:
            return cls.from_dict(json.loads(path.read_text()), source=str(path))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc})") from exc

    def replace(self, **changes) -> BigBirdConfig:
        return dataclasses.replace(self, **changes)
