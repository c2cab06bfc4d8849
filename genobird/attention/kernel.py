"""Block-sparse attention in pure PyTorch (paper appendix D) and its dense oracle.

Both take q, k, v as [B, H, N, D], an optional key_padding_mask bool [B, N] (True for
real tokens), scale scores by 1/sqrt(D), return [B, H, N, D] with zeros at padded
query positions, and never produce NaN: a query with no key to attend gets zeros.

`dense_attention` is the specification: softmax restricted to exactly the allowed
(query, key) pairs, computed densely. `block_sparse_attention` must equal it for any
BlockLayout, in outputs and gradients (tests check both in fp64).

Under bf16/fp16 the products run in the input dtype while softmax statistics (max,
sum) are kept in fp32: inside PyTorch's fused SDPA kernel for the block-sparse path,
explicitly in the oracle.
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
    log_counts: torch.Tensor | None = None,
) -> torch.Tensor:
    """Softmax attention over the pairs allowed by `mask` (bool [H, N, N] or [N, N], or
    None for all pairs) and by `key_padding_mask`; the oracle for every sparse kernel.
    `log_counts` ([H, N, N]) weights a pair as if its key sat that many times in the row."""
    _check_inputs(q, k, v, key_padding_mask)
    batch, _, length, dim = q.shape
    allowed = torch.ones(length, length, dtype=torch.bool, device=q.device)
    if mask is not None:
        allowed = mask.to(q.device)
    allowed = allowed.expand(batch, q.shape[1], length, length)
    if key_padding_mask is not None:
        allowed = allowed & key_padding_mask[:, None, None, :]
    scores = (q @ k.transpose(-1, -2)) * dim**-0.5  # [B, H, N, N]
    if log_counts is not None:
        scores = scores + log_counts.to(q.device, scores.dtype)
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
    # Gather whole blocks as rows of a [B*H*NB, b*D] matrix: [B*H*R*K, b*D] ->
    # [B*H*R, K*b, D]. index_select on dim 0 copies contiguous rows (PyTorch's fast
    # path), and its backward, index_add_, accumulates the gradient of a key block from
    # every query block that used it.
    first_block = torch.arange(batch * heads, device=device).view(batch, heads, 1, 1) * blocks
    flat_index = (index[None] + first_block).flatten()
    k_gathered = k.reshape(-1, size * dim).index_select(0, flat_index)
    v_gathered = v.reshape(-1, size * dim).index_select(0, flat_index)
    k_gathered = k_gathered.view(-1, width * size, dim)  # [B*H*R, K*b, D]
    v_gathered = v_gathered.view(-1, width * size, dim)
    queries = q_blocks[:, :, rows].reshape(-1, size, dim)  # [B*H*R, b, D]
    key_ok = key_valid.view(batch, blocks, size)[:, index]  # [B, H, R, K, b]
    allowed = (key_ok & valid[None, ..., None]).reshape(-1, 1, width * size)
    weights = _repeat_weights(layout, batch, size, queries.dtype)
    out = _fused_attention(queries, k_gathered, v_gathered, allowed, dropout_p, weights)
    return out.view(batch, heads, -1, size, dim)


def _repeat_weights(layout: BlockLayout, batch: int, size: int, dtype) -> torch.Tensor | None:
    """[B*H*R, 1, K*b] log-count score bias of the gathered keys, or None (all once)."""
    log_counts = layout.sparse_log_counts
    if log_counts is None:
        return None
    heads, rows, width = log_counts.shape
    expanded = log_counts[None, ..., None].expand(batch, heads, rows, width, size)
    return expanded.reshape(-1, 1, width * size).to(layout.block_mask.device, dtype)


def _fused_attention(
    queries, keys, values, allowed, dropout_p: float, log_counts=None
) -> torch.Tensor:
    """Attention of q [M, b, D] over k, v [M, K, D] restricted to `allowed` [M, 1, K],
    through PyTorch's fused SDPA kernel (fp32 softmax statistics inside, no score
    tensor kept for backward). Masked keys get the dtype's lowest finite bias rather
    than -inf, so a row with no allowed key is finite, and is zeroed afterwards.
    `log_counts` [M, 1, K], added to the scores, counts a key as if repeated."""
    bias = torch.zeros(allowed.shape, dtype=queries.dtype, device=queries.device)
    if log_counts is not None:
        bias = bias + log_counts.to(queries.device)
    bias.masked_fill_(~allowed, torch.finfo(queries.dtype).min)
    # Blocks go in SDPA's batch dimension with one head: the CPU kernel works in a
    # [batch, length, heads, D] layout, identical to ours when heads == 1, so its
    # backward neither transposes nor zero-fills extra score-sized gradient buffers.
    out = F.scaled_dot_product_attention(
        queries[:, None],
        keys[:, None],
        values[:, None],
        attn_mask=bias[:, None],
        dropout_p=dropout_p,
    )[:, 0]
    # zeroed unconditionally: asking whether any row lacks a key would make a CUDA step
    # wait for the answer
    return out * allowed.any(dim=-1, keepdim=True)


def _global_rows(q_blocks, k, v, key_valid, layout: BlockLayout, dropout_p: float):
    batch, heads, _, size, dim = q_blocks.shape
    rows = layout.global_rows.to(q_blocks.device)
    counts = layout.block_counts
    if counts is not None and bool((counts[:, rows] != 1).any()):
        raise ConfigError("a row attending every block must count each block once")
    queries = q_blocks[:, :, rows].reshape(batch * heads, -1, dim)  # [B*H, G*b, D]
    allowed = key_valid[:, None, None, :].expand(-1, heads, -1, -1).reshape(batch * heads, 1, -1)
    out = _fused_attention(
        queries,
        k.reshape(batch * heads, -1, dim),  # [B*H, NB*b, D]
        v.reshape(batch * heads, -1, dim),
        allowed,
        dropout_p,
    )
    return out.view(batch, heads, len(rows), size, dim)
