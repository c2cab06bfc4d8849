# The HTML report over the whole results folder (genobird report).


rule report:
    input:
        expand(f"{RESULTS}/{{folder}}/report/metrics.json", folder=TASK_FOLDERS),
        expand(f"{RESULTS}/score/{{task}}_{{source}}.tsv", task=TASKS, source=SCORE_SOURCES),
        BASELINE_OUTPUTS,
        ZERO_SHOT_OUTPUTS,
        SEED_OUTPUTS,
        chromatin_task_outputs(),
        # without any fine-tuning task, the report still needs the pretrained model
        rules.pretrain.output.model,
    output:
        html=f"{RESULTS}/report.html",
        checks=f"{RESULTS}/report.checks.json",  # the checks against the baselines, as JSON
    params:
        results=lambda wildcards, output: os.path.dirname(output.html),
        context=report_context_options(config.get("report", {})),
    log:
        f"{RESULTS}/logs/report.log",
    threads: 1
    resources:
        mem_mb=4000,
    conda:
        ENV
    shell:
        "genobird -q report --results {params.results} --out {output.html} {params.context} > {log} 2>&1"
