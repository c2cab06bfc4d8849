# Chromatin-profile prediction. Demo: genome bins labelled from the demo's peak BEDs.
# Downloaded reference: DeepSEA's 919 labels (train/valid/test .mat) around its published
# 200 bp bins, with the paper's longer context cut from the genome. Then fine-tuning.

CHROMATIN = config.get("chromatin")
# Where DeepSEA's archives put their files once unpacked.
DEEPSEA_SPLITS = ("train", "valid", "test")
DEEPSEA_MAT = "deepsea_train/{split}.mat"
DEEPSEA_BINS = "allTFs.pos.bed"


if HAS_CHROMATIN and (DEMO or OWN_FASTA):

    rule chromatin_data:
        input:
            features=FEATURES,
            fasta=GENOME,
        output:
            f"{RESULTS}/chromatin/data.h5",
        params:
            context=CHROMATIN["context"],
            bins=f"--max-bins {CHROMATIN['max_bins']}" if "max_bins" in CHROMATIN else "",
            valid=" ".join(SPLIT["valid_chromosomes"]),
            test=" ".join(SPLIT["test_chromosomes"]),
        log:
            f"{RESULTS}/logs/chromatin_data.log",
        threads: 1
        resources:
            mem_mb=4000,
        conda:
            ENV
        shell:
            "genobird -q dataset chromatin --features {input.features} --reference {input.fasta}"
            " --out {output} --context-bp {params.context} {params.bins}"
            " --valid-chromosomes {params.valid} --test-chromosomes {params.test} > {log} 2>&1"

elif HAS_CHROMATIN:

    rule chromatin_data:
        input:
            bundle=DOWNLOADED["deepsea_bundle"],
            bins=DOWNLOADED["deepsea_coordinates"],
            fasta=GENOME,
        output:
            f"{RESULTS}/chromatin/data.h5",
        params:
            mats=lambda wildcards, input: " ".join(
                os.path.join(input.bundle, DEEPSEA_MAT.format(split=split))
                for split in DEEPSEA_SPLITS
            ),
            splits=" ".join(DEEPSEA_SPLITS),
            bins=lambda wildcards, input: os.path.join(input.bins, DEEPSEA_BINS),
            features=(
                f"--features {CHROMATIN['deepsea_features']}"
                if "deepsea_features" in CHROMATIN
                else ""
            ),
            context=CHROMATIN["context"],
        log:
            f"{RESULTS}/logs/chromatin_data.log",
        threads: 1
        resources:
            mem_mb=32000,  # train.mat's labels and sequences are read whole
        conda:
            ENV
        shell:
            "genobird -q dataset deepsea --mat {params.mats} --split {params.splits}"
            " --coordinates {params.bins} --reference {input.fasta} {params.features}"
            " --context-bp {params.context} --out {output} > {log} 2>&1"


if HAS_CHROMATIN:

    rule chromatin_finetune:
        input:
            data=f"{RESULTS}/chromatin/data.h5",
            pretrained=rules.pretrain.output.model,
        output:
            metrics=f"{RESULTS}/chromatin/report/metrics.json",
            model=f"{RESULTS}/chromatin/model/config.json",
        params:
            output=lambda wildcards, output: os.path.dirname(os.path.dirname(output.model)),
            tokens=CHROMATIN["max_tokens"],
            steps=CHROMATIN["max_steps"],
            rate=CHROMATIN["learning_rate"],
            batch=CHROMATIN["batch_size"],
            options=finetune_options(CHROMATIN),
        log:
            f"{RESULTS}/logs/chromatin_finetune.log",
        threads: 2
        priority: CRITICAL_PATH
        resources:
            mem_mb=8000,
            gpu=FINETUNE_GPUS,
        conda:
            ENV
        shell:
            "genobird -q finetune chromatin --data {input.data} --out {params.output}"
            " --restart-changed --model $(dirname {input.pretrained}) --max-tokens {params.tokens}"
            " --max-steps {params.steps} --learning-rate {params.rate} --batch-size {params.batch}"
            " {params.options} > {log} 2>&1"
