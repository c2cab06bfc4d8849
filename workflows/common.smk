# Helpers shared by the rule modules (kept apart from rules, as Snakemake's lint asks).

from genobird.artifacts import CORPUS_STATISTICS, PRETRAINED_EVALUATION, RUN_COMPARISONS
from genobird.finetuning.recipe_pipeline import (
    arm_finetune_options,
    deepsea_arm_settings,
    finetune_options,
    reads_deepsea_arm,
)

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


def training_negatives_option(section):
    """The DeePromoter negatives per training positive of a promoter config section."""
    if "training_negatives" not in section:
        return ""
    return f"--training-negatives {section['training_negatives']}"


def motif_options(section):
    """genobird motifs options of a task's `motifs` config section: the test split's
    positives read (at most `windows`), the bases of each window attributed (`span`)."""
    options = f"--split test --label 1 --limit {section['windows']}"
    if "span" in section:
        options += " --span {}-{}".format(*section["span"])
    return options


def report_context_options(report):
    """genobird report options of the config's `report` section (genobird's defaults for
    what it leaves out)."""
    options = []
    if "context_lengths" in report:
        options += ["--context-tokens", *map(str, report["context_lengths"])]
    if "context_windows" in report:
        options += ["--context-windows", str(report["context_windows"])]
    if "copy_context_lengths" in report:
        options += ["--copy-context-tokens", *map(str, report["copy_context_lengths"])]
    if "copy_windows" in report:
        options += ["--copy-windows", str(report["copy_windows"])]
    return " ".join(options)


# --------------------------------------------------------------- chromatin tasks
CHROMATIN_TASKS = config.get("chromatin_tasks", {})
CHROMATIN_TASK_BASELINES = ("deepsea-cnn", "kmer-lr")


def chromatin_task(wildcards):
    return CHROMATIN_TASKS[wildcards.name]


def baseline_contexts(task, kind):
    """Contexts of a baseline: DeepSEA's CNN at the narrowest and the widest context by
    default, the k-mer LR at the narrowest (counting k-mers over 8 kb costs 6x the
    time of 1 kb and dilutes the bin's own)."""
    contexts = task["contexts"]
    if kind == "kmer-lr":
        return task.get("kmer_contexts", [min(contexts)])
    return task.get("cnn_contexts", sorted({min(contexts), max(contexts)}))


def start_baselines(wildcards):
    """The baseline arms at a genobird arm's context that fitted its base readers (the
    k-mer LR; DeepSEA's CNN when the base CNN is DeepSEA's): the run reads them
    (`--base-start-from`) instead of fitting them again."""
    task, bp = chromatin_task(wildcards), int(wildcards.bp)
    kinds = []
    if task.get("base_kmers"):
        kinds.append("kmer-lr")
    if reads_deepsea_arm(task):
        kinds.append("deepsea-cnn")
    folder = f"{RESULTS}/chromatin_tasks/{wildcards.name}/baselines"
    return [f"{folder}/{kind}-{bp}/report/metrics.json" for kind in kinds
            if bp in baseline_contexts(task, kind)]


def chromatin_task_outputs():
    """Every file the report reads of the chromatin tasks."""
    outputs = []
    for name, task in CHROMATIN_TASKS.items():
        folder = f"{RESULTS}/chromatin_tasks/{name}"
        outputs += [f"{folder}/context-{bp}/report/metrics.json" for bp in task["contexts"]]
        outputs += [
            f"{folder}/baselines/{kind}-{bp}/report/metrics.json"
            for kind in CHROMATIN_TASK_BASELINES
            for bp in baseline_contexts(task, kind)
        ]
        if "score_bed" in task:
            outputs.append(f"{folder}/score.tsv")
    return outputs


def feature_tables(wildcards) -> list[str]:
    """The task's feature tables: each `features` entry is a table, or {table, assayed}."""
    return [e if isinstance(e, str) else e["table"] for e in chromatin_task(wildcards)["features"]]


def chromatin_task_data_options(wildcards):
    task = chromatin_task(wildcards)
    assayed = [e for e in task["features"] if not isinstance(e, str) and "assayed" in e]
    options = [
        f"--context-bp {max(task['contexts'])}",
        "--valid-chromosomes " + " ".join(f"'{region}'" for region in task["valid"]),
        "--test-chromosomes " + " ".join(f"'{region}'" for region in task["test"]),
    ]
    if "negative_ratio" in task:
        options.append(f"--negative-ratio {task['negative_ratio']}")
    if "max_bins" in task:
        options.append(f"--max-bins {task['max_bins']}")
    if "profile_bins" in task:
        options.append(f"--profile-bins {task['profile_bins']}")
    if assayed:
        options.append("--assayed " + " ".join(f"'{e['table']}={e['assayed']}'" for e in assayed))
    return " ".join(options)


def chromatin_task_pretrained(wildcards):
    """The pretrained model the task fine-tunes: the pipeline's own."""
    return rules.pretrain.output.model


def chromatin_baseline_options(wildcards):
    """The CNN arm's budget and width (`deepsea_arm_settings`)."""
    if wildcards.kind != "deepsea-cnn":
        return ""
    settings = deepsea_arm_settings(wildcards.name, chromatin_task(wildcards),
                                    config.get("baselines") or {})  # fmt: skip
    flags = {"cnn_max_epochs": "--max-epochs", "cnn_max_minutes": "--max-minutes",
             "cnn_channels": "--channels"}  # fmt: skip
    return " ".join(f"{flags[key]} {settings[key]}" for key in flags if settings[key] is not None)


def chromatin_finetune_options(wildcards):
    """A genobird arm's recipe options (`arm_finetune_options`)."""
    return arm_finetune_options(wildcards.name, chromatin_task(wildcards),
                                config.get("baselines") or {})  # fmt: skip


def scoring_model(wildcards):
    """The model that scores a chromatin task's regions: the widest context's."""
    widest = max(chromatin_task(wildcards)["contexts"])
    return os.path.join(RESULTS, "chromatin_tasks", wildcards.name, f"context-{widest}",
                        "model", "config.json")
