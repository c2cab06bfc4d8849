# The reference genome: the embedded demo genome, generated deterministically.


rule demo_reference:
    output:
        fasta=f"{RESULTS}/reference/genome.fa",
        tss=f"{RESULTS}/reference/tss.bed",
        features=f"{RESULTS}/reference/features.tsv",
        samples=f"{RESULTS}/reference/samples.fa",
        variants=f"{RESULTS}/reference/variants.vcf",
        manifest=f"{RESULTS}/reference/manifest.json",
    params:
        outdir=f"{RESULTS}/reference",
        seed=config["reference"]["seed"],
        size=config["reference"]["size_mb"],
    log:
        f"{RESULTS}/logs/demo_reference.log",
    threads: 1
    resources:
        mem_mb=2000,
    shell:
        "genobird demo-reference {params.outdir} --seed {params.seed} --size-mb {params.size}"
        " > {log} 2>&1"
