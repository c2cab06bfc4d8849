# Scoring with both predictors: the TSSs of the test chromosomes as BED regions, and the
# demo genome's sample sequences (FASTA) and variants (VCF).

TASKS = ["promoter", "chromatin"]
# source name -> (genobird score option, input file)
SCORE_INPUTS = {
    "heldout_tss": ("--bed", f"{RESULTS}/score/heldout_tss.bed"),
    "samples": ("--fasta", f"{RESULTS}/reference/samples.fa"),
    "variants": ("--vcf", f"{RESULTS}/reference/variants.vcf"),
}
SCORE_SOURCES = list(SCORE_INPUTS)


rule heldout_tss:
    input:
        rules.demo_reference.output.tss,
    output:
        f"{RESULTS}/score/heldout_tss.bed",
    params:
        chromosomes="|".join(SPLIT["test_chromosomes"]),
    log:
        f"{RESULTS}/logs/heldout_tss.log",
    threads: 1
    shell:
        "grep -E '^({params.chromosomes})\\b' {input} > {output} 2> {log}"


rule score:
    input:
        source=lambda wildcards: SCORE_INPUTS[wildcards.source][1],
        model=f"{RESULTS}/{{task}}/model/config.json",
        fasta=rules.demo_reference.output.fasta,
    output:
        f"{RESULTS}/score/{{task}}_{{source}}.tsv",
    params:
        option=lambda wildcards: SCORE_INPUTS[wildcards.source][0],
    wildcard_constraints:
        task="promoter|chromatin",
        source="|".join(SCORE_SOURCES),
    log:
        f"{RESULTS}/logs/score_{{task}}_{{source}}.log",
    threads: 2
    resources:
        mem_mb=4000,
    shell:
        "genobird -q score --model $(dirname {input.model}) {params.option} {input.source}"
        " --reference {input.fasta} --out {output} > {log} 2>&1"
