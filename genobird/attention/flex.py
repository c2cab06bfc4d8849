"""FlexAttention backend (torch.nn.attention.flex_attention) for CUDA.

The layout is handed to FlexAttention as explicit block lists, so the fused kernel visits
only the layout's blocks. Blocks wholly inside the pattern whose keys are all real go to
the "full" lists (no mask evaluated); the others go to the partial lists, where
`mask_mod` masks padded keys and unattended layout blocks. `mask_mod` encodes the whole
pattern, so the function is exact whatever the lists' granularity.
On CPU the same code runs eagerly (unfused, for tests); on CUDA it is compiled once.
"""

from __future__ import annotations

import functools
import math

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from genobird.attention.layouts import BlockLayout
from genobird.errors import ConfigError


def _block_lists(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """bool [B, H, NB, NB] -> (counts int32 [B, H, NB], indices int32 [B, H, NB, NB]),
    the attended key blocks of each row first, in ascending order."""
    counts = mask.sum(dim=-1, dtype=torch.int32)
    indices = torch.sort((~mask).to(torch.int8), dim=-1, stable=True).indices.to(torch.int32)
    return counts, indices


# The Triton kernels walk each listed block in tiles that must divide it. PyTorch 2.11
# picks its backward tiles from a per-GPU heuristic that ignores kernel_options (on Hopper
# with head dim 64: 128-query and 128-key tiles), so a 64-token block list cannot be
# differentiated there. The lists are therefore built at a granularity of 128 tokens (or
# the layout's block, if larger): a listed 128-block holding some unattended 64-blocks
# is "partial", and mask_mod, which encodes the exact layout, masks them inside it.
KERNEL_TILE = 128


def flex_granularity(block_size: int) -> int:
    """Tokens per FlexAttention block for a layout of `block_size`: the least common
    multiple with the kernel tile, so each tile falls inside one layout block's rows."""
    return math.lcm(block_size, KERNEL_TILE)


def key_validity(layout: BlockLayout, key_padding_mask, batch: int, padded: int, device):
    """bool [B, padded]: real keys True; padding past the sequence and masked keys False."""
    valid = torch.zeros(batch, padded, dtype=torch.bool, device=device)
    valid[:, : layout.seq_len] = True if key_padding_mask is None else key_padding_mask
    return valid


def _pad_to_groups(pattern: torch.Tensor, factor: int) -> torch.Tensor:
    """bool [H, NB, NB] -> [H, NBc*f, NBc*f], NBc = ceil(NB / f); added blocks unattended."""
    heads, blocks, _ = pattern.shape
    size = -(-blocks // factor) * factor
    padded = pattern.new_zeros(heads, size, size)
    padded[:, :blocks, :blocks] = pattern
    return padded


def flex_block_mask(
    layout: BlockLayout, key_padding_mask=None, batch: int = 1, device="cpu", granularity=None
) -> BlockMask:
    """The BlockMask that restricts FlexAttention to `layout` (and to real keys), with
    block lists at `granularity` tokens (default: the layout's own block size)."""
    size = layout.block_size
    granularity = granularity or size
    if granularity % size:
        raise ConfigError(f"granularity {granularity} is not a multiple of the block {size}")
    factor = granularity // size
    # Padded to whole coarse blocks, also so that mask_mod can index any position a tile holds.
    block_pattern = _pad_to_groups(layout.block_mask.to(device), factor)
    heads, coarse_blocks = block_pattern.shape[0], block_pattern.shape[1] // factor
    grouped = block_pattern.view(heads, coarse_blocks, factor, coarse_blocks, factor)
    touched = grouped.any(dim=4).any(dim=2)  # [H, NBc, NBc]: some layout block attended
    covered = grouped.all(dim=4).all(dim=2)  # all of them attended
    key_valid = key_validity(layout, key_padding_mask, batch, coarse_blocks * granularity, device)
    keys_all_real = key_valid.view(batch, coarse_blocks, granularity).all(dim=-1)  # [B, NBc]
    full = covered[None] & keys_all_real[:, None, None, :]
    partial = touched[None] & ~full
    counts, indices = _block_lists(partial)
    full_counts, full_indices = _block_lists(full)

    # The whole pattern, not only the padding: eager (CPU) FlexAttention evaluates
    # mask_mod everywhere; compiled, it evaluates it in partial blocks only.
    def mask_mod(b, h, q_idx, kv_idx):
        return block_pattern[h, q_idx // size, kv_idx // size] & key_valid[b, kv_idx]

    return BlockMask.from_kv_blocks(
        counts,
        indices,
        full_counts,
        full_indices,
        BLOCK_SIZE=granularity,
        mask_mod=mask_mod,
        seq_lengths=(layout.seq_len, layout.seq_len),
    )


@functools.cache
def _compiled_flex():
    return torch.compile(flex_attention, dynamic=False)


def flex_block_sparse_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: BlockLayout,
    key_padding_mask: torch.Tensor | None = None,
    block_mask: BlockMask | None = None,
) -> torch.Tensor:
    """Same contract as `block_sparse_attention` (no attention dropout: FlexAttention has
    none, so the dispatcher uses the PyTorch kernel when dropout is on)."""
    if block_mask is None:
        granularity = flex_granularity(layout.block_size) if q.is_cuda else None
        block_mask = flex_block_mask(layout, key_padding_mask, q.shape[0], q.device, granularity)
    kernel = _compiled_flex() if q.is_cuda else flex_attention  # eager: unfused, for tests
    out = kernel(q, k, v, block_mask=block_mask, scale=q.shape[-1] ** -0.5)
    if key_padding_mask is not None:
        out = out * key_padding_mask[:, None, :, None].to(out.dtype)
    return out
