"""HuggingFace BigBird weights both ways, against transformers itself (the oracle)."""

from __future__ import annotations

import pytest
import torch

from genobird.errors import CheckpointError
from genobird.model import BigBirdConfig, BigBirdForPretraining
from genobird.model.hf import (
    config_from_hf,
    config_to_hf,
    state_dict_from_hf,
    state_dict_to_hf,
)

transformers = pytest.importorskip("transformers")  # a dev requirement: installed by make setup

SHAPE = dict(vocab_size=70, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64,
             max_position=512, block_size=16, num_random_blocks=2, hidden_dropout=0.0,
             attention_dropout=0.0)  # fmt: skip


def inputs(length: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 70, (2, length), generator=generator)
    segments = torch.zeros_like(ids)
    segments[:, length // 2 :] = 1
    mask = torch.ones_like(ids)
    mask[1, length - 20 :] = 0
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
    config = BigBirdConfig(**SHAPE, attention_type="dense", hidden_act=hidden_act,
                           rescale_embeddings=rescale)  # fmt: skip
    ours = BigBirdForPretraining(config).eval()
    assert_exports_to_transformers(ours)


def test_composed_token_embeddings_export_as_the_table_they_compute():
    """genobird's composed DNA embeddings become HF's plain word embeddings, exactly."""
    torch.manual_seed(2)
    config = BigBirdConfig(**SHAPE, attention_type="dense", composed_token_embeddings=True,
                           position_init="sinusoidal")  # fmt: skip
    ours = BigBirdForPretraining(config).eval()
    bases = torch.randint(0, 4, (70, 9), generator=torch.Generator().manual_seed(0))
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces += ["".join("ACGT"[b] for b in row[: 1 + i % 9]) for i, row in enumerate(bases[5:])]
    ours.encoder.embeddings.set_vocabulary(pieces)
    with torch.no_grad():
        ours.encoder.embeddings.tokens.residual.normal_(std=0.02)
    assert_exports_to_transformers(ours)


def test_a_transformers_checkpoint_runs_in_genobird_with_the_same_outputs():
    """A randomly initialised HF block-sparse BigBirdForPreTraining (its defaults:
    gelu_new) on an input of 6 blocks, which both compute with full attention (HF up to
    5 + 2r blocks; genobird where its layout covers every block)."""
    torch.manual_seed(1)
    hf_config = transformers.BigBirdConfig(
        vocab_size=70, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=512, block_size=16,
        num_random_blocks=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        sep_token_id=2,
    )  # fmt: skip
    theirs = transformers.BigBirdForPreTraining(hf_config).eval()
    config = config_from_hf(hf_config.to_dict())
    assert (config.attention_type, config.hidden_act) == ("itc", "gelu_new")
    ours = BigBirdForPretraining(config).eval()
    state = state_dict_from_hf(theirs.state_dict(), config.num_layers)
    result = ours.load_state_dict(state, strict=False)
    assert result.missing_keys == ["mlm.token_embedding.weight"]  # tied to the embeddings
    ids, segments, mask = inputs(6 * 16)
    assert ours.encoder.layers[0].attention.layout_for(96, torch.device("cpu")).is_dense
    assert_same_outputs(ours, theirs, ids, segments, mask)


def test_unsupported_hf_configs_are_named():
    base = transformers.BigBirdConfig(vocab_size=70, sep_token_id=2).to_dict()
    for key, value in (("model_type", "bert"), ("is_decoder", True), ("use_bias", False),
                       ("attention_type", "sparse")):  # fmt: skip
        with pytest.raises(CheckpointError, match=f"{key} = "):
            config_from_hf({**base, key: value})
    with pytest.raises(CheckpointError, match="'etc' has no HuggingFace BigBird counterpart"):
        config_to_hf(BigBirdConfig(**SHAPE, attention_type="etc", num_global_tokens=16), "x")
