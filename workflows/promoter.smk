# Promoter region prediction: windows around the TSSs, DeePromoter negatives, fine-tuning.

SPLIT = config.get("split")
PROMOTER = config.get("promoter")
# the motifs the promoter model reads, where the config asks for them (promoter.motifs)
PROMOTER_MOTIF_OUTPUTS = (
    [f"{RESULTS}/promoter/motifs/motifs.json"] if HAS_PROMOTER and "motifs" in PROMOTER else []
)


if HAS_PROMOTER:

    rule promoter_data:
        input:
            tss=TSS,
            fasta=GENOME,
        output:
            f"{RESULTS}/promoter/data.h5",
        params:
            upstream=PROMOTER["upstream"],
            downstream=PROMOTER["downstream"],
            valid=" ".join(SPLIT["valid_chromosomes"]),
            test=" ".join(SPLIT["test_chromosomes"]),
            negatives=training_negatives_option(PROMOTER),
        log:
            f"{RESULTS}/logs/promoter_data.log",
        threads: 1
        resources:
            mem_mb=4000,
        conda:
            ENV
        shell:
            "genobird -q dataset promoter --tss {input.tss} --reference {input.fasta} --out {output}"
            " --upstream-bp {params.upstream} --downstream-bp {params.downstream}"
            " --valid-chromosomes {params.valid} --test-chromosomes {params.test}"
            " {params.negatives} > {log} 2>&1"


    rule promoter_finetune:
        input:
            data=f"{RESULTS}/promoter/data.h5",
            pretrained=rules.pretrain.output.model,
        output:
            metrics=f"{RESULTS}/promoter/report/metrics.json",
            model=f"{RESULTS}/promoter/model/config.json",
        params:
            output=lambda wildcards, output: os.path.dirname(os.path.dirname(output.model)),
            tokens=PROMOTER["max_tokens"],
            steps=PROMOTER["max_steps"],
            rate=PROMOTER["learning_rate"],
            batch=PROMOTER["batch_size"],
            options=finetune_options(PROMOTER),
        log:
            f"{RESULTS}/logs/promoter_finetune.log",
        threads: 2
        priority: CRITICAL_PATH
        resources:
            mem_mb=8000,
            gpu=FINETUNE_GPUS,
        conda:
            ENV
        shell:
            "genobird -q finetune promoter --data {input.data} --out {params.output}"
            " --restart-changed --model $(dirname {input.pretrained}) --max-tokens {params.tokens}"
            " --max-steps {params.steps} --learning-rate {params.rate} --batch-size {params.batch}"
            " {params.options} > {log} 2>&1"


if PROMOTER_MOTIF_OUTPUTS:

    rule promoter_motifs:
        input:
            model=rules.promoter_finetune.output.model,
            data=f"{RESULTS}/promoter/data.h5",
            known=[KNOWN_PROMOTER_MOTIFS] if KNOWN_PROMOTER_MOTIFS else [],
        output:
            PROMOTER_MOTIF_OUTPUTS[0],
        params:
            model=lambda wildcards, input: os.path.dirname(input.model),
            out=lambda wildcards, output: os.path.dirname(output[0]),
            options=motif_options(PROMOTER["motifs"]),
            known=lambda wildcards, input: f"--known {input.known}" if input.known else "",
        log:
            f"{RESULTS}/logs/promoter_motifs.log",
        threads: 2
        resources:
            mem_mb=6000,
        conda:
            ENV
        shell:
            "genobird -q motifs --model {params.model} --data {input.data} {params.options}"
            " {params.known} --out {params.out} > {log} 2>&1"
