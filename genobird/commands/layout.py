"""`genobird layout`: describe a sparsity pattern."""

from __future__ import annotations

import argparse
import logging

from genobird.commands.common import (
    EXIT_OK,
    subcommand,
)
from genobird.commands.options import add_shared

log = logging.getLogger("genobird")


LAYOUT_PATTERNS = ("bigbird", "etc", "strided", "fixed", "star", "random", "window-global")


def cmd_layout(args: argparse.Namespace) -> int:
    from genobird.attention import analyse_layout
    from genobird.attention import layouts as patterns

    size, length = args.block_size, args.max_tokens
    build = {
        "bigbird": lambda: patterns.bigbird_layout(
            length,
            size,
            args.global_blocks,
            args.window_blocks,
            args.random_blocks,
            args.heads,
            args.seed,
            args.layer,
        ),
        "etc": lambda: patterns.bigbird_etc_layout(
            length,
            args.global_tokens,
            size,
            args.window_blocks,
            args.random_blocks,
            args.heads,
            args.seed,
            args.layer,
        ),
        "strided": lambda: patterns.strided_layout(
            length, size, args.neighbour_blocks, args.stride, args.heads
        ),
        "fixed": lambda: patterns.fixed_layout(length, size, args.stride, 1, args.heads),
        "star": lambda: patterns.star_layout(length, size, args.heads),
        "random": lambda: patterns.random_layout(
            length, size, args.random_blocks, args.heads, args.seed, args.layer
        ),
        "window-global": lambda: patterns.window_global_layout(
            length, size, args.window_blocks, (0,), args.heads
        ),
    }
    layout = build[args.pattern]()
    per_row = layout.block_mask.sum(dim=2).float()
    print(
        f"{layout.name}: {layout.seq_len} tokens in {layout.num_blocks} blocks of {size}, "
        f"{layout.num_heads} heads; density {layout.density():.3f}; key blocks per query block "
        f"min {per_row.min():.0f} / mean {per_row.mean():.1f} / max {per_row.max():.0f}; "
        f"{len(layout.global_rows)} global rows"
    )
    print(analyse_layout(layout).summary())
    return EXIT_OK


def add_layout(commands) -> None:
    sub = subcommand(
        commands,
        "layout",
        "Describe an attention sparsity pattern: density, blocks per row, and whether it "
        "satisfies Yun et al.'s Assumption 1 and contains a star graph (BigBird Theorem 1).",
        cmd_layout,
    )
    sub.add_argument("pattern", choices=LAYOUT_PATTERNS)
    add_shared(sub, "max_tokens", max_tokens={"default": 4096, "help": "sequence length"})
    sub.add_argument("--block-size", type=int, default=64)
    sub.add_argument("--heads", type=int, default=1)
    shape = sub.add_argument_group("pattern parameters")
    shape.add_argument("--global-blocks", type=int, default=2, help="bigbird")
    shape.add_argument("--global-tokens", type=int, default=64, help="etc")
    shape.add_argument("--window-blocks", type=int, default=3, help="bigbird, etc, window-global")
    shape.add_argument("--random-blocks", type=int, default=3, help="bigbird, etc, random")
    shape.add_argument(
        "--neighbour-blocks", type=int, default=1, help="strided: neighbouring blocks each side"
    )
    shape.add_argument("--stride", type=int, default=4, help="strided stride; fixed group size")
    add_shared(shape, "seed")
    shape.add_argument("--layer", type=int, default=0)
