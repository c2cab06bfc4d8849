"""FlexAttention backend (torch.nn.attention.flex_attention) for CUDA.

The layout is handed to FlexAttention as explicit block lists, so the fused kernel visits
only the layout's blocks. A layout that repeats key blocks in a row (HuggingFace
BigBird's, `hf_plan`) lists each once and adds the log of its count to the block's
scores through `score_mod`: exp(s + log c) = c exp(s), the block weighed as if gathered
c times. The lists depend on the layout alone (and on whether the call
has key padding), so they are built once per layout and device and reused by every call
of that layer at that length; each call only binds its own key validity to `mask_mod`.
On CPU the same code runs eagerly (unfused, for tests); on CUDA it is compiled once.
"""

from __future__ import annotations

import copy
import functools
import weakref

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from genobird.attention.layouts import BlockLayout


def _block_lists(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """bool [B, H, NB, NB] -> (counts int32 [B, H, NB], indices int32 [B, H, NB, NB]),
    the attended key blocks of each row first, in ascending order."""
    counts = mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.sort((~mask).to(torch.int8), dim=-1, stable=True).indices.to(torch.int32)
    return counts, indices


def key_validity(layout: BlockLayout, key_padding_mask, batch: int, device) -> torch.Tensor:
    """bool [B, NB*b]: real keys True; padding of the last block and masked keys False."""
    padded = layout.num_blocks * layout.block_size
    valid = torch.zeros(batch, padded, dtype=torch.bool, device=device)
    valid[:, : layout.seq_len] = True if key_padding_mask is None else key_padding_mask
    return valid


# Block lists built so far (tests check that they are built once per layout and padding
# class, not per call).
LIST_BUILDS = 0
_TEMPLATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _template(layout: BlockLayout, device, full_columns: int) -> tuple[BlockMask, torch.Tensor]:
    """The block lists of `layout` for calls whose first `full_columns` key blocks hold
    only real keys in every row, built once per (device, full_columns) and kept with the
    layout; with them the key validity of an unpadded call.

    Listed blocks left of `full_columns` are "full" (no mask evaluated); the others, and a
    last block that runs past seq_len, are "partial": mask_mod masks their padded keys
    wherever they are, so the lists need not change with each call's padding (no per-call
    sort, transpose or list build). Unpadded inputs have every column full but the tail;
    padding only at the ends of rows (scoring, fine-tuning batches) leaves the leading
    columns full, so the kernel evaluates the mask only in the last blocks."""
    global LIST_BUILDS
    cache = _TEMPLATES.setdefault(layout, {})
    key = (str(device), full_columns)
    if key not in cache:
        LIST_BUILDS += 1
        pattern = layout.block_mask.to(device)[None]  # [1, H, NB, NB]: broadcast over batch
        partial_columns = torch.arange(layout.num_blocks, device=device) >= full_columns
        partial_columns[-1] |= layout.seq_len % layout.block_size != 0
        counts, indices = _block_lists(pattern & partial_columns)
        full_counts, full_indices = _block_lists(pattern & ~partial_columns)
        lists = BlockMask.from_kv_blocks(
            counts,
            indices,
            full_counts,
            full_indices,
            BLOCK_SIZE=layout.block_size,
            seq_lengths=(layout.seq_len, layout.seq_len),
        )
        cache[key] = (lists, key_validity(layout, None, 1, device))
    return cache[key]


_LAST_COUNT: tuple | None = None  # (weak reference to a padding mask, blocks, block size, count)


def full_leading_blocks(layout: BlockLayout, key_valid: torch.Tensor, key_padding_mask) -> int:
    """How many leading key blocks hold only real keys in every row of this call. One
    host read per padding mask: the layers of a forward pass share their mask, and the
    count is kept for it. While a CUDA graph is being captured no host read is allowed,
    so the count is 0 there (every block partial: correct, only slower)."""
    global _LAST_COUNT
    shape = (layout.num_blocks, layout.block_size)
    if _LAST_COUNT is not None:
        reference, counted_shape, count = _LAST_COUNT
        if reference() is key_padding_mask and counted_shape == shape:
            return count
    if key_valid.is_cuda and torch.cuda.is_current_stream_capturing():
        return 0
    columns = key_valid.view(key_valid.shape[0], *shape).all(-1).all(0)
    count = int(columns.int().cumprod(0).sum())
    _LAST_COUNT = (weakref.ref(key_padding_mask), shape, count)
    return count


def flex_block_mask(
    layout: BlockLayout, key_padding_mask=None, batch: int = 1, device="cpu", compiled=False
) -> BlockMask:
    """The BlockMask that restricts FlexAttention to `layout` (and to real keys): the
    layout's cached block lists with a mask_mod reading this call's key validity.

    Eager FlexAttention (CPU) ignores the block lists and evaluates mask_mod everywhere,
    so there mask_mod encodes the whole pattern. The compiled kernel visits only listed
    blocks and evaluates mask_mod only in partial ones, so there mask_mod checks the keys
    alone: a per-element lookup of the [H, NB, NB] pattern made the kernel 30x slower on
    an H100 (28.5 vs 0.9 ms at N=32768).
    """
    size = layout.block_size
    padded = key_padding_mask is not None
    if padded:
        key_valid = key_validity(layout, key_padding_mask, batch, device)
        leading = full_leading_blocks(layout, key_valid, key_padding_mask)
        template, _ = _template(layout, device, leading)
    else:
        template, key_valid = _template(layout, device, layout.num_blocks)
    pattern = layout.block_mask.to(device)

    if padded:

        def keys_only(b, h, q_idx, kv_idx):
            return key_valid[b, kv_idx]

    else:  # one row of validity (the tail past seq_len) serves the whole batch

        def keys_only(b, h, q_idx, kv_idx):
            return key_valid[0, kv_idx]

    def pattern_and_keys(b, h, q_idx, kv_idx):
        return pattern[h, q_idx // size, kv_idx // size] & keys_only(b, h, q_idx, kv_idx)

    block_mask = copy.copy(template)
    block_mask.mask_mod = keys_only if compiled else pattern_and_keys
    return block_mask


def repeat_score_mod(layout: BlockLayout, device):
    """The `score_mod` that weighs each key block by its count in the row (None for a
    layout without repeats); the log counts are built once per layout and device."""
    if layout.block_counts is None:
        return None
    cache = _LOG_COUNTS.setdefault(layout, {})
    key = str(device)
    if key not in cache:
        cache[key] = layout.block_counts.to(device).clamp(min=1).float().log()
    log_counts, size = cache[key], layout.block_size

    def weigh_repeats(score, b, h, q_idx, kv_idx):
        return score + log_counts[h, q_idx // size, kv_idx // size]

    return weigh_repeats


_LOG_COUNTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


# Each new (batch, heads, length) compiles its own kernel (dynamic=False keeps the tiles
# static); past Dynamo's default of 8 shapes a compiled function silently falls back to
# eager FlexAttention, which materialises every score. Scoring a file's last short batch,
# sampled cuts and several models in one process reach 8 quickly.
FLEX_RECOMPILE_LIMIT = 64


@functools.cache
def _compiled_flex():
    import torch._dynamo.config as dynamo_config

    dynamo_config.recompile_limit = max(dynamo_config.recompile_limit, FLEX_RECOMPILE_LIMIT)
    # max_autotune: PyTorch 2.11 takes the backward kernel's tiles from a per-GPU default
    # that ignores kernel_options (on Hopper, head dim 64: 128-token tiles), and a tile
    # must divide the 64-token block; autotuning offers tiles that do, and picks the
    # fastest (once per shape, cached on disk by Inductor).
    return torch.compile(flex_attention, dynamic=False, options={"max_autotune": True})


def flex_block_sparse_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: BlockLayout,
    key_padding_mask: torch.Tensor | None = None,
    block_mask: BlockMask | None = None,
) -> torch.Tensor:
    """Same contract as `block_sparse_attention`, repeated blocks included (no attention
    dropout: FlexAttention has none, so the dispatcher uses the PyTorch kernel when
    dropout is on)."""
    if block_mask is None:
        block_mask = flex_block_mask(layout, key_padding_mask, q.shape[0], q.device, q.is_cuda)
    kernel = _compiled_flex() if q.is_cuda else flex_attention  # eager: unfused, for tests
    out = kernel(
        q,
        k,
        v,
        score_mod=repeat_score_mod(layout, q.device),
        block_mask=block_mask,
        scale=q.shape[-1] ** -0.5,
    )
    if key_padding_mask is not None:
        out = out * key_padding_mask[:, None, :, None].to(out.dtype)
    return out
