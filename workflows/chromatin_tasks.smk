# Chromatin tasks on your own peaks (`chromatin_tasks:`), each with its own reference (one
# FASTA or several read as one genome) and held-out chromosomes or regions: one data set of
# the widest context, the pretrained model fine-tuned at each context of `contexts` around
# the same bins (the paper's Table 7 as an ablation), DeepSEA's CNN at each of
# `cnn_contexts` and the k-mer LR at each of `kmer_contexts`, held-out regions scored with
# the widest context's model, and the report's comparison.
# A genobird arm whose base readers are those baselines starts from the arms at its context
# (`--base-start-from`), which then run first.
# Outputs: RESULTS/chromatin_tasks/NAME/{data.h5, context-BP/, baselines/KIND-BP/, score.tsv};
# each run's wall time and peak memory in its benchmark.tsv, which the report reads.

for _name, _task in CHROMATIN_TASKS.items():  # a base CNN the arms cannot read: refused now
    deepsea_arm_settings(_name, _task, config.get("baselines") or {})

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
        baselines=start_baselines,
    output:
        metrics=f"{RESULTS}/chromatin_tasks/{{name}}/context-{{bp}}/report/metrics.json",
        model=f"{RESULTS}/chromatin_tasks/{{name}}/context-{{bp}}/model/config.json",
    params:
        output=lambda wildcards, output: os.path.dirname(os.path.dirname(output.model)),
        steps=lambda wildcards: chromatin_task(wildcards)["max_steps"],
        rate=lambda wildcards: chromatin_task(wildcards)["learning_rate"],
        batch=lambda wildcards: chromatin_task(wildcards)["batch_size"],
        options=chromatin_finetune_options,
        start=lambda wildcards, input: " ".join(
            ["--base-start-from"] * bool(input.baselines)
            + [os.path.dirname(os.path.dirname(path)) for path in input.baselines]
        ),
    wildcard_constraints:
        name="|".join(CHROMATIN_TASKS) or "none",
        bp="[0-9]+",
    log:
        f"{RESULTS}/logs/chromatin_task_finetune_{{name}}_{{bp}}.log",
    benchmark:
        f"{RESULTS}/chromatin_tasks/{{name}}/context-{{bp}}/benchmark.tsv"
    threads: 2
    priority: CRITICAL_PATH
    resources:
        mem_mb=8000,
        gpu=FINETUNE_GPUS,
    conda:
        ENV
    shell:
        "genobird -q finetune chromatin --data {input.data} --out {params.output}"
        " --restart-changed --model $(dirname {input.pretrained}) --window-bp {wildcards.bp}"
        " --max-steps {params.steps} --learning-rate {params.rate} --batch-size {params.batch}"
        " {params.options} {params.start} > {log} 2>&1"


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
    benchmark:
        f"{RESULTS}/chromatin_tasks/{{name}}/baselines/{{kind}}-{{bp}}/benchmark.tsv"
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
        model=scoring_model,
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
