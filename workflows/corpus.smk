# Documents (paper appendix F.1), the BPE vocabulary and MLM+NSP instances.

CORPUS = config["corpus"]


rule documents:
    input:
        fasta=GENOME_FILES,
    output:
        f"{RESULTS}/corpus/{{part}}.txt",
    params:
        chromosomes=lambda wildcards: " ".join(CORPUS[f"{wildcards.part}_chromosomes"]),
        passes=lambda wildcards: CORPUS["passes"] if wildcards.part == "train" else 1,
        seed=CORPUS["seed"],
    wildcard_constraints:
        part="train|heldout",
    log:
        f"{RESULTS}/logs/documents_{{part}}.log",
    threads: 16  # Snakemake lowers it to --cores
    priority: CRITICAL_PATH
    resources:
        mem_mb=2000,
    conda:
        ENV
    shell:
        "genobird -q corpus documents --reference {input.fasta} --out {output}"
        " --chromosomes {params.chromosomes} --passes {params.passes} --seed {params.seed}"
        " --threads {threads} > {log} 2>&1"


rule vocabulary:
    input:
        train=f"{RESULTS}/corpus/train.txt",
        heldout=f"{RESULTS}/corpus/heldout.txt",
    output:
        f"{RESULTS}/corpus/tokenizer.model",
    params:
        size=CORPUS["vocab_size"],
        seed=CORPUS["seed"],
    log:
        f"{RESULTS}/logs/vocabulary.log",
    threads: 16  # Snakemake lowers it to --cores
    priority: CRITICAL_PATH
    resources:
        mem_mb=4000,
    conda:
        ENV
    shell:
        "genobird -q vocab train --documents {input.train} --out {output}"
        " --vocab-size {params.size} --heldout {input.heldout} --seed {params.seed}"
        " --threads {threads} > {log} 2>&1"


rule instances:
    input:
        documents=f"{RESULTS}/corpus/{{part}}.txt",
        tokenizer=rules.vocabulary.output,
    output:
        manifest=f"{RESULTS}/corpus/instances-{{part}}/manifest.json",
    params:
        outdir=lambda wildcards, output: os.path.dirname(output.manifest),
        length=CORPUS["max_seq_length"],
        seed=CORPUS["seed"],
    wildcard_constraints:
        part="train|heldout",
    log:
        f"{RESULTS}/logs/instances_{{part}}.log",
    threads: 16  # Snakemake lowers it to --cores
    priority: CRITICAL_PATH
    resources:
        mem_mb=4000,
    conda:
        ENV
    shell:
        "genobird -q corpus instances --documents {input.documents} --tokenizer {input.tokenizer}"
        " --out {params.outdir} --max-tokens {params.length} --seed {params.seed}"
        " --threads {threads} > {log} 2>&1"
