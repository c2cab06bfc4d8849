"""What genobird learns on real DNA, beside simple baselines run on the same data here.

    python benchmarks/learning.py --results results/human-mini            # after the pipeline
    python benchmarks/learning.py --results results/human-mini --tasks tata gue0 gue1 \
        --from-scratch --steps 3000 --eval-every 500 --patience 3

1. Bits per base on the held-out chromosomes: the pretrained model's BPC (masked tokens,
   held-out instances) against the order-k Markov baseline on the same held-out DNA
   (`genobird baseline markov`, k chosen on validation DNA), from the pipeline results,
   and masked-token accuracy by context length (the same masked tokens seen through
   windows of 8-128 tokens tiled over the held-out instances, then 64-512 centred; each
   length's gain over the previous one paired token by token, with a 95% interval).
2. Classification on real tasks from ../shared/data (EPDnew TATA promoters with
   DeePromoter negatives; GUE human TF binding 0-4): genobird fine-tuned from the
   pretrained model (and, with --from-scratch, the same recipe from random weights),
   k-mer (3-6) logistic regression and the small CNN, all on the same splits, test
   metrics printed as a table with genobird / baseline ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from genobird.cli import main as genobird

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GENOBIRD_SHARED_DATA", REPO.parent / "shared" / "data"))
GUE = SHARED / "tasks" / "gue_human_tf"
TASKS = {
    "tata": [
        "dataset",
        "promoter-sequences",
        "--positives",
        str(SHARED / "promoters" / "hs_TATA_promoters_300bp.txt"),
    ]
}
TASKS.update(
    {
        f"gue{i}": [
            "dataset",
            "classify",
            "--input",
            str(GUE / str(i) / "train.csv"),
            "--valid",
            str(GUE / str(i) / "dev.csv"),
            "--test",
            str(GUE / str(i) / "test.csv"),
        ]
        for i in range(5)
    }
)
# DNABERT-2 (117 M parameters) test MCC on GUE human TF 0-4, as published
DNABERT2_MCC = {"gue0": 0.7199, "gue1": 0.7606, "gue2": 0.6652, "gue3": 0.5854, "gue4": 0.7743}


def run(args: list[str]) -> None:
    code = genobird(["-q", *args])
    if code:
        raise SystemExit(f"genobird {' '.join(args)} failed with exit code {code}")


def metrics(folder: Path) -> dict:
    return json.loads((folder / "report" / "metrics.json").read_text())


def bits_per_base(results: Path, model: Path) -> list[tuple]:
    """genobird's held-out BPC, scored here (every scored token shown as [MASK]), beside
    the pipeline's Markov baseline on the same held-out DNA."""
    from genobird.training.context import evaluate_saved_model

    held_out = evaluate_saved_model(model, results / "corpus" / "instances-heldout")
    markov = json.loads((results / "baselines" / "markov.json").read_text())
    bpc = held_out["bits_per_character"]
    return [
        ("genobird (held-out masked tokens)", bpc, bpc / markov["bits_per_bp"]),
        (f"order-{markov['order']} Markov, alpha {markov['alpha']:g}", markov["bits_per_bp"], 1.0),
    ]


def context_curves(results: Path, model: Path, short_windows: int = 10_000) -> None:
    """Masked-token accuracy and BPC against context length, two ranges: short windows
    tiled over every held-out instance (at most `short_windows`: more score more tokens
    and narrow the intervals), long ones centred on it."""
    from genobird.report.sections.pretraining import context_gain_text
    from genobird.training.context import mlm_accuracy_by_context

    instances = results / "corpus" / "instances-heldout"
    print("\nMasked-token accuracy by context (the same masked tokens at every length; gains")
    print("over the previous length paired token by token, with 95% intervals)\n")
    print(
        "| tokens | MLM accuracy | gain [95%] | bits per bp | bits saved [95%] | masked | windows |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for lengths, windows in (([8, 16, 32, 64, 128], short_windows), ([64, 128, 256, 512], 4_000)):
        for row in mlm_accuracy_by_context(model, instances, lengths, max_windows=windows):
            saved = ""
            if "bits_gain" in row:
                low, high = row["bits_gain_ci95"]
                saved = f"{row['bits_gain']:+.4f} [{low:+.4f}, {high:+.4f}]"
            cells = (
                row["context_length"],
                f"{row['mlm_accuracy']:.4f}",
                context_gain_text(row),
                f"{row['bits_per_character']:.4f}",
                saved,
                row["masked_tokens"],
                row["windows"],
            )
            print("| " + " | ".join(map(str, cells)) + " |")


def classification(task: str, pretrained: Path, work: Path, options) -> dict:
    """{model: test metrics} for one task; each run's seconds are recorded too."""
    folder = work / task
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "data.h5"
    dataset = list(TASKS[task])
    if options.training_negatives != 1:  # main() allows it with tata only
        dataset += ["--training-negatives", str(options.training_negatives)]
    cached_data(dataset, data)
    finetune = [
        "--max-steps",
        str(options.steps),
        "--learning-rate",
        str(options.learning_rate),
        "--batch-size",
        str(options.batch_size),
        "--eval-every",
        str(options.eval_every),
        "--patience",
        str(options.patience),
        "--pooling",
        options.pooling,
    ]
    if options.dropout is not None:
        finetune += ["--dropout", str(options.dropout)]
    if options.pos_weight is not None:
        finetune += ["--pos-weight", str(options.pos_weight)]
    if options.rc_augment:
        finetune += ["--rc-augment", "--rc-average"]
    if options.seed:  # seed 0 is finetune's default: keeps earlier runs' records valid
        finetune += ["--seed", str(options.seed)]
    kind = "promoter" if task == "tata" else "classify"
    runs = {
        "genobird": ["finetune", kind, "--data", str(data), "--model", str(pretrained), *finetune],
        "kmer-lr": ["baseline", "kmer-lr", "--data", str(data)],
        "cnn": ["baseline", "cnn", "--data", str(data), "--max-minutes", str(options.cnn_minutes)],
    }
    if options.from_scratch:
        runs["genobird, from scratch"] = [
            "finetune",
            kind,
            "--data",
            str(data),
            "--from-scratch",
            "--tokenizer",
            str(pretrained),
            "--model",
            str(pretrained),
            *finetune,
        ]
    results = {}
    for name, command in runs.items():
        output = folder / name.replace(", ", "-").replace(" ", "-")
        cached_run(command, output)
        results[name] = {**metrics(output), "seconds": float((output / "seconds.txt").read_text())}
    return results


def cached_data(command: list[str], data: Path) -> None:
    """Build the data set unless it is there; every run in the folder uses it, so one
    built by another command (other training negatives) is an error."""
    record = data.with_suffix(".command.json")
    if data.is_file():
        refuse_other_command(record, command, data)
        return
    run([*command, "--out", str(data)])
    record.write_text(json.dumps(command) + "\n")


def cached_run(command: list[str], output: Path) -> None:
    """Run `command` into `output` unless a finished run is there. Its command is recorded
    (command.json), and a finished run made with other settings (steps, dropout...) is an
    error rather than a silently reused figure; runs from before the record are reused."""
    record = output / "command.json"
    if (output / "report" / "metrics.json").is_file():
        refuse_other_command(record, command, output)
        return
    started = time.perf_counter()
    run([*command, "--out", str(output)])
    (output / "seconds.txt").write_text(f"{time.perf_counter() - started:.1f}\n")
    record.write_text(json.dumps(command) + "\n")


def refuse_other_command(record: Path, command: list[str], made: Path) -> None:
    """A cached file or run made by another command is an error, not a reused figure."""
    if record.is_file() and json.loads(record.read_text()) != command:
        raise SystemExit(
            f"{made} was made by another command ({record}); give another --work folder"
        )


def print_table(task: str, results: dict) -> None:
    print(f"\n{task} (test split)\n")
    print("| model | MCC | F1 | F1 (valid threshold) | AUROC | seconds | MCC / k-mer LR |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    reference = results["kmer-lr"]["mcc"]
    for name, report in results.items():
        print(
            f"| {name} | {report['mcc']:.4f} | {report['f1']:.4f} | "
            f"{report.get('f1_at_valid_threshold', float('nan')):.4f} | {report['auroc']:.4f} | "
            f"{report['seconds']:.0f} | {report['mcc'] / reference:.2f}x |"
        )
    if task in DNABERT2_MCC:
        print(f"| DNABERT-2 (published) | {DNABERT2_MCC[task]:.4f} | | | | | |")


def print_gue_means(gue: dict) -> None:
    """The issue's GUE targets: genobird at least the k-mer LR on each task (the tables
    above) and at least the CNN on the mean MCC over the tasks run."""
    print(f"\nMean test MCC over {', '.join(gue)}\n")
    print("| model | mean MCC | tasks at least the k-mer LR |")
    print("| --- | ---: | ---: |")
    for name in next(iter(gue.values())):
        mean = sum(results[name]["mcc"] for results in gue.values()) / len(gue)
        ahead = sum(results[name]["mcc"] >= results["kmer-lr"]["mcc"] for results in gue.values())
        print(f"| {name} | {mean:.4f} | {ahead} of {len(gue)} |")
    mean = sum(DNABERT2_MCC[task] for task in gue) / len(gue)
    print(f"| DNABERT-2 (published) | {mean:.4f} | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--results",
        type=Path,
        required=True,
        help="a pipeline results folder (pretrain/model, baselines/markov.json)",
    )
    parser.add_argument("--pretrained", type=Path, help="default: RESULTS/pretrain/model")
    parser.add_argument("--work", type=Path, default=Path("results/benchmark-learning"))
    parser.add_argument(
        "--tasks",
        nargs="*",
        default=["tata", "gue0"],
        choices=sorted(TASKS),
        help="classification tasks (none: bits per base only)",
    )
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--learning-rate", type=float, default=3e-4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--patience", type=int, default=3)
    parser.add_argument("--pooling", choices=["cls", "mean"], default="cls")
    parser.add_argument("--cnn-minutes", type=float, default=5.0)
    parser.add_argument("--dropout", type=float, help="fine-tuning dropout (default: the model's)")
    parser.add_argument("--pos-weight", type=float, help="weight of a positive in the loss")
    parser.add_argument(
        "--rc-augment",
        action="store_true",
        help="tata: train on a random strand, score both (GUE always)",
    )
    parser.add_argument("--seed", type=int, default=0, help="fine-tuning seed (genobird runs)")
    parser.add_argument(
        "--training-negatives",
        type=int,
        default=1,
        help="tata: DeePromoter negatives per training positive",
    )
    parser.add_argument(
        "--from-scratch",
        action="store_true",
        help="also fine-tune the same shape from random weights",
    )
    parser.add_argument(
        "--context", action="store_true", help="also print masked-token accuracy by context length"
    )
    parser.add_argument(
        "--context-windows",
        type=int,
        default=10_000,
        help="--context: at most this many windows of 8-128 tokens",
    )
    options = parser.parse_args()
    if options.training_negatives != 1 and set(options.tasks) - {"tata"}:
        parser.error("--training-negatives applies to the tata task only")
    if not SHARED.is_dir():
        raise SystemExit(f"real data not found at {SHARED} (set GENOBIRD_SHARED_DATA)")
    pretrained = options.pretrained or options.results / "pretrain" / "model"
    if (options.results / "baselines" / "markov.json").is_file():
        print("Bits per base on the held-out chromosomes\n")
        print("| model | bits per bp | / Markov |")
        print("| --- | ---: | ---: |")
        for name, bits, ratio in bits_per_base(options.results, pretrained):
            print(f"| {name} | {bits:.4f} | {ratio:.3f} |")
    if options.context:
        context_curves(options.results, pretrained, options.context_windows)
    gue = {}
    for task in options.tasks:
        results = classification(task, pretrained, options.work, options)
        print_table(task, results)
        if task in DNABERT2_MCC:
            gue[task] = results
    if len(gue) > 1:
        print_gue_means(gue)


if __name__ == "__main__":
    main()
