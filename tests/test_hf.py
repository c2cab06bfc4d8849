"""HuggingFace BigBird weights both ways, against transformers itself (the oracle)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from genobird.attention import BlockLayout, block_sparse_attention, hf_bigbird_layout
from genobird.attention.hf_plan import hf_block_counts, random_blocks_per_row
from genobird.errors import CheckpointError
from genobird.model import BigBirdConfig, BigBirdForPretraining
from genobird.model.hf import (
    config_from_hf,
    config_to_hf,
    state_dict_from_hf,
    state_dict_to_hf,
)

transformers = pytest.importorskip("transformers")  # a dev requirement: installed by make setup

SHAPE = dict(
    vocab_size=70,
    hidden_size=32,
    num_layers=2,
    num_heads=4,
    intermediate_size=64,
    max_position=512,
    block_size=16,
    num_random_blocks=2,
    hidden_dropout=0.0,
    attention_dropout=0.0,
)


def inputs(length: int, seed: int = 0, batch: int = 2, padding: int = 20):
    """Random ids, segments A then B, and the last `padding` tokens of row 1 padded."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 70, (batch, length), generator=generator)
    segments = torch.zeros_like(ids)
    segments[:, length // 2 :] = 1
    mask = torch.ones_like(ids)
    if batch > 1:
        mask[1, length - padding :] = 0
    return ids, segments, mask


def hf_outputs(model, ids, segments, mask):
    out = model(input_ids=ids, token_type_ids=segments, attention_mask=mask)
    return out.prediction_logits, out.seq_relationship_logits


def genobird_outputs(model, ids, segments, mask):
    """MLM logits at every position (masked_positions = all) and NSP logits."""
    positions = torch.arange(ids.shape[1]).expand_as(ids)
    out = model(ids, segments, mask.bool(), positions)
    return out.mlm_logits.view(*ids.shape, -1), out.nsp_logits


def assert_same_outputs(ours, theirs, ids, segments, mask) -> None:
    """MLM logits at every real position and NSP logits agree to 1e-4."""
    with torch.no_grad():
        mlm, nsp = genobird_outputs(ours, ids, segments, mask)
        hf_mlm, hf_nsp = hf_outputs(theirs, ids, segments, mask)
    real = mask.bool()
    torch.testing.assert_close(mlm[real], hf_mlm[real], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(nsp, hf_nsp, rtol=1e-4, atol=1e-4)


def assert_exports_to_transformers(ours) -> None:
    """`ours` (full attention) exported to a fresh HF BigBirdForPreTraining: every tensor
    maps, none is left over, and the outputs agree."""
    hf_config = transformers.BigBirdConfig(**config_to_hf(ours.config, "BigBirdForPreTraining"))
    theirs = transformers.BigBirdForPreTraining(hf_config).eval()
    result = theirs.load_state_dict(state_dict_to_hf(ours.state_dict(), 2), strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    ids, segments, mask = inputs(96)
    assert_same_outputs(ours, theirs, ids, segments, mask)


@pytest.mark.parametrize("hidden_act, rescale", [("gelu_new", False), ("gelu", True)])
def test_genobird_weights_run_in_transformers_with_the_same_outputs(hidden_act, rescale):
    """Full attention on both sides (HF original_full, genobird dense): every tensor maps."""
    torch.manual_seed(0)
    config = BigBirdConfig(
        **SHAPE, attention_type="dense", hidden_act=hidden_act, rescale_embeddings=rescale
    )
    ours = BigBirdForPretraining(config).eval()
    assert_exports_to_transformers(ours)


def test_composed_token_embeddings_export_as_the_table_they_compute():
    """genobird's composed DNA embeddings become HF's plain word embeddings, exactly."""
    torch.manual_seed(2)
    config = BigBirdConfig(
        **SHAPE, attention_type="dense", composed_token_embeddings=True, position_init="sinusoidal"
    )
    ours = BigBirdForPretraining(config).eval()
    bases = torch.randint(0, 4, (70, 9), generator=torch.Generator().manual_seed(0))
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces += ["".join("ACGT"[b] for b in row[: 1 + i % 9]) for i, row in enumerate(bases[5:])]
    ours.encoder.embeddings.set_vocabulary(pieces)
    with torch.no_grad():
        ours.encoder.embeddings.tokens.residual.normal_(std=0.02)
    assert_exports_to_transformers(ours)


def small_hf_config(**changes):
    values = dict(
        vocab_size=70,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=1024,
        block_size=16,
        num_random_blocks=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        sep_token_id=2,
    )
    return transformers.BigBirdConfig(**{**values, **changes})


def imported(theirs) -> BigBirdForPretraining:
    """A genobird model holding the weights of a transformers BigBirdForPreTraining."""
    config = config_from_hf(theirs.config.to_dict())
    ours = BigBirdForPretraining(config)
    state = state_dict_from_hf(theirs.state_dict(), config.num_layers)
    result = ours.load_state_dict(state, strict=False)
    assert result.missing_keys == ["mlm.token_embedding.weight"]  # tied to the embeddings
    return ours


def transformers_random_blocks(attention, length: int) -> np.ndarray:
    """[H, NB - 2, r] random blocks as transformers' bigbird_block_sparse_attention draws
    them in training mode (its own helpers, its own seeding)."""
    attention.train()
    size, random, heads = (
        attention.block_size,
        attention.num_random_blocks,
        attention.num_attention_heads,
    )
    np.random.seed(attention.seed)
    if length in (1024, 3072, 4096):
        plans = [
            attention._bigbird_block_rand_mask(
                attention.max_seqlen, attention.max_seqlen, size, size, random, last_idx=1024
            )[: length // size - 2]
            for _ in range(heads)
        ]
    else:
        ends, counts = attention._get_rand_attn_plan(length, size, random)
        plans = attention._bigbird_block_rand_mask_with_head(
            from_seq_length=length,
            to_seq_length=length,
            from_block_size=size,
            to_block_size=size,
            num_heads=heads,
            plan_from_length=ends,
            plan_num_rand_blocks=counts,
        )
    return np.stack(plans)


def test_the_hf_layout_draws_transformers_random_blocks():
    """Every layer, head and row, for the paper's plan lengths and the others."""
    theirs = transformers.BigBirdForPreTraining(small_hf_config())
    for layer, module in enumerate(theirs.bert.encoder.layer):
        for length in (160, 400, 512, 1008, 1024):
            ours = random_blocks_per_row(length // 16, 16, 2, 4, layer, 1024)
            np.testing.assert_array_equal(
                ours, transformers_random_blocks(module.attention.self, length)
            )
    state = np.random.get_state()[1].copy()
    random_blocks_per_row(64, 16, 2, 4, 1, 1024)
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # global numpy untouched


def assert_same_states(ours, theirs, length: int, batch: int) -> None:
    """Hidden states and MLM logits agree to 1e-5 at every real position of a batch whose
    last row ends in 37 padding tokens."""
    ids, segments, mask = inputs(length, batch=batch, padding=37)
    with torch.no_grad():
        expected = theirs(
            input_ids=ids, token_type_ids=segments, attention_mask=mask, output_hidden_states=True
        )
        hidden = ours.encoder(ids, segments, mask.bool()).sequence
        positions = torch.arange(length).expand_as(ids)
        logits = ours(ids, segments, mask.bool(), positions).mlm_logits.view(*ids.shape, -1)
    real = mask.bool()
    assert (hidden - expected.hidden_states[-1])[real].abs().max() <= 1e-5
    assert (logits - expected.prediction_logits)[real].abs().max() <= 1e-5


@pytest.mark.parametrize("length, batch", [(1024, 2), (390, 2), (400, 1), (150, 1)])
def test_a_block_sparse_transformers_checkpoint_computes_the_same_in_genobird(length, batch):
    """transformers' BigBirdForPreTraining in training mode (dropout 0), block_sparse, and
    its weights in genobird (attention_type "hf"): hidden states and MLM logits agree to
    1e-5 at every real position; lengths that are and are not block multiples (padded
    inside), a padded batch, the paper's 1,024-token plan, and an input of at most 5 + 2r
    blocks, which both compute with full attention."""
    torch.manual_seed(1)
    theirs = transformers.BigBirdForPreTraining(small_hf_config()).train()
    ours = imported(theirs).train()
    assert ours.config.attention_type == "hf"
    assert_same_states(ours, theirs, length, batch)


def test_a_block_sparse_checkpoint_imports_without_attention_dropout_as_transformers_runs():
    """transformers' block-sparse attention ignores attention_probs_dropout_prob (GENA-LM
    configs carry 0.1): imported with attention dropout 0, genobird trains the function
    transformers trains, output for output in training mode; original_full keeps it."""
    torch.manual_seed(3)
    theirs = transformers.BigBirdForPreTraining(
        small_hf_config(attention_probs_dropout_prob=0.1)
    ).train()
    ours = imported(theirs).train()
    assert ours.config.attention_dropout == 0.0
    assert_same_states(ours, theirs, 390, 2)
    full = config_from_hf(
        small_hf_config(attention_type="original_full", attention_probs_dropout_prob=0.1).to_dict()
    )
    assert full.attention_dropout == 0.1


@pytest.mark.parametrize("length, batch", [(256, 2), (250, 1)])
def test_an_original_full_transformers_checkpoint_computes_the_same_in_genobird(length, batch):
    """attention_type original_full imports as genobird's dense attention: hidden states
    and MLM logits agree to 1e-5 (a block multiple and not, padded and single batches)."""
    torch.manual_seed(2)
    theirs = transformers.BigBirdForPreTraining(small_hf_config(attention_type="original_full"))
    ours = imported(theirs).eval()
    assert ours.config.attention_type == "dense"
    assert_same_states(ours, theirs.eval(), length, batch)


def test_the_1024_token_plan_repeats_blocks_and_genobird_counts_them():
    """Layer 2 of the test model draws, at 1,024 tokens, random blocks that sit in their
    row's window as well: transformers counts them twice, and so must genobird (the test
    above passes only with the counts; dropping them changes the outputs)."""
    counts = hf_block_counts(64, 16, 2, 4, layer=2, max_position=1024)
    assert counts.max() == 2
    layout = hf_bigbird_layout(1024, 16, 2, 4, layer=2, max_position=1024)
    once = BlockLayout(layout.block_mask, 16, 1024)
    q, k, v = (torch.randn(1, 4, 1024, 8, dtype=torch.float64) for _ in range(3))
    assert not torch.allclose(
        block_sparse_attention(q, k, v, layout), block_sparse_attention(q, k, v, once)
    )


def test_short_inputs_get_full_attention_like_transformers():
    assert hf_bigbird_layout(9 * 16, 16, 2, 4, 0, 1024).is_dense  # 5 + 2r blocks
    assert not hf_bigbird_layout(10 * 16, 16, 2, 4, 0, 1024).is_dense


def test_hf_weights_round_trip_through_genobird_unchanged():
    theirs = transformers.BigBirdForPreTraining(small_hf_config())
    ours = imported(theirs)
    back = state_dict_to_hf(ours.state_dict(), ours.config.num_layers)
    original = theirs.state_dict()
    assert set(back) == set(original)
    for name, tensor in original.items():
        assert torch.equal(back[name], tensor), name
    config = config_to_hf(ours.config, "BigBirdForPreTraining")
    assert config["attention_type"] == "block_sparse"
    for key in ("block_size", "num_random_blocks", "max_position_embeddings", "hidden_act"):
        assert config[key] == theirs.config.to_dict()[key]


def test_unsupported_hf_configs_are_named():
    base = transformers.BigBirdConfig(vocab_size=70, sep_token_id=2).to_dict()
    for key, value in (
        ("model_type", "bert"),
        ("is_decoder", True),
        ("use_bias", False),
        ("attention_type", "sparse"),
    ):
        with pytest.raises(CheckpointError, match=f"{key} = "):
            config_from_hf({**base, key: value})
    with pytest.raises(CheckpointError, match="'etc' has no HuggingFace BigBird counterpart"):
        config_to_hf(BigBirdConfig(**SHAPE, attention_type="etc", num_global_tokens=16), "x")
    with pytest.raises(CheckpointError, match=r"base convolution .* no room for"):
        config_to_hf(BigBirdConfig(**SHAPE, base_conv_channels=8), "x")
    for change in ({"position_encoding": "rotary"}, {"layer_norm": "pre"}):
        with pytest.raises(CheckpointError, match=r"only a learned position table .* post-"):
            config_to_hf(BigBirdConfig(**SHAPE, **change), "x")
