"""Block-sparse attention in pure PyTorch (paper appendix D) and its dense oracle.

Both take q, k, v as [B, H, N, D], an optional key_padding_mask bool [B, N] (True for
real tokens), scale scores by 1/sqrt(D), return [B, H, N, D] with zeros at padded
query positions, and never produce NaN: a query with no key to attend gets zeros.

`dense_attention` is the specification: softmax restricted to exactly the allowed
(query, key) pairs, computed densely. `block_sparse_attention` must equal it for any
BlockLayout, in outputs and gradients (tests check both in fp64).

Under bf16/fp16 the products run in the input dtype but softmax statistics (max, sum)
are taken in fp32, and the probabilities are cast back for the product with V.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from genobird.attention.layouts import BlockLayout
from genobird.errors import ConfigError


def _masked_softmax(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim restricted to `allowed`, in fp32; all-masked rows -> 0.

    Filling masked scores with -inf alone would give NaN on rows with no allowed key, so
    such rows are filled with zeros before the softmax and zeroed after it. Half types
    are upcast to fp32 for the statistics; fp32 and fp64 keep their precision.
    """
    statistics_dtype = torch.promote_types(scores.dtype, torch.float32)
    scores = scores.to(statistics_dtype).masked_fill(~allowed, float("-inf"))
    has_key = allowed.any(dim=-1, keepdim=True)
    scores = scores.masked_fill(~has_key, 0.0)
    return torch.softmax(scores, dim=-1) * has_key


def _check_inputs(q, k, v, key_padding_mask) -> None:
    if q.dim() != 4 or q.shape != k.shape or k.shape != v.shape:
        raise ConfigError(
            "q, k, v must all be [B, H, N, D]; "
            f"got {list(q.shape)}, {list(k.shape)}, {list(v.shape)}"
        )
    if key_padding_mask is not None and (
        key_padding_mask.dtype != torch.bool or key_padding_mask.shape != (q.shape[0], q.shape[2])
    ):
        raise ConfigError(
            f"key_padding_mask must be bool [B, N] = {[q.shape[0], q.shape[2]]}, "
            f"got {key_padding_mask.dtype} {list(key_padding_mask.shape)}"
        )


def dense_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    key_padding_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Softmax attention over the pairs allowed by `mask` (bool [H, N, N] or [N, N], or
    None for all pairs) and by `key_padding_mask`; the oracle for every sparse kernel."""
    _check_inputs(q, k, v, key_padding_mask)
    batch, _, length, dim = q.shape
    allowed = torch.ones(length, length, dtype=torch.bool, device=q.device)
    if mask is not None:
        allowed = mask.to(q.device)
    allowed = allowed.expand(batch, q.shape[1], length, length)
    if key_padding_mask is not None:
        allowed = allowed & key_padding_mask[:, None, None, :]
    scores = (q @ k.transpose(-1, -2)) * dim**-0.5  # [B, H, N, N]
    probs = _masked_softmax(scores, allowed)
    if dropout_p > 0:
        probs = F.dropout(probs, p=dropout_p)
    out = probs.to(v.dtype) @ v
    return _zero_padded_queries(out, key_padding_mask)


def _zero_padded_queries(out: torch.Tensor, key_padding_mask: torch.Tensor | None):
    if key_padding_mask is None:
        return out
    return out * key_padding_mask[:, None, :, None].to(out.dtype)


def block_sparse_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: BlockLayout,
    key_padding_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor:
    """Attention restricted to `layout`, with cost linear in N for a fixed pattern width.

    Queries are blocked into [B, H, NB, b, D]. Sparse rows gather their K key blocks into
    [B, H, R, K*b, D] (global columns, window and random blocks alike, each once) and take
    one batched product; global rows attend the whole sequence densely. N need not be a
    multiple of b: inputs are zero-padded to NB*b inside and the padding masked as keys.
    """
    _check_inputs(q, k, v, key_padding_mask)
    batch, heads, length, dim = q.shape
    if length != layout.seq_len or heads != layout.num_heads:
        raise ConfigError(
            f"layout is for N={layout.seq_len}, H={layout.num_heads}; "
            f"inputs have N={length}, H={heads}"
        )
    size, blocks = layout.block_size, layout.num_blocks
    padded = blocks * size
    key_valid = torch.ones(batch, padded, dtype=torch.bool, device=q.device)
    key_valid[:, length:] = False
    if key_padding_mask is not None:
        key_valid[:, :length] &= key_padding_mask
    if padded != length:
        q, k, v = (F.pad(t, (0, 0, 0, padded - length)) for t in (q, k, v))

    q_blocks = q.view(batch, heads, blocks, size, dim)
    parts, order = [], []
    if len(layout.sparse_rows):
        parts.append(_sparse_rows(q_blocks, k, v, key_valid, layout, dropout_p))
        order.append(layout.sparse_rows)
    if len(layout.global_rows):
        parts.append(_global_rows(q_blocks, k, v, key_valid, layout, dropout_p))
        order.append(layout.global_rows)
    # Put the row blocks back in sequence order: out[:, :, order[i]] = parts[i].
    inverse = torch.argsort(torch.cat(order)).to(q.device)
    out = torch.cat(parts, dim=2)[:, :, inverse].reshape(batch, heads, padded, dim)
    return _zero_padded_queries(out[:, :, :length], key_padding_mask)


def _sparse_rows(q_blocks, k, v, key_valid, layout: BlockLayout, dropout_p: float):
    batch, heads, blocks, size, dim = q_blocks.shape
    device = q_blocks.device
    rows = layout.sparse_rows.to(device)
    index, valid = (t.to(device) for t in layout.sparse_plan)  # [H, R, K]
    width = index.shape[-1]
    head = torch.arange(heads, device=device)[:, None, None]
    k_blocks = k.view(batch, heads, blocks, size, dim)
    v_blocks = v.view(batch, heads, blocks, size, dim)
    # Gather: [B, H, R, K, b, D] -> [B, H, R, K*b, D]; autograd scatters gradients back
    # (accumulating) into every key block that several query blocks used.
    k_gathered = k_blocks[:, head, index].reshape(batch, heads, -1, width * size, dim)
    v_gathered = v_blocks[:, head, index].reshape(batch, heads, -1, width * size, dim)
    queries = q_blocks[:, :, rows]  # [B, H, R, b, D]
    scores = (queries @ k_gathered.transpose(-1, -2)) * dim**-0.5  # [B, H, R, b, K*b]
    key_ok = key_valid.view(batch, blocks, size)[:, index]  # [B, H, R, K, b]
    allowed = (key_ok & valid[None, ..., None]).reshape(batch, heads, -1, 1, width * size)
    probs = _masked_softmax(scores, allowed)
    if dropout_p > 0:
        probs = F.dropout(probs, p=dropout_p)
    return probs.to(v.dtype) @ v_gathered  # [B, H, R, b, D]


def _global_rows(q_blocks, k, v, key_valid, layout: BlockLayout, dropout_p: float):
    batch, heads, _, size, dim = q_blocks.shape
    rows = layout.global_rows.to(q_blocks.device)
    queries = q_blocks[:, :, rows].reshape(batch, heads, -1, dim)  # [B, H, G*b, D]
    scores = (queries @ k.transpose(-1, -2)) * dim**-0.5  # [B, H, G*b, NB*b]
    probs = _masked_softmax(scores, key_valid[:, None, None, :])
    if dropout_p > 0:
        probs = F.dropout(probs, p=dropout_p)
    return (probs.to(v.dtype) @ v).view(batch, heads, len(rows), size, dim)
