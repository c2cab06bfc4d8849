"""FlexAttention backend (torch.nn.attention.flex_attention) for CUDA.

The layout is handed to FlexAttention as explicit block lists with the block size set to
the layout's, so the fused kernel visits exactly the layout's blocks. Blocks whose keys
are all real go to the "full" lists (no mask evaluated); blocks holding padding go to the
partial lists, where `mask_mod` masks the padded keys. `mask_mod` also encodes the
pattern itself, so the function is right even where the block lists are not used.
On CPU the same code runs eagerly (unfused, for tests); on CUDA it is compiled once.
"""

from __future__ import annotations

import functools

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


def key_validity(layout: BlockLayout, key_padding_mask, batch: int, device) -> torch.Tensor:
    """bool [B, NB*b]: real keys True; padding of the last block and masked keys False."""
    padded = layout.num_blocks * layout.block_size
    valid = torch.zeros(batch, padded, dtype=torch.bool, device=device)
    valid[:, : layout.seq_len] = True if key_padding_mask is None else key_padding_mask
    return valid


def flex_block_mask(layout: BlockLayout, key_padding_mask=None, batch: int = 1, device="cpu"):
    """The BlockMask that restricts FlexAttention to `layout` (and to real keys)."""
    size = layout.block_size
    key_valid = key_validity(layout, key_padding_mask, batch, device)
    block_has_padding = ~key_valid.view(batch, layout.num_blocks, size).all(dim=-1)  # [B, NB]
    pattern = layout.block_mask.to(device)[None]  # [1, H, NB, NB]
    full = pattern & ~block_has_padding[:, None, None, :]
    partial = pattern & block_has_padding[:, None, None, :]
    counts, indices = _block_lists(partial)
    full_counts, full_indices = _block_lists(full)

    block_pattern = layout.block_mask.to(device)

    # The whole pattern, not only the padding: eager (CPU) FlexAttention evaluates
    # mask_mod everywhere and ignores the block lists; compiled, it skips the full blocks.
    def mask_mod(b, h, q_idx, kv_idx):
        return block_pattern[h, q_idx // size, kv_idx // size] & key_valid[b, kv_idx]

    return BlockMask.from_kv_blocks(
        counts,
        indices,
        full_counts,
        full_indices,
        BLOCK_SIZE=size,
        mask_mod=mask_mod,
        seq_lengths=(layout.seq_len, layout.seq_len),
    )


@functools.cache
def _compiled_flex():
    return torch.compile(flex_attention, dynamic=False)


def kernel_tiles(block_size: int) -> dict[str, int]:
    """Triton tile sizes that divide the layout's block size.

    The fused kernel walks each listed block in tiles, so its tiles must divide the block;
    the defaults (128 queries per tile on Hopper) do not divide BigBird's 64. The backward
    kernels also need BLOCK_M1 | BLOCK_N1 and BLOCK_N2 | BLOCK_M2; 16 is Triton's smallest
    matrix-multiply tile.
    """
    if block_size % 16:
        raise ConfigError(
            f"FlexAttention needs a block size that is a multiple of 16, got {block_size}; "
            "use attention_impl 'block_sparse'"
        )
    tile = min(block_size & -block_size, 128)  # largest power of two dividing the block
    half = max(tile // 2, 16)
    return {
        "fwd_BLOCK_M": tile,
        "fwd_BLOCK_N": min(tile, 64),
        "bwd_BLOCK_M1": half,
        "bwd_BLOCK_N1": tile,
        "bwd_BLOCK_M2": tile,
        "bwd_BLOCK_N2": half,
    }


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
        block_mask = flex_block_mask(layout, key_padding_mask, q.shape[0], q.device)
    if q.is_cuda:
        out = _compiled_flex()(
            q, k, v, block_mask=block_mask, scale=q.shape[-1] ** -0.5,
            kernel_options=kernel_tiles(layout.block_size),
        )  # fmt: skip
    else:  # eager: the unfused reference path, for tests on CPU
        out = flex_attention(q, k, v, block_mask=block_mask, scale=q.shape[-1] ** -0.5)
    if key_padding_mask is not None:
        out = out * key_padding_mask[:, None, :, None].to(out.dtype)
    return out
