"""The trainer: learning, exact resume, checkpoints, NaN handling, DDP, and `pretrain`."""

from __future__ import annotations

import itertools
import json
import math
import os
import traceback
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
import yaml
from torch.utils._python_dispatch import TorchDispatchMode

from genobird.cli import main
from genobird.corpus import PretrainingDataset, Tokenizer, shard_paths
from genobird.errors import CheckpointError, ConfigError
from genobird.model import BigBirdConfig, BigBirdForPretraining, from_pretrained
from genobird.training import EpochSampler, Trainer, TrainingConfig, TrainingError, linear_schedule
from genobird.training.checkpoint import complete_checkpoints, latest_checkpoint, load_checkpoint
from genobird.training.context import TruncatedDataset
from genobird.training.mlm import (
    evaluate_pretraining,
    hide_scored_tokens,
    masked_token_scores,
    pretraining_step,
)
from genobird.training.pretraining import load_run_config

MODEL = dict(
    hidden_size=32,
    num_layers=2,
    num_heads=2,
    intermediate_size=64,
    max_position=256,
    block_size=32,
    num_random_blocks=1,
)


def make_model(vocab_size=500, seed=0, **changes) -> BigBirdForPretraining:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return BigBirdForPretraining(BigBirdConfig(vocab_size=vocab_size, **{**MODEL, **changes}))


def training_config(**changes) -> TrainingConfig:
    values = dict(
        learning_rate=2e-3,
        warmup_steps=2,
        max_steps=6,
        batch_size=2,
        effective_batch_size=4,
        checkpoint_every=3,
        log_every=1,
        eval_every=0,
        progress=False,
    )
    values.update(changes)
    return TrainingConfig(**values)


def run(trainer: Trainer, seed=0, resume=False):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if resume:
            assert trainer.resume()
        return trainer.train()


@pytest.fixture(scope="module")
def datasets(pretraining_data):
    return (
        PretrainingDataset(shard_paths(pretraining_data["train"])),
        PretrainingDataset(shard_paths(pretraining_data["eval"])),
    )


# --------------------------------------------------------------------------- learning
def test_loss_falls_on_the_demo_corpus(datasets, pretraining_data, tmp_path):
    train, held_out = datasets
    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    model = make_model()
    config = training_config(max_steps=60, checkpoint_every=1000, warmup_steps=5)
    trainer = Trainer(model, train, config, tmp_path, pretraining_step)
    before = evaluate_pretraining(
        model,
        torch.utils.data.DataLoader(held_out, 8),
        "cpu",
        tokenizer.piece_lengths,
        tokenizer.mask_id,
    )
    run(trainer)
    after = evaluate_pretraining(
        model,
        torch.utils.data.DataLoader(held_out, 8),
        "cpu",
        tokenizer.piece_lengths,
        tokenizer.mask_id,
    )
    assert after["mlm_loss"] < before["mlm_loss"] - 0.5
    assert after["bits_per_character"] < before["bits_per_character"]
    losses = [r["mlm_loss"] for r in trainer.state.history if "mlm_loss" in r]
    first, last = losses[:5], losses[-5:]
    assert sum(last) < sum(first)


def test_bits_per_character_follows_its_definition(datasets, pretraining_data):
    _, held_out = datasets
    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    model = make_model().eval()
    loader = torch.utils.data.DataLoader(held_out, 8)
    metrics = evaluate_pretraining(model, loader, "cpu", tokenizer.piece_lengths, tokenizer.mask_id)
    expected = metrics["mlm_loss"] / math.log(2) / metrics["bp_per_masked_token"]
    assert metrics["bits_per_character"] == pytest.approx(expected)
    assert metrics["mlm_loss"] == pytest.approx(math.log(500), rel=0.1)  # untrained: ~uniform
    assert 0.3 < metrics["nsp_accuracy"] < 0.7


def test_scoring_never_shows_the_model_a_scored_token(datasets, pretraining_data):
    """BERT masking leaves 10% of the chosen tokens unchanged in the input; scoring them
    as they are would let the model read the answer. Whatever the input holds at a
    scored position (the stored 80/10/10 corruption, the true token, [MASK]), the scores
    are those of [MASK] there."""
    _, held_out = datasets
    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    model = make_model().eval()
    batch = next(iter(torch.utils.data.DataLoader(held_out, 8)))
    scored = batch["masked_labels"] != -100
    shown = batch["input_ids"].gather(1, batch["masked_positions"])
    assert (shown[scored] == batch["masked_labels"][scored]).any()  # the 10% kept as they are
    revealed = batch["input_ids"].clone()
    revealed.scatter_(
        1, batch["masked_positions"], torch.where(scored, batch["masked_labels"], shown)
    )
    inputs = {"stored": batch, "revealed": {**batch, "input_ids": revealed}}
    scores = {
        name: masked_token_scores(model, [variant], "cpu", tokenizer.mask_id)
        for name, variant in inputs.items()
    }
    np.testing.assert_array_equal(scores["stored"]["loss_nats"], scores["revealed"]["loss_nats"])
    hidden = hide_scored_tokens(inputs["revealed"], tokenizer.mask_id)
    assert (
        hidden["input_ids"].gather(1, batch["masked_positions"])[scored] == tokenizer.mask_id
    ).all()
    untouched = ~torch.zeros_like(revealed, dtype=torch.bool).scatter_(
        1, batch["masked_positions"], scored
    )
    assert torch.equal(hidden["input_ids"][untouched], revealed[untouched])


# --------------------------------------------------------------------------- resume
class Interrupt(Exception):
    pass


def interrupted_after(calls: int, step=pretraining_step):
    """`step` that raises Interrupt on its call number `calls` + 1 (a micro-batch each)."""
    made = {"n": 0}

    def failing_step(model, batch):
        made["n"] += 1
        if made["n"] > calls:
            raise Interrupt
        return step(model, batch)

    return failing_step


def test_interrupted_and_resumed_run_equals_uninterrupted_bitwise(datasets, tmp_path):
    train, _ = datasets
    small = torch.utils.data.Subset(train, range(10))  # 2.5 steps per epoch: crosses epochs
    config = training_config(max_steps=8, checkpoint_every=3)
    straight = make_model(hidden_dropout=0.1, attention_dropout=0.1)
    run(Trainer(straight, small, config, tmp_path / "a", pretraining_step))

    failing_step = interrupted_after(4 * 2)  # after 4 optimiser steps of 2 micro-batches
    interrupted = make_model(hidden_dropout=0.1, attention_dropout=0.1)
    with pytest.raises(Interrupt):
        run(Trainer(interrupted, small, config, tmp_path / "b", failing_step))
    assert latest_checkpoint(tmp_path / "b" / "checkpoints").name == "step-00000003"
    resumed = make_model(seed=99, hidden_dropout=0.1, attention_dropout=0.1)  # other init
    trainer = Trainer(resumed, small, config, tmp_path / "b", pretraining_step)
    run(trainer, seed=1234, resume=True)  # another seed too: the checkpoint's RNG must win
    for (name, a), (_, b) in zip(
        straight.state_dict().items(), resumed.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    rows = [
        json.loads(line) for line in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    ]
    steps = [row["step"] for row in rows if "loss" in row]
    assert steps == list(range(1, 9))  # the steps after the checkpoint were not logged twice


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a CUDA run's checkpoint")
def test_a_cuda_run_resumes_from_its_checkpoint(datasets, tmp_path):
    """The training state is loaded onto the GPU; its RNG states must go back as the CPU
    byte tensors that torch.set_rng_state takes (a CUDA resume once failed on them)."""
    train, _ = datasets
    config = training_config(max_steps=3, checkpoint_every=1)
    failing_step = interrupted_after(2 * 2)  # after 2 optimiser steps of 2 micro-batches
    with pytest.raises(Interrupt):
        run(Trainer(make_model(), train, config, tmp_path, failing_step, device="cuda"))
    trainer = Trainer(make_model(), train, config, tmp_path, pretraining_step, device="cuda")
    assert trainer.resume() and trainer.state.step == 2
    trainer.train()
    assert trainer.state.step == 3


def test_a_checkpoint_resumes_only_under_the_settings_that_wrote_it(datasets, tmp_path):
    train, _ = datasets
    config = training_config(max_steps=3, checkpoint_every=3)
    recipe = {"task": {"bpe_dropout": 0.0}}
    run(Trainer(make_model(), train, config, tmp_path, pretraining_step, run_identity=recipe))
    # how often a run logs and checkpoints, and its micro-batch, may change on resume
    moved = training_config(max_steps=3, checkpoint_every=1, log_every=2, batch_size=1)
    assert Trainer(
        make_model(), train, moved, tmp_path, pretraining_step, run_identity=recipe
    ).resume()
    refusals = {
        r"training\.max_steps: 3 -> 6": (training_config(max_steps=6), recipe),
        r"training\.learning_rate: 0\.002 -> 0\.001": (
            training_config(max_steps=3, learning_rate=1e-3),
            recipe,
        ),
        r"task\.bpe_dropout: 0\.0 -> 0\.1": (config, {"task": {"bpe_dropout": 0.1}}),
    }
    for change, (changed, identity) in refusals.items():
        trainer = Trainer(
            make_model(), train, changed, tmp_path, pretraining_step, run_identity=identity
        )
        with pytest.raises(CheckpointError, match=rf"other settings \({change}\); .* delete "):
            trainer.resume()


def test_checkpoints_of_another_run_are_discarded_on_request_and_the_run_logs_anew(
    datasets, tmp_path
):
    """What a pipeline rerun after a config change needs: the former run's checkpoints
    deleted and a fresh start (its metrics not mixed with the new run's); a run's own
    checkpoints are kept to resume."""
    from genobird.training.config import discard_other_run

    train, _ = datasets
    config = training_config(max_steps=3, checkpoint_every=3)
    run(Trainer(make_model(), train, config, tmp_path, pretraining_step, run_identity={"a": 1}))
    root = tmp_path / "checkpoints"
    assert discard_other_run(root, config, {"a": 1}) == [] and latest_checkpoint(root)
    changed = training_config(max_steps=4, checkpoint_every=4)
    # a checkpoint of another model is named by its settings before its weights are read
    other = Trainer(
        make_model(intermediate_size=128),
        train,
        changed,
        tmp_path,
        pretraining_step,
        run_identity={"a": 2},
    )
    with pytest.raises(CheckpointError, match=r"other settings \(a: 1 -> 2"):
        other.resume()
    assert discard_other_run(root, changed, {"a": 2}) == ["a: 1 -> 2", "training.max_steps: 3 -> 4"]
    assert not root.exists() and discard_other_run(root, changed, {"a": 2}) == []
    trainer = Trainer(
        make_model(), train, changed, tmp_path, pretraining_step, run_identity={"a": 2}
    )
    assert not trainer.resume()
    run(trainer)
    steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").open()]
    assert steps == sorted(steps) and steps[-1] == 4 and steps.count(3) <= 1  # one run's lines


def test_a_checkpoint_from_before_run_settings_is_checked_on_its_training_config(
    datasets, tmp_path
):
    class OlderTrainer(Trainer):  # wrote checkpoints without the "run" entry
        def checkpoint_state(self):
            return {k: v for k, v in super().checkpoint_state().items() if k != "run"}

    train, _ = datasets
    config = training_config(max_steps=3, checkpoint_every=3)
    run(OlderTrainer(make_model(), train, config, tmp_path, pretraining_step))
    assert "run" not in load_checkpoint(latest_checkpoint(tmp_path / "checkpoints"), make_model())
    identity = {"task": {"bpe_dropout": 0.1}}  # not recorded then: cannot be checked
    assert Trainer(
        make_model(), train, config, tmp_path, pretraining_step, run_identity=identity
    ).resume()
    longer = Trainer(make_model(), train, training_config(max_steps=6), tmp_path, pretraining_step)
    with pytest.raises(CheckpointError, match=r"training\.max_steps: 3 -> 6"):
        longer.resume()


def test_changed_settings_names_each_difference_once_and_ignores_added_ones():
    from genobird.training.config import changed_settings

    before = {"training": {"max_steps": 3, "seed": 0}, "model": {"rotary": False}}
    now = {"training": {"max_steps": 6, "seed": 0, "new_field": 1}, "model": {"rotary": True}}
    assert changed_settings(before, now) == [
        "model.rotary: False -> True",
        "training.max_steps: 3 -> 6",
    ]
    assert changed_settings(before, before) == []


def test_a_pretraining_checkpoint_is_tied_to_the_model_but_not_to_its_kernel():
    from genobird.training.pretraining import model_identity

    config = make_model().config
    assert model_identity(config) == model_identity(config.replace(attention_impl="dense"))
    assert model_identity(config) != model_identity(config.replace(hidden_dropout=0.3))


def test_keeps_the_last_k_checkpoints(datasets, tmp_path):
    train, _ = datasets
    config = training_config(max_steps=5, checkpoint_every=1, keep_checkpoints=2)
    run(Trainer(make_model(), train, config, tmp_path, pretraining_step))
    names = [p.name for p in complete_checkpoints(tmp_path / "checkpoints")]
    assert names == ["step-00000004", "step-00000005"]


def test_corrupted_or_truncated_checkpoint_is_refused(datasets, tmp_path):
    train, _ = datasets
    run(Trainer(make_model(), train, training_config(max_steps=3), tmp_path, pretraining_step))
    folder = latest_checkpoint(tmp_path / "checkpoints")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(CheckpointError, match="truncated or corrupted"):
        Trainer(
            make_model(), train, training_config(max_steps=6), tmp_path, pretraining_step
        ).resume()


def test_incomplete_checkpoint_folder_is_not_used(datasets, tmp_path):
    train, _ = datasets
    run(Trainer(make_model(), train, training_config(max_steps=3), tmp_path, pretraining_step))
    partial = tmp_path / "checkpoints" / "step-00000009"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"half")  # no checkpoint.json: never finished
    assert latest_checkpoint(tmp_path / "checkpoints").name == "step-00000003"


def test_checkpoint_into_mismatched_configuration_names_the_mismatch(datasets, tmp_path):
    train, _ = datasets
    run(Trainer(make_model(), train, training_config(max_steps=3), tmp_path, pretraining_step))
    other = make_model(intermediate_size=128)
    with pytest.raises(CheckpointError, match=r"shape mismatch: .*feed_forward"):
        load_checkpoint(latest_checkpoint(tmp_path / "checkpoints"), other)


def test_nan_loss_stops_with_a_message_and_keeps_the_last_good_checkpoint(datasets, tmp_path):
    train, _ = datasets
    calls = {"n": 0}

    def poisoned(model, batch):
        calls["n"] += 1
        loss, metrics = pretraining_step(model, batch)
        return (loss * float("nan") if calls["n"] > 8 else loss), metrics

    config = training_config(max_steps=10, checkpoint_every=2)
    with pytest.raises(TrainingError, match=r"became nan .* step 5.*step-00000004"):
        run(Trainer(make_model(), train, config, tmp_path, poisoned))
    assert latest_checkpoint(tmp_path / "checkpoints").name == "step-00000004"


def test_a_nan_between_checks_is_caught_at_the_next_check_naming_its_step(datasets, tmp_path):
    """Steps do not read the device: a NaN at step 3 is found at the step-4 checkpoint
    (logging only every 10 steps), named as step 3, and nothing after step 2 is saved."""
    train, _ = datasets
    calls = {"n": 0}

    def poisoned(model, batch):
        calls["n"] += 1
        loss, metrics = pretraining_step(model, batch)
        assert all(isinstance(value, torch.Tensor) for value in metrics.values())
        return (loss * float("nan") if calls["n"] == 5 else loss), metrics

    config = training_config(max_steps=10, checkpoint_every=2, log_every=10)
    with pytest.raises(TrainingError, match=r"became nan / nan at step 3;.*step-00000002"):
        run(Trainer(make_model(), train, config, tmp_path, poisoned))
    assert latest_checkpoint(tmp_path / "checkpoints").name == "step-00000002"


aten = torch.ops.aten


class HostReads(TorchDispatchMode):
    """Records the operations that make a CUDA device wait for the host: reading a value
    (`item`, `bool`, `int`) and shapes that depend on values (boolean-mask indexing,
    `nonzero`). Run on the CPU, it shows what a CUDA step would wait on."""

    VALUE_READS = frozenset(
        {
            aten._local_scalar_dense,
            aten.nonzero,
            aten.masked_select,
            aten._unique2,
            aten.unique_consecutive,
            aten.repeat_interleave,
        }
    )
    MASK_INDEXED = frozenset({aten.index, aten.index_put_, aten.index_put})

    def __init__(self):
        super().__init__()
        self.reads: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        packet = func.overloadpacket
        by_mask = packet in self.MASK_INDEXED and any(
            index is not None and index.dtype == torch.bool for index in args[1]
        )
        if packet in self.VALUE_READS or by_mask:
            caller = next(
                (
                    f"{frame.filename.split('genobird/')[-1]}:{frame.lineno}"
                    for frame in reversed(traceback.extract_stack())
                    if "/genobird/" in frame.filename and "/tests/" not in frame.filename
                ),
                "autograd",
            )
            self.reads.append(f"{func} in {caller}")
        return func(*args, **(kwargs or {}))


def test_a_training_step_reads_no_value_back_from_the_device(datasets, tmp_path):
    """The forward and backward passes of a pretraining step, watched on the CPU: none of
    their operations would make a CUDA device wait for the host (the CUDA test below checks
    the whole step on a GPU). Composed token embeddings and the base convolution still
    read the batch's pieces and length back (docs/experiments, "One H200 lease")."""
    train, _ = datasets
    config = training_config(max_steps=4, checkpoint_every=1000, log_every=1000)
    trainer = Trainer(make_model(), train, config, tmp_path, pretraining_step)
    batch, _ = next(trainer.micro_batches())
    loss, _ = pretraining_step(trainer.model, batch)  # warm-up: layouts built, then cached
    watch = HostReads()
    with watch:
        loss, metrics = pretraining_step(trainer.model, batch)
        loss.backward()
    assert watch.reads == [], "\n".join(watch.reads)
    assert set(metrics) == {"mlm_loss", "nsp_loss"}


@pytest.mark.parametrize("problem", ["multi_label", "single_label"])
def test_a_fine_tuning_step_reads_no_value_back_from_the_device(problem):
    """The same watch over a classification step: mean pooling over padded windows and the
    positively weighted loss of a promoter or chromatin task."""
    from genobird.model.classifier import BigBirdForSequenceClassification

    config = BigBirdConfig(vocab_size=500, **MODEL)
    model = BigBirdForSequenceClassification(config, 2, problem, pos_weight=8.0, pooling="mean")
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, 500, (3, 100), generator=generator)
    mask = torch.ones_like(input_ids, dtype=torch.bool)
    mask[1, 60:] = False  # a shorter window, padded
    labels = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    if problem == "single_label":
        labels = torch.tensor([0, 1, 1])
    model(input_ids, None, mask, labels)  # warm-up: layouts built, then cached
    watch = HostReads()
    with watch:
        model(input_ids, None, mask, labels).loss.backward()
    assert watch.reads == [], "\n".join(watch.reads)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="host synchronisation is a CUDA matter")
def test_a_cuda_training_step_never_synchronises_with_the_host(datasets, tmp_path):
    train, _ = datasets
    config = training_config(max_steps=4, checkpoint_every=1000, log_every=1000)
    trainer = Trainer(make_model(), train, config, tmp_path, pretraining_step, device="cuda")
    batches = trainer.micro_batches()
    trainer.optimizer_step(batches)  # warm-up: allocations, lazy initialisation
    torch.cuda.set_sync_debug_mode("error")
    try:
        trainer.optimizer_step(batches)
    finally:
        torch.cuda.set_sync_debug_mode("default")


# --------------------------------------------------------------------------- pieces
def test_schedule_warms_up_then_decays_to_zero():
    factor = linear_schedule(warmup=4, total=12)
    assert [round(factor(s), 3) for s in (0, 1, 3, 4, 8, 12)] == [0.25, 0.5, 1.0, 1.0, 0.5, 0.0]


def test_learning_rate_scales_follow_the_longest_prefix_and_decay_rules():
    from genobird.training.schedule import parameter_groups

    model = make_model()
    scales = {"encoder.": 0.5, "encoder.layers.1.": 0.1}
    groups = parameter_groups(model, weight_decay=0.01, learning_rate=1e-3, scales=scales)
    by_parameter = {id(p): g for g in groups for p in g["params"]}
    named = dict(model.named_parameters())
    assert len(by_parameter) == len({id(p) for p in named.values()})  # each once
    expected_lr = {
        "encoder.layers.1.attention.qkv.weight": 1e-4,
        "encoder.layers.0.attention.qkv.weight": 5e-4,
        "encoder.embeddings.norm.weight": 5e-4,
    }
    for name, lr in expected_lr.items():
        assert by_parameter[id(named[name])]["lr"] == pytest.approx(lr), name
    assert by_parameter[id(named["encoder.embeddings.norm.weight"])]["weight_decay"] == 0.0
    assert by_parameter[id(named["encoder.layers.0.attention.qkv.weight"])]["weight_decay"] == 0.01
    heads = [n for n in named if not n.startswith("encoder.")]
    assert heads and all(by_parameter[id(named[n])]["lr"] == pytest.approx(1e-3) for n in heads)
    with pytest.raises(ConfigError, match=r"no parameter name starts with 'decoder\.'"):
        parameter_groups(model, 0.01, 1e-3, {"decoder.": 0.1})
    with pytest.raises(ConfigError, match=r"use a number > 0"):
        parameter_groups(model, 0.01, 1e-3, {"encoder.": 0})


def test_sampler_resumes_mid_epoch_and_splits_ranks():
    full = list(EpochSampler(10, seed=3))
    sampler = EpochSampler(10, seed=3)
    sampler.set_position(0, 4)
    assert list(sampler) == full[4:]
    ranks = [list(EpochSampler(10, seed=3, rank=r, world=2)) for r in range(2)]
    assert sorted(ranks[0] + ranks[1]) == sorted(full)
    other_epoch = EpochSampler(10, seed=3)
    other_epoch.set_position(1, 0)
    assert list(other_epoch) != full


def test_truncated_dataset_drops_masks_past_the_cut_and_nsp(datasets):
    train, _ = datasets
    item = TruncatedDataset(train, 64)[0]
    assert item["input_ids"].shape == (64,)
    kept = item["masked_labels"] != -100
    assert (item["masked_positions"][kept] < 64).all()
    assert int(item["nsp_labels"]) == -100


def test_centred_context_windows_score_the_same_masked_tokens_at_every_length(datasets):
    from genobird.training.context import CentredContextDataset

    train, _ = datasets  # instances of 256 tokens
    for index in range(5):
        original = train[index]
        real = int(original["attention_mask"].sum())
        masks = {
            int(p): int(label)
            for p, label in zip(
                original["masked_positions"], original["masked_labels"], strict=True
            )
            if label != -100
        }
        targets = None
        for length in (64, 128, 256):
            item = CentredContextDataset(train, length, scored=32)[index]
            span = min(length - 1, real)
            start = min(max(0, real // 2 - span // 2), real - span)
            assert item["input_ids"].shape == (length,) and int(item["input_ids"][0]) == 2
            assert torch.equal(
                item["input_ids"][1 : span + 1], original["input_ids"][start : start + span]
            )
            kept = item["masked_labels"] != -100
            found = {
                int(p) - 1 + start: int(label)
                for p, label in zip(
                    item["masked_positions"][kept], item["masked_labels"][kept], strict=True
                )
            }
            assert found and all(masks[p] == label for p, label in found.items())
            assert all(abs(p - real // 2) <= 16 for p in found)  # the central 32 only
            targets = found if targets is None else targets
            assert found == targets  # the same targets, more context around them
        assert int(item["nsp_labels"]) == -100


@pytest.mark.slow
def test_sliding_context_windows_tile_each_instance_and_score_the_same_tokens(datasets):
    from genobird.training.context import CentredContextDataset

    train, _ = datasets  # instances of 256 tokens
    lengths, scored = (16, 32, 64), 8
    views = {n: CentredContextDataset(train, n, scored, longest=64) for n in lengths}
    centred = CentredContextDataset(train, 16, scored)
    assert len(centred) == len(train)
    assert len(views[16]) == len(views[64]) > 20 * len(train)  # ~24 stretches per instance
    stretches = {}
    for index in range(len(views[16])):
        instance, centre = views[16].windows[index]
        original = train[instance]
        real = int(original["attention_mask"].sum())
        assert 31 <= centre <= real - 32  # a 64-token window fits around every stretch
        targets = None
        for length, view in views.items():
            item = view[index]
            start = centre - (length - 1) // 2
            assert torch.equal(
                item["input_ids"][1:], original["input_ids"][start : start + length - 1]
            )
            kept = item["masked_labels"] != -100
            found = {int(p) - 1 + start for p in item["masked_positions"][kept]}
            assert all(centre - scored // 2 <= p < centre + scored // 2 for p in found)
            targets = found if targets is None else targets
            assert found == targets  # the same masked tokens at every length
        stretches.setdefault(instance, []).append(centre)
    for centres in stretches.values():  # disjoint stretches, one every `scored` tokens
        assert np.diff(centres).tolist() == [scored] * (len(centres) - 1)
    capped = CentredContextDataset(train, 32, scored, longest=64, max_windows=10)
    assert len(capped) == 10 and capped.windows[0] == views[16].windows[0]
    assert capped.windows[-1] == views[16].windows[-1]
    with pytest.raises(ConfigError, match="longest"):
        CentredContextDataset(train, 64, scored, longest=32)


def test_context_gains_are_paired_on_the_same_masked_tokens(pretraining_data, tmp_path):
    from genobird.model import save_pretrained
    from genobird.training.context import mlm_accuracy_by_context, paired_context_gain

    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    model = make_model(vocab_size=tokenizer.vocab_size)
    save_pretrained(model, tmp_path / "model")
    tokenizer.save(tmp_path / "model")
    rows = mlm_accuracy_by_context(tmp_path / "model", pretraining_data["eval"], [16, 32, 64])
    assert [row["context_length"] for row in rows] == [16, 32, 64]
    assert len({row["masked_tokens"] for row in rows}) == 1
    assert "accuracy_gain" not in rows[0]
    for shorter, longer in itertools.pairwise(rows):
        gain = longer["mlm_accuracy"] - shorter["mlm_accuracy"]
        assert longer["accuracy_gain"] == pytest.approx(gain, abs=1e-9)
        saved = shorter["bits_per_character"] - longer["bits_per_character"]
        assert longer["bits_gain"] == pytest.approx(saved, rel=1e-4, abs=1e-7)
        low, high = longer["accuracy_gain_ci95"]
        assert low <= longer["accuracy_gain"] <= high

    lengths = np.array([1, 2, 4])  # piece id -> bp
    shorter = {
        "labels": np.array([1, 2, 1, 2]),
        "correct": np.array([0, 0, 1, 0], bool),
        "loss_nats": np.array([1.0, 2.0, 1.0, 2.0]),
    }
    longer = {
        **shorter,
        "correct": np.array([1, 1, 1, 0], bool),
        "loss_nats": np.array([0.5, 1.0, 1.0, 2.0]),
    }
    gain = paired_context_gain(shorter, longer, lengths)
    assert gain["accuracy_gain"] == pytest.approx(0.5)
    half = 1.96 * np.std([1, 1, 0, 0], ddof=1) / 2
    assert gain["accuracy_gain_ci95"] == pytest.approx([0.5 - half, 0.5 + half])
    assert gain["bits_gain"] == pytest.approx(1.5 / math.log(2) / 12)  # 1.5 nats over 12 bp
    with pytest.raises(ConfigError, match="same masked tokens"):
        paired_context_gain(shorter, {**longer, "labels": np.array([2, 2, 1, 2])}, lengths)


def test_effective_batch_must_divide():
    with pytest.raises(ConfigError, match="not a multiple"):
        TrainingConfig(batch_size=3, effective_batch_size=8).accumulation_steps(1)


# --------------------------------------------------------------------------- DDP
def _ddp_worker(rank, world, init_file, shards, out_dir):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{init_file}", rank=rank, world_size=world
    )
    try:
        dataset = PretrainingDataset(shards)
        model = make_model()
        config = training_config(
            max_steps=3, batch_size=2, effective_batch_size=4, checkpoint_every=100
        )
        trainer = Trainer(model, dataset, config, out_dir, pretraining_step, device="cpu")
        run(trainer)
        layouts = [
            layer.attention.layout_for(256, torch.device("cpu")).block_mask
            for layer in model.encoder.layers
        ]
        torch.save({"state": model.state_dict(), "layouts": layouts}, f"{out_dir}/rank{rank}.pt")
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_two_process_ddp_gives_identical_weights_on_both_ranks(pretraining_data, tmp_path):
    shards = [str(p) for p in shard_paths(pretraining_data["train"])]
    mp.spawn(_ddp_worker, args=(2, str(tmp_path / "init"), shards, str(tmp_path)), nprocs=2)
    first, second = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2))
    for name, tensor in first["state"].items():
        assert torch.equal(tensor, second["state"][name]), name
    for a, b in zip(first["layouts"], second["layouts"], strict=True):
        assert torch.equal(a, b)  # the same random attention plan on every rank
    untrained = make_model().state_dict()
    assert not torch.equal(
        untrained["encoder.pooler.weight"], first["state"]["encoder.pooler.weight"]
    )


# --------------------------------------------------------------------------- command line
def test_report_scores_a_summary_written_with_the_answers_visible_again(pretraining_data, tmp_path):
    """A training summary without `heldout_scoring` (written before every scored token
    was shown as [MASK]) is not reported as it is: the report scores the saved model on
    the held-out instances again and says so."""
    from genobird.model import save_pretrained
    from genobird.training.context import evaluate_saved_model
    from tests.conftest import drawn_report

    results = tmp_path / "results"
    model_dir = results / "pretrain" / "model"
    tokenizer = Tokenizer(pretraining_data["tokenizer"])
    save_pretrained(make_model(vocab_size=tokenizer.vocab_size), model_dir)
    tokenizer.save(model_dir)
    (model_dir / "training_summary.json").write_text(
        json.dumps({"eval": {"bits_per_character": 0.1234, "mlm_accuracy": 0.5678}})
    )
    (results / "corpus").mkdir()
    (results / "corpus" / "instances-heldout").symlink_to(pretraining_data["eval"])
    page = drawn_report(results, tmp_path / "report.html").read_text()
    rescored = evaluate_saved_model(model_dir, pretraining_data["eval"])
    assert "Scored again" in page
    assert f"<td>{rescored['bits_per_character']:.4g}</td>" in page
    assert "0.1234" not in page and "0.5678" not in page


def test_a_saved_model_is_never_scored_on_instances_of_another_vocabulary(
    pretraining_data, tmp_path
):
    from genobird.corpus import VocabSpec, train_vocabulary
    from genobird.model import save_pretrained
    from genobird.training.context import evaluate_saved_model, mlm_accuracy_by_context

    other = train_vocabulary(
        pretraining_data["folder"] / "train.txt", tmp_path / "other.model", VocabSpec(400)
    )
    save_pretrained(make_model(vocab_size=other.vocab_size), tmp_path / "model")
    other.save(tmp_path / "model")
    with pytest.raises(ConfigError, match="another vocabulary"):
        evaluate_saved_model(tmp_path / "model", pretraining_data["eval"])
    with pytest.raises(ConfigError, match="another vocabulary"):
        mlm_accuracy_by_context(tmp_path / "model", pretraining_data["eval"], [16, 32])


def test_instances_of_a_vocabulary_of_the_same_size_but_other_pieces_are_refused(
    pretraining_data, tmp_path
):
    from genobird.corpus import VocabSpec, train_vocabulary
    from genobird.corpus.shards import PretrainingDataset, shard_paths
    from genobird.corpus.tokenizer import load_tokenizer
    from genobird.training.mlm import require_same_vocabulary

    shards = PretrainingDataset(shard_paths(pretraining_data["eval"]))
    own = load_tokenizer(pretraining_data["tokenizer"])
    spec = VocabSpec(shards.vocab_size, max_piece_length=6)
    other = train_vocabulary(pretraining_data["folder"] / "train.txt", tmp_path / "o.model", spec)
    assert (other.vocab_size, other.special) == (own.vocab_size, own.special)
    assert other.pieces != own.pieces
    require_same_vocabulary(shards, own, "eval", "own")  # no error
    with pytest.raises(ConfigError, match="another vocabulary"):
        require_same_vocabulary(shards, other, "eval", "other")


def test_pretrain_command_writes_a_model_directory_and_the_context_ablation(
    pretraining_data, tmp_path, capsys
):
    config = {
        "model": MODEL,
        "training": {**training_config(max_steps=4).__dict__, "progress": False},
        "data": {k: str(pretraining_data[k]) for k in ("train", "eval", "tokenizer")},
        "output": str(tmp_path / "run"),
    }
    path = tmp_path / "pretrain.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["-q", "pretrain", "--config", str(path), "--context-tokens", "64", "128"]) == 0
    out = capsys.readouterr().out
    assert "pretrained 4 steps" in out and "BPC" in out
    model_dir = tmp_path / "run" / "model"
    assert {"config.json", "model.safetensors", "tokenizer.model", "training_summary.json"} <= {
        p.name for p in model_dir.iterdir()
    }
    assert isinstance(from_pretrained(model_dir), BigBirdForPretraining)
    ablation = json.loads((tmp_path / "run" / "context_ablation.json").read_text())
    assert [row["context_length"] for row in ablation] == [64, 128]
    assert (tmp_path / "run" / "mlm_accuracy_vs_context.png").read_bytes()[:4] == b"\x89PNG"
    # a second run resumes from the final checkpoint: no step is taken again
    assert main(["-q", "pretrain", "--config", str(path)]) == 0
    assert "pretrained 4 steps" in capsys.readouterr().out


@pytest.mark.parametrize(
    "path",
    sorted((Path(__file__).parents[1] / "pipelines" / "pretrain").glob("*.yaml")),
    ids=lambda path: path.name,
)
def test_every_shipped_pretraining_config_loads_and_builds_its_model_shape(path):
    config = load_run_config(path)
    BigBirdConfig(**config["model"], vocab_size=100)  # validates the shape's arithmetic


class _Captured(Exception):
    """Raised by a stand-in for train_one once it has what the test wants."""


@pytest.mark.parametrize("dynamic", [True, False])
def test_the_config_chooses_new_masks_each_epoch_over_the_stored_ones(
    pretraining_data, tmp_path, monkeypatch, dynamic
):
    from genobird.training import pretraining

    def capture_training_set(config, output, train_set, *rest, **options):
        raise _Captured(train_set)

    monkeypatch.setattr(pretraining, "train_one", capture_training_set)
    data = {k: str(pretraining_data[k]) for k in ("train", "eval", "tokenizer")}
    config = {
        "model": MODEL,
        "training": {"seed": 3},
        "output": str(tmp_path / "run"),
        "data": {**data, "dynamic_masking": dynamic},
    }
    with pytest.raises(_Captured) as captured:
        pretraining.run_pretraining(config)
    train_set = captured.value.args[0]
    first = train_set[0]["masked_positions"].clone()
    train_set.set_epoch(1)
    assert np.array_equal(first, train_set[0]["masked_positions"]) != dynamic


def test_dynamic_masking_that_is_not_a_boolean_is_refused(pretraining_data, tmp_path):
    from genobird.training.pretraining import run_pretraining

    data = {k: str(pretraining_data[k]) for k in ("train", "tokenizer")}
    config = {
        "model": MODEL,
        "training": {},
        "output": str(tmp_path / "run"),
        "data": {**data, "dynamic_masking": "false"},
    }
    with pytest.raises(ConfigError, match="dynamic_masking must be true or false, got 'false'"):
        run_pretraining(config)
    assert not (tmp_path / "run").exists()


def test_pretrain_config_typos_fail_before_training(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("model: {hiden_size: 3}\ndata: {train: x, tokenizer: y}\n")
    assert main(["pretrain", "--config", str(path)]) == 1
    assert "unknown model keys ['hiden_size']" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"data\.train is required"):
        path.write_text("data: {tokenizer: y}\n")
        load_run_config(path)


# --------------------------------------------------------------------------- model selection
class _Regression(torch.nn.Module):
    """A one-weight model whose evaluation scores follow a script."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))


class _Points(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, index):
        return {"x": torch.tensor([float(index % 7)])}


def _step(model, batch):
    return ((model.weight - batch["x"]) ** 2).mean(), {}


def test_best_weights_are_kept_and_training_stops_after_patience(tmp_path):
    scores = iter([0.5, 0.7, 0.6, 0.65, 0.69, 0.9])
    seen = []

    def eval_fn(module, loader, device):
        seen.append(float(module.weight))
        return {"auroc": next(scores)}

    config = training_config(
        max_steps=100,
        eval_every=2,
        best_metric="auroc",
        patience=3,
        effective_batch_size=2,
        checkpoint_every=50,
    )
    model = _Regression()
    trainer = Trainer(model, _Points(), config, tmp_path, _step, _Points(), eval_fn)
    state = run(trainer)
    # evaluations at steps 2, 4 (best), 6, 8, 10 (3rd without improvement): stop at 10
    assert state.step == 10 and state.stopped_early
    assert state.best_step == 4 and state.best_score == pytest.approx(0.7)
    assert model.weight.item() == pytest.approx(seen[1])  # the weights of step 4
    assert seen[1] != seen[-1]
    # a resumed run that had stopped early stays stopped, with the best weights
    again = Trainer(_Regression(), _Points(), config, tmp_path, _step, _Points(), eval_fn)
    state = run(again, resume=True)
    assert state.step == 10 and again.module.weight.item() == pytest.approx(seen[1])


def test_a_time_limit_stops_training_and_saves_evaluates_and_checkpoints_its_last_step(
    tmp_path,
):
    """max_minutes: the first step past the limit is the last one; it is evaluated and
    checkpointed as a last step is, and the schedule is still that of max_steps. Time is
    the trainer's clock, which each step moves by 3 s: the verdict holds on any machine."""
    now = [0.0]

    def slow_step(model, batch):
        now[0] += 3.0
        return _step(model, batch)

    evaluated = []

    def eval_fn(module, loader, device):
        evaluated.append(float(module.weight))
        return {"auroc": 0.5}

    config = training_config(
        max_steps=100, eval_every=50, checkpoint_every=50, effective_batch_size=2, max_minutes=0.12
    )
    trainer = Trainer(_Regression(), _Points(), config, tmp_path, slow_step, _Points(), eval_fn)
    trainer.clock = lambda: now[0]
    state = run(trainer)
    assert state.step == 3 and state.stopped_at_time  # 7.2 s reached after the third step
    assert latest_checkpoint(tmp_path / "checkpoints").name == f"step-{state.step:08d}"
    assert evaluated == [float(trainer.module.weight)]
    # the learning rate is that of step `state.step` of a 100-step schedule, not its end
    assert trainer.optimizer.param_groups[0]["lr"] > 0.9 * config.learning_rate
    with pytest.raises(ConfigError, match="max_minutes"):
        training_config(max_minutes=-1)


def test_a_time_limit_is_refused_in_a_distributed_run(monkeypatch, tmp_path):
    """Each process would stop on its own clock, at another step, and hang the rest."""
    from genobird.training import distributed

    monkeypatch.setattr(distributed, "world_size", lambda: 2)
    config = training_config(max_steps=10, effective_batch_size=4, max_minutes=1.0)
    with pytest.raises(ConfigError, match="a distributed run must stop by max_steps"):
        Trainer(_Regression(), _Points(), config, tmp_path, _step)


def test_a_warm_start_that_training_never_beats_is_kept(tmp_path):
    """eval_at_start: the starting weights are evaluated before the first step, kept when
    no later evaluation beats them; the last step is evaluated too (12 is no multiple of
    5); a resumed run does not evaluate its start again."""
    scores = iter([0.9, 0.5, 0.6, 0.7, 0.8])
    seen = []

    def eval_fn(module, loader, device):
        seen.append(float(module.weight))
        return {"auroc": next(scores)}

    config = training_config(
        max_steps=12, eval_every=5, best_metric="auroc", eval_at_start=True, effective_batch_size=2
    )
    model = _Regression()
    with torch.no_grad():
        model.weight.fill_(3.0)
    state = run(Trainer(model, _Points(), config, tmp_path, _step, _Points(), eval_fn))
    steps = [row["step"] for row in state.history if "eval_auroc" in row]
    assert steps == [0, 5, 10, 12] and state.best_step == 0
    assert seen[0] == 3.0 and seen[-1] != 3.0 and model.weight.item() == 3.0

    def no_evaluation(module, loader, device):
        raise AssertionError("a resumed run evaluated its start again")

    again = Trainer(_Regression(), _Points(), config, tmp_path, _step, _Points(), no_evaluation)
    assert run(again, resume=True).step == 12 and again.module.weight.item() == 3.0


def test_model_selection_needs_the_metric(tmp_path):
    config = training_config(max_steps=4, eval_every=2, best_metric="auroc", effective_batch_size=2)
    trainer = Trainer(
        _Regression(),
        _Points(),
        config,
        tmp_path,
        _step,
        _Points(),
        lambda module, loader, device: {"loss": 1.0},
    )
    with pytest.raises(TrainingError, match="no finite 'auroc'"):
        run(trainer)


# --------------------------------------------------------------------------- weight average
def _ema_oracle(trajectory: list[float], decay: float) -> float:
    """The averaged weight after each update, written out: TensorFlow's warmed-up decay."""
    average = trajectory[0]
    for updates, weight in enumerate(trajectory[1:], start=1):
        current = min(decay, (1 + updates) / (10 + updates))
        average = current * average + (1 - current) * weight
    return average


def test_weight_average_follows_its_definition_and_restores_the_weights():
    from genobird.training.averaging import WeightAverage

    model = _Regression()
    average = WeightAverage(model, decay=0.9)
    trajectory = [0.0]
    for value in [1.0, -2.0, 5.0, 0.5, 3.0, 3.0, 3.0, 7.0, -1.0, 2.0, 4.0, 4.0, 6.0]:
        with torch.no_grad():
            model.weight.fill_(value)
        average.update()
        trajectory.append(value)
    expected = _ema_oracle(trajectory, 0.9)
    with average.applied():
        assert model.weight.item() == pytest.approx(expected, rel=1e-6)
    assert model.weight.item() == 6.0  # its own weights back after the block
    average.copy_to_module()
    assert model.weight.item() == pytest.approx(expected, rel=1e-6)


def _trained_weight(output: Path) -> float:
    """The weight in a run's last checkpoint: the trained one, never the average."""
    import safetensors.torch

    folder = latest_checkpoint(output / "checkpoints")
    return safetensors.torch.load_file(str(folder / "model.safetensors"))["weight"].item()


def test_training_ends_with_the_averaged_weights_and_evaluates_them(tmp_path):
    """The average changes what is evaluated and kept, never the training itself: the
    trained weights match a run without averaging bit for bit."""
    trajectory, evaluated = [], []

    def recording_step(model, batch):
        trajectory.append(model.weight.item())  # the weights before each update
        return _step(model, batch)

    def eval_fn(module, loader, device):
        evaluated.append(module.weight.item())
        return {}

    config = training_config(
        max_steps=12,
        effective_batch_size=2,
        checkpoint_every=100,
        eval_every=4,
        learning_rate=0.1,
        ema_decay=0.8,
    )
    averaged, plain = _Regression(), _Regression()
    run(Trainer(averaged, _Points(), config, tmp_path / "ema", recording_step, _Points(), eval_fn))
    run(Trainer(plain, _Points(), replace(config, ema_decay=0.0), tmp_path / "plain", _step))
    trained = _trained_weight(tmp_path / "ema")
    assert trained == plain.weight.item() == _trained_weight(tmp_path / "plain")
    trajectory.append(trained)
    assert averaged.weight.item() == pytest.approx(_ema_oracle(trajectory, 0.8), rel=1e-5)
    assert abs(averaged.weight.item() - trained) > 0.01
    # the evaluations at steps 4, 8 and 12 saw the average of the weights until then
    expected = [_ema_oracle(trajectory[: step + 1], 0.8) for step in (4, 8, 12)]
    assert evaluated == pytest.approx(expected, rel=1e-5)


def test_model_selection_keeps_the_averaged_weights_of_the_best_evaluation(tmp_path):
    scores = iter([0.5, 0.9, 0.6])
    evaluated = []

    def eval_fn(module, loader, device):
        evaluated.append(module.weight.item())
        return {"auroc": next(scores)}

    config = training_config(
        max_steps=6,
        effective_batch_size=2,
        checkpoint_every=100,
        eval_every=2,
        best_metric="auroc",
        learning_rate=0.1,
        ema_decay=0.8,
    )
    model = _Regression()
    state = run(Trainer(model, _Points(), config, tmp_path, _step, _Points(), eval_fn))
    assert state.best_step == 4
    assert model.weight.item() == evaluated[1] != _trained_weight(tmp_path)


def test_an_interrupted_averaged_run_resumes_to_the_same_average(tmp_path):
    config = training_config(
        max_steps=8, effective_batch_size=2, checkpoint_every=3, learning_rate=0.1, ema_decay=0.7
    )
    straight = _Regression()
    run(Trainer(straight, _Points(), config, tmp_path / "a", _step))
    with pytest.raises(Interrupt):
        run(Trainer(_Regression(), _Points(), config, tmp_path / "b", interrupted_after(4, _step)))
    resumed = _Regression()
    run(Trainer(resumed, _Points(), config, tmp_path / "b", _step), resume=True)
    assert resumed.weight.item() == straight.weight.item()
    assert straight.weight.item() != _trained_weight(tmp_path / "a")


def test_an_averaging_decay_outside_zero_to_one_is_refused():
    for decay in (-0.1, 1.0, 1.5):
        with pytest.raises(ConfigError, match=r"ema_decay must be in \[0, 1\)"):
            training_config(ema_decay=decay)
