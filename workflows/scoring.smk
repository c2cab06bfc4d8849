# Scoring with both predictors: the TSSs of the test chromosomes as BED regions.


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
        bed=f"{RESULTS}/score/heldout_tss.bed",
        model=f"{RESULTS}/{{task}}/model/config.json",
        fasta=rules.demo_reference.output.fasta,
    output:
        f"{RESULTS}/score/{{task}}_heldout_tss.tsv",
    wildcard_constraints:
        task="promoter|chromatin",
    log:
        f"{RESULTS}/logs/score_{{task}}.log",
    threads: 2
    resources:
        mem_mb=4000,
    shell:
        "genobird -q score --model $(dirname {input.model}) --bed {input.bed}"
        " --reference {input.fasta} --out {output} > {log} 2>&1"
