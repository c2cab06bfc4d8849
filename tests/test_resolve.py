"""A fine-tuning run resolved once (finetuning.resolve), its decisions (finetuning.decisions)
and the classifier built once (finetuning.build)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from genobird.datasets.windows import WindowSet
from genobird.finetuning.decisions import (
    Probes,
    StrandsAsAsked,
    StrandsWithStart,
    decide,
    decisions,
)
from genobird.finetuning.recipe import SETTINGS, Recipe
from genobird.finetuning.resolve import NONE_MEANS, Resolved

META = {
    "task": "classify",
    "window_bp": 300,
    "feature_names": ["y"],
    "counts": {"train": 600, "valid": 200, "test": 200},
    "positives_by_split": {"valid": [100]},
}


def resolved_for(task: str, **given) -> Resolved:
    return Resolved.of(Recipe.of(max_tokens=64, **given), {**META, "task": task}, 0.05)


@pytest.mark.parametrize("task", ["classify", "promoter", "chromatin"])
def test_a_resolved_recipe_leaves_no_setting_open_and_says_where_each_came_from(task):
    resolved = resolved_for(task, batch_size=16)
    values, sources = resolved.recipe.values(), resolved.sources
    assert {name for name, value in values.items() if value is None} <= set(NONE_MEANS)
    assert set(sources) == {setting.name for setting in SETTINGS}
    # what follows the task kind is its run_default, declared beside the setting
    by_task = {"classify": (1.0, 1.0, True), "promoter": (1.0, 1.0, False)}
    pos_weight, head_scale, both = by_task.get(task, (8.0, 10.0, True))
    optim = resolved.recipe.optim
    assert (optim.pos_weight, optim.head_lr_scale) == (pos_weight, head_scale)
    assert resolved.recipe.data.rc_augment is both and resolved.recipe.evaluation.rc_average is both
    assert sources["pos_weight"] == sources["rc_average"] == "the task kind"
    # the data set's window, the start's dropout, the batch, the strands read
    assert (
        resolved.recipe.data.window_bp == 300 and sources["window_bp"] == "the data set's windows"
    )
    assert resolved.recipe.head.dropout == 0.05 and sources["dropout"] == "the start's own"
    assert optim.effective_batch_size == 16 and sources["effective_batch_size"] == (
        "follows batch_size"
    )
    assert resolved.recipe.head.base.strands == ("both" if both else "one")
    assert sources["batch_size"] == sources["max_tokens"] == "given"
    # the recipe as asked keeps them open: finetune.json records only what was asked
    asked = resolved.asked
    assert asked.optim.pos_weight is None and asked.data.window_bp is None
    assert asked.data.rc_augment is None and asked.head.base.strands is None


def test_a_value_given_or_decided_is_kept_and_its_followers_follow_it():
    resolved = resolved_for("chromatin", pos_weight=2.0, rc_average=False)
    assert resolved.recipe.optim.pos_weight == 2.0 and resolved.sources["pos_weight"] == "given"
    # the one strand setting not given follows the task kind; the base readers, the run's
    assert resolved.recipe.data.rc_augment is True
    assert resolved.recipe.head.base.strands == "one"
    decided = resolved.with_values("chosen on validation", rc_average=True, max_steps=7)
    assert decided.recipe.head.base.strands == "both"
    assert decided.sources["rc_average"] == decided.sources["max_steps"] == "chosen on validation"
    assert decided.asked.evaluation.rc_average is True and decided.asked.optim.max_steps == 7
    assert resolved.recipe.evaluation.rc_average is False  # the first is left as it was


def kinds(steps) -> list:
    return [type(step) for step in steps]


def test_each_run_settles_its_strands_by_exactly_one_decision():
    """With the start (classify, base readers, strands open), by probes (classify without
    base readers, probes asked), or as asked (options, the task kind, or no probes)."""
    strands = (StrandsWithStart, StrandsAsAsked)
    cases = {
        ("classify", ()): [StrandsWithStart],
        ("classify", (("probe_steps", 50),)): [StrandsWithStart],
        ("classify", (("probe_steps", 50), ("base_kmers", 0))): [Probes],
        ("classify", (("rc_augment", True),)): [StrandsAsAsked],
        ("classify", (("base_kmers", 0),)): [StrandsAsAsked],
        ("promoter", (("probe_steps", 50),)): [StrandsAsAsked],
        ("chromatin", ()): [StrandsAsAsked],
    }
    for (task, given), expected in cases.items():
        given = {"base_cnn_channels": 0, "base_kmers": 4, **dict(given)}
        resolved = resolved_for(task, **given)
        steps = decisions(resolved, resolved_meta(task))
        assert kinds(steps) == expected, (task, given)
        settles = [
            s for s in steps if isinstance(s, strands) or "strands" in getattr(s, "questions", ())
        ]
        assert len(settles) == 1, (task, given)
    # probes asked beside the start's strands: both listed, the probes not asking strands
    asked = Recipe.of(
        max_tokens=64, base_kmers=4, probe_steps=50, choose_on_validation=("learning_rate",)
    )
    steps = decisions(Resolved.of(asked, META), META)
    assert kinds(steps) == [StrandsWithStart, Probes] and steps[1].questions == ("learning_rate",)
    assert steps[0].readings == 2 and steps[1].runs(10, 2) == [(50, 10, 2)] * 2


def resolved_meta(task: str) -> dict:
    return {**META, "task": task}


def test_strands_as_asked_record_how_they_were_settled(tmp_path):
    from types import SimpleNamespace

    job = SimpleNamespace(meta=resolved_meta("promoter"), folder=None)
    resolved = resolved_for("promoter", base_kmers=4)
    settled, record = decide(resolved, job, decisions(resolved, job.meta), run=None)
    assert record == {
        "strands": {
            "chosen_by": "task",
            "rc_augment": False,
            "rc_average": False,
            "base_strands": "one",
        }
    }
    assert settled.asked.data.rc_augment is False and settled.asked.head.base.strands == "one"
    assert settled.sources["rc_augment"] == "strands: task"


def planted_classify(folder, windows=120):
    data = WindowSet("classify", ["y"], ["label"])
    rng = np.random.default_rng(5)
    for index in range(windows):
        sequence = list("".join(rng.choice(list("ACGT"), 80)))
        if index % 2:
            sequence[30:38] = list("GATAAGCA")  # not a palindrome
        data.add(
            "".join(sequence),
            [index % 2],
            "s",
            0,
            80,
            "+",
            ("train", "train", "train", "valid", "test")[index % 5],
        )
    return data.write(folder / "d.h5")


@pytest.mark.parametrize("strands", ["given", "chosen with the start"])
def test_the_classifier_the_plan_times_is_the_one_trained_unless_a_decision_reshapes_it(
    pretraining_data, tmp_path, monkeypatch, strands
):
    """One classifier built where no decision changes its shape; a second where the
    start's strands choice does (the one timed reads both strands, one is chosen). A
    fresh run reads back nothing it wrote (base-start.json is the start's record)."""
    from pathlib import Path

    from genobird.finetuning import build
    from genobird.finetuning.finetune import finetune
    from genobird.finetuning.job import FinetuneJob

    data, built, reads = planted_classify(tmp_path), [], []
    original_build, original_read = build.build_task_model, Path.read_text

    def counted_build(*args, **kwargs):
        built.append(kwargs)
        return original_build(*args, **kwargs)

    def recorded_read(self, *args, **kwargs):
        reads.append(self.name)
        return original_read(self, *args, **kwargs)

    monkeypatch.setattr(build, "build_task_model", counted_build)
    monkeypatch.setattr(Path, "read_text", recorded_read)
    given = {"rc_augment": True, "rc_average": True} if strands == "given" else {}
    recipe = Recipe.of(
        max_steps=4, eval_every=2, batch_size=8, base_cnn_channels=0, base_kmers=3, **given
    )
    job = FinetuneJob.open(data, tmp_path / "run", tokenizer_path=pretraining_data["tokenizer"])
    finetune(recipe, job)
    monkeypatch.undo()
    metrics = json.loads((tmp_path / "run" / "report" / "metrics.json").read_text())
    chosen = metrics["strands"]
    assert "base-start.json" not in reads
    assert (
        metrics["training"]["start_validation_auroc"]
        == json.loads((tmp_path / "run" / "base-start.json").read_text())["start_validation_auroc"]
    )
    if strands == "given":
        assert len(built) == 1 and chosen["chosen_by"] == "options"
    else:
        reshaped = chosen["base_strands"] != "both"
        assert len(built) == 1 + reshaped and chosen["chosen_by"] == "the start's validation AUROC"
        assert [k["base_strands"] for k in built] == ["both", "one"][: 1 + reshaped]


def test_timing_a_classifier_leaves_its_weights_gradients_and_mode_as_they_were():
    import torch

    from genobird.finetuning.cost import time_classifier

    model = torch.nn.Linear(4, 1)
    before = {k: v.clone() for k, v in model.state_dict().items()}

    class Out:
        def __init__(self, loss):
            self.loss = loss

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, ids, segments, mask, labels=None):
            out = self.inner(ids.float())
            return Out(out.pow(2).mean())

    wrapped = Wrapped().eval()
    rows = [{"x": torch.ones(4)} for _ in range(3)]
    batch = {
        "input_ids": torch.ones(3, 4),
        "segment_ids": None,
        "attention_mask": None,
        "labels": torch.zeros(3, 1),
    }
    time_classifier(wrapped, rows, 3, 1, lambda rows: batch, 3, 0.1)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters()) and not wrapped.training
