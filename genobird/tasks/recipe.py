"""The fine-tuning recipe's settings that a user picks, named once: `genobird finetune`
takes each as an option, a pipeline's fine-tuning sections (promoter, chromatin, each
sequence and chromatin task) as a key of the same name, and workflows/common.smk turns
the one into the other. tests/test_recipe.py holds the three together. No torch here:
Snakemake reads this module when it parses the workflow."""

from __future__ import annotations

# config key (= option without `--`, underscores for dashes) of every optional setting
RECIPE_OPTIONS = (
    "eval_every",
    "patience",
    "pooling",
    "centre_bp",
    "base_cnn_channels",
    "dropout",
    "layer_decay",
    "head_lr_scale",
    "bpe_dropout",
    "segmentations",
    "pos_weight",
    "strand_probe_steps",
)
# the required ones, every fine-tuning section gives them
REQUIRED_RECIPE = ("max_steps", "learning_rate", "batch_size")
# how a window becomes one vector for the head: BigBirdForSequenceClassification.POOLINGS,
# named here too so that building the command line imports no torch (a test holds them equal)
POOLINGS = ("cls", "mean", "hf", "centre")
# Fine-tuning steps of each of the two strand probes (tasks.finetune.choose_strands): 2 x
# 500 steps is a third more than the 3,000-step recipe of pipelines/human-mini.yaml.
STRAND_PROBE_STEPS = 500


def finetune_options(section: dict) -> str:
    """The optional fine-tuning settings of a pipeline config section, as `genobird
    finetune` options. rc_augment sets both strands in training and in scoring."""
    options = [f"--{key.replace('_', '-')} {section[key]}" for key in RECIPE_OPTIONS
               if key in section]  # fmt: skip
    if "rc_augment" in section:  # scored on the strands it was trained on
        strands = "" if section["rc_augment"] else "no-"
        options += [f"--{strands}rc-augment --{strands}rc-average"]
    return " ".join(options)
