# Scoring with both predictors: the TSSs of the test chromosomes as BED regions and, with
# the demo genome, its sample sequences (FASTA) and variants (VCF).

TASKS = ["promoter", "chromatin"]
# source name -> (genobird score option, input file)
SCORE_INPUTS = {"heldout_tss": ("--bed", f"{RESULTS}/score/heldout_tss.bed")}
if DEMO:
    SCORE_INPUTS["samples"] = ("--fasta", rules.demo_reference.output.samples)
    SCORE_INPUTS["variants"] = ("--vcf", rules.demo_reference.output.variants)
SCORE_SOURCES = list(SCORE_INPUTS)


rule heldout_tss:
    input:
        TSS,
    output:
        f"{RESULTS}/score/heldout_tss.bed",
    params:
        chromosomes="|".join(SPLIT["test_chromosomes"]),
    log:
        f"{RESULTS}/logs/heldout_tss.log",
    threads: 1
    resources:
        mem_mb=500,
    conda:
        ENV
    shell:
        "grep -E '^({params.chromosomes})\\b' {input} > {output} 2> {log}"


rule score:
    input:
        source=lambda wildcards: SCORE_INPUTS[wildcards.source][1],
        model=f"{RESULTS}/{{task}}/model/config.json",
        fasta=GENOME,
    output:
        f"{RESULTS}/score/{{task}}_{{source}}.tsv",
    params:
        option=lambda wildcards: SCORE_INPUTS[wildcards.source][0],
    wildcard_constraints:
        task="|".join(TASKS),
        source="|".join(SCORE_SOURCES),
    log:
        f"{RESULTS}/logs/score_{{task}}_{{source}}.log",
    threads: 2
    resources:
        mem_mb=4000,
        gpu=FINETUNE_GPUS,
    conda:
        ENV
    shell:
        "genobird -q score --model $(dirname {input.model}) {params.option} {input.source}"
        " --reference {input.fasta} --out {output} > {log} 2>&1"
