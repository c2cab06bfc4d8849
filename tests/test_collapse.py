"""A pretraining run that learns nothing from its input is said, as it trains and after:
its MLM loss held at the unigram entropy of its targets, and held-out bits that do not
move with the context length."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from genobird.cli import main
from genobird.training.collapse import CollapseWatch, context_blind, context_blind_note


def test_the_watch_warns_once_when_the_loss_stays_at_the_unigram_level():
    flat = CollapseWatch(entropy=8.22, after_steps=300)
    notes = [
        flat({"step": step, "mlm_loss": 8.2 + 0.02 * np.sin(step)}) for step in range(10, 610, 10)
    ]
    warned = [n for n in notes if n]
    assert len(warned) == 1 and notes.index(warned[0]) == 29  # at step 300, once
    assert (
        "within 0.25 of the 8.220 a model that ignores its input"
        in warned[0]["mlm_collapse_warning"]
    )
    assert flat.verdict()["collapsed"] and flat.verdict()["warned"]
    # human-mini's own curve: 9.43 at step 10, 7.76 at 210, 7.14 at 610
    learning = CollapseWatch(entropy=8.22, after_steps=300)
    losses = np.interp(np.arange(10, 1510, 10), [10, 210, 610, 1500], [9.43, 7.76, 7.14, 7.0])
    assert not any(
        learning({"step": int(s), "mlm_loss": float(v)})
        for s, v in zip(range(10, 1510, 10), losses, strict=True)
    )
    assert not learning.verdict()["collapsed"] and not learning.verdict()["warned"]
    assert learning({"step": 700, "eval_mlm_loss": 9.0}) is None  # evaluation rows aside
    assert CollapseWatch.for_run(8.0, max_steps=100).after_steps == 50


def test_a_model_that_ignores_its_input_is_said_to_have_collapsed(
    pretraining_data, tmp_path, monkeypatch, caplog
):
    from genobird.model.bigbird import BigBirdForPretraining

    forward = BigBirdForPretraining.forward

    def blind(self, input_ids, *args, **kwargs):  # every input the same: only [MASK]s
        return forward(self, input_ids.clamp(max=4) * 0 + 4, *args, **kwargs)

    monkeypatch.setattr(BigBirdForPretraining, "forward", blind)
    config = tmp_path / "pretrain.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "model": {
                    "hidden_size": 32,
                    "num_layers": 1,
                    "num_heads": 2,
                    "intermediate_size": 64,
                    "max_position": 256,
                    "block_size": 32,
                },
                "training": {
                    "max_steps": 30,
                    "batch_size": 4,
                    "effective_batch_size": 4,
                    "learning_rate": 3e-3,
                    "warmup_steps": 2,
                    "log_every": 5,
                    "checkpoint_every": 1000,
                    "progress": False,
                },
                "data": {
                    "train": str(pretraining_data["train"]),
                    "tokenizer": str(pretraining_data["tokenizer"]),
                },
            }
        )
    )
    out = tmp_path / "run"
    with caplog.at_level("WARNING"):
        assert main(["-q", "pretrain", "--config", str(config), "--out", str(out)]) == 0
    assert "it has learnt nothing from its input yet" in caplog.text
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    (warning,) = [row for row in rows if "mlm_collapse_warning" in row]
    assert warning["step"] == 15  # half of a 30-step run
    summary = json.loads((out / "model" / "training_summary.json").read_text())
    collapse = summary["mlm_collapse"]
    assert collapse["collapsed"] and collapse["warned"]
    assert collapse["final_mlm_loss"] >= collapse["unigram_entropy_nats"] - 0.25
    from genobird.report.sections.pretraining import collapse_note

    assert "pretraining learnt nothing from the sequence" in collapse_note(summary)


def test_held_out_bits_that_do_not_move_with_context_are_the_collapse_signature():
    blind = {512: 1.92901, 1024: 1.92899, 4096: 1.92903}
    assert context_blind(blind) and "1.9290 at every context length (512, 1,024, 4,096" in (
        context_blind_note(blind)
    )
    assert not context_blind({512: 1.670, 4096: 1.662})
    assert not context_blind({512: 1.9}) and context_blind_note({512: 1.67, 4096: 1.66}) == ""


@pytest.mark.parametrize("key", ["mlm_collapse"])
def test_an_older_summary_without_the_verdict_says_nothing(key):
    from genobird.report.sections.pretraining import collapse_note

    assert collapse_note({}) == "" and collapse_note({key: {"collapsed": False}}) == ""
