# Baselines on the same data as genobird, for the report to set side by side: an
# order-k Markov model's bits per base on the held-out chromosomes (beside the pretrained
# model's BPC), and k-mer logistic regression / a small CNN on every fine-tuning data set
# (same splits, same metrics.json as genobird finetune).

BASELINES = config.get("baselines")
# every fine-tuning data set: RESULTS-relative folder -> its data.h5
TASK_FOLDERS = [task for task, on in (("promoter", HAS_PROMOTER), ("chromatin", HAS_CHROMATIN)) if on]
TASK_FOLDERS += [f"tasks/{name}" for name in SEQUENCE_TASKS]
BASELINE_OUTPUTS = []

if BASELINES:
    BASELINE_OUTPUTS = [f"{RESULTS}/baselines/markov.json"] + [
        f"{RESULTS}/{folder}/baselines/{kind}/report/metrics.json"
        for folder in TASK_FOLDERS
        for kind in BASELINES["classifiers"]
    ]

    rule markov_baseline:
        input:
            train=f"{RESULTS}/corpus/train.txt",
            heldout=f"{RESULTS}/corpus/heldout.txt",
        output:
            f"{RESULTS}/baselines/markov.json",
        params:
            orders=BASELINES["markov_orders"],
        log:
            f"{RESULTS}/logs/markov_baseline.log",
        threads: 1
        resources:
            mem_mb=4000,
        conda:
            ENV
        shell:
            "genobird -q baseline markov --train {input.train} --heldout {input.heldout}"
            " --orders {params.orders} --out {output} > {log} 2>&1"

    rule classifier_baseline:
        input:
            f"{RESULTS}/{{folder}}/data.h5",
        output:
            f"{RESULTS}/{{folder}}/baselines/{{kind}}/report/metrics.json",
        params:
            output=lambda wildcards, output: os.path.dirname(os.path.dirname(output[0])),
            budget=lambda wildcards: " ".join(
                f"{flag} {BASELINES[key]}"
                for key, flag in (("cnn_max_epochs", "--max-epochs"),
                                  ("cnn_max_minutes", "--max-minutes"))
                if wildcards.kind == "cnn" and key in BASELINES
            ),
        wildcard_constraints:
            folder="|".join(TASK_FOLDERS) or "none",
            kind="kmer-lr|cnn",
        log:
            f"{RESULTS}/logs/baseline_{{kind}}/{{folder}}.log",
        # the CNN trains with torch on both cores; the k-mer LR fits one model at a time
        threads: lambda wildcards: 2 if wildcards.kind == "cnn" else 1
        resources:
            mem_mb=8000,
        conda:
            ENV
        shell:
            "genobird -q baseline {wildcards.kind} --data {input} --out {params.output}"
            " {params.budget} > {log} 2>&1"
