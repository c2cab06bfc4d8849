"""Model inputs: framing, special ids, padding to whole blocks or multiples of 8, input lengths."""

from __future__ import annotations

import numpy as np

from genobird.datasets.windows import WindowSet

# --------------------------------------------------------------------------- negatives


def test_collate_pads_each_batch_to_its_longest_window_in_whole_blocks(pretraining_data):
    from genobird.corpus import Tokenizer
    from genobird.inputs import collate_windows, window_ids

    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    rng = np.random.default_rng(0)
    sequences = ["".join(rng.choice(list("ACGT"), n)) for n in (50, 400)]
    items = [
        {"input_ids": window_ids(tokenizer, s, 1024), "labels": np.zeros(1, np.float32)}
        for s in sequences
    ]
    longest = max(len(item["input_ids"]) for item in items)
    batch = collate_windows(items, block_size=64, pad_id=tokenizer.pad_id)
    assert batch["input_ids"].shape == (2, -(-longest // 64) * 64)
    assert batch["attention_mask"].sum(dim=1).tolist() == [len(i["input_ids"]) for i in items]
    assert batch["input_ids"][0, 0] == 2 and batch["labels"].shape == (2, 1)  # [CLS] first
    short = collate_windows(items[:1], block_size=64, pad_id=tokenizer.pad_id)
    assert short["input_ids"].shape[1] == -(-len(items[0]["input_ids"]) // 8) * 8  # one block


def test_batches_the_model_attends_densely_pad_to_a_multiple_of_8_not_whole_blocks():
    """Block padding buys nothing below the model's densely attended length (blocks of
    16, 3 random: 112 tokens): such a batch pads to a multiple of 8 and gets the same
    logits as padded to whole blocks; a longer batch still pads to whole blocks."""
    import torch

    from genobird.inputs import collate_windows, window_collate
    from genobird.model import BigBirdConfig, BigBirdForSequenceClassification

    config = BigBirdConfig(
        vocab_size=60,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position=256,
        block_size=16,
    )
    torch.manual_seed(0)
    model = BigBirdForSequenceClassification(config, 2, pooling="mean").eval()
    assert model.encoder.dense_input_length() == 112
    rng = np.random.default_rng(0)
    items = [{"input_ids": rng.integers(5, 60, n), "labels": np.zeros(1)} for n in (85, 60)]
    fitted = window_collate(model, pad_id=0)(items)
    blocks = collate_windows(items, block_size=16, pad_id=0)
    assert fitted["input_ids"].shape[1] == 88 and blocks["input_ids"].shape[1] == 96
    with torch.no_grad():
        logits = [model(b["input_ids"], None, b["attention_mask"]).logits for b in (fitted, blocks)]
    torch.testing.assert_close(logits[0], logits[1])
    longer = [{"input_ids": rng.integers(5, 60, 120), "labels": np.zeros(1)}]
    assert window_collate(model, pad_id=0)(longer)["input_ids"].shape[1] == 128


def test_windows_take_their_special_ids_from_the_tokenizer(pretraining_data):
    """GENA-LM's layout ([CLS] 1, [SEP] 2, [PAD] 3), not genobird's (2, 3, 0)."""
    from genobird.corpus import Tokenizer
    from genobird.corpus.tokenizer import SpecialIds
    from genobird.inputs import collate_windows, window_ids

    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    tokenizer.special = SpecialIds(unk=0, cls=1, sep=2, pad=3, mask=4)
    rows = [window_ids(tokenizer, "ACGT" * n, 1024) for n in (5, 60)]
    assert all(row[0] == 1 and row[-1] == 2 for row in rows)
    batch = collate_windows([{"input_ids": r, "labels": np.zeros(1)} for r in rows], 64, 3)
    padded = batch["input_ids"][0, len(rows[0]) :]
    assert (padded == 3).all() and not batch["attention_mask"][0, len(rows[0]) :].any()
    assert batch["attention_mask"][0, : len(rows[0])].all()


def test_max_tokens_defaults_to_what_the_windows_need(pretraining_data, tmp_path):
    from genobird.corpus import Tokenizer
    from genobird.datasets.windows import default_max_tokens

    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    windows = WindowSet("classify", ["y"], ["label"])
    rng = np.random.default_rng(1)
    sequences = ["".join(rng.choice(list("ACGT"), n)) for n in (100, 450, 200)]
    for index, sequence in enumerate(sequences):
        windows.add(sequence, [index % 2], "s", 0, len(sequence), "+", "train")
    windows.write(tmp_path / "w.h5")
    need = max(len(tokenizer.encode(s)) for s in sequences) + 2
    assert need > 64
    assert default_max_tokens(tmp_path / "w.h5", tokenizer, 64, 4096) == -(-need // 64) * 64
    assert default_max_tokens(tmp_path / "w.h5", tokenizer, 64, 64) == 64  # model's limit
