# Promoter region prediction: windows around the TSSs, DeePromoter negatives, fine-tuning.

PROMOTER = config["promoter"]
SPLIT = config["split"]


rule promoter_data:
    input:
        tss=rules.demo_reference.output.tss,
        fasta=rules.demo_reference.output.fasta,
    output:
        f"{RESULTS}/promoter/data.h5",
    params:
        upstream=PROMOTER["upstream"],
        downstream=PROMOTER["downstream"],
        valid=" ".join(SPLIT["valid_chromosomes"]),
        test=" ".join(SPLIT["test_chromosomes"]),
    log:
        f"{RESULTS}/logs/promoter_data.log",
    threads: 1
    resources:
        mem_mb=2000,
    shell:
        "genobird -q dataset promoter --tss {input.tss} --reference {input.fasta} --out {output}"
        " --upstream {params.upstream} --downstream {params.downstream}"
        " --valid-chromosomes {params.valid} --test-chromosomes {params.test} > {log} 2>&1"


rule promoter_finetune:
    input:
        data=f"{RESULTS}/promoter/data.h5",
        pretrained=rules.pretrain.output.model,
    output:
        metrics=f"{RESULTS}/promoter/report/metrics.json",
        model=f"{RESULTS}/promoter/model/config.json",
    params:
        output=f"{RESULTS}/promoter",
        tokens=PROMOTER["max_tokens"],
        steps=PROMOTER["max_steps"],
    log:
        f"{RESULTS}/logs/promoter_finetune.log",
    threads: 2
    resources:
        mem_mb=8000,
    shell:
        "genobird -q finetune promoter --data {input.data} --output {params.output}"
        " --pretrained $(dirname {input.pretrained}) --max-tokens {params.tokens}"
        " --max-steps {params.steps} > {log} 2>&1"
