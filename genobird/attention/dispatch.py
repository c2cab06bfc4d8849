"""One entry point, `attention`, choosing how to compute a layout's attention.

impl: "block_sparse" (pure PyTorch, CPU and CUDA), "flex" (FlexAttention, CUDA),
"dense" (the masked oracle: slow, for checks), or "auto": flex on CUDA when attention
dropout is off (FlexAttention has no dropout) and the block size is a multiple of 32
(its Triton tiles must divide a block), block_sparse otherwise.

Whatever the impl, a layout that covers every block (a sequence too short for the
pattern) is computed as full attention with PyTorch's SDPA, for that call only:
nothing about the module or layout changes, and the next longer input is sparse again.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from genobird.attention.kernel import block_sparse_attention, dense_attention
from genobird.attention.layouts import BlockLayout
from genobird.errors import ConfigError

IMPLEMENTATIONS = ("auto", "block_sparse", "flex", "dense")


def resolve_impl(impl: str, device: torch.device, dropout_p: float, block_size: int = 64) -> str:
    if impl not in IMPLEMENTATIONS:
        raise ConfigError(f"attention_impl must be one of {IMPLEMENTATIONS}, got {impl!r}")
    if impl == "auto":
        # The Triton tiles must divide a block; 32-multiples are what the autotuner's
        # configurations cover (64, the BigBird default, is the size checked on an H100).
        flex_ok = device.type == "cuda" and dropout_p == 0 and block_size % 32 == 0
        return "flex" if flex_ok else "block_sparse"
    if impl == "flex" and dropout_p > 0:
        raise ConfigError(
            "attention_impl 'flex' has no attention dropout; set attention dropout to 0 "
            "or use attention_impl 'block_sparse'"
        )
    return impl


def full_attention(q, k, v, key_padding_mask=None, dropout_p: float = 0.0) -> torch.Tensor:
    """Unrestricted attention through SDPA, with the same padding contract as the kernels."""
    if key_padding_mask is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    # A sequence with no real token would give an all-masked row (NaN in SDPA): let it
    # attend everything and zero its outputs below.
    empty = ~key_padding_mask.any(dim=1, keepdim=True)
    attn_mask = (key_padding_mask | empty)[:, None, None, :]
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p)
    return out * key_padding_mask[:, None, :, None].to(out.dtype)


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: BlockLayout | None,
    key_padding_mask: torch.Tensor | None = None,
    impl: str = "auto",
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Attention of q, k, v [B, H, N, D] restricted to `layout` (None: full attention)."""
    if layout is None or layout.is_dense:
        return full_attention(q, k, v, key_padding_mask, dropout_p)
    chosen = resolve_impl(impl, q.device, dropout_p, layout.block_size)
    if chosen == "flex":
        from genobird.attention.flex import flex_block_sparse_attention

        return flex_block_sparse_attention(q, k, v, layout, key_padding_mask)
    if chosen == "dense":
        mask, log_counts = layout.dense_mask(), layout.dense_log_counts()
        return dense_attention(q, k, v, mask, key_padding_mask, dropout_p, log_counts)
    return block_sparse_attention(q, k, v, layout, key_padding_mask, dropout_p)
