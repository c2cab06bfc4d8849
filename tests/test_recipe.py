"""One fine-tuning recipe, three spellings: `genobird finetune`'s options, the pipeline
schema's fine-tuning sections, and the Snakemake options built from a section
(genobird.finetuning.recipe). A setting added to one and not the others fails here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from genobird.commands import build_parser
from genobird.finetuning.finetune import FinetuneSpec
from genobird.finetuning.recipe import (
    POOLINGS,
    RECIPE_OPTIONS,
    REQUIRED_RECIPE,
    TASK_DEFAULTS,
    finetune_options,
)
from genobird.model.classifier import BigBirdForSequenceClassification

REPO = Path(__file__).resolve().parents[1]
SCHEMA = yaml.safe_load((REPO / "workflows" / "schemas" / "config.schema.yaml").read_text())


def finetune_cli() -> dict:
    """option string -> argparse action of `genobird finetune`."""
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command")
    return dict(commands.choices["finetune"]._option_string_actions)


def sections() -> dict[str, dict]:
    """Every fine-tuning section of the schema: name -> its schema."""
    properties = SCHEMA["properties"]
    return {
        "promoter": properties["promoter"],
        "chromatin": properties["chromatin"],
        "sequence_tasks": properties["sequence_tasks"]["additionalProperties"],
        "chromatin_tasks": properties["chromatin_tasks"]["additionalProperties"],
    }


def test_every_recipe_setting_is_a_finetune_option_and_a_spec_field():
    options = finetune_cli()
    fields = {field.name for field in dataclasses.fields(FinetuneSpec)}
    training = {"learning_rate", "max_steps", "batch_size"}
    for key in (*RECIPE_OPTIONS, *REQUIRED_RECIPE, "rc_augment"):
        assert f"--{key.replace('_', '-')}" in options, key
        assert key in fields or key in training, key


def test_the_schema_names_the_recipe_once_and_every_section_takes_it():
    recipe = SCHEMA["$defs"]["recipe"]["properties"]
    assert set(recipe) == {*RECIPE_OPTIONS, *REQUIRED_RECIPE, "rc_augment"}
    assert recipe["pooling"]["enum"] == list(POOLINGS)
    for name, section in sections().items():
        assert section["allOf"] == [{"$ref": "#/$defs/recipe"}], name
        assert section["unevaluatedProperties"] is False, name
        assert not set(section["properties"]) & set(recipe), name  # not pasted again
        assert set(REQUIRED_RECIPE) <= set(section["required"]), name


def test_pooling_choices_are_the_models():
    assert POOLINGS == BigBirdForSequenceClassification.POOLINGS
    assert list(finetune_cli()["--pooling"].choices) == list(POOLINGS)


def test_a_section_becomes_finetune_options_the_parser_reads():
    section = {"eval_every": 500, "patience": 2, "pooling": "centre", "centre_bp": 300,
               "dropout": 0.3, "layer_decay": 0.9, "head_lr_scale": 10, "bpe_dropout": 0.1,
               "segmentations": 4, "pos_weight": 2.0, "base_cnn_channels": 128, "base_kmers": 5,
               "probe_steps": 200, "rc_augment": False}  # fmt: skip
    assert set(section) - {"rc_augment"} == set(RECIPE_OPTIONS)
    argv = ["finetune", "chromatin", "--data", "d.h5", "--out", "o", "--model", "m",
            *finetune_options(section).split()]  # fmt: skip
    args = build_parser().parse_args(argv)
    for key, value in section.items():
        if key != "rc_augment":
            assert getattr(args, key) == value, key
    assert args.rc_augment is False and args.rc_average is False


def test_options_left_out_take_their_task_kinds_defaults(tmp_path):
    """classify: the recipe measured on task families it was not chosen on (base CNN,
    mean pooling, dropout, up to 3,000 steps stopped by validation); promoter and
    chromatin: the short [CLS] runs their pipelines override. An option given is kept; a
    head for export (--pooling hf) gets no base readers by default."""
    from genobird.commands.finetune import fill_task_defaults
    from genobird.model import BigBirdConfig, BigBirdForPretraining, save_pretrained

    shape = dict(vocab_size=16, hidden_size=16, num_layers=1, num_heads=2,
                 intermediate_size=32, max_position=128, block_size=16)  # fmt: skip
    save_pretrained(BigBirdForPretraining(BigBirdConfig(**shape, base_conv_channels=4)),
                    tmp_path / "reads-bases")  # fmt: skip
    save_pretrained(BigBirdForPretraining(BigBirdConfig(**shape)), tmp_path / "plain")

    def resolved(task, model, *options, train_windows=1000):
        argv = ["finetune", task, "--data", "d.h5", "--out", "o", "--model",
                str(tmp_path / model), *options]  # fmt: skip
        args = build_parser().parse_args(argv)
        fill_task_defaults(args, train_windows)
        return {key: getattr(args, key) for key in TASK_DEFAULTS["classify"]}

    assert resolved("classify", "reads-bases") == TASK_DEFAULTS["classify"]
    assert resolved("classify", "reads-bases")["base_cnn_channels"] == 128
    assert resolved("classify", "plain")["base_cnn_channels"] == 128  # its own table of bases
    assert resolved("classify", "reads-bases", "--pooling", "hf")["base_cnn_channels"] == 0
    given = resolved("classify", "reads-bases", "--pooling", "cls", "--base-cnn-channels",
                     "0", "--max-steps", "10", "--patience", "0")  # fmt: skip
    assert given == {**TASK_DEFAULTS["classify"], "pooling": "cls", "base_cnn_channels": 0,
                     "max_steps": 10, "patience": 0}  # fmt: skip
    assert resolved("classify", "plain", train_windows=20)["batch_size"] == 20
    assert resolved("classify", "plain", "--batch-size", "64", train_windows=20)["batch_size"] == 64
    for task in ("promoter", "chromatin"):
        assert resolved(task, "reads-bases") == TASK_DEFAULTS["promoter"]
        assert resolved(task, "reads-bases")["pooling"] == "cls"
