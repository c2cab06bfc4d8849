"""HuggingFace BigBird's block-sparse pattern, reproduced draw for draw (`hf` layout).

A model imported from transformers (GENA-LM's DNA BigBird, for one) was trained with
transformers' pattern, not with genobird's ITC layout: the first and last query blocks
attend everything; the second attends key blocks 0, 1, 2, the last and r random ones;
the second-to-last attends 0, -3, -2, -1 and r random; the others their 3-block window,
the first and the last block and r random. The random blocks come from numpy's legacy
generator seeded with the layer index, drawn per head in transformers' order:

- padded lengths 1,024 / 3,072 / 4,096 ("the paper's plans"): rows of a plan drawn for
  `max_position` tokens, random blocks taken from the first 1,024 tokens;
- other lengths: the plan of `_get_rand_attn_plan`, random blocks from the first
  (2r + 5) blocks when the input is long enough.

Some rows draw a random block that is also in their window (transformers' own comments
call the slicing a mistake), and a row that finds too few legal blocks keeps block 0 in
the unused slots. Such a key block then sits twice in that row's softmax, so the layout
carries per-block counts (`BlockLayout.block_counts`) and the kernels weight a repeated
block by its count. Inputs of at most 5 + 2r blocks get full attention, as in
transformers (which, unlike genobird, then stays in full attention for every later call).

transformers in eval mode (>= 4.29) replaces every random block by block 0; genobird
keeps the training-time blocks in eval too, so that a model computes in inference what
it was trained with. A `RandomState` of its own is used: the global numpy state is
untouched.
"""

from __future__ import annotations

import numpy as np
import torch

from genobird.attention.layouts import BlockLayout, num_blocks_for
from genobird.errors import ConfigError

PAPER_PLAN_LENGTHS = (1024, 3072, 4096)
PAPER_PLAN_LAST_INDEX = 1024  # the paper's plans draw random blocks from the first 1k tokens


def full_attention_blocks(num_random_blocks: int) -> int:
    """transformers computes inputs of at most this many blocks with full attention."""
    return 5 + 2 * num_random_blocks


def paper_plan_rows(rng, num_blocks: int, num_random: int, last_index: int, block_size: int):
    """`_bigbird_block_rand_mask`: [num_blocks - 2, r] random blocks of the middle rows."""
    rows = np.zeros((num_blocks - 2, num_random), dtype=np.int64)
    middle = np.arange(1, num_blocks - 1, dtype=np.int32)
    last = num_blocks - 1
    if last_index > 2 * block_size:
        last = last_index // block_size - 1
    for i in range(1, num_blocks - 1):
        start, end = i - 2, i
        if i == 1:
            pool = middle[2:last]
        elif i == 2:
            pool = middle[3:last]
        elif i in (num_blocks - 3, num_blocks - 2):
            pool = middle[:last]  # transformers: "should have been sliced till last-3/-4"
        elif start > last:
            pool = middle[:last]
        elif end + 1 == last:
            pool = middle[:start]
        else:
            pool = np.concatenate((middle[:start], middle[end + 1 : last]))
        if len(pool) < num_random:
            raise ConfigError(f"{num_random} random blocks do not fit {num_blocks} blocks")
        rows[i - 1] = rng.permutation(pool)[:num_random]
    return rows


def single_row(rng, block: int, to_end: int, num_random: int) -> list[int]:
    """`_get_single_block_row_attention` with a window of 1 each side and 1 global block
    each end: the first `num_random` legal blocks of a permutation of [0, to_end)."""
    permuted = rng.permutation(np.arange(0, to_end, dtype=np.int32))
    illegal = {block - 1, block, block + 1, 0, to_end - 1}
    if block == 1:
        illegal.add(to_end - 2)
    if block == to_end - 2:
        illegal.add(1)
    chosen = [int(b) for b in permuted if int(b) not in illegal]
    return chosen[:num_random]


def planned_rows(rng, num_blocks: int, num_heads: int, num_random: int) -> np.ndarray:
    """`_bigbird_block_rand_mask_with_head` for the inputs it sees in sparse mode: [H, NB-2, r].

    Sparse inputs have more than 2r + 5 blocks, so `_get_rand_attn_plan` always makes two
    parts, [0, 2r + 5) with r random blocks and the rest with none, and the helper's loops
    come down to: every row but the first, in order, each head in turn, draws r blocks
    from the first 2r + 5 (the last row too: its draw is discarded but moves the stream).
    """
    plan_end = 2 * num_random + 5
    rows = np.zeros((num_heads, num_blocks, num_random), dtype=np.int64)
    for row in range(1, num_blocks):
        for head in range(num_heads):
            rows[head, row] = single_row(rng, row, plan_end, num_random)
    return rows[:, 1 : num_blocks - 1]


def random_blocks_per_row(
    num_blocks: int, block_size: int, num_random: int, num_heads: int, layer: int, max_position: int
) -> np.ndarray:
    """[H, NB - 2, R] random key blocks of query blocks 1 .. NB-2, as transformers draws
    them in training mode for layer `layer`."""
    rng = np.random.RandomState(layer)
    if num_blocks * block_size in PAPER_PLAN_LENGTHS:
        plan_blocks = max_position // block_size
        if plan_blocks < num_blocks:
            raise ConfigError(
                f"max_position {max_position} is shorter than the input ({num_blocks} blocks)"
            )
        return np.stack(
            [
                paper_plan_rows(rng, plan_blocks, num_random, PAPER_PLAN_LAST_INDEX, block_size)
                for _ in range(num_heads)
            ]
        )[:, : num_blocks - 2]
    return planned_rows(rng, num_blocks, num_heads, num_random)


def hf_block_counts(
    num_blocks: int, block_size: int, num_random: int, num_heads: int, layer: int, max_position: int
) -> torch.Tensor | None:
    """int [H, NB, NB]: how often each key block appears in each query block's key list
    (0: not attended); None where transformers computes full attention."""
    if num_blocks <= full_attention_blocks(num_random):
        return None
    random = random_blocks_per_row(
        num_blocks, block_size, num_random, num_heads, layer, max_position
    )
    last = num_blocks - 1
    fixed = [[1, 2, last]]  # row 1 (and block 0, added to every row below)
    fixed += [[i - 1, i, i + 1, last] for i in range(2, last - 1)]
    fixed += [[last - 2, last - 1, last]]  # row NB-2
    counts = np.zeros((num_heads, num_blocks, num_blocks), dtype=np.int64)
    counts[:, 0, :] = 1
    counts[:, last, :] = 1
    heads = np.arange(num_heads)[:, None]
    for row, keys in enumerate(fixed, start=1):
        counts[:, row, [0, *keys]] += 1
        np.add.at(counts, (heads, row, random[:, row - 1]), 1)
    return torch.from_numpy(counts)


def hf_bigbird_layout(
    seq_len: int,
    block_size: int,
    num_random_blocks: int,
    num_heads: int,
    layer: int,
    max_position: int,
) -> BlockLayout:
    """transformers' BigBird pattern of encoder layer `layer` for `seq_len` tokens (padded
    to whole blocks, as transformers pads them), with repeated key blocks counted."""
    num_blocks = num_blocks_for(seq_len, block_size)
    counts = hf_block_counts(
        num_blocks, block_size, num_random_blocks, num_heads, layer, max_position
    )
    if counts is None:
        full = torch.ones(num_heads, num_blocks, num_blocks, dtype=torch.bool)
        return BlockLayout(full, block_size, seq_len, "hf-full")
    return BlockLayout(counts > 0, block_size, seq_len, "hf-bigbird", block_counts=counts)
