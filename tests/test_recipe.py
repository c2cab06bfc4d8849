"""The fine-tuning recipe is declared once, as the typed tree genobird.finetuning.recipe.
Recipe; the command line, the pipeline schema, a pipeline section's options and
finetune.json all come from walking it, and a setting added there appears in each."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from genobird.baselines.cnn import ARCHITECTURES
from genobird.commands import build_parser
from genobird.errors import ConfigError
from genobird.finetuning import recipe, recipe_pipeline
from genobird.finetuning.recipe import (
    CNN_ARCHITECTURES,
    POOLINGS,
    RECIPE_OPTIONS,
    REQUIRED_RECIPE,
    SETTINGS,
    TASK_DEFAULTS,
    Recipe,
    read_config,
    resolve,
    tree,
)
from genobird.finetuning.recipe_pipeline import finetune_options
from genobird.model.base_readers import BASE_CNNS
from genobird.model.classifier import BigBirdForSequenceClassification
from genobird.settings import branch, setting, walk

REPO = Path(__file__).resolve().parents[1]
SCHEMA = yaml.safe_load((REPO / "workflows" / "schemas" / "config.schema.yaml").read_text())
# `genobird finetune`'s options that are not recipe settings: what to read, start from, write
# the command's inputs and outputs, and how a rerun treats a former run's checkpoints
NOT_SETTINGS = {
    "-h",
    "--help",
    "--data",
    "--model",
    "--from-scratch",
    "--tokenizer",
    "--config",
    "--out",
    "--restart-changed",
    "--base-start-from",
}


def finetune_parser():
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command")
    return commands.choices["finetune"]


def test_every_option_of_finetune_is_a_setting_in_its_group():
    parser = finetune_parser()
    options = {option for action in parser._actions for option in action.option_strings}
    settings = {s.option for s in SETTINGS} | {f"--no-{s.option[2:]}" for s in SETTINGS if s.toggle}
    assert options - NOT_SETTINGS == settings
    groups = {
        group.title: {o for a in group._group_actions for o in a.option_strings}
        for group in parser._action_groups
    }
    for one in SETTINGS:
        assert one.option in groups[one.group], one.name
    assert list(parser._option_string_actions["--pooling"].choices) == list(POOLINGS)
    assert POOLINGS == BigBirdForSequenceClassification.POOLINGS
    assert CNN_ARCHITECTURES == tuple(ARCHITECTURES) == tuple(BASE_CNNS)


def test_the_recipe_tree_has_a_typed_leaf_per_setting_with_its_default():
    """Each setting is one leaf of Recipe, found by its path, of its declared type, at its
    default; names are unique; a recipe is checked when it is made."""
    made = Recipe()
    assert len({s.name for s in SETTINGS}) == len(SETTINGS)
    hints = {}
    for one in SETTINGS:
        node = made
        for name in one.path[:-1]:
            node = getattr(node, name)
        assert getattr(node, one.path[-1]) == one.default, one.name
        hints = {f.name: f.type for f in dataclasses.fields(node)}
        assert one.type.__name__ in hints[one.path[-1]], one.name
    assert made.head.base.kmers == 0 and made.head.base.any is False
    assert (
        Recipe.of(base_kmers=6).head.base.any
        and Recipe.of(base_kmers=6).values()["base_kmers"] == 6
    )
    assert Recipe.of(pooling="mean").with_values(base_cnn_channels=8).head.base.cnn_channels == 8
    with pytest.raises(ConfigError, match=r"layer_decay must be in \(0, 1\]"):
        Recipe.of(layer_decay=0)
    with pytest.raises(ConfigError, match="pooling must be one of"):
        Recipe.of(pooling="max")
    with pytest.raises(ConfigError, match="ema_decay"):
        Recipe.of(ema_decay=1.5)
    with pytest.raises(ConfigError, match="base_kmers"):
        Recipe.of(base_kmers=2)
    with pytest.raises(ConfigError, match="base_kmer_pull needs base_kmers"):
        Recipe.of(base_kmer_pull=1.0)
    with pytest.raises(ConfigError, match="no recipe setting 'pooler'"):
        Recipe.of(pooler="cls")


def test_the_schema_file_holds_the_generated_recipe_and_every_section_takes_it():
    assert SCHEMA["$defs"]["recipe"] == recipe_pipeline.schema()
    assert (
        yaml.safe_load("$defs:\n" + recipe_pipeline.schema_yaml())["$defs"]["recipe"]
        == recipe_pipeline.schema()
    )
    properties = SCHEMA["$defs"]["recipe"]["properties"]
    assert set(properties) == {*RECIPE_OPTIONS, *REQUIRED_RECIPE, "rc_augment"}
    sections = {
        "promoter": SCHEMA["properties"]["promoter"],
        "chromatin": SCHEMA["properties"]["chromatin"],
        "sequence_tasks": SCHEMA["properties"]["sequence_tasks"]["additionalProperties"],
        "chromatin_tasks": SCHEMA["properties"]["chromatin_tasks"]["additionalProperties"],
    }
    for name, section in sections.items():
        assert section["allOf"] == [{"$ref": "#/$defs/recipe"}], name
        assert section["unevaluatedProperties"] is False, name
        assert not set(section["properties"]) & set(properties), name  # not pasted again
        assert set(REQUIRED_RECIPE) <= set(section["required"]), name


def test_a_section_becomes_finetune_options_the_parser_reads():
    section = {
        "eval_every": 500,
        "patience": 2,
        "pooling": "centre",
        "centre_bp": 300,
        "dropout": 0.3,
        "layer_decay": 0.9,
        "head_lr_scale": 10,
        "bpe_dropout": 0.1,
        "segmentations": 4,
        "pos_weight": 2.0,
        "base_cnn_channels": 128,
        "base_cnn_architecture": "deepsea-cnn",
        "base_cnn_epochs": 12,
        "base_cnn_minutes": 15.0,
        "base_kmers": 5,
        "base_strands": "one",
        "base_blend": "by-category",
        "base_kmer_pull": 1.0,
        "probe_steps": 200,
        "rc_augment": False,
    }
    assert set(section) - {"rc_augment"} == set(RECIPE_OPTIONS)
    argv = [
        "finetune",
        "chromatin",
        "--data",
        "d.h5",
        "--out",
        "o",
        "--model",
        "m",
        *finetune_options(section).split(),
    ]
    args = build_parser().parse_args(argv)
    for key, value in section.items():
        if key != "rc_augment":
            assert getattr(args, key) == value, key
    assert args.rc_augment is False and args.rc_average is False


def test_settings_left_out_take_their_task_kinds_defaults():
    """classify: the recipe measured on task families it was not chosen on (base readers,
    mean pooling, dropout, up to 3,000 steps stopped by validation); promoter and
    chromatin: the short [CLS] runs their pipelines override. A setting given is kept; a
    head for export (pooling hf) gets no base readers unless given; a default batch is
    at most the training windows."""
    classify = resolve({}, "classify", 1000)
    assert {k: classify[k] for k in TASK_DEFAULTS["classify"]} == TASK_DEFAULTS["classify"]
    assert classify["base_cnn_channels"] == 128 and classify["base_kmers"] == 6
    assert classify["probe_steps"] == 0 and classify["centre_bp"] == 200
    hf = resolve({"pooling": "hf"}, "classify", 1000)
    assert hf["base_cnn_channels"] == hf["base_kmers"] == 0
    given = resolve({"pooling": "cls", "base_cnn_channels": 0, "max_steps": 10}, "classify", 1000)
    assert (given["pooling"], given["base_cnn_channels"], given["max_steps"]) == ("cls", 0, 10)
    assert resolve({}, "classify", 20)["batch_size"] == 20
    assert resolve({"batch_size": 64}, "classify", 20)["batch_size"] == 64
    for task in ("promoter", "chromatin"):
        values = resolve({}, task, 1000)
        assert {k: values[k] for k in TASK_DEFAULTS[task]} == TASK_DEFAULTS["promoter"]
        assert values["pooling"] == "cls" and values["dropout"] is None
    with pytest.raises(
        ConfigError, match="segmentations needs bpe_dropout: give --bpe-dropout too"
    ):
        resolve({"segmentations": 4}, "classify")
    with pytest.raises(ConfigError, match="no recipe setting 'pooler'"):
        resolve({"pooler": "cls"}, "classify")
    with pytest.raises(ConfigError, match="learning_rate must be a number"):
        resolve({"learning_rate": "fast"}, "classify")


def test_a_recipe_file_is_read_nested_grouped_or_flat_and_checked(tmp_path):
    nested = tmp_path / "nested.yaml"
    nested.write_text("head:\n  pooling: centre\n  base:\n    kmers: 5\noptim:\n  seed: 2\n")
    assert read_config(nested) == {"pooling": "centre", "base_kmers": 5, "seed": 2}
    grouped = tmp_path / "recipe.yaml"  # an older finetune.json's groups
    grouped.write_text("model:\n  pooling: centre\n  dropout: 0\nrecipe:\n  max_steps: 40\n")
    assert read_config(grouped) == {"pooling": "centre", "dropout": 0.0, "max_steps": 40}
    flat = tmp_path / "recipe.json"
    flat.write_text(json.dumps({"pooling": "mean", "learning_rate": 1e-4}))
    assert read_config(flat) == {"pooling": "mean", "learning_rate": 1e-4}
    bad = tmp_path / "bad.yaml"
    for text, message in (
        ("recipe:\n  max_step: 4\n", "no recipe setting 'max_step'"),
        ("head:\n  base:\n    kmer: 4\n", "under head.base: no recipe setting 'kmer'"),
        ("max_steps: -1\n", r"max_steps must be in \[1, inf\)"),
        ("- 1\n", "maps setting names to values"),
    ):
        bad.write_text(text)
        with pytest.raises(ConfigError, match=message):
            read_config(bad)
    with pytest.raises(ConfigError, match="not found"):
        read_config(tmp_path / "missing.yaml")


def test_a_new_setting_is_one_declaration(capsys, tmp_path):
    """The worked example of docs/finetune.md: a setting declared once, as a leaf of its
    branch, shows in --help, in the pipeline schema and in finetune.json's tree, is read
    back from it, and is checked and defaulted."""
    import argparse

    @dataclasses.dataclass(frozen=True)
    class Smoothed(recipe.OptimRecipe):
        label_smoothing: float = setting(
            float, default=0.0, low=0, high=0.5, help="move each label this far towards 0.5"
        )

    @dataclasses.dataclass(frozen=True)
    class Extended(Recipe):
        optim: Smoothed = branch(Smoothed)

    settings = tuple(walk(Extended))
    assert len(settings) == len(SETTINGS) + 1
    parser = argparse.ArgumentParser(prog="finetune")
    recipe.add_options({g: parser.add_argument_group(g) for g in recipe.GROUPS}, settings)
    parser.print_help()
    assert "--label-smoothing LABEL_SMOOTHING" in capsys.readouterr().out
    assert recipe_pipeline.schema(settings)["properties"]["label_smoothing"]["maximum"] == 0.5
    values = resolve({"label_smoothing": 0.1}, "classify", settings=settings)
    assert tree(values, settings)["optim"]["label_smoothing"] == 0.1
    saved = tmp_path / "finetune.json"
    saved.write_text(json.dumps(tree(values, settings)))
    assert read_config(saved, settings) == values
    assert resolve({}, "promoter", settings=settings)["label_smoothing"] == 0.0
    with pytest.raises(ConfigError, match=r"label_smoothing must be in \[0, 0.5\]"):
        resolve({"label_smoothing": 0.7}, "classify", settings=settings)


def test_a_recipe_round_trips_through_its_tree(tmp_path):
    values = resolve({"pooling": "centre", "learning_rate": 1e-4, "seed": 3}, "chromatin", 100)
    made = Recipe.of(**values)
    assert made.values() == values
    assert (made.head.pooling, made.optim.learning_rate, made.optim.seed) == ("centre", 1e-4, 3)
    saved = tmp_path / "finetune.json"
    saved.write_text(json.dumps(tree(values)))
    assert read_config(saved) == values
    assert set(tree(values)) == set(recipe.GROUPS)
    assert tree(values)["head"]["base"]["kmers"] == values["base_kmers"]


def test_the_docs_table_names_every_setting_in_its_group():
    table = {}
    for line in (REPO / "docs" / "finetune.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.split("|")[1:-1]]
        if len(cells) == 2 and cells[0] in recipe.GROUPS:
            table[cells[0]] = cells[1]
    for one in SETTINGS:
        assert f"`{one.option}" in table[one.group], one.name


def test_an_arm_reading_deepseas_cnn_takes_its_budget_and_a_conflict_is_named():
    """A chromatin task whose base CNN is DeepSEA's reads it from DeepSEA's CNN arm, so
    the arm's width and budget (the task's, else the pipeline's `baselines`) are the base
    CNN's; a base setting that differs from the arm's is refused, naming both keys."""
    from genobird.finetuning.recipe_pipeline import arm_finetune_options, deepsea_arm_settings

    section = {"base_cnn_channels": 64, "base_cnn_architecture": "deepsea-cnn", "cnn_max_epochs": 5}
    options = arm_finetune_options("t", section, {"cnn_max_minutes": 15})
    assert "--base-cnn-epochs 5 --base-cnn-minutes 15" in options
    assert deepsea_arm_settings("t", section, {})["cnn_channels"] == 64
    own = {"base_cnn_channels": 64, "cnn_max_epochs": 5}  # its own CNN: left as given
    assert "--base-cnn-epochs" not in arm_finetune_options("t", own, {"cnn_max_minutes": 15})
    with pytest.raises(
        ValueError, match="base_cnn_epochs 7 differs from DeepSEA's CNN arm's cnn_max_epochs 5"
    ):
        arm_finetune_options("t", {**section, "base_cnn_epochs": 7}, {})
