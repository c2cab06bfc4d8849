"""Block-sparse attention: layouts, the pure-PyTorch kernel, the dense oracle, FlexAttention."""

from genobird.attention.analysis import LayoutReport, analyse_layout
from genobird.attention.dispatch import IMPLEMENTATIONS, attention, full_attention
from genobird.attention.hf_plan import hf_bigbird_layout
from genobird.attention.kernel import block_sparse_attention, dense_attention
from genobird.attention.layouts import (
    BlockLayout,
    bigbird_etc_layout,
    bigbird_layout,
    fixed_layout,
    random_layout,
    star_layout,
    strided_layout,
    window_global_layout,
)

__all__ = [
    "IMPLEMENTATIONS",
    "BlockLayout",
    "LayoutReport",
    "analyse_layout",
    "attention",
    "bigbird_etc_layout",
    "bigbird_layout",
    "block_sparse_attention",
    "dense_attention",
    "fixed_layout",
    "full_attention",
    "hf_bigbird_layout",
    "random_layout",
    "star_layout",
    "strided_layout",
    "window_global_layout",
]
