# The pipeline's evaluations (genobird evaluate), each a JSON artifact, and the HTML
# report that draws them with the rest of the results folder (genobird report).


rule evaluate_corpus:
    input:
        documents=expand(f"{RESULTS}/corpus/{{part}}.txt", part=("train", "heldout")),
        tokenizer=rules.vocabulary.output,
    output:
        f"{RESULTS}/{CORPUS_STATISTICS}",
    params:
        # the results folder the artifact is in (RESULTS/corpus/statistics.json)
        results=lambda wildcards, output: output[0][: -len(CORPUS_STATISTICS) - 1],
    log:
        f"{RESULTS}/logs/evaluate_corpus.log",
    threads: 1
    resources:
        mem_mb=2000,
    conda:
        ENV
    shell:
        "genobird -q evaluate corpus --results {params.results} > {log} 2>&1"


rule evaluate_pretrained:
    input:
        model=rules.pretrain.output.model,
        heldout=f"{RESULTS}/corpus/instances-heldout/manifest.json",
        documents=expand(f"{RESULTS}/corpus/{{part}}.txt", part=("train", "heldout")),
        markov=[f"{RESULTS}/baselines/markov.json"] if BASELINES else [],
    output:
        f"{RESULTS}/{PRETRAINED_EVALUATION}",
    params:
        # the results folder the artifact is in (RESULTS/pretrain/evaluation.json)
        results=lambda wildcards, output: output[0][: -len(PRETRAINED_EVALUATION) - 1],
        context=report_context_options(config.get("report", {})),
    log:
        f"{RESULTS}/logs/evaluate_pretrained.log",
    threads: 1
    resources:
        mem_mb=4000,
    conda:
        ENV
    shell:
        "genobird -q evaluate pretrained --results {params.results} {params.context} > {log} 2>&1"


rule compare_runs:
    input:
        expand(f"{RESULTS}/{{folder}}/report/metrics.json", folder=TASK_FOLDERS),
        BASELINE_OUTPUTS,
        ZERO_SHOT_OUTPUTS,
        SEED_OUTPUTS,
        chromatin_task_outputs(),
    output:
        f"{RESULTS}/{RUN_COMPARISONS}",
    params:
        results=lambda wildcards, output: output[0][: -len(RUN_COMPARISONS) - 1],
    log:
        f"{RESULTS}/logs/compare_runs.log",
    threads: 1
    resources:
        mem_mb=2000,
    conda:
        ENV
    shell:
        "genobird -q evaluate runs --results {params.results} > {log} 2>&1"


rule report:
    input:
        expand(f"{RESULTS}/{{folder}}/report/metrics.json", folder=TASK_FOLDERS),
        expand(f"{RESULTS}/score/{{task}}_{{source}}.tsv", task=TASKS, source=SCORE_SOURCES),
        BASELINE_OUTPUTS,
        ZERO_SHOT_OUTPUTS,
        SEED_OUTPUTS,
        chromatin_task_outputs(),
        PROMOTER_MOTIF_OUTPUTS,
        # without any fine-tuning task, the report still needs the pretrained model
        rules.pretrain.output.model,
        rules.evaluate_corpus.output,
        rules.evaluate_pretrained.output,
        rules.compare_runs.output,
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
        mem_mb=2000,
    conda:
        ENV
    shell:
        "genobird -q report --results {params.results} --out {output.html} {params.context} > {log} 2>&1"
