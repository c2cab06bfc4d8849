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
    "base_kmers",
    "dropout",
    "layer_decay",
    "head_lr_scale",
    "bpe_dropout",
    "segmentations",
    "pos_weight",
    "probe_steps",
)
# the settings besides strands (which the rc options settle) that a classify run left
# without them chooses on validation (finetuning.probes; FinetuneSpec.choose_on_validation)
QUESTIONS = ("learning_rate", "pooling")
# the required ones, every fine-tuning section gives them
REQUIRED_RECIPE = ("max_steps", "learning_rate", "batch_size")
# how a window becomes one vector for the head: BigBirdForSequenceClassification.POOLINGS,
# named here too so that building the command line imports no torch (a test holds them equal)
POOLINGS = ("cls", "mean", "hf", "centre", "profile")
# `genobird finetune`'s setting for each option left out, by task kind. classify (a
# user's own labelled sequences, of any family): the recipe that benchmarks/carryover.py
# measures on task families it was not chosen on (docs/results.md, "One recipe on tasks it
# was not chosen on"): learning rate 3e-4 and mean pooling unless validation prefers 1e-4 or
# [CLS] (finetuning.probes), base readers under the encoder, started from genobird's baselines
# (a CNN of the CNN baseline's width, trained alone first, and the k-mer LR's 3- to
# 6-mer counts, fitted first, blended on validation; finetuning.base_start),
# dropout 0.3, up to 3,000 steps of 32 windows, validation
# every 500 steps (or every pass over the windows, if sooner), the best weights kept, and
# a stop after 3 checks without improvement. promoter and chromatin data sets come from
# the pipelines, which give their own recipes: short runs of the paper's [CLS] head.
TASK_DEFAULTS = {
    "classify": {"learning_rate": 3e-4, "max_steps": 3000, "batch_size": 32, "pooling": "mean",
                 "dropout": 0.3, "eval_every": 500, "patience": 3, "base_cnn_channels": 128,
                 "base_kmers": 6},
    "promoter": {"learning_rate": 3e-4, "max_steps": 300, "batch_size": 8, "pooling": "cls",
                 "dropout": None, "eval_every": 0, "patience": 0, "base_cnn_channels": 0,
                 "base_kmers": 0},
}  # fmt: skip
TASK_DEFAULTS["chromatin"] = TASK_DEFAULTS["promoter"]

# Fine-tuning steps of each probe that answers a classify run's open recipe questions
# (finetuning.probes: strands, learning rate, pooling; at most 4 probes, so at most 2,000 steps
# beside the 3,000-step run, and fewer where validation stops them as it stops the run).
PROBE_STEPS = 500


def finetune_options(section: dict) -> str:
    """The optional fine-tuning settings of a pipeline config section, as `genobird
    finetune` options. rc_augment sets both strands in training and in scoring."""
    options = [f"--{key.replace('_', '-')} {section[key]}" for key in RECIPE_OPTIONS
               if key in section]  # fmt: skip
    if "rc_augment" in section:  # scored on the strands it was trained on
        strands = "" if section["rc_augment"] else "no-"
        options += [f"--{strands}rc-augment --{strands}rc-average"]
    return " ".join(options)
