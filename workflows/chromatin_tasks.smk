# Chromatin tasks on your own peaks (`chromatin_tasks:`), each with its own reference (one
# FASTA or several read as one genome) and held-out chromosomes or regions: one data set of
# the widest context, the pretrained model fine-tuned at each context of `contexts` around
# the same bins (the paper's Table 7 as an ablation), DeepSEA's CNN at each of
# `cnn_contexts` and the k-mer LR at each of `kmer_contexts`, held-out regions scored with
# the widest context's model, and the report's comparison.
# Outputs: RESULTS/chromatin_tasks/NAME/{data.h5, context-BP/, baselines/KIND-BP/, score.tsv}.

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
    if assayed:
        options.append("--assayed " + " ".join(f"'{e['table']}={e['assayed']}'" for e in assayed))
    return " ".join(options)


def chromatin_task_pretrained(wildcards):
    """The pretrained model the task fine-tunes: the pipeline's own."""
    return rules.pretrain.output.model


rule chromatin_task_data:
    input:
        fasta=lambda wildcards: chromatin_task(wildcards)["reference"],
        features=feature_tables,
    output:
        f"{RESULTS}/chromatin_tasks/{{name}}/data.h5",
    params:
        options=chromatin_task_data_options,
    wildcard_constraints:
        name="|".join(CHROMATIN_TASKS) or "none",
    log:
        f"{RESULTS}/logs/chromatin_task_data_{{name}}.log",
    threads: 1
    resources:
        mem_mb=4000,
    conda:
        ENV
    shell:
        "genobird -q dataset chromatin --features {input.features} --reference {input.fasta}"
        " {params.options} --out {output} > {log} 2>&1"


rule chromatin_task_finetune:
    input:
        data=f"{RESULTS}/chromatin_tasks/{{name}}/data.h5",
        pretrained=chromatin_task_pretrained,
    output:
        metrics=f"{RESULTS}/chromatin_tasks/{{name}}/context-{{bp}}/report/metrics.json",
        model=f"{RESULTS}/chromatin_tasks/{{name}}/context-{{bp}}/model/config.json",
    params:
        output=lambda wildcards, output: os.path.dirname(os.path.dirname(output.model)),
        steps=lambda wildcards: chromatin_task(wildcards)["max_steps"],
        rate=lambda wildcards: chromatin_task(wildcards)["learning_rate"],
        batch=lambda wildcards: chromatin_task(wildcards)["batch_size"],
        options=lambda wildcards: finetune_options(chromatin_task(wildcards)),
    wildcard_constraints:
        name="|".join(CHROMATIN_TASKS) or "none",
        bp="[0-9]+",
    log:
        f"{RESULTS}/logs/chromatin_task_finetune_{{name}}_{{bp}}.log",
    threads: 2
    priority: CRITICAL_PATH
    resources:
        mem_mb=8000,
        gpu=FINETUNE_GPUS,
    conda:
        ENV
    shell:
        "genobird -q finetune chromatin --data {input.data} --out {params.output}"
        " --model $(dirname {input.pretrained}) --window-bp {wildcards.bp}"
        " --max-steps {params.steps} --learning-rate {params.rate} --batch-size {params.batch}"
        " {params.options} > {log} 2>&1"


def chromatin_baseline_options(wildcards):
    """The CNN's budget (the task's cnn_max_minutes, else baselines.cnn_max_minutes) and
    width (the task's cnn_channels)."""
    if wildcards.kind != "deepsea-cnn":
        return ""
    options = []
    minutes = chromatin_task(wildcards).get("cnn_max_minutes", (BASELINES or {}).get("cnn_max_minutes"))
    if minutes is not None:
        options.append(f"--max-minutes {minutes}")
    if "cnn_channels" in chromatin_task(wildcards):
        options.append(f"--channels {chromatin_task(wildcards)['cnn_channels']}")
    return " ".join(options)


rule chromatin_task_baseline:
    input:
        f"{RESULTS}/chromatin_tasks/{{name}}/data.h5",
    output:
        f"{RESULTS}/chromatin_tasks/{{name}}/baselines/{{kind}}-{{bp}}/report/metrics.json",
    params:
        output=lambda wildcards, output: os.path.dirname(os.path.dirname(output[0])),
        options=chromatin_baseline_options,
    wildcard_constraints:
        name="|".join(CHROMATIN_TASKS) or "none",
        kind="|".join(CHROMATIN_TASK_BASELINES),
        bp="[0-9]+",
    log:
        f"{RESULTS}/logs/chromatin_task_baseline_{{name}}_{{kind}}_{{bp}}.log",
    threads: lambda wildcards: 2 if wildcards.kind == "deepsea-cnn" else 1
    resources:
        mem_mb=8000,
    conda:
        ENV
    shell:
        "genobird -q baseline {wildcards.kind} --data {input} --window-bp {wildcards.bp}"
        " --out {params.output} {params.options} > {log} 2>&1"


rule chromatin_task_score:
    input:
        bed=lambda wildcards: chromatin_task(wildcards)["score_bed"],
        model=lambda wildcards: (
            f"{RESULTS}/chromatin_tasks/{wildcards.name}"
            f"/context-{max(chromatin_task(wildcards)['contexts'])}"
            "/model/config.json"
        ),
        fasta=lambda wildcards: chromatin_task(wildcards)["reference"],
    output:
        f"{RESULTS}/chromatin_tasks/{{name}}/score.tsv",
    params:
        chromosomes=lambda wildcards: " ".join(
            f"'{region}'" for region in chromatin_task(wildcards)["test"] if ":" not in region
        ),
    wildcard_constraints:
        name="|".join(CHROMATIN_TASKS) or "none",
    log:
        f"{RESULTS}/logs/chromatin_task_score_{{name}}.log",
    threads: 1
    resources:
        mem_mb=4000,
        gpu=FINETUNE_GPUS,
    conda:
        ENV
    shell:
        "genobird -q score --model $(dirname {input.model}) --bed {input.bed}"
        " --chromosomes {params.chromosomes} --reference {input.fasta} --out {output} > {log} 2>&1"


rule chromatin_tasks:
    """Every chromatin task's runs and baselines, without the rest of the pipeline."""
    input:
        chromatin_task_outputs(),
