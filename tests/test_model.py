"""The BigBird encoder, its heads and model directories."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch
import torch.nn.functional as F

from genobird.errors import CheckpointError, ConfigError
from genobird.model import (
    BigBirdConfig,
    BigBirdForPretraining,
    BigBirdForSequenceClassification,
    from_pretrained,
    save_pretrained,
)
from genobird.model.embeddings import composed_weight


def tiny_config(**changes) -> BigBirdConfig:
    values = dict(
        vocab_size=60,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position=1024,
        block_size=16,
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )
    values.update(changes)
    return BigBirdConfig(**values)


def batch(length=320, vocab=60, seed=0, padded_from=250):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (2, length), generator=generator)
    mask = torch.ones(2, length, dtype=torch.bool)
    mask[1, padded_from:] = False
    segments = torch.zeros(2, length, dtype=torch.long)
    segments[:, length // 2 :] = 1
    return ids, segments, mask


def encode(model, ids, segments, mask):
    return model.encoder(ids, segments, mask).sequence


# --------------------------------------------------------------------------- config
def test_config_round_trips_through_json(tmp_path):
    config = tiny_config(seed=7, attention_type="itc")
    config.save(tmp_path / "c.json")
    assert BigBirdConfig.load(tmp_path / "c.json") == config


def test_gelu_new_and_rescaled_embeddings_compute_huggingfaces_formulas(tmp_path):
    """The options an imported HuggingFace BigBird needs, against the formulas written
    out: gelu_new = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))); rescaled token
    embeddings are multiplied by sqrt(hidden) before positions and segments are added."""
    import math

    torch.manual_seed(0)
    model = BigBirdForPretraining(tiny_config(hidden_act="gelu_new", rescale_embeddings=True))
    x = torch.randn(3, 32)
    feed_forward = model.encoder.layers[0].feed_forward
    up = feed_forward.up(x)
    gelu_new = 0.5 * up * (1 + torch.tanh(math.sqrt(2 / math.pi) * (up + 0.044715 * up**3)))
    torch.testing.assert_close(feed_forward(x), feed_forward.down(gelu_new))
    wide = torch.linspace(-4, 4, 81)  # the two forms differ by up to ~5e-4 here
    assert (feed_forward.activation(wide) - torch.nn.functional.gelu(wide)).abs().max() > 1e-4
    embeddings = model.encoder.embeddings
    ids, segments, _ = batch(length=40)
    summed = (
        embeddings.tokens(ids) * math.sqrt(32)
        + embeddings.positions.weight[:40]
        + embeddings.segments(segments)
    )
    torch.testing.assert_close(embeddings.eval()(ids, segments), embeddings.norm(summed))
    save_pretrained(model, tmp_path / "m")
    loaded = from_pretrained(tmp_path / "m").encoder
    assert (loaded.embeddings.token_scale, loaded.layers[0].feed_forward.activation.keywords) == (
        math.sqrt(32),
        {"approximate": "tanh"},
    )


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"hidden_size": 30}, "divisible by num_heads"),
        ({"attention_type": "sparse"}, "attention_type must be one of"),
        ({"attention_type": "etc"}, "num_global_tokens >= 1"),
        ({"num_window_blocks": 4}, "must be odd"),
        ({"hidden_dropout": 1.0}, r"in \[0, 1\)"),
        ({"hidden_act": "relu"}, "hidden_act must be one of"),
        ({"position_encoding": "alibi"}, "position_encoding must be one of"),
        (
            {"position_encoding": "rotary", "attention_type": "etc", "num_global_tokens": 4},
            "'rotary' is not supported with attention_type 'etc'",
        ),
        ({"position_encoding": "rotary", "hidden_size": 36}, "even head dim, got 9"),
        ({"layer_norm": "sandwich"}, "layer_norm must be one of"),
    ],
)
def test_invalid_config_values_are_named(changes, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config(**changes)


def test_unknown_config_field_is_named(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**tiny_config().to_dict(), "hidden": 3}))
    with pytest.raises(ConfigError, match=r"unknown BigBirdConfig fields \['hidden'\]"):
        BigBirdConfig.load(path)


# --------------------------------------------------------------------------- the function
@pytest.mark.parametrize("shape", [{}, {"position_encoding": "rotary", "layer_norm": "pre"}])
def test_block_sparse_model_equals_the_dense_oracle_model_in_fp64(shape):
    torch.manual_seed(0)
    model = BigBirdForPretraining(tiny_config(attention_impl="block_sparse", **shape))
    model = model.double().eval()
    ids, segments, mask = batch()
    layout = model.encoder.layers[0].attention.layout_for(320, torch.device("cpu"))
    assert not layout.is_dense  # 20 blocks: the sparse path is really exercised
    sparse = encode(model, ids, segments, mask)
    for layer in model.encoder.layers:
        layer.attention.config = layer.attention.config.replace(attention_impl="dense")
    dense = encode(model, ids, segments, mask)
    torch.testing.assert_close(sparse, dense, rtol=0, atol=1e-10)


def test_layers_draw_different_random_plans_from_one_seed():
    model = BigBirdForPretraining(tiny_config())
    first, second = (
        layer.attention.layout_for(640, torch.device("cpu")) for layer in model.encoder.layers
    )
    assert not torch.equal(first.block_mask, second.block_mask)
    again = (
        BigBirdForPretraining(tiny_config())
        .encoder.layers[0]
        .attention.layout_for(640, torch.device("cpu"))
    )
    assert torch.equal(first.block_mask, again.block_mask)


def test_train_and_eval_compute_the_same_function_with_dropout_off():
    torch.manual_seed(0)
    model = BigBirdForPretraining(tiny_config())
    ids, segments, mask = batch()
    model.train()
    trained = encode(model, ids, segments, mask)
    model.eval()
    torch.testing.assert_close(encode(model, ids, segments, mask), trained)


def test_short_input_uses_dense_for_that_call_only():
    torch.manual_seed(0)
    model = BigBirdForPretraining(tiny_config()).eval()
    attention = model.encoder.layers[0].attention
    ids, segments, mask = batch(length=96, padded_from=80)  # 6 blocks: pattern covers all
    short = encode(model, ids, segments, mask)
    assert attention.layout_for(96, torch.device("cpu")).is_dense
    assert not attention.layout_for(512, torch.device("cpu")).is_dense  # not switched
    assert torch.isfinite(short).all()


@pytest.mark.parametrize("random_blocks", [0, 3])
def test_dense_input_length_is_where_the_model_still_computes_full_attention(random_blocks):
    """Up to `dense_input_length` every query block attends every key block (the first and
    last blocks global, a window of 3, r random: 4 + r blocks), so the model computes full
    attention, at lengths between whole blocks too; one block more and it does not."""
    torch.manual_seed(0)
    model = BigBirdForPretraining(tiny_config(num_random_blocks=random_blocks)).double().eval()
    full = BigBirdForPretraining(
        tiny_config(num_random_blocks=random_blocks, attention_type="dense")
    ).double()
    full.load_state_dict(model.state_dict())
    dense_length = model.encoder.dense_input_length()
    assert dense_length == (4 + random_blocks) * 16
    for length, attends_fully in (
        (dense_length - 3, True),
        (dense_length, True),
        (dense_length + 16, False),
    ):
        ids, segments, mask = batch(length=length, padded_from=length - 5)
        sparse, dense = (encode(m.eval(), ids, segments, mask) for m in (model, full))
        assert torch.allclose(sparse, dense, rtol=0, atol=1e-10) == attends_fully, length


def test_dense_input_length_of_full_attention_and_etc_models():
    full = BigBirdForPretraining(tiny_config(attention_type="dense"))
    assert full.encoder.dense_input_length() == 1024  # max_position
    etc = BigBirdForPretraining(tiny_config(attention_type="etc", num_global_tokens=5))
    assert etc.encoder.dense_input_length() == 16  # its global segment lengthens the input


def test_real_tokens_ignore_what_padding_holds():
    torch.manual_seed(0)
    model = BigBirdForPretraining(tiny_config()).eval()
    ids, segments, mask = batch()
    other = ids.clone()
    other[1, 250:] = 7
    a, b = encode(model, ids, segments, mask), encode(model, other, segments, mask)
    torch.testing.assert_close(a[1, :250], b[1, :250])


def test_etc_model_prepends_globals_and_matches_the_oracle():
    torch.manual_seed(0)
    config = tiny_config(attention_type="etc", num_global_tokens=5, attention_impl="block_sparse")
    model = BigBirdForPretraining(config).double().eval()
    ids, segments, mask = batch()
    out = model.encoder(ids, segments, mask)
    assert out.sequence.shape == (2, 320, 32) and out.global_states.shape == (2, 5, 32)
    for layer in model.encoder.layers:
        layer.attention.config = layer.attention.config.replace(attention_impl="dense")
    torch.testing.assert_close(model.encoder(ids, segments, mask).sequence, out.sequence)


def test_gradient_checkpointing_gives_the_same_loss_and_gradients():
    ids, segments, mask = batch()
    labels = torch.tensor([0, 1])
    results = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        model = BigBirdForSequenceClassification(
            tiny_config(gradient_checkpointing=checkpointing, hidden_dropout=0.1), num_labels=2
        ).train()
        torch.manual_seed(1)
        loss = model(ids, segments, mask, labels).loss
        loss.backward()
        results.append((loss.detach(), model.encoder.layers[0].attention.qkv.weight.grad.clone()))
    torch.testing.assert_close(results[0][0], results[1][0])
    torch.testing.assert_close(results[0][1], results[1][1])


def test_bf16_autocast_runs_and_stays_close_to_fp32():
    torch.manual_seed(0)
    model = BigBirdForSequenceClassification(tiny_config(), num_labels=3).eval()
    ids, segments, mask = batch()
    reference = model(ids, segments, mask).logits
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = model(ids, segments, mask).logits
    assert torch.isfinite(low).all()
    assert (low.float() - reference).abs().max() < 0.1


# --------------------------------------------------------------------------- heads
def test_mlm_decoder_is_tied_to_the_token_embedding():
    model = BigBirdForPretraining(tiny_config())
    assert model.mlm.token_embedding.weight is model.encoder.embeddings.tokens.weight


def test_pretraining_losses_and_masked_slots():
    torch.manual_seed(0)
    model = BigBirdForPretraining(tiny_config()).eval()
    ids, segments, mask = batch()
    positions = torch.tensor([[1, 5, 9, 0], [2, 3, 0, 0]])
    labels = torch.tensor([[10, 11, 12, -100], [13, 14, -100, -100]])
    out = model(ids, segments, mask, positions, labels, torch.tensor([1, 0]))
    assert out.mlm_logits.shape == (5, 60)  # only the 5 real predictions
    expected = torch.nn.functional.cross_entropy(out.mlm_logits, torch.tensor([10, 11, 12, 13, 14]))
    torch.testing.assert_close(out.mlm_loss, expected)
    torch.testing.assert_close(out.loss, out.mlm_loss + out.nsp_loss)


def test_mean_pooling_reads_the_real_tokens_only():
    """Mean pooling equals the average of each input's real token states, computed row by
    row, whatever the padding holds."""
    torch.manual_seed(0)
    model = BigBirdForSequenceClassification(tiny_config(), 2, pooling="mean").eval()
    ids, segments, mask = batch()
    states = encode(model, ids, segments, mask)
    expected = torch.stack([states[row, mask[row]].mean(0) for row in range(2)])
    torch.testing.assert_close(model.head(expected), model(ids, segments, mask).logits)
    other = ids.clone()
    other[1, 250:] = 7  # padding: the pooled vector, hence the logits, must not move
    torch.testing.assert_close(
        model(other, segments, mask).logits, model(ids, segments, mask).logits
    )


def test_profile_pooling_reads_each_bins_tokens_and_scores_the_middle_bin(tmp_path):
    """Pooling "profile": each of K bins is the mean of its own slice of the real tokens
    (the middle one the slice centre pooling reads), all read by one head; `logits` are
    the middle bin's; labels [B, K, F] train every bin, [B, F] the middle one; the base
    readers' window features sit beside every bin's vector; it survives a save."""
    from genobird.model import from_pretrained, save_pretrained
    from genobird.model.classifier import central_tokens, masked_bce, profile_tokens

    torch.manual_seed(0)
    model = BigBirdForSequenceClassification(
        tiny_config(),
        2,
        problem="multi_label",
        pooling="profile",
        centre_fraction=0.2,
        profile_bins=3,
    ).eval()
    ids, segments, mask = batch()
    states = encode(model, ids, segments, mask)
    weights = profile_tokens(mask, 0.2, 3)
    assert torch.equal(weights[:, :, 1], central_tokens(mask, 0.2))
    for row in range(2):  # adjacent slices of the real tokens, none outside them
        slots = [weights[row, :, k].nonzero().ravel() for k in range(3)]
        assert all(len(slot) for slot in slots) and not weights[row, ~mask[row]].any()
        assert slots[0][-1] + 1 == slots[1][0] and slots[1][-1] + 1 == slots[2][0]
    pooled = torch.stack(
        [
            torch.stack([states[row, weights[row, :, k]].mean(0) for k in range(3)])
            for row in range(2)
        ]
    )
    profile = model.head(pooled)  # [B, K, F]
    out = model(ids, segments, mask)
    torch.testing.assert_close(out.logits, profile[:, 1])
    labels = torch.tensor([[[1.0, 0], [0, float("nan")], [1, 1]], [[0, 0], [1, 0], [0, 1]]])
    pos_weight = model.pos_weight_on_device
    torch.testing.assert_close(
        model(ids, segments, mask, labels).loss, masked_bce(profile, labels, pos_weight)
    )
    torch.testing.assert_close(
        model(ids, segments, mask, labels[:, 1]).loss,
        masked_bce(profile[:, 1], labels[:, 1], pos_weight),
    )
    save_pretrained(model, tmp_path / "m")
    loaded = from_pretrained(tmp_path / "m").eval()
    assert (loaded.profile_bins, loaded.centre_fraction) == (3, 0.2)
    torch.testing.assert_close(loaded(ids, segments, mask).logits, out.logits)
    with pytest.raises(ConfigError, match="odd number of bins"):
        BigBirdForSequenceClassification(
            tiny_config(), 2, pooling="profile", centre_fraction=0.2, profile_bins=2
        )
    with pytest.raises(ConfigError, match="odd number of bins"):
        BigBirdForSequenceClassification(
            tiny_config(), 2, pooling="profile", centre_fraction=0.4, profile_bins=3
        )


def test_a_profile_head_started_from_a_kmer_lr_gives_every_bin_its_logits():
    """Base readers read the window: started from a k-mer LR (encoder columns zero), each
    bin of the profile starts at the k-mer LR's logit of the window, the middle one too."""
    torch.manual_seed(0)
    config = tiny_config(
        vocab_size=len(PIECES), composed_token_embeddings=True, base_conv_channels=4
    )
    model = BigBirdForSequenceClassification(
        config,
        2,
        problem="multi_label",
        pooling="profile",
        centre_fraction=0.2,
        profile_bins=3,
        base_kmers=3,
    ).eval()
    model.encoder.embeddings.set_vocabulary(PIECES)
    features = model.base_kmer_counts.output_size
    generator = torch.Generator().manual_seed(1)
    coefficients = torch.randn(2, features, generator=generator)
    intercepts, scale = torch.tensor([0.5, -1.0]), torch.rand(features, generator=generator) + 0.5
    model.start_from_baselines(kmer_lr=(coefficients, intercepts, scale))
    ids = torch.randint(5, len(PIECES), (2, 64), generator=generator)
    mask = torch.ones_like(ids, dtype=torch.bool)
    captured = {}
    model.head.register_forward_hook(lambda module, args, output: captured.update(out=output))
    logits = model(ids, torch.zeros_like(ids), mask).logits
    spelled, _ = model.speller().spelled_bases(ids, mask, markers=False)
    expected = model.base_kmer_counts(spelled) @ coefficients.T + intercepts
    for k in range(3):
        torch.testing.assert_close(captured["out"][:, k], expected)
    torch.testing.assert_close(logits, expected)


def test_centre_pooling_reads_the_central_real_tokens_only(tmp_path):
    """Centre pooling equals the average of each input's central real token states (the
    middle fifth of them here), row by row, whatever lies outside; it survives a save."""
    from genobird.model import from_pretrained, save_pretrained
    from genobird.model.classifier import central_tokens

    torch.manual_seed(0)
    model = BigBirdForSequenceClassification(
        tiny_config(), 2, pooling="centre", centre_fraction=0.2
    ).eval()
    ids, segments, mask = batch()
    states = encode(model, ids, segments, mask)
    rows = []
    for row in range(2):
        length = int(mask[row].sum())
        span = max(round(length * 0.2), 1)
        first = (length - span) // 2
        rows.append(states[row, first : first + span].mean(0))
    torch.testing.assert_close(model.head(torch.stack(rows)), model(ids, segments, mask).logits)
    assert central_tokens(torch.ones(1, 10, dtype=torch.bool), 0.2)[
        0
    ].nonzero().ravel().tolist() == [4, 5]
    assert central_tokens(torch.ones(1, 9, dtype=torch.bool), 0.01)[
        0
    ].nonzero().ravel().tolist() == [4]  # at least the middle token
    save_pretrained(model, tmp_path / "m")
    loaded = from_pretrained(tmp_path / "m").eval()
    assert loaded.centre_fraction == 0.2
    torch.testing.assert_close(
        loaded(ids, segments, mask).logits, model(ids, segments, mask).logits
    )


def test_multi_label_head_uses_pos_weight():
    torch.manual_seed(0)
    ids, segments, mask = batch()
    labels = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    plain = BigBirdForSequenceClassification(tiny_config(), 3, "multi_label", pos_weight=1.0).eval()
    weighted = BigBirdForSequenceClassification(
        tiny_config(), 3, "multi_label", pos_weight=8.0
    ).eval()
    weighted.load_state_dict(plain.state_dict())
    logits = plain(ids, segments, mask).logits
    expected = torch.nn.functional.binary_cross_entropy_with_logits(
        logits, labels, pos_weight=torch.tensor(8.0)
    )
    torch.testing.assert_close(weighted(ids, segments, mask, labels).loss, expected)
    assert weighted(ids, segments, mask, labels).loss > plain(ids, segments, mask, labels).loss


@pytest.mark.parametrize("shape", [{}, {"position_encoding": "rotary", "layer_norm": "pre"}])
def test_tiny_model_overfits_one_batch(shape):
    torch.manual_seed(0)
    model = BigBirdForPretraining(tiny_config(hidden_size=64, num_heads=4, **shape)).train()
    ids, segments, mask = batch(length=256)
    positions = torch.arange(0, 240, 8).repeat(2, 1)
    labels = torch.gather(ids, 1, positions)
    masked = ids.clone().scatter_(1, positions, 4)  # [MASK]
    nsp = torch.tensor([1, 0])
    optimiser = torch.optim.Adam(model.parameters(), lr=2e-3)
    first = None
    for _ in range(120):
        loss = model(masked, segments, mask, positions, labels, nsp).loss
        first = first if first is not None else loss.item()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    assert loss.item() < 0.05 * first


# --------------------------------------------------------------------------- model directories
def test_save_and_load_round_trip_keeps_function_and_tying(tmp_path):
    torch.manual_seed(0)
    model = BigBirdForSequenceClassification(tiny_config(), 4, "multi_label", 8.0).eval()
    save_pretrained(model, tmp_path / "m")
    loaded = from_pretrained(tmp_path / "m").eval()
    assert isinstance(loaded, BigBirdForSequenceClassification)
    assert (loaded.num_labels, loaded.problem, loaded.pos_weight) == (4, "multi_label", 8.0)
    ids, segments, mask = batch()
    torch.testing.assert_close(
        loaded(ids, segments, mask).logits, model(ids, segments, mask).logits
    )
    pretrain = BigBirdForPretraining(tiny_config())
    save_pretrained(pretrain, tmp_path / "p")
    reloaded = from_pretrained(tmp_path / "p")
    assert reloaded.mlm.token_embedding.weight is reloaded.encoder.embeddings.tokens.weight


def test_mismatched_configuration_names_the_mismatch(tmp_path):
    save_pretrained(BigBirdForPretraining(tiny_config()), tmp_path / "m")
    description = json.loads((tmp_path / "m" / "config.json").read_text())
    description["config"]["intermediate_size"] = 128
    (tmp_path / "m" / "config.json").write_text(json.dumps(description))
    with pytest.raises(
        CheckpointError,
        match=r"shape mismatch: .*feed_forward.up.weight \[64, 32\] vs model \[128, 32\]",
    ):
        from_pretrained(tmp_path / "m")


def test_truncated_weights_are_detected(tmp_path):
    save_pretrained(BigBirdForPretraining(tiny_config()), tmp_path / "m")
    weights = tmp_path / "m" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupted"):
        from_pretrained(tmp_path / "m")


def test_task_models_load_without_the_model_layer_importing_theirs(tmp_path):
    """model/ imports nothing above it: a saved task model records its module, and
    loading imports that module (genobird's own only) in a fresh interpreter."""
    import subprocess
    import sys
    from pathlib import Path

    import genobird.model

    for source in Path(genobird.model.__file__).parent.glob("*.py"):
        assert not re.search(r"^\s*(from|import) genobird\.nlp", source.read_text(), re.M), source
    from genobird.nlp.models import BigBirdForMultipleChoice

    config = tiny_config(attention_type="etc", num_global_tokens=16)
    save_pretrained(BigBirdForMultipleChoice(config), tmp_path / "mc")
    description = json.loads((tmp_path / "mc" / "config.json").read_text())
    assert description["model_module"] == "genobird.nlp.models"
    script = (
        "import sys; from genobird.model import from_pretrained; "
        f"m = from_pretrained({str(tmp_path / 'mc')!r}); "
        "print(type(m).__name__, 'genobird.nlp.models' in sys.modules)"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.stdout.split() == ["BigBirdForMultipleChoice", "True"], run.stderr
    description.update(model_class="Evil", model_module="os")  # not genobird's: not imported
    (tmp_path / "mc" / "config.json").write_text(json.dumps(description))
    with pytest.raises(CheckpointError, match="unknown model_class 'Evil'"):
        from_pretrained(tmp_path / "mc")


def test_not_a_model_directory(tmp_path):
    with pytest.raises(CheckpointError, match=r"config\.json is missing"):
        from_pretrained(tmp_path)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="FlexAttention's fused kernel needs CUDA")
def test_flex_and_pytorch_kernels_train_the_same_model_on_cuda():
    """The CUDA default (FlexAttention, compiled once for all layers) against the PyTorch
    block-sparse kernel: same loss and gradients under bf16 autocast, and no recompile
    per layer or per step (a recompile storm would fall back to slow eager code)."""
    from torch._dynamo.utils import counters

    config = tiny_config(vocab_size=200, hidden_size=128, max_position=2048, block_size=64)
    ids, segments, mask = (t.cuda() for t in batch(length=2048, vocab=200, padded_from=1500))
    positions = torch.tensor([[1, 700, 1400, 2000], [3, 600, 1200, 1499]], device="cuda")
    labels = {
        "masked_positions": positions,
        "masked_labels": torch.gather(ids, 1, positions),
        "nsp_labels": torch.tensor([0, 1], device="cuda"),
    }
    results = {}
    for impl in ("flex", "block_sparse"):
        torch.manual_seed(0)
        model = BigBirdForPretraining(config.replace(attention_impl=impl)).cuda()
        counters.clear()
        for _ in range(2):
            model.zero_grad()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(ids, segments, mask, **labels).loss
            loss.backward()
        results[impl] = (loss.detach().float(), model.encoder.layers[1].attention.qkv.weight.grad)
        if impl == "flex":
            assert counters["stats"]["unique_graphs"] <= 2, dict(counters["stats"])
    torch.testing.assert_close(results["flex"][0], results["block_sparse"][0], atol=2e-2, rtol=0)
    flex_grad, torch_grad = results["flex"][1], results["block_sparse"][1]
    assert (flex_grad - torch_grad).abs().max() < 0.05 * torch_grad.abs().max()


# --------------------------------------------------------------------------- DNA embeddings
PIECES = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "A", "CG", "acgT", "ANT", "GATTACAGATTACA"]


def composed_model(piece_length=4, **changes) -> BigBirdForPretraining:
    torch.manual_seed(0)
    config = tiny_config(
        vocab_size=len(PIECES),
        composed_token_embeddings=True,
        composed_piece_length=piece_length,
        **changes,
    )
    model = BigBirdForPretraining(config)
    model.encoder.embeddings.set_vocabulary(PIECES)
    with torch.no_grad():  # a trained-looking residual, so that it is seen in the sums
        model.encoder.embeddings.tokens.residual.normal_()
    return model


def composed_oracle(residual, table, piece: str, index: int, piece_length: int):
    """A piece's vector written out: residual + base terms from each end."""
    codes = ["ACGT".find(base) for base in piece.upper()]
    if not codes or min(codes) < 0:
        return residual[index]
    first, last = codes[:piece_length], codes[::-1][:piece_length]
    terms = [table[4 * i + c] for i, c in enumerate(first)]
    terms += [table[4 * (piece_length + i) + c] for i, c in enumerate(last)]
    return residual[index] + torch.stack(terms).sum(0)


def test_composed_token_embeddings_sum_each_pieces_bases():
    model = composed_model(piece_length=4)
    tokens = model.encoder.embeddings.tokens
    weight = tokens.weight
    for index, piece in enumerate(PIECES):  # "GATTACAGATTACA" is longer than 2 x 4 bases
        expected = composed_oracle(tokens.residual, tokens.table, piece, index, 4)
        torch.testing.assert_close(weight[index], expected)
    same_bases = weight[7] - tokens.residual[7]  # "acgT" is composed as "ACGT"
    other = composed_oracle(torch.zeros_like(tokens.residual), tokens.table, "ACGT", 7, 4)
    torch.testing.assert_close(same_bases, other)


def test_composed_embeddings_compose_only_the_batchs_pieces_with_the_full_tables_result():
    tokens = composed_model(piece_length=4).encoder.embeddings.tokens
    ids = torch.tensor([[2, 5, 6, 5, 9], [7, 7, 0, 0, 0]])
    fast = tokens(ids)
    fast.square().sum().backward()
    grads = tokens.residual.grad.clone(), tokens.table.grad.clone()
    tokens.zero_grad()
    full = F.embedding(ids, tokens.weight)  # every piece composed
    full.square().sum().backward()
    torch.testing.assert_close(fast, full)
    torch.testing.assert_close(grads[0], tokens.residual.grad)
    torch.testing.assert_close(grads[1], tokens.table.grad)
    assert grads[0][1].abs().sum() == 0  # a piece not in the batch gets no gradient


def test_composed_embeddings_train_through_input_and_tied_decoder(tmp_path):
    model = composed_model()
    assert model.mlm.token_embedding is model.encoder.embeddings.tokens
    ids = torch.tensor([[2, 5, 6, 4, 7, 9, 3] * 4])
    positions = torch.tensor([[3, 10]])
    out = model(ids, None, None, positions, torch.tensor([[6, 9]]), torch.tensor([0]))
    out.loss.backward()
    table = model.encoder.embeddings.tokens.table
    assert table.grad is not None and table.grad[:-1].abs().sum() > 0
    assert table.grad[-1].abs().sum() == 0  # the padding row stays zero
    save_pretrained(model.eval(), tmp_path / "m")
    loaded = from_pretrained(tmp_path / "m").eval()
    torch.testing.assert_close(
        loaded.encoder.embeddings.tokens.weight, model.encoder.embeddings.tokens.weight
    )
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).mlm_logits, model(ids).mlm_logits)


def test_composed_weight_is_reused_without_gradients_until_its_parts_change():
    model = composed_model().eval()
    tokens = model.encoder.embeddings.tokens
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torch.no_grad():
        first = tokens.weight
        assert tokens.weight is first  # composed once for every scoring batch
    ids, positions = torch.tensor([[2, 5, 6, 4, 7, 9, 3] * 4]), torch.tensor([[3, 10]])
    model(ids, None, None, positions, torch.tensor([[6, 9]])).loss.backward()
    optimizer.step()  # in place: the parts change, the composed weight with them
    with torch.no_grad():
        stepped = tokens.weight
        assert not torch.equal(stepped, first)
        fresh = composed_weight(tokens.residual, tokens.table, tokens.piece_terms)
        torch.testing.assert_close(stepped, fresh)
        tokens.table.mul_(2)  # loaded or edited weights, in place
        torch.testing.assert_close(
            tokens.weight, composed_weight(tokens.residual, tokens.table, tokens.piece_terms)
        )
    assert tokens.weight.requires_grad  # with gradients: composed afresh, differentiable


@pytest.mark.parametrize("training_mode_no_grad", [False, True])
def test_composed_weight_follows_a_fused_optimiser_step(training_mode_no_grad):
    """AdamW's fused kernel updates the parts without bumping their version counters:
    the held-out checks of a training run (eval mode, or no_grad in training mode) must
    still read the stepped weight, not the one composed at the first check."""
    model = composed_model()
    tokens = model.encoder.embeddings.tokens
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, fused=True)
    ids, positions = torch.tensor([[2, 5, 6, 4, 7, 9, 3] * 4]), torch.tensor([[3, 10]])
    for _ in range(2):
        model.train()
        model(ids, None, None, positions, torch.tensor([[6, 9]])).loss.backward()
        versions = [part._version for part in (tokens.residual, tokens.table)]
        optimizer.step()
        optimizer.zero_grad()
        assert [part._version for part in (tokens.residual, tokens.table)] == versions
        if not training_mode_no_grad:
            model.eval()
        with torch.no_grad():
            fresh = composed_weight(tokens.residual, tokens.table, tokens.piece_terms)
            torch.testing.assert_close(tokens.weight, fresh, rtol=0, atol=0)


def test_composed_embeddings_without_a_vocabulary_are_refused():
    model = BigBirdForPretraining(tiny_config(composed_token_embeddings=True))
    with pytest.raises(ConfigError, match="need the vocabulary's pieces"):
        model(torch.tensor([[2, 5, 6, 3]]))
    with pytest.raises(ConfigError, match="the vocabulary has 3 pieces, the embedding 60"):
        model.encoder.embeddings.set_vocabulary(["A", "C", "G"])
    with pytest.raises(ConfigError, match="set only once"):
        composed_model().encoder.embeddings.set_vocabulary(PIECES)


def test_fresh_composed_embeddings_start_at_the_initializer_scale():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    pieces = ["[PAD]", "[CLS]"] + [
        "".join("ACGT"[b] for b in torch.randint(0, 4, (int(n),), generator=generator))
        for n in torch.randint(1, 13, (998,), generator=generator)
    ]
    model = BigBirdForPretraining(
        tiny_config(vocab_size=1000, hidden_size=64, composed_token_embeddings=True)
    )
    model.encoder.embeddings.set_vocabulary(pieces)
    weight = model.encoder.embeddings.tokens.weight.detach()
    assert 0.016 < float(weight[2:].std()) < 0.024  # BERT's 0.02, as a free table starts
    assert float(weight[:2].abs().max()) == 0.0  # special tokens: the zero residual alone


def test_sinusoidal_positions_depend_on_distance_alone():
    torch.manual_seed(0)
    model = BigBirdForPretraining(tiny_config(position_init="sinusoidal", hidden_size=64))
    table = model.encoder.embeddings.positions.weight.detach()
    gram = table @ table.T
    for shift in (1, 17, 300):  # p_i . p_j = p_(i+s) . p_(j+s)
        torch.testing.assert_close(
            gram[:100, :100], gram[shift : shift + 100, shift : shift + 100], atol=1e-6, rtol=1e-3
        )
    assert abs(float(table.std()) - 0.02) < 0.002  # BERT's scale, as the token embeddings
    assert gram[0, 1] > gram[0, 50]  # neighbours are more alike than distant positions
    with pytest.raises(ConfigError, match="position_init must be one of"):
        tiny_config(position_init="rotary")


# --------------------------------------------------------------------------- rotary, pre-LayerNorm
def rotary_oracle(x: torch.Tensor) -> torch.Tensor:
    """RoFormer's rotation written with complex numbers: dimensions (i, i + D/2) of the
    token at position p are one complex number, multiplied by exp(1j p 10000^(-2i/D))."""
    half = x.shape[-1] // 2
    pairs = torch.complex(x[..., :half].double(), x[..., half:].double())
    frequency = 10_000.0 ** (-2 * torch.arange(half, dtype=torch.float64) / x.shape[-1])
    angle = torch.arange(x.shape[-2], dtype=torch.float64)[:, None] * frequency
    turned = pairs * torch.polar(torch.ones_like(angle), angle)
    return torch.cat([turned.real, turned.imag], dim=-1)


def test_rotary_positions_turn_each_pair_by_its_position():
    from genobird.model.bigbird import rotate_by_position

    x = torch.randn(2, 3, 600, 8, dtype=torch.float64)
    torch.testing.assert_close(rotate_by_position(x), rotary_oracle(x), rtol=0, atol=1e-12)
    half = rotate_by_position(x.to(torch.bfloat16))  # turned in fp32, returned in bf16
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(half.double(), rotary_oracle(x), rtol=0.02, atol=0.05)
    # one query vector and one key vector at every position score by their distance alone
    same_q = rotate_by_position(x[:1, :1, :1].expand(1, 1, 600, 8).contiguous())[0, 0]
    same_k = rotate_by_position(x[:1, :1, 1:2].expand(1, 1, 600, 8).contiguous())[0, 0]
    scores = same_q @ same_k.T  # [N, N]
    for distance in (-7, 0, 5, 300):
        torch.testing.assert_close(scores.diagonal(distance)[:-50], scores.diagonal(distance)[50:])
    assert scores[0, :20].std() > 1e-3  # while the score changes with the distance


def test_rotary_model_has_no_position_table_and_reads_token_order():
    torch.manual_seed(0)
    model = BigBirdForPretraining(
        tiny_config(position_encoding="rotary", attention_type="dense")
    ).eval()
    assert model.encoder.embeddings.positions is None
    assert not any("positions" in name for name in model.state_dict())
    plain = BigBirdForPretraining(tiny_config(attention_type="dense")).eval()
    with torch.no_grad():  # sharper attention than at initialisation, and no position table
        for layer in [*model.encoder.layers, *plain.encoder.layers]:
            layer.attention.qkv.weight.mul_(30)
        plain.encoder.embeddings.positions.weight.zero_()
    ids = torch.randint(5, 60, (1, 64))
    states = model.encoder(ids).sequence
    reversed_states = model.encoder(ids.flip(1)).sequence.flip(1)
    # without any position signal, full attention would give each token the same state
    # in either order
    assert (states - reversed_states).abs().max() > 0.1
    unordered = plain.encoder(ids).sequence
    torch.testing.assert_close(unordered, plain.encoder(ids.flip(1)).sequence.flip(1))


def test_pre_layer_norm_layers_add_each_sublayer_to_the_raw_residual_stream():
    torch.manual_seed(0)
    model = BigBirdForPretraining(tiny_config(layer_norm="pre")).eval()
    ids, segments, mask = batch()
    layer = model.encoder.layers[0]
    x = torch.randn(2, 320, 32)
    norm = layer.attention_norm
    attended = x + layer.attention(F.layer_norm(x, (32,), norm.weight, norm.bias, 1e-12), mask)
    expected = attended + layer.feed_forward(
        F.layer_norm(attended, (32,), layer.output_norm.weight, layer.output_norm.bias, 1e-12)
    )
    torch.testing.assert_close(layer(x, mask), expected)
    with torch.no_grad():
        model.encoder.final_norm.weight.fill_(2.0)
    top = encode(model, ids, segments, mask)[0]
    assert torch.allclose(top.std(-1, unbiased=False), torch.full((320,), 2.0), atol=1e-3)


def test_rotary_pre_norm_model_saves_and_loads(tmp_path):
    torch.manual_seed(0)
    model = BigBirdForPretraining(tiny_config(position_encoding="rotary", layer_norm="pre"))
    save_pretrained(model.eval(), tmp_path / "m")
    loaded = from_pretrained(tmp_path / "m").eval()
    assert (loaded.config.position_encoding, loaded.config.layer_norm) == ("rotary", "pre")
    ids, segments, mask = batch()
    torch.testing.assert_close(
        encode(loaded, ids, segments, mask), encode(model, ids, segments, mask)
    )


# --------------------------------------------------------------------------- base convolution
def base_conv_model(**changes) -> BigBirdForPretraining:
    torch.manual_seed(0)
    config = tiny_config(
        vocab_size=len(PIECES),
        base_conv_channels=8,
        base_conv_width=5,
        composed_token_embeddings=True,
        composed_piece_length=4,
        **changes,
    )
    model = BigBirdForPretraining(config)
    model.encoder.embeddings.set_vocabulary(PIECES)
    return model


def base_conv_oracle(conv, ids: list[int], real: int) -> torch.Tensor:
    """BaseConvolution written out for one sequence: its first `real` tokens spelled as
    one-hot columns (A C G T N, a marker for a token without bases), a direct sum over
    the filter's taps, ReLU, the maximum over each token's own columns (torch.amax: the
    gradient split evenly among equal maxima), the projection."""
    columns, owner = [], []
    for token, index in enumerate(ids[:real]):
        piece = PIECES[index].upper()
        codes = ["ACGTN".index(b) for b in piece] if set(piece) <= set("ACGTN") else [5]
        columns += codes
        owner += [token] * len(codes)
    weight, bias = conv.conv.weight.double(), conv.conv.bias.double()
    half = weight.shape[-1] // 2
    filters = []
    for position in range(len(columns)):
        total = bias.clone()
        for tap in range(weight.shape[-1]):
            source = position + tap - half
            if 0 <= source < len(columns):
                total = total + weight[:, columns[source], tap]
        filters.append(torch.relu(total))
    filters = torch.stack(filters)
    pooled = torch.zeros(len(ids), weight.shape[0], dtype=torch.float64)
    for token in range(real):
        pooled[token] = filters[[i for i, o in enumerate(owner) if o == token]].amax(0)
    return pooled @ conv.project.weight.double().T + conv.project.bias.double()


def test_base_convolution_equals_a_per_sequence_oracle():
    conv = base_conv_model().encoder.embeddings.base_conv.double()
    with torch.no_grad():  # a trained-looking projection bias, so padding rows are seen
        conv.project.bias.normal_()
    rows = [[2, 5, 9, 4, 7, 6, 8, 3], [2, 8, 3, 0, 0, 0, 0, 0]]  # [MASK] = 4, [PAD] = 0
    ids = torch.tensor(rows)
    mask = ids != 0
    features = conv(ids, mask).detach()
    for index, (row, real) in enumerate(zip(rows, mask.sum(1).tolist(), strict=True)):
        expected = base_conv_oracle(conv, row, real).detach()
        torch.testing.assert_close(features[index, :real], expected[:real])
    # padding tokens take no columns: their features are the projection of nothing
    torch.testing.assert_close(features[1, 3:], conv.project.bias.expand(5, -1))
    # gradients through the pooling reach the filters that won each maximum, as the oracle's
    weights = torch.randn(features.shape, dtype=torch.float64, generator=torch.Generator())
    (conv(ids, mask)[mask] * weights[mask]).sum().backward()
    ours = conv.conv.weight.grad.clone()
    conv.zero_grad()
    reals = mask.sum(1).tolist()
    oracle = [
        base_conv_oracle(conv, row, real)[:real] for row, real in zip(rows, reals, strict=True)
    ]
    sum((out * weights[i, : len(out)]).sum() for i, out in enumerate(oracle)).backward()
    torch.testing.assert_close(ours, conv.conv.weight.grad)


def test_base_convolution_features_do_not_depend_on_batch_padding():
    model = base_conv_model().eval()
    alone = torch.tensor([[2, 9, 6, 7, 5, 8, 3]])
    padded = torch.cat([alone, torch.zeros(1, 9, dtype=torch.long)], dim=1)
    longer = torch.tensor([[2] + [7] * 14 + [3]])
    batch_ids = torch.cat([padded, longer])
    with torch.no_grad():
        single = model.encoder(alone).sequence
        batched = model.encoder(batch_ids, attention_mask=batch_ids != 0).sequence
    torch.testing.assert_close(batched[0, :7], single[0], atol=1e-5, rtol=1e-5)


def test_base_convolution_trains_saves_and_loads(tmp_path):
    model = base_conv_model()
    ids = torch.tensor([[2, 5, 6, 4, 7, 9, 3] * 4])
    out = model(ids, None, None, torch.tensor([[3, 10]]), torch.tensor([[6, 9]]), torch.tensor([0]))
    out.loss.backward()
    assert model.encoder.embeddings.base_conv.conv.weight.grad.abs().sum() > 0
    save_pretrained(model.eval(), tmp_path / "m")
    loaded = from_pretrained(tmp_path / "m").eval()
    codes = loaded.encoder.embeddings.base_conv.piece_codes
    assert codes.dtype == torch.int8 and codes[9, :14].tolist() == [2, 0, 3, 3, 0, 1, 0] * 2
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).mlm_logits, model(ids).mlm_logits)


def test_base_convolution_without_a_vocabulary_is_refused():
    model = BigBirdForPretraining(tiny_config(vocab_size=len(PIECES), base_conv_channels=4))
    with pytest.raises(ConfigError, match="reading the bases needs the vocabulary's pieces"):
        model(torch.tensor([[2, 5, 6, 3]]))


def test_base_convolution_refuses_pieces_longer_than_its_table():
    model = BigBirdForPretraining(
        tiny_config(vocab_size=len(PIECES), base_conv_channels=4, base_conv_max_piece_length=8)
    )
    with pytest.raises(ConfigError, match="raise base_conv_max_piece_length to at least 14"):
        model.encoder.embeddings.set_vocabulary(PIECES)
    with pytest.raises(ConfigError, match="base_conv_width must be odd"):
        tiny_config(base_conv_channels=4, base_conv_width=4)


# --------------------------------------------------------------------------- base CNN
def base_cnn_classifier(**readers) -> BigBirdForSequenceClassification:
    torch.manual_seed(0)
    config = tiny_config(
        vocab_size=len(PIECES),
        base_conv_channels=8,
        base_conv_width=5,
        composed_token_embeddings=True,
        composed_piece_length=4,
    )
    readers = readers or {"base_cnn_channels": 6}
    model = BigBirdForSequenceClassification(config, 3, pooling="mean", **readers)
    model.encoder.embeddings.set_vocabulary(PIECES)
    with torch.no_grad():  # trained-looking batch-norm statistics, so eval mode is not identity
        for block in model.base_cnn.blocks if model.base_cnn is not None else []:
            block[1].running_mean.normal_()
            block[1].running_var.uniform_(0.5, 2.0)
    return model.eval()


def codes_of_tokens(ids: list[int]) -> torch.Tensor:
    """[1, L]: the CNN baseline's codes (baselines.cnn.encode) of the bases the tokens
    spell, a token without bases ([CLS], [SEP]) taking no position: the window the CNN
    baseline reads, which the base CNN must read too."""
    from genobird.baselines.cnn import encode

    return encode(
        ["".join(p for p in map(PIECES.__getitem__, ids) if set(p.upper()) <= set("ACGTN"))]
    )


def test_base_cnn_equals_the_cnn_baselines_tower_on_each_input_alone():
    """In a padded batch, each input's base-CNN features are those of genobird's CNN
    baseline (SmallCNN, the same weights, its output layer the identity) run on that
    input's one-hot bases alone; the head reads them beside the mean-pooled states."""
    from genobird.baselines.cnn import SmallCNN

    model = base_cnn_classifier()
    rows = [[2, 9, 9, 9, 9, 7, 8, 6, 5, 3], [2, 9, 9, 6, 3, 0, 0, 0, 0, 0]]
    ids = torch.tensor(rows)
    mask = ids != 0
    baseline = SmallCNN(num_outputs=12, channels=6).eval()
    baseline.blocks.load_state_dict(model.base_cnn.blocks.state_dict())
    with torch.no_grad():
        baseline.out.weight.copy_(torch.eye(12))
        baseline.out.bias.zero_()
        spelled, _ = model.encoder.embeddings.base_conv.spelled_bases(ids, mask, markers=False)
        features = model.base_cnn(spelled)
        for index, (row, real) in enumerate(zip(rows, mask.sum(1).tolist(), strict=True)):
            alone = baseline.strand_logits(codes_of_tokens(row[:real]))[0]
            torch.testing.assert_close(features[index], alone, atol=1e-5, rtol=1e-5)
        states = model.encoder(ids, None, mask).sequence
        pooled = torch.stack([states[i, mask[i]].mean(0) for i in range(2)])
        expected = model.head(torch.cat([pooled, features], dim=1))
        torch.testing.assert_close(model(ids, None, mask).logits, expected)


def test_a_classifier_started_from_a_trained_cnn_gives_that_cnns_logits():
    """start_from_baselines: the CNN baseline's tower and output layer in the base CNN and the
    head, the head's weights on the encoder's vector zero: the classifier's logits are
    the CNN's on each input's bases, whatever the encoder computes; a CNN of another
    width is refused."""
    from genobird.baselines.cnn import SmallCNN

    model = base_cnn_classifier()
    torch.manual_seed(3)
    cnn = SmallCNN(num_outputs=3, channels=6)
    with torch.no_grad():
        for block in cnn.blocks:
            block[1].running_mean.normal_()
            block[1].running_var.uniform_(0.5, 2.0)
    cnn.eval()
    model.start_from_baselines(cnn)
    rows = [[2, 9, 9, 9, 9, 7, 8, 6, 5, 3], [2, 9, 9, 6, 3, 0, 0, 0, 0, 0]]
    ids = torch.tensor(rows)
    mask = ids != 0
    with torch.no_grad():
        logits = model(ids, None, mask).logits
        for index, real in enumerate(mask.sum(1).tolist()):
            alone = cnn.strand_logits(codes_of_tokens(rows[index][:real]))[0]
            torch.testing.assert_close(logits[index], alone, atol=1e-5, rtol=1e-5)
    with pytest.raises(ConfigError, match="cannot start a base CNN of 6 filters"):
        model.start_from_baselines(SmallCNN(num_outputs=3, channels=8))


def test_base_cnn_trains_saves_loads_and_is_refused_where_it_cannot_work(tmp_path):
    model = base_cnn_classifier().train()
    ids = torch.tensor([[2, 9, 9, 7, 6, 3]] * 2)
    model(ids, labels=torch.tensor([0, 1])).loss.backward()
    assert model.base_cnn.blocks[0][0].weight.grad.abs().sum() > 0
    save_pretrained(model.eval(), tmp_path / "m")
    loaded = from_pretrained(tmp_path / "m").eval()
    assert loaded.head_config()["base_cnn_channels"] == 6
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, model(ids).logits)
    with_conv = tiny_config(vocab_size=len(PIECES), base_conv_channels=4)
    with pytest.raises(ConfigError, match="no transformers counterpart"):
        BigBirdForSequenceClassification(with_conv, 2, pooling="hf", base_cnn_channels=4)


# --------------------------------------------------------------------------- base k-mers
def spelled_text(ids: list[int]) -> str:
    """What the k-mer LR baseline reads for a row of tokens: the pieces' bases, a token
    without bases ([CLS], [SEP]) as an N, which no k-mer crosses."""
    return "".join(
        p if set(p.upper()) <= set("ACGTN") else "N" for p in map(PIECES.__getitem__, ids)
    )


def test_base_kmers_count_what_the_kmer_baseline_counts_on_each_input_alone():
    """In a padded batch, each input's base k-mer features are the k-mer LR baseline's
    counts (baselines.kmer.kmer_matrix: k-mers with an N or across a token without bases
    not counted) of that input's bases, times the scale."""
    import numpy as np

    from genobird.baselines.kmer import kmer_matrix

    model = base_cnn_classifier(base_kmers=4)
    counts = model.base_kmer_counts
    assert counts.ks == (3, 4) and counts.output_size == 64 + 256
    generator = torch.Generator().manual_seed(5)
    rows = [[2, *torch.randint(5, 10, (n,), generator=generator).tolist(), 3] for n in (12, 7)]
    rows.append([2, 5, 3])  # [CLS] A [SEP]
    ids = torch.zeros(3, 14, dtype=torch.long)
    for index, row in enumerate(rows):
        ids[index, : len(row)] = torch.tensor(row)
    spelled, _ = model.encoder.embeddings.base_conv.spelled_bases(ids, ids != 0)
    expected = kmer_matrix([spelled_text(row) for row in rows], (3, 4)).toarray()
    assert expected[0].sum() > 0 and expected[2].sum() == 0  # "[CLS] A [SEP]": no 3-mer
    torch.testing.assert_close(counts(spelled), torch.tensor(expected, dtype=torch.float32))
    scale = torch.rand(counts.output_size, generator=generator)
    counts.set_scale(scale)
    torch.testing.assert_close(counts(spelled), torch.tensor(expected, dtype=torch.float32) * scale)
    assert np.allclose(counts(spelled[:1, :3]).numpy(), 0)  # shorter than every k


def fitted_kmer_lr(ks=(3, 4)):
    """A k-mer LR fitted by scikit-learn on random windows of the test vocabulary's bases:
    two outputs with both classes, one with a single class (predicted at its rate)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import MaxAbsScaler

    from genobird.baselines.kmer import KmerLR, kmer_matrix

    generator = torch.Generator().manual_seed(11)
    # 20 pieces: at least 32 bases, past which the base CNN pools as the CNN baseline does
    # whatever the batch's padding (a shorter input pools once alone, twice padded)
    rows = [[2, *torch.randint(5, 10, (20,), generator=generator).tolist(), 3] for _ in range(60)]
    counts = kmer_matrix([spelled_text(row) for row in rows], ks)
    scaler = MaxAbsScaler().fit(counts)
    labels = torch.randint(0, 2, (60, 2), generator=generator).numpy()
    models = [
        LogisticRegression(C=1.0).fit(scaler.transform(counts), labels[:, i]) for i in range(2)
    ]
    return KmerLR(ks, None, scaler, [*models, 0.25], {}, None), rows


def test_a_classifier_started_from_a_cnn_and_a_kmer_lr_gives_their_blended_logits():
    """start_from_baselines with both: the logits are w x the CNN's + (1 - w) x the k-mer
    LR's decision function (scikit-learn's, on its scaled counts; an output fitted on one
    class gives its rate's log-odds), whatever the encoder computes; the scale is saved
    and loaded with the weights. A k-mer LR of another width is refused."""
    import numpy as np

    from genobird.baselines.cnn import SmallCNN
    from genobird.baselines.kmer import kmer_matrix

    model = base_cnn_classifier(base_cnn_channels=6, base_kmers=4)
    kmer_lr, rows = fitted_kmer_lr()
    torch.manual_seed(3)
    cnn = SmallCNN(num_outputs=3, channels=6).eval()
    model.start_from_baselines(cnn, kmer_lr.linear(), cnn_weight=0.25)
    ids = torch.zeros(4, 22, dtype=torch.long)
    for index, row in enumerate(rows[:4]):
        ids[index, : len(row) - index] = torch.tensor(row[: len(row) - index])
    mask = ids != 0
    with torch.no_grad():
        logits = model(ids, None, mask).logits
    for index, real in enumerate(mask.sum(1).tolist()):
        row = ids[index, :real].tolist()
        with torch.no_grad():
            cnn_logit = cnn.strand_logits(codes_of_tokens(row))[0].numpy()
        features = kmer_lr.scaler.transform(kmer_matrix([spelled_text(row)], (3, 4)))
        lr_logit = [m.decision_function(features)[0] for m in kmer_lr.models[:2]]
        lr_logit.append(np.log(0.25 / 0.75))
        expected = 0.25 * cnn_logit + 0.75 * np.array(lr_logit)
        np.testing.assert_allclose(logits[index].numpy(), expected, rtol=1e-4, atol=1e-4)
    with pytest.raises(ConfigError, match="cannot start base k-mers of 320 features"):
        other, _ = fitted_kmer_lr(ks=(3,))
        model.start_from_baselines(kmer_lr=other.linear())


def test_a_start_under_a_positive_weight_is_the_baselines_logits_plus_its_log():
    """With positives weighted w, the start is the k-mer LR's logits + log w (the weighted
    loss's optimum for the same probabilities); unweighted and single-label heads start
    at the LR's own logits."""
    kmer_lr, rows = fitted_kmer_lr((3, 4))
    ids = torch.tensor(rows[:5])
    mask = torch.ones_like(ids, dtype=torch.bool)
    logits = {}
    for problem, weight in (("multi_label", 1.0), ("multi_label", 8.0), ("single_label", 8.0)):
        model = base_cnn_classifier(base_kmers=4)
        model.problem, model.pos_weight = problem, weight  # as built with them
        model.start_from_baselines(kmer_lr=kmer_lr.linear())
        with torch.no_grad():
            logits[problem, weight] = model.eval()(ids, None, mask).logits
    torch.testing.assert_close(
        logits["multi_label", 8.0], logits["multi_label", 1.0] + math.log(8.0)
    )
    torch.testing.assert_close(logits["single_label", 8.0], logits["multi_label", 1.0])


def test_base_kmers_alone_start_save_load_and_are_refused_where_they_cannot_work(tmp_path):
    model = base_cnn_classifier(base_kmers=4)
    kmer_lr, rows = fitted_kmer_lr()
    model.start_from_baselines(kmer_lr=kmer_lr.linear())  # the k-mer LR alone: weight 1
    ids = torch.tensor(rows[:2])
    expected = kmer_lr.probabilities([spelled_text(row) for row in rows[:2]])
    with torch.no_grad():
        torch.testing.assert_close(
            torch.sigmoid(model(ids).logits).double(), torch.tensor(expected), atol=1e-5, rtol=1e-5
        )
    save_pretrained(model, tmp_path / "m")
    loaded = from_pretrained(tmp_path / "m").eval()
    assert (
        loaded.head_config()["base_kmers"] == 4 and "base_cnn_channels" not in loaded.head_config()
    )
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, model(ids).logits)
    with pytest.raises(ConfigError, match="no base reader to start from a CNN"):
        from genobird.baselines.cnn import SmallCNN

        model.start_from_baselines(SmallCNN(num_outputs=3, channels=6))
    with_conv = tiny_config(vocab_size=len(PIECES), base_conv_channels=4)
    with pytest.raises(ConfigError, match="base_kmers has no transformers counterpart"):
        BigBirdForSequenceClassification(with_conv, 2, pooling="hf", base_kmers=4)
    with pytest.raises(ConfigError, match="0 \\(none\\) or 3-8, got 2"):
        BigBirdForSequenceClassification(with_conv, 2, pooling="mean", base_kmers=2)


def test_base_readers_of_an_encoder_without_a_base_convolution_spell_with_their_own_table(
    tmp_path,
):
    """A converted checkpoint's encoder spells no bases: the classifier keeps a table of
    the vocabulary's bases of its own (set with the vocabulary, saved with the weights),
    and its base readers see what they see beside an encoder that spells them."""
    from genobird.model.task_model import build_task_model

    spelling = base_cnn_classifier(base_cnn_channels=6, base_kmers=4)
    config = tiny_config(vocab_size=len(PIECES))
    model = BigBirdForSequenceClassification(
        config, 3, pooling="mean", base_cnn_channels=6, base_kmers=4
    ).eval()
    assert model.base_speller is not None and spelling.base_speller is None
    ids = torch.tensor([[2, 9, 9, 7, 6, 8, 3, 0], [2, 5, 6, 3, 0, 0, 0, 0]])
    with pytest.raises(ConfigError, match="reading the bases needs the vocabulary's pieces"):
        model(ids, None, ids != 0)
    built = build_task_model(
        BigBirdForSequenceClassification,
        config,
        None,
        0,
        PIECES,
        num_labels=3,
        pooling="mean",
        base_kmers=4,
    )
    assert built.base_speller.has_pieces
    model.base_speller.set_pieces(PIECES)
    own = model.base_speller.spelled_bases(ids, ids != 0)[0]
    theirs = spelling.encoder.embeddings.base_conv.spelled_bases(ids, ids != 0)[0]
    assert torch.equal(own, theirs)
    torch.testing.assert_close(model.base_kmer_counts(own), spelling.base_kmer_counts(theirs))
    save_pretrained(model, tmp_path / "m")
    loaded = from_pretrained(tmp_path / "m").eval()
    with torch.no_grad():
        torch.testing.assert_close(
            loaded(ids, None, ids != 0).logits, model(ids, None, ids != 0).logits
        )


def test_a_classifier_saved_before_base_markers_keeps_reading_its_markers(tmp_path):
    """A model directory with base readers written without `base_markers` (fine-tuned
    when the readers read one all-zero position for [CLS] and [SEP]) loads, reading them
    as it was trained to; a new classifier reads the window's bases alone."""
    import json

    model = base_cnn_classifier(base_cnn_channels=6, base_kmers=4)
    assert model.head_config()["base_markers"] is False
    model.base_markers = True  # as such a model computed
    ids = torch.tensor([[2, 9, 9, 7, 6, 8, 3], [2, 5, 6, 3, 0, 0, 0]])
    save_pretrained(model, tmp_path / "m")
    description = json.loads((tmp_path / "m" / "config.json").read_text())
    del description["head"]["base_markers"]
    (tmp_path / "m" / "config.json").write_text(json.dumps(description))
    loaded = from_pretrained(tmp_path / "m").eval()
    assert loaded.base_markers is True
    with torch.no_grad():
        torch.testing.assert_close(
            loaded(ids, None, ids != 0).logits, model(ids, None, ids != 0).logits
        )
        model.base_markers = False
        assert not torch.allclose(
            loaded(ids, None, ids != 0).logits, model(ids, None, ids != 0).logits
        )
    plain = BigBirdForSequenceClassification(tiny_config(), 2, pooling="mean")
    assert "base_markers" not in plain.head_config()  # no base readers: nothing to say
