"""Block-sparse attention against its specification, the dense masked oracle (fp64, CPU).

Each pitfall listed in DESIGN.md ("Block-sparse attention: what correct means") is a test.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from genobird.attention import (
    BlockLayout,
    analyse_layout,
    attention,
    bigbird_etc_layout,
    bigbird_layout,
    block_sparse_attention,
    dense_attention,
    fixed_layout,
    hf_bigbird_layout,
    random_layout,
    star_layout,
    strided_layout,
    window_global_layout,
)
from genobird.attention.dispatch import resolve_impl
from genobird.attention.flex import flex_block_mask, flex_block_sparse_attention
from genobird.errors import ConfigError

F64 = torch.float64


def qkv(batch, heads, length, dim=8, seed=0, dtype=F64, requires_grad=False):
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(batch, heads, length, dim, generator=generator, dtype=dtype).requires_grad_(
            requires_grad
        )
        for _ in range(3)
    ]


def assert_matches_oracle(layout, batch=2, key_padding_mask=None, dim=8, seed=0):
    """Outputs and gradients of q, k and v equal the dense oracle's."""
    q, k, v = qkv(batch, layout.num_heads, layout.seq_len, dim, seed, requires_grad=True)
    sparse = block_sparse_attention(q, k, v, layout, key_padding_mask)
    dense = dense_attention(
        q, k, v, layout.dense_mask(), key_padding_mask, log_counts=layout.dense_log_counts()
    )
    torch.testing.assert_close(sparse, dense, rtol=0, atol=1e-12)
    weights = torch.randn(sparse.shape, generator=torch.Generator().manual_seed(1), dtype=F64)
    grads_sparse = torch.autograd.grad((sparse * weights).sum(), (q, k, v))
    grads_dense = torch.autograd.grad((dense * weights).sum(), (q, k, v))
    for name, a, b in zip("qkv", grads_sparse, grads_dense, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-11, msg=f"gradient of {name}")
    return sparse


def padding_mask(batch, length, lengths):
    mask = torch.zeros(batch, length, dtype=torch.bool)
    for row, real in enumerate(lengths):
        mask[row, :real] = True
    return mask


# --------------------------------------------------------------------------- equivalence
@pytest.mark.parametrize("length", [512, 500, 449, 64 * 9 + 1])
def test_itc_matches_oracle_for_lengths_multiple_and_not_of_block(length):
    layout = bigbird_layout(length, block_size=32, num_heads=3, seed=5)
    assert layout.num_blocks * 32 >= length
    assert_matches_oracle(layout)


def test_batch_with_different_padding_per_sequence_and_zero_padded_queries():
    layout = bigbird_layout(480, block_size=32, num_heads=2, seed=1)
    mask = padding_mask(3, 480, [480, 301, 33])
    out = assert_matches_oracle(layout, batch=3, key_padding_mask=mask)
    assert (out[1, :, 301:] == 0).all() and (out[2, :, 33:] == 0).all()
    assert (out[1, :, :301].abs().sum(-1) > 0).all()


def test_padded_keys_inside_window_random_and_global_blocks():
    """Holes in the middle of a sequence (not only at its end) hit every kind of block."""
    layout = bigbird_layout(512, block_size=32, num_heads=2, seed=2)
    mask = torch.ones(2, 512, dtype=torch.bool)
    mask[0, 3:9] = False  # inside global block 0
    mask[0, 500:505] = False  # inside global block 15 (the last)
    mask[1, ::3] = False  # a third of every window and random block
    assert_matches_oracle(layout, key_padding_mask=mask)


def test_fully_masked_rows_give_zeros_not_nan():
    layout = bigbird_layout(256, block_size=32, num_heads=2)
    mask = padding_mask(2, 256, [256, 0])  # the second sequence is all padding
    q, k, v = qkv(2, 2, 256, requires_grad=True)
    out = block_sparse_attention(q, k, v, layout, mask)
    out.sum().backward()
    assert not torch.isnan(out).any() and not torch.isnan(q.grad).any()
    assert (out[1] == 0).all()
    assert not torch.isnan(dense_attention(q, k, v, layout.dense_mask(), mask)).any()


def test_heads_use_their_own_random_blocks_and_values():
    layout = bigbird_layout(1024, block_size=32, num_heads=4, seed=9)
    assert not torch.equal(layout.block_mask[0], layout.block_mask[1])
    assert_matches_oracle(layout)


def test_repeated_key_blocks_weigh_as_if_gathered_that_many_times():
    """A layout counting a key block twice in a row equals attention over an explicit key
    list holding that block twice (HuggingFace BigBird's rows can repeat a block)."""
    size, blocks = 4, 6
    counts = torch.zeros(1, blocks, blocks, dtype=torch.long)
    counts[0, 0, :] = counts[0, -1, :] = 1  # global rows
    for row in range(1, blocks - 1):
        counts[0, row, [0, row, blocks - 1]] = 1
    counts[0, 2, 3] = 2  # row 2 attends block 3 twice
    counts[0, 3, 3] = 3  # row 3 attends itself three times
    layout = BlockLayout(counts > 0, size, blocks * size, block_counts=counts)
    q, k, v = qkv(1, 1, blocks * size, seed=4)
    out = block_sparse_attention(q, k, v, layout)
    for row in (2, 3):
        keys = [b for b in range(blocks) for _ in range(int(counts[0, row, b]))]
        tokens = torch.cat([torch.arange(b * size, (b + 1) * size) for b in keys])
        rows = slice(row * size, (row + 1) * size)
        probs = torch.softmax(q[0, 0, rows] @ k[0, 0, tokens].T / 8**0.5, dim=-1)
        torch.testing.assert_close(out[0, 0, rows], probs @ v[0, 0, tokens], rtol=0, atol=1e-12)
    assert_matches_oracle(layout, batch=1)


@pytest.mark.parametrize("length", [1024, 400, 390])
def test_hf_layout_matches_oracle_with_padding(length):
    layout = hf_bigbird_layout(length, 16, 2, num_heads=3, layer=2, max_position=1024)
    assert layout.block_counts is not None
    mask = padding_mask(2, length, [length, length - 50])
    assert_matches_oracle(layout, key_padding_mask=mask)


@pytest.mark.parametrize("lengths", [None, [1024, 700]])
def test_flex_weighs_repeated_blocks_by_their_counts(lengths):
    """FlexAttention lists each key block once and adds log(count) to its scores: the
    same function as the gather kernel, which gathers a repeated block count times, and
    as the dense oracle with log counts (HuggingFace BigBird's pattern, with padding)."""
    layout = hf_bigbird_layout(1024, 16, 2, num_heads=2, layer=2, max_position=1024)
    assert (layout.block_counts > 1).any()
    q, k, v = qkv(2, 2, 1024)
    mask = None if lengths is None else padding_mask(2, 1024, lengths)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager FlexAttention warns that it is unfused
        got = attention(q, k, v, layout, mask, impl="flex")
    torch.testing.assert_close(
        got, block_sparse_attention(q, k, v, layout, mask), rtol=0, atol=1e-6
    )
    oracle = dense_attention(q, k, v, layout.dense_mask(), mask, 0.0, layout.dense_log_counts())
    torch.testing.assert_close(got, oracle, rtol=0, atol=1e-6)


def test_etc_layout_matches_oracle_and_globals_see_everything():
    layout = bigbird_etc_layout(
        400, num_global_tokens=20, block_size=32, num_random_blocks=2, num_heads=2, seed=4
    )
    assert layout.seq_len == 32 + 400  # globals fill one whole block
    dense = layout.dense_mask()
    assert dense[:, :32, :].all() and dense[:, :, :32].all()
    mask = torch.ones(2, layout.seq_len, dtype=torch.bool)
    mask[:, 20:32] = False  # the unused global slots are padding
    assert_matches_oracle(layout, key_padding_mask=mask)


YUN_LAYOUTS = [
    strided_layout(640, block_size=32, window=1, stride=4, num_heads=2),
    fixed_layout(640, block_size=32, group=4, summaries=1, num_heads=2),
    star_layout(640, block_size=32, num_heads=2),
    random_layout(640, block_size=32, num_random_blocks=3, num_heads=2, seed=3),
    window_global_layout(640, block_size=32, num_window_blocks=5, global_blocks=(0, 7)),
]


@pytest.mark.parametrize("layout", YUN_LAYOUTS, ids=lambda layout: layout.name)
def test_every_pattern_matches_oracle(layout):
    mask = padding_mask(2, layout.seq_len, [layout.seq_len, 600])
    assert_matches_oracle(layout, key_padding_mask=mask)


def test_short_sequence_gives_a_dense_layout_and_full_attention_matches():
    layout = bigbird_layout(200, block_size=32)  # 7 blocks: 2 global + 3 window + 3 random
    assert layout.is_dense
    q, k, v = qkv(2, 1, 200)
    mask = padding_mask(2, 200, [200, 150])
    expected = dense_attention(q, k, v, None, mask)
    torch.testing.assert_close(attention(q, k, v, layout, mask), expected)
    torch.testing.assert_close(block_sparse_attention(q, k, v, layout, mask), expected)


def test_gradcheck_fp64_small():
    layout = bigbird_layout(100, block_size=8, num_heads=2, num_random_blocks=2, seed=1)
    q, k, v = qkv(1, 2, 100, dim=4, requires_grad=True)
    mask = padding_mask(1, 100, [93])
    assert torch.autograd.gradcheck(
        lambda q, k, v: block_sparse_attention(q, k, v, layout, mask), (q, k, v)
    )


def test_key_block_used_by_many_queries_accumulates_gradient_from_all():
    """Global column 0 is gathered by every query block: its key gradient sums them all."""
    layout = bigbird_layout(512, block_size=32, num_heads=1)
    q, k, v = qkv(1, 1, 512, requires_grad=True)
    block_sparse_attention(q, k, v, layout).sum().backward()
    grad_sparse = v.grad.clone()
    v.grad = None
    dense_attention(q, k, v, layout.dense_mask()).sum().backward()
    torch.testing.assert_close(grad_sparse[..., :32, :], v.grad[..., :32, :], rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- the plan
def test_global_blocks_attend_all_and_are_attended_by_all():
    layout = bigbird_layout(1024, block_size=64, num_heads=2)
    blocks = layout.block_mask
    assert blocks[:, 0].all() and blocks[:, -1].all()
    assert blocks[:, :, 0].all() and blocks[:, :, -1].all()
    assert layout.global_rows.tolist() == [0, 15]


def test_no_block_repeats_in_any_row_and_interior_rows_have_g_w_r_blocks():
    layout = bigbird_layout(4096, block_size=64, num_heads=4, seed=11)
    index, valid = layout.sparse_plan
    for head in range(4):
        for row in range(index.shape[1]):
            used = index[head, row][valid[head, row]].tolist()
            assert len(used) == len(set(used))
    interior = layout.block_mask[:, 3:-3].sum(dim=2)
    assert (interior == 2 + 3 + 3).all()


def test_random_blocks_never_repeat_window_or_global_blocks():
    nb = 40
    layout = bigbird_layout(nb * 16, block_size=16, num_heads=3, seed=0)
    for head in range(3):
        for row in range(1, nb - 1):
            attended = set(torch.nonzero(layout.block_mask[head, row]).flatten().tolist())
            window_and_global = {row - 1, row, row + 1, 0, nb - 1}
            assert len(attended - window_and_global) == 3


def test_same_seed_same_plan_other_layer_other_plan_and_global_rng_untouched():
    torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()
    first = bigbird_layout(2048, block_size=64, num_heads=4, seed=3, layer=1)
    torch.manual_seed(123)  # global state must not matter either
    np.random.seed(123)
    again = bigbird_layout(2048, block_size=64, num_heads=4, seed=3, layer=1)
    other_layer = bigbird_layout(2048, block_size=64, num_heads=4, seed=3, layer=2)
    assert torch.equal(first.block_mask, again.block_mask)
    assert not torch.equal(first.block_mask, other_layer.block_mask)
    np.random.seed(0)
    torch.manual_seed(0)
    torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()
    bigbird_layout(2048, block_size=64, num_heads=4, seed=3, layer=1)
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert np.array_equal(np.random.get_state()[1], numpy_state[1])


def test_random_blocks_are_uniform_over_the_whole_sequence():
    """Public code draws from the first ~1k tokens only; the paper's text (and we) draw
    from all legal blocks. Row 1 of a 64-block layout: legal blocks are 3..62 (60)."""
    counts = np.zeros(64)
    draws = 0
    for seed in range(150):
        layout = bigbird_layout(64 * 64, block_size=64, num_heads=4, seed=seed)
        rows = layout.block_mask[:, 1].numpy()
        counts += rows.sum(axis=0)
        draws += 4
    random_counts = counts[3:63] - 0  # window {0,1,2} and global {0,63} excluded
    assert counts[3:63].sum() == draws * 3
    expected = draws * 3 / 60
    chi2 = ((random_counts - expected) ** 2 / expected).sum()
    assert chi2 < 100  # 59 dof: p < 0.001 above ~99.6
    assert random_counts[-20:].sum() > 0.2 * random_counts.sum()  # the far end is drawn


def test_layout_validates_its_mask():
    with pytest.raises(ConfigError, match="needs 4"):
        BlockLayout(torch.ones(1, 3, 3, dtype=torch.bool), block_size=10, seq_len=35)
    with pytest.raises(ConfigError, match="odd"):
        bigbird_layout(512, block_size=32, num_window_blocks=2)


# --------------------------------------------------------------------------- precision
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_stays_close_to_the_fp64_oracle_with_large_logits(dtype):
    layout = bigbird_layout(512, block_size=32, num_heads=2)
    q, k, v = qkv(1, 2, 512, dim=16)
    q = q * 6  # logits of several tens: exp would overflow fp16 without fp32 statistics
    expected = dense_attention(q, k, v, layout.dense_mask())
    got = block_sparse_attention(q.to(dtype), k.to(dtype), v.to(dtype), layout)
    assert got.dtype == dtype and torch.isfinite(got).all()
    assert (got.double() - expected).abs().max() < 0.1


# --------------------------------------------------------------------------- dispatch
def test_dispatch_choices():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert resolve_impl("auto", cpu, 0.0) == "block_sparse"
    assert resolve_impl("auto", cuda, 0.0) == "flex"
    assert resolve_impl("auto", cuda, 0.1) == "block_sparse"
    assert resolve_impl("auto", cuda, 0.0, block_size=48) == "block_sparse"  # no Triton tile
    assert resolve_impl("auto", cuda, 0.0, block_size=128) == "flex"
    with pytest.raises(ConfigError, match="no attention dropout"):
        resolve_impl("flex", cuda, 0.1)
    with pytest.raises(ConfigError, match="must be one of"):
        resolve_impl("sparse", cpu, 0.0)


@pytest.mark.parametrize("impl", ["block_sparse", "dense", "flex"])
def test_every_impl_computes_the_same_function(impl):
    layout = bigbird_layout(384, block_size=32, num_heads=2, seed=8)
    q, k, v = qkv(2, 2, 384)
    mask = padding_mask(2, 384, [384, 200])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager FlexAttention warns that it is unfused
        got = attention(q, k, v, layout, mask, impl=impl)
    expected = dense_attention(q, k, v, layout.dense_mask(), mask)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)


# --------------------------------------------------------------------------- FlexAttention
def listed_blocks(block_mask, head: int, row: int) -> tuple[list[int], list[int]]:
    """(partial, full) key blocks FlexAttention visits for one query row (batch 0)."""
    partial = block_mask.kv_indices[0, head, row][: block_mask.kv_num_blocks[0, head, row]]
    full = block_mask.full_kv_indices[0, head, row][: block_mask.full_kv_num_blocks[0, head, row]]
    return partial.tolist(), full.tolist()


def test_flex_block_lists_are_the_layout_rows():
    """Every row lists exactly its layout blocks. Unpadded: all "full" but the last block,
    which runs past N = 500; padded at the ends of rows (the shorter row has 321 real
    keys, 10 whole blocks of 32): the 10 leading columns full, the rest partial, their
    keys masked by mask_mod; padded at the start of a row: every block partial."""
    layout = bigbird_layout(500, block_size=32, num_heads=2, seed=6)
    unpadded = flex_block_mask(layout, None, batch=2)
    padded = flex_block_mask(layout, padding_mask(2, 500, [500, 321]), batch=2)
    leading = padding_mask(2, 500, [500, 500])
    leading[1, :5] = False
    padded_first = flex_block_mask(layout, leading, batch=2)
    assert unpadded.BLOCK_SIZE == (32, 32)
    assert unpadded.kv_num_blocks.shape[0] == padded.kv_num_blocks.shape[0] == 1  # broadcast
    for head in range(2):
        for row in range(layout.num_blocks):
            expected = torch.nonzero(layout.block_mask[head, row]).flatten().tolist()
            partial, full = listed_blocks(unpadded, head, row)
            assert sorted(partial + full) == expected
            assert partial == [b for b in expected if b == 15]
            partial, full = listed_blocks(padded, head, row)
            assert full == [b for b in expected if b < 10]
            assert partial == [b for b in expected if b >= 10]
            partial, full = listed_blocks(padded_first, head, row)
            assert partial == expected and full == []


def test_flex_block_lists_are_built_once_per_layout_and_padding_class_not_per_call():
    """Calls with new padding, new batches and other layers' calls reuse the lists: one
    build per (layout, device, number of leading blocks real in every row); the outputs
    still follow each call's padding (eager FlexAttention against the dense oracle)."""
    from genobird.attention import flex

    layouts = [bigbird_layout(384, block_size=32, num_heads=2, seed=8, layer=i) for i in range(2)]
    before = flex.LIST_BUILDS
    q, k, v = qkv(2, 2, 384)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager FlexAttention warns that it is unfused
        # leading real blocks: 6, 9, 6 again, all 12 (as unpadded), unpadded
        for lengths in ([384, 200], [300, 384], [210, 384], [384, 384], None):
            mask = None if lengths is None else padding_mask(2, 384, lengths)
            for layout in layouts:
                got = flex_block_sparse_attention(q, k, v, layout, mask)
                expected = dense_attention(q, k, v, layout.dense_mask(), mask)
                torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    assert flex.LIST_BUILDS - before == 6  # 2 layouts x (6, 9, 12 leading real blocks)


def test_the_count_of_real_leading_blocks_is_read_once_per_padding_mask():
    """The layers of one forward pass share their padding mask: the host reads how many
    leading blocks are real once for it, and a new mask is counted afresh."""
    from genobird.attention import flex

    layout = bigbird_layout(384, block_size=32, num_heads=2, seed=8)
    mask = padding_mask(2, 384, [384, 200])
    valid = flex.key_validity(layout, mask, 2, "cpu")
    assert flex.full_leading_blocks(layout, valid, mask) == 6
    mask[1, :] = True  # the count is kept per mask object (a forward pass keeps its mask)
    assert flex.full_leading_blocks(layout, valid, mask) == 6
    other = padding_mask(2, 384, [384, 384])
    assert flex.full_leading_blocks(layout, flex.key_validity(layout, other, 2, "cpu"), other) == 12


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the compiled FlexAttention kernel needs CUDA"
)
def test_flex_kernel_on_cuda_compiles_each_new_shape_past_dynamos_default_limit():
    """Dynamo stops compiling a function after 8 shapes and runs it eagerly from then on
    (FlexAttention unfused: every score materialised). Nine shapes new to this process
    must each get a compiled kernel, and each must still match the oracle."""
    from torch._dynamo.utils import counters

    compiled_before = counters["frames"]["ok"]
    shapes = [(batch, 64 * blocks) for batch in (1, 3, 5) for blocks in (9, 11, 13)]
    for batch, length in shapes:
        layout = bigbird_layout(length, block_size=64, num_heads=3, seed=4).to("cuda")
        q, k, v = (t.cuda().float() for t in qkv(batch, 3, length, dim=32))
        with torch.no_grad():
            got = flex_block_sparse_attention(q, k, v, layout)
        expected = dense_attention(q, k, v, layout.dense_mask(), None)
        torch.testing.assert_close(got, expected, rtol=2e-3, atol=2e-3)
    assert counters["frames"]["ok"] - compiled_before >= len(shapes)


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the compiled FlexAttention kernel needs CUDA"
)
def test_flex_kernel_on_cuda_matches_oracle():
    layout = bigbird_layout(2048, block_size=64, num_heads=4, seed=2).to("cuda")
    q, k, v = (t.cuda().float() for t in qkv(2, 4, 2048, dim=64))
    mask = padding_mask(2, 2048, [2048, 1500]).cuda()
    got = flex_block_sparse_attention(q, k, v, layout, mask)
    expected = dense_attention(q.double(), k.double(), v.double(), layout.dense_mask(), mask)
    assert (got.double() - expected).abs().max() < 2e-3


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the compiled FlexAttention kernel needs CUDA"
)
def test_flex_kernel_on_cuda_weighs_repeated_blocks_like_the_oracle():
    layout = hf_bigbird_layout(2048, 64, 3, num_heads=4, layer=1, max_position=4096).to("cuda")
    q, k, v = (t.cuda().float() for t in qkv(2, 4, 2048, dim=64))
    mask = padding_mask(2, 2048, [2048, 1500]).cuda()
    got = flex_block_sparse_attention(q, k, v, layout, mask)
    expected = dense_attention(
        q.double(),
        k.double(),
        v.double(),
        layout.dense_mask(),
        mask,
        0.0,
        layout.dense_log_counts(),
    )
    assert (got.double() - expected).abs().max() < 2e-3


# --------------------------------------------------------------------------- graph analysis
def test_bigbird_satisfies_assumption_1_and_has_a_star():
    report = analyse_layout(bigbird_layout(2048, block_size=64, num_heads=2))
    assert report.self_attention and report.hamiltonian_path and report.has_star
    assert report.hops_to_all == 2 and report.satisfies_assumption_1


@pytest.mark.parametrize(
    "layout, star, hops",
    [
        (strided_layout(1024, 64, window=1, stride=4), False, 3),
        (fixed_layout(1024, 64, group=4, summaries=1), False, 2),
        (star_layout(1024, 64), True, 2),
        (window_global_layout(1024, 64), True, 2),
    ],
    ids=["strided", "fixed", "star", "window-global"],
)
def test_yun_patterns_satisfy_assumption_1(layout, star, hops):
    report = analyse_layout(layout)
    assert report.satisfies_assumption_1
    assert report.has_star == star and report.hops_to_all == hops


def test_random_layout_with_an_unattended_block_fails_reachability():
    layout = random_layout(1024, 64, num_random_blocks=2, seed=0)
    in_degree = layout.block_mask[0].sum(dim=0) - 1  # without self-attention
    report = analyse_layout(layout)
    assert (report.hops_to_all is None) == bool((in_degree == 0).any())
    assert not report.has_star


def test_checker_detects_missing_self_attention_and_missing_path():
    mask = torch.zeros(1, 4, 4, dtype=torch.bool)
    mask[0, 0, 1] = mask[0, 1, 0] = mask[0, 2, 3] = mask[0, 3, 2] = True  # two islands
    report = analyse_layout(BlockLayout(mask, block_size=1, seq_len=4))
    assert not report.self_attention
    assert report.hamiltonian_path is False
    assert report.hops_to_all is None
    assert report.satisfies_assumption_1 is False


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the compiled FlexAttention kernel needs CUDA"
)
def test_flex_kernel_gradients_on_cuda_match_the_oracle_in_bf16():
    layout = bigbird_layout(4096, block_size=64, num_heads=4, seed=3).to("cuda")
    inputs = [t.cuda() for t in qkv(2, 4, 4096, dim=64)]
    mask = padding_mask(2, 4096, [4096, 3001]).cuda()
    low = [t.bfloat16().requires_grad_(True) for t in inputs]
    high = [t.double().requires_grad_(True) for t in inputs]
    weights = torch.randn(2, 4, 4096, 64, generator=torch.Generator().manual_seed(1)).cuda()
    (flex_block_sparse_attention(*low, layout, mask).double() * weights).sum().backward()
    (dense_attention(*high, layout.dense_mask(), mask) * weights).sum().backward()
    for got, expected in zip(low, high, strict=True):
        error = (got.grad.double() - expected.grad).abs().max()
        assert error < 0.05 * expected.grad.abs().max()


@pytest.mark.slow
def test_compiled_flex_forward_at_training_shapes_on_the_cpu_matches_the_oracle():
    """The forward FlexAttention trains with, at the paper's training shape (batch 8 of
    4,096 tokens, 64-token blocks), compiled as on a GPU (Inductor's CPU backend; its
    backward is CUDA-only): genobird's block lists and repeat weights for two layers'
    random layouts, and each row's own padding, against the dense fp64 oracle."""
    from torch.nn.attention.flex_attention import flex_attention

    from genobird.attention.flex import repeat_score_mod

    batch, heads, length, dim = 8, 2, 4096, 32
    compiled = torch.compile(flex_attention, dynamic=False)
    lengths = [4096, 3001, 4000, 2048, 4096, 1000, 3500, 4095]
    mask = padding_mask(batch, length, lengths)
    for layer in range(2):
        layout = bigbird_layout(length, block_size=64, num_heads=heads, seed=0, layer=layer)
        q, k, v = qkv(batch, heads, length, dim=dim, seed=layer, dtype=torch.float32)
        block_mask = flex_block_mask(layout, mask, batch, q.device, False)
        try:
            out = compiled(
                q,
                k,
                v,
                score_mod=repeat_score_mod(layout, q.device),
                block_mask=block_mask,
                scale=dim**-0.5,
            )
        except torch._dynamo.exc.BackendCompilerFailed as error:  # no C++ compiler here
            pytest.skip(f"torch cannot compile FlexAttention on this CPU: {error}")
        out = out * mask[:, None, :, None]
        for row in range(batch):
            expected = dense_attention(
                q[row : row + 1].double(),
                k[row : row + 1].double(),
                v[row : row + 1].double(),
                layout.dense_mask(),
                mask[row : row + 1],
            )
            torch.testing.assert_close(out[row : row + 1].double(), expected, rtol=0, atol=1e-5)
