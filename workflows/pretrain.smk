# MLM + NSP pretraining; resumes from its own checkpoints when rerun after a stop.

PRETRAIN = config["pretrain"]
# One process per GPU through torchrun (DistributedDataParallel); plain genobird on CPU.
LAUNCH = (
    f"torchrun --standalone --nproc_per_node {PRETRAIN['gpus']} -m genobird.cli"
    if PRETRAIN["gpus"] > 0
    else "genobird"
)
# Fine-tuning and scoring run on one GPU where pretraining had any.
FINETUNE_GPUS = min(1, PRETRAIN["gpus"])


rule pretrain:
    input:
        config=PRETRAIN["config"],
        train=f"{RESULTS}/corpus/instances-train/manifest.json",
        heldout=f"{RESULTS}/corpus/instances-heldout/manifest.json",
        tokenizer=f"{RESULTS}/corpus/tokenizer.model",
    output:
        model=f"{RESULTS}/pretrain/model/config.json",
    params:
        output=lambda wildcards, output: os.path.dirname(os.path.dirname(output.model)),
        steps=PRETRAIN["max_steps"],
        launch=LAUNCH,
    log:
        f"{RESULTS}/logs/pretrain.log",
    threads: 2
    priority: CRITICAL_PATH
    resources:
        mem_mb=8000,
        gpu=PRETRAIN["gpus"],
    conda:
        ENV
    shell:
        "{params.launch} -q pretrain --config {input.config} --out {params.output}"
        " --train $(dirname {input.train}) --eval $(dirname {input.heldout})"
        " --tokenizer {input.tokenizer} --max-steps {params.steps} > {log} 2>&1"
