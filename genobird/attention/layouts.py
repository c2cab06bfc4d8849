"""Block sparsity layouts: which query block may attend which key block.

A `BlockLayout` holds one boolean block mask [H, NB, NB] and derives everything else
from it: the token-level mask of the dense oracle, the per-row key-block lists the
block-sparse kernel gathers, and the block lists FlexAttention uses. Because every
consumer reads the same mask, the kernels and the oracle cannot disagree on the pattern.

Layouts here:
- `bigbird_layout` (BigBird-ITC, paper section 2): global blocks attend everywhere and are
  attended by all; other blocks attend a window and r random blocks;
- `bigbird_etc_layout` (BigBird-ETC): extra global tokens prepended, as whole blocks;
- the patterns analysed by Yun et al. 2020 ("O(n) Connections are Expressive Enough") at
  block granularity: `strided_layout`, `fixed_layout`, `star_layout`, `random_layout`,
  and `window_global_layout` (Longformer-like).

Random blocks are drawn from a private generator seeded by (seed, layer, head), never from
global RNG state, so a plan is the same in train and eval, across checkpoint recompute
and on every data-parallel rank, and drawing it does not disturb anyone else's stream.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch

from genobird.errors import ConfigError


@dataclass(frozen=True, eq=False)
class BlockLayout:
    """A block-level attention pattern over a sequence of `seq_len` tokens.

    block_mask: bool [H, NB, NB]; block_mask[h, i, j] is True when query block i may
    attend key block j in head h. NB = ceil(seq_len / block_size); the last block may be
    partly padding, which the kernels mask.
    """

    block_mask: torch.Tensor
    block_size: int
    seq_len: int
    name: str = "custom"
    # Optional int [H, NB, NB]: how many times each attended key block sits in its row's
    # softmax (HuggingFace BigBird's pattern repeats some, `hf_plan`); None: once each.
    block_counts: torch.Tensor | None = None

    def __post_init__(self):
        mask = self.block_mask
        if mask.dtype != torch.bool or mask.dim() != 3 or mask.shape[1] != mask.shape[2]:
            raise ConfigError(
                f"block_mask must be bool [H, NB, NB], got {mask.dtype} {list(mask.shape)}"
            )
        counts = self.block_counts
        if counts is not None and (counts.shape != mask.shape or not torch.equal(counts > 0, mask)):
            raise ConfigError("block_counts must have block_mask's shape and be > 0 exactly on it")
        if mask.shape[1] != math.ceil(self.seq_len / self.block_size):
            raise ConfigError(
                f"block_mask has {mask.shape[1]} blocks but seq_len {self.seq_len} / block_size "
                f"{self.block_size} needs {math.ceil(self.seq_len / self.block_size)}"
            )

    @property
    def num_heads(self) -> int:
        return self.block_mask.shape[0]

    @property
    def num_blocks(self) -> int:
        return self.block_mask.shape[1]

    @functools.cached_property
    def is_dense(self) -> bool:
        """True when every block attends every block: sparsity would buy nothing.

        Cached: reading a CUDA mask waits for the GPU, and every forward pass asks."""
        return bool(self.block_mask.all())

    @functools.cached_property
    def global_rows(self) -> torch.Tensor:
        """Query blocks that attend every key block in every head (computed densely)."""
        return torch.nonzero(self.block_mask.all(dim=2).all(dim=0)).flatten()

    @functools.cached_property
    def sparse_rows(self) -> torch.Tensor:
        """The other query blocks, computed by gathering their key blocks."""
        return torch.nonzero(~self.block_mask.all(dim=2).all(dim=0)).flatten()

    @functools.cached_property
    def sparse_plan(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(index, valid) for the sparse rows: long [H, R, K] key-block indices in ascending
        order and bool [H, R, K], False on the filler entries of rows with fewer than K blocks.

        Each key block appears at most once per row (a block the layout counts twice is
        weighted by `sparse_log_counts` instead); rows with fewer blocks carry masked
        fillers rather than repeats.
        """
        rows = self.block_mask[:, self.sparse_rows]  # [H, R, NB]
        counts = rows.sum(dim=2)
        width = int(counts.max()) if rows.numel() else 0
        order = torch.sort((~rows).to(torch.int8), dim=2, stable=True).indices  # True first
        index = order[..., :width].contiguous()
        valid = torch.arange(width, device=rows.device) < counts[..., None]
        return index, valid

    @functools.cached_property
    def sparse_log_counts(self) -> torch.Tensor | None:
        """float [H, R, K] log of each gathered block's count (0 on fillers), the score
        bias that weights a block as if it sat `count` times in the row; None: all once."""
        if self.block_counts is None:
            return None
        index, valid = self.sparse_plan
        counts = torch.gather(self.block_counts[:, self.sparse_rows], 2, index)
        return torch.where(valid, counts.clamp(min=1).double().log(), 0.0)

    def _token_level(self, blocks: torch.Tensor) -> torch.Tensor:
        size = self.block_size
        expanded = blocks.repeat_interleave(size, 1).repeat_interleave(size, 2)
        return expanded[:, : self.seq_len, : self.seq_len]

    def dense_mask(self) -> torch.Tensor:
        """bool [H, N, N]: True where query token i may attend key token j (the oracle's input)."""
        return self._token_level(self.block_mask)

    def dense_log_counts(self) -> torch.Tensor | None:
        """float [H, N, N] log of each attended pair's count (the oracle's score bias)."""
        if self.block_counts is None:
            return None
        return self._token_level(self.block_counts.clamp(min=1).double().log())

    def density(self) -> float:
        """Fraction of (query block, key block) pairs attended, averaged over heads."""
        return float(self.block_mask.float().mean())

    def to(self, device: torch.device | str) -> BlockLayout:
        counts = None if self.block_counts is None else self.block_counts.to(device)
        return BlockLayout(
            self.block_mask.to(device), self.block_size, self.seq_len, self.name, counts
        )


# =========================================================================== helpers
def num_blocks_for(seq_len: int, block_size: int) -> int:
    if seq_len <= 0 or block_size <= 0:
        raise ConfigError(f"seq_len and block_size must be positive, got {seq_len}, {block_size}")
    return math.ceil(seq_len / block_size)


def window_mask(num_blocks: int, num_window_blocks: int) -> torch.Tensor:
    """bool [NB, NB]: each block attends the `num_window_blocks` blocks centred on itself."""
    if num_window_blocks < 1 or num_window_blocks % 2 == 0:
        raise ConfigError(f"num_window_blocks must be odd and >= 1, got {num_window_blocks}")
    positions = torch.arange(num_blocks)
    return (positions[:, None] - positions[None, :]).abs() <= num_window_blocks // 2


def global_mask(num_blocks: int, global_blocks: list[int]) -> torch.Tensor:
    """bool [NB, NB]: global blocks attend everything and are attended by everything."""
    mask = torch.zeros(num_blocks, num_blocks, dtype=torch.bool)
    mask[global_blocks, :] = True
    mask[:, global_blocks] = True
    return mask


def default_global_blocks(num_blocks: int, num_global_blocks: int) -> list[int]:
    """The first ceil(g/2) and the last floor(g/2) blocks (paper: first and last for g=2)."""
    if num_global_blocks < 0:
        raise ConfigError(f"num_global_blocks must be >= 0, got {num_global_blocks}")
    first = list(range(min(num_blocks, math.ceil(num_global_blocks / 2))))
    last = list(range(num_blocks - num_global_blocks // 2, num_blocks))
    return sorted(set(first + last))


def random_blocks(
    base: torch.Tensor, num_random_blocks: int, seed: int, layer: int, head: int
) -> torch.Tensor:
    """Add `num_random_blocks` random key blocks to each row of `base` [NB, NB] that is not
    already all True, drawn uniformly without replacement from the blocks the row does not
    attend yet (so never a window or global block, never twice). Rows with fewer legal
    blocks than asked get all of them.

    Deliberate deviation from public BigBird code, which draws from the first ~1k tokens
    only: we follow the paper's text and draw from the whole sequence.
    """
    if num_random_blocks <= 0:
        return base.clone()
    rng = np.random.default_rng([seed, layer, head])
    legal = ~base.numpy()
    # Uniform sampling without replacement per row: rank random keys over the legal blocks.
    keys = np.where(legal, rng.random(legal.shape), np.inf)
    chosen = np.argsort(keys, axis=1, kind="stable")[:, :num_random_blocks]
    picked = np.zeros_like(legal)
    np.put_along_axis(picked, chosen, True, axis=1)
    return base | torch.from_numpy(picked & legal)


def _stack_heads(per_head: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack(per_head, dim=0)


# =========================================================================== BigBird
def bigbird_layout(
    seq_len: int,
    block_size: int = 64,
    num_global_blocks: int = 2,
    num_window_blocks: int = 3,
    num_random_blocks: int = 3,
    num_heads: int = 1,
    seed: int = 0,
    layer: int = 0,
    global_blocks: list[int] | None = None,
) -> BlockLayout:
    """BigBird-ITC: global blocks (default first and last), a window of
    `num_window_blocks` centred blocks and `num_random_blocks` random blocks per row,
    drawn per head and layer from (seed, layer, head)."""
    nb = num_blocks_for(seq_len, block_size)
    chosen_globals = (
        default_global_blocks(nb, num_global_blocks) if global_blocks is None else global_blocks
    )
    if any(not 0 <= g < nb for g in chosen_globals):
        raise ConfigError(f"global_blocks {chosen_globals} out of range for {nb} blocks")
    base = window_mask(nb, num_window_blocks) | global_mask(nb, chosen_globals)
    heads = [random_blocks(base, num_random_blocks, seed, layer, h) for h in range(num_heads)]
    return BlockLayout(_stack_heads(heads), block_size, seq_len, "bigbird-itc")


def bigbird_etc_layout(
    seq_len: int,
    num_global_tokens: int,
    block_size: int = 64,
    num_window_blocks: int = 3,
    num_random_blocks: int = 0,
    num_heads: int = 1,
    seed: int = 0,
    layer: int = 0,
) -> BlockLayout:
    """BigBird-ETC: `num_global_tokens` extra global tokens prepended to a sequence of
    `seq_len` tokens. The globals fill ceil(g / block_size) whole blocks at the front
    (the model pads the unused slots and masks them as keys), so the layout covers
    global_blocks * block_size + seq_len tokens; the rest use window (+ random) attention."""
    if num_global_tokens < 1:
        raise ConfigError(f"ETC needs at least one global token, got {num_global_tokens}")
    global_block_count = math.ceil(num_global_tokens / block_size)
    total = global_block_count * block_size + seq_len
    nb = num_blocks_for(total, block_size)
    base = window_mask(nb, num_window_blocks) | global_mask(nb, list(range(global_block_count)))
    heads = [random_blocks(base, num_random_blocks, seed, layer, h) for h in range(num_heads)]
    return BlockLayout(_stack_heads(heads), block_size, total, "bigbird-etc")


def etc_padded_global_count(num_global_tokens: int, block_size: int) -> int:
    """How many token slots the ETC global segment occupies (whole blocks)."""
    return math.ceil(num_global_tokens / block_size) * block_size


# =========================================================================== Yun et al. 2020
def _same_for_heads(mask: torch.Tensor, num_heads: int) -> torch.Tensor:
    return mask.unsqueeze(0).expand(num_heads, -1, -1).clone()


def strided_layout(
    seq_len: int, block_size: int = 64, window: int = 1, stride: int = 4, num_heads: int = 1
) -> BlockLayout:
    """STRIDED (Child et al. 2019, bidirectional): blocks within `window` and every
    `stride`-th block from oneself."""
    nb = num_blocks_for(seq_len, block_size)
    positions = torch.arange(nb)
    offset = positions[:, None] - positions[None, :]
    mask = (offset.abs() <= window) | (offset % stride == 0)
    return BlockLayout(_same_for_heads(mask, num_heads), block_size, seq_len, "strided")


def fixed_layout(
    seq_len: int, block_size: int = 64, group: int = 4, summaries: int = 1, num_heads: int = 1
) -> BlockLayout:
    """FIXED (Child et al. 2019, bidirectional): blocks in one's own group of `group`
    blocks, and the last `summaries` blocks of every group."""
    nb = num_blocks_for(seq_len, block_size)
    positions = torch.arange(nb)
    same_group = (positions[:, None] // group) == (positions[None, :] // group)
    summary = (positions % group) >= group - summaries
    mask = same_group | summary[None, :]
    return BlockLayout(_same_for_heads(mask, num_heads), block_size, seq_len, "fixed")


def star_layout(seq_len: int, block_size: int = 64, num_heads: int = 1) -> BlockLayout:
    """STAR (Star-Transformer): neighbours within one block, plus block 0 as the relay
    node that attends all and is attended by all."""
    nb = num_blocks_for(seq_len, block_size)
    mask = window_mask(nb, 3) | global_mask(nb, [0])
    return BlockLayout(_same_for_heads(mask, num_heads), block_size, seq_len, "star")


def random_layout(
    seq_len: int,
    block_size: int = 64,
    num_random_blocks: int = 3,
    num_heads: int = 1,
    seed: int = 0,
    layer: int = 0,
) -> BlockLayout:
    """RANDOM: each block attends itself and `num_random_blocks` random others."""
    nb = num_blocks_for(seq_len, block_size)
    base = torch.eye(nb, dtype=torch.bool)
    heads = [random_blocks(base, num_random_blocks, seed, layer, h) for h in range(num_heads)]
    return BlockLayout(_stack_heads(heads), block_size, seq_len, "random")


def window_global_layout(
    seq_len: int,
    block_size: int = 64,
    num_window_blocks: int = 3,
    global_blocks: tuple[int, ...] = (0,),
    num_heads: int = 1,
) -> BlockLayout:
    """Window + global (Longformer-like): BigBird without random blocks."""
    nb = num_blocks_for(seq_len, block_size)
    mask = window_mask(nb, num_window_blocks) | global_mask(nb, list(global_blocks))
    return BlockLayout(_same_for_heads(mask, num_heads), block_size, seq_len, "window-global")
