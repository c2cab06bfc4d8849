# Chromatin-profile prediction: genome bins labelled from the peak BEDs, fine-tuning.

CHROMATIN = config["chromatin"]


rule chromatin_data:
    input:
        features=rules.demo_reference.output.features,
        fasta=rules.demo_reference.output.fasta,
    output:
        f"{RESULTS}/chromatin/data.h5",
    params:
        context=CHROMATIN["context"],
        bins=CHROMATIN["max_bins"],
        valid=" ".join(SPLIT["valid_chromosomes"]),
        test=" ".join(SPLIT["test_chromosomes"]),
    log:
        f"{RESULTS}/logs/chromatin_data.log",
    threads: 1
    resources:
        mem_mb=4000,
    shell:
        "genobird -q dataset chromatin --features {input.features} --reference {input.fasta}"
        " --out {output} --context {params.context} --max-bins {params.bins}"
        " --valid-chromosomes {params.valid} --test-chromosomes {params.test} > {log} 2>&1"


rule chromatin_finetune:
    input:
        data=f"{RESULTS}/chromatin/data.h5",
        pretrained=rules.pretrain.output.model,
    output:
        metrics=f"{RESULTS}/chromatin/report/metrics.json",
        model=f"{RESULTS}/chromatin/model/config.json",
    params:
        output=f"{RESULTS}/chromatin",
        tokens=CHROMATIN["max_tokens"],
        steps=CHROMATIN["max_steps"],
    log:
        f"{RESULTS}/logs/chromatin_finetune.log",
    threads: 2
    resources:
        mem_mb=8000,
    shell:
        "genobird -q finetune chromatin --data {input.data} --output {params.output}"
        " --pretrained $(dirname {input.pretrained}) --max-tokens {params.tokens}"
        " --max-steps {params.steps} --learning-rate 5e-4 > {log} 2>&1"
