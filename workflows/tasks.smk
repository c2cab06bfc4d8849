# Sequence tasks: labelled sequences without coordinates (e.g. GUE's TF-binding CSVs,
# EPDnew promoter sequences with DeePromoter negatives), each fine-tuned from the
# pretrained model. Outputs: RESULTS/tasks/NAME/{data.h5, report/metrics.json, model/}.

rule sequence_task_data:
    input:
        unpack(sequence_task_inputs),
    output:
        f"{RESULTS}/tasks/{{name}}/data.h5",
    params:
        command=sequence_task_command,
    wildcard_constraints:
        name="|".join(SEQUENCE_TASKS) or "none",
    log:
        f"{RESULTS}/logs/task_data_{{name}}.log",
    threads: 1
    resources:
        mem_mb=4000,
    conda:
        ENV
    shell:
        "{params.command} --out {output} > {log} 2>&1"


rule sequence_task_finetune:
    input:
        data=f"{RESULTS}/tasks/{{name}}/data.h5",
        pretrained=rules.pretrain.output.model,
    output:
        metrics=f"{RESULTS}/tasks/{{name}}/report/metrics.json",
        model=f"{RESULTS}/tasks/{{name}}/model/config.json",
    params:
        output=lambda wildcards, output: os.path.dirname(os.path.dirname(output.model)),
        task=lambda wildcards: (
            "promoter" if "promoter_sequences" in SEQUENCE_TASKS[wildcards.name] else "classify"
        ),
        steps=lambda wildcards: SEQUENCE_TASKS[wildcards.name]["max_steps"],
        rate=lambda wildcards: SEQUENCE_TASKS[wildcards.name]["learning_rate"],
        batch=lambda wildcards: SEQUENCE_TASKS[wildcards.name]["batch_size"],
        selection=lambda wildcards: finetune_options(SEQUENCE_TASKS[wildcards.name]),
        seed="",  # seed 0, finetune's default
    wildcard_constraints:
        name="|".join(SEQUENCE_TASKS) or "none",
    log:
        f"{RESULTS}/logs/task_finetune_{{name}}.log",
    threads: 2
    resources:
        mem_mb=8000,
        gpu=FINETUNE_GPUS,
    conda:
        ENV
    shell:
        "genobird -q finetune {params.task} --data {input.data} --out {params.output}"
        " --restart-changed --model $(dirname {input.pretrained}) --max-steps {params.steps}"
        " --learning-rate {params.rate} --batch-size {params.batch} {params.selection}"
        "{params.seed} > {log} 2>&1"


# Further seeds of a sequence task (`seeds: N`): the same recipe with seeds 1 to N - 1, each
# in RESULTS/tasks/NAME/seeds/SEED/. Only seed 0's model scores sequences; the report sets
# the seeds' mean beside the baselines, since one seed's figure carries its own luck.
SEED_OUTPUTS = [
    f"{RESULTS}/tasks/{name}/seeds/{seed}/report/metrics.json"
    for name, task in SEQUENCE_TASKS.items()
    for seed in range(1, task.get("seeds", 1))
]


use rule sequence_task_finetune as sequence_task_finetune_seed with:
    output:
        metrics=f"{RESULTS}/tasks/{{name}}/seeds/{{seed}}/report/metrics.json",
        model=f"{RESULTS}/tasks/{{name}}/seeds/{{seed}}/model/config.json",
    params:
        seed=lambda wildcards: f" --seed {wildcards.seed}",
    wildcard_constraints:
        name="|".join(SEQUENCE_TASKS) or "none",
        seed="[1-9][0-9]*",
    log:
        f"{RESULTS}/logs/task_finetune_{{name}}_seed{{seed}}.log",


# Zero-shot (sequence tasks with `zero_shot: true`): the data set classified by likelihood
# alone under the pretrained model, beside order-k Markov models of the same pretraining
# DNA. Outputs: RESULTS/tasks/NAME/zero-shot/{genobird,markov}/report/metrics.json.
ZERO_SHOT_OUTPUTS = [
    f"{RESULTS}/tasks/{name}/zero-shot/{kind}/report/metrics.json"
    for name, task in SEQUENCE_TASKS.items()
    if task.get("zero_shot")
    for kind in ("genobird", "markov")
]


rule sequence_task_zero_shot:
    input:
        data=f"{RESULTS}/tasks/{{name}}/data.h5",
        pretrained=rules.pretrain.output.model,
        corpus=f"{RESULTS}/corpus/train.txt",
    output:
        f"{RESULTS}/tasks/{{name}}/zero-shot/{{kind}}/report/metrics.json",
    params:
        output=lambda wildcards, output: os.path.dirname(os.path.dirname(output[0])),
        scorer=lambda wildcards, input: (
            f"--model {os.path.dirname(input.pretrained)}"
            if wildcards.kind == "genobird"
            else f"--markov {input.corpus}"
        ),
    wildcard_constraints:
        name="|".join(SEQUENCE_TASKS) or "none",
        kind="genobird|markov",
    log:
        f"{RESULTS}/logs/zero_shot_{{kind}}/{{name}}.log",
    threads: 1
    resources:
        mem_mb=4000,
    conda:
        ENV
    shell:
        "genobird -q zero-shot --data {input.data} --out {params.output} {params.scorer}"
        " > {log} 2>&1"
