# Scoring with both predictors: the TSSs of the test chromosomes as BED regions and, with
# the demo genome, its sample sequences (FASTA) and variants (VCF).

TASKS = [task for task, on in (("promoter", HAS_PROMOTER), ("chromatin", HAS_CHROMATIN)) if on]
# source name -> (input file, how genobird score reads it)
SCORE_INPUTS = {}
if TSS:
    SCORE_INPUTS["heldout_tss"] = (
        TSS,
        "--bed {} --chromosomes " + " ".join(SPLIT["test_chromosomes"]),
    )
if DEMO:
    SCORE_INPUTS["samples"] = (rules.demo_reference.output.samples, "--fasta {}")
    SCORE_INPUTS["variants"] = (rules.demo_reference.output.variants, "--vcf {}")
SCORE_SOURCES = list(SCORE_INPUTS)


rule score:
    input:
        source=lambda wildcards: SCORE_INPUTS[wildcards.source][0],
        model=f"{RESULTS}/{{task}}/model/config.json",
        fasta=GENOME,
    output:
        f"{RESULTS}/score/{{task}}_{{source}}.tsv",
    params:
        source=lambda wildcards, input: SCORE_INPUTS[wildcards.source][1].format(input.source),
    wildcard_constraints:
        task="|".join(TASKS) or "none",
        source="|".join(SCORE_SOURCES) or "none",
    log:
        f"{RESULTS}/logs/score_{{task}}_{{source}}.log",
    threads: 1  # a few seconds each, mostly start-up: two run side by side
    resources:
        mem_mb=4000,
        gpu=FINETUNE_GPUS,
    conda:
        ENV
    shell:
        "genobird -q score --model $(dirname {input.model}) {params.source}"
        " --reference {input.fasta} --out {output} > {log} 2>&1"
