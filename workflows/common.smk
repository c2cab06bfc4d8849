# Helpers shared by the rule modules (kept apart from rules, as Snakemake's lint asks).

SEQUENCE_TASKS = config.get("sequence_tasks", {})
# Snakemake priority of the jobs between the genome and the fine-tuned models (corpus,
# pretraining, fine-tuning): with few cores they go first and the baselines fill the
# gaps, instead of a baseline holding both cores while pretraining waits.
CRITICAL_PATH = 10


def sequence_task_inputs(wildcards):
    task = SEQUENCE_TASKS[wildcards.name]
    keys = ("promoter_sequences",) if "promoter_sequences" in task else ("input", "valid", "test")
    return {key: task[key] for key in keys if key in task}


def sequence_task_command(wildcards, input):
    if "promoter_sequences" in input.keys():
        command = f"genobird -q dataset promoter-sequences --positives {input.promoter_sequences}"
        return f"{command} {training_negatives_option(SEQUENCE_TASKS[wildcards.name])}"
    command = f"genobird -q dataset classify --input {input.input}"
    for key in ("valid", "test"):
        if key in input.keys():
            command += f" --{key} {input[key]}"
    return command


def finetune_options(section):
    """The optional fine-tuning settings of a config section (promoter, chromatin or one
    sequence task), as genobird finetune options."""
    keys = ("eval_every", "patience", "pooling", "centre_bp", "dropout", "layer_decay",
            "head_lr_scale", "bpe_dropout", "segmentations", "pos_weight")
    options = [f"--{key.replace('_', '-')} {section[key]}" for key in keys if key in section]
    if "rc_augment" in section:  # scored on the strands it was trained on
        strands = "" if section["rc_augment"] else "no-"
        options += [f"--{strands}rc-augment --{strands}rc-average"]
    return " ".join(options)


def training_negatives_option(section):
    """The DeePromoter negatives per training positive of a promoter config section."""
    if "training_negatives" not in section:
        return ""
    return f"--training-negatives {section['training_negatives']}"


def report_context_options(report):
    """genobird report options of the config's `report` section (genobird's defaults for
    what it leaves out)."""
    options = []
    if "context_lengths" in report:
        options += ["--context-tokens", *map(str, report["context_lengths"])]
    if "context_windows" in report:
        options += ["--context-windows", str(report["context_windows"])]
    return " ".join(options)
