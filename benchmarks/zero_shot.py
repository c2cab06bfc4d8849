"""Zero-shot: does the pretrained model tell real promoters from DeePromoter negatives by
likelihood alone, better than a Markov model of the same DNA?

    python benchmarks/zero_shot.py --results results/human-mini --task epdnew_tata

A DeePromoter negative keeps 8 of its promoter's 20 segments and replaces the other 12
with uniform random bases, so a model that has learned what genomic DNA looks like
should find negatives less likely, without any labelled training. For every window of the
task's data set (`RESULTS/tasks/TASK/data.h5`) this scores

1. genobird: bits per bp under the pretraining model (`RESULTS/pretrain/model`), every
   piece masked once (stride 7), both strands averaged (`genobird likelihood`);
2. order-k Markov models of the DNA the model was pretrained on (`RESULTS/corpus/
   train.txt`, first pass; both strands, add-1 smoothing), the order chosen on the
   validation split's AUROC.

Each score becomes a probability through a one-feature logistic regression fitted on the
training split (its only use of labels), and the test split's metrics are printed beside
the fine-tuned model and the k-mer LR of the same results folder, with paired bootstrap
intervals of genobird minus the Markov model (`genobird baseline compare`'s).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from genobird.baselines.markov import (
    dna_codes,
    fit_counts,
    read_dna,
    reverse_complement_codes,
    sequence_bits,
)
from genobird.likelihood import LikelihoodScorer
from genobird.tasks.compare import Predictions, describe_difference, paired_bootstrap
from genobird.tasks.data import read_split
from genobird.tasks.metrics import best_f1_threshold, binary_metrics

SPLITS = ("train", "valid", "test")
MARKOV_ORDERS = (2, 4, 6, 8, 10)
MARKOV_ALPHA = 1.0


def genobird_bits(model_dir: Path, sequences: dict, stride: int) -> dict:
    scorer = LikelihoodScorer(model_dir, "auto", stride=stride)
    print(f"scoring {sum(map(len, sequences.values())):,} windows with {model_dir}")
    return {
        split: scorer.score(seqs)["bits_per_bp"].to_numpy() for split, seqs in sequences.items()
    }


def markov_bits(train_dna: list[np.ndarray], sequences: dict, orders) -> dict[int, dict]:
    """Bits per bp of every window under each order, both strands averaged."""
    counts = fit_counts(train_dna, max(orders), both_strands=True)
    result = {}
    for order in orders:
        result[order] = {}
        for split, seqs in sequences.items():
            codes = [dna_codes(s) for s in seqs]
            result[order][split] = np.array([
                (sequence_bits(counts, c, order, MARKOV_ALPHA)
                 + sequence_bits(counts, reverse_complement_codes(c), order, MARKOV_ALPHA))
                / 2 / max(1, int((c < 4).sum()))
                for c in codes
            ])  # fmt: skip
    return result


def calibrated(bits: dict, labels: dict) -> dict:
    """Probabilities of each split from -bits per bp, by a logistic fit on train."""
    from sklearn.linear_model import LogisticRegression

    fit = LogisticRegression().fit(-bits["train"][:, None], labels["train"])
    return {split: fit.predict_proba(-values[:, None])[:, 1] for split, values in bits.items()}


def summary(labels: dict, probabilities: dict) -> dict:
    test = binary_metrics(labels["test"], probabilities["test"])
    threshold = best_f1_threshold(labels["valid"], probabilities["valid"])
    tuned = binary_metrics(labels["test"], probabilities["test"], threshold)
    valid_auroc = binary_metrics(labels["valid"], probabilities["valid"])["auroc"]
    return {**{k: test[k] for k in ("auroc", "f1", "mcc")}, "f1_at_valid_threshold": tuned["f1"],
            "valid_auroc": valid_auroc}  # fmt: skip


def fitted_rows(results: Path, task: str) -> dict:
    """The fine-tuned model's and the classifier baselines' test metrics, where run."""
    rows = {}
    folder = results / "tasks" / task
    runs = {"genobird fine-tuned": folder, "k-mer LR": folder / "baselines" / "kmer-lr",
            "CNN": folder / "baselines" / "cnn"}  # fmt: skip
    for name, run in runs.items():
        path = run / "report" / "metrics.json"
        if path.is_file():
            metrics = json.loads(path.read_text())
            rows[name] = {
                k: metrics.get(k) for k in ("auroc", "f1", "mcc", "f1_at_valid_threshold")
            }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, required=True, help="a pipeline results folder")
    parser.add_argument("--task", default="epdnew_tata", help="a promoter sequence task of it")
    parser.add_argument("--stride", type=int, default=7)
    parser.add_argument("--out", type=Path, help="also write the figures as JSON")
    args = parser.parse_args()
    data = args.results / "tasks" / args.task / "data.h5"
    model = args.results / "pretrain" / "model"
    corpus = args.results / "corpus" / "train.txt"
    for path in (data, model / "config.json", corpus):
        if not path.exists():
            raise SystemExit(f"{path} is missing: run the pipeline of {args.results} first")
    sequences, labels = {}, {}
    for split in SPLITS:
        sequences[split], split_labels = read_split(data, split)
        labels[split] = split_labels[:, 0].astype(int)
    rows = {}
    genobird = calibrated(genobird_bits(model, sequences, args.stride), labels)
    rows["genobird zero-shot"] = summary(labels, genobird)
    markov_by_order = markov_bits(read_dna(corpus), sequences, MARKOV_ORDERS)
    markov = {order: calibrated(bits, labels) for order, bits in markov_by_order.items()}
    by_order = {order: summary(labels, probs) for order, probs in markov.items()}
    best = max(by_order, key=lambda order: by_order[order]["valid_auroc"])
    for order, row in by_order.items():
        rows[f"order-{order} Markov zero-shot" + (" (chosen)" if order == best else "")] = row
    rows.update(fitted_rows(args.results, args.task))
    print(f"\n{args.task}: test split, {len(labels['test'])} windows")
    print(
        "| model | AUROC | F1 | MCC | F1 (valid threshold) |\n| --- | ---: | ---: | ---: | ---: |"
    )
    for name, row in rows.items():
        print(f"| {name} | {row['auroc']:.3f} | {row['f1']:.3f} | {row['mcc']:.3f} | "
              f"{row['f1_at_valid_threshold']:.3f} |")  # fmt: skip
    pair = paired_bootstrap(
        Predictions(labels["test"], genobird["test"], "same", data),
        Predictions(labels["test"], markov[best]["test"], "same", data),
    )
    for name, row in pair["metrics"].items():
        print(f"genobird zero-shot - order-{best} Markov, {name}: {describe_difference(row)}")
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "paired": pair}, indent=2))


if __name__ == "__main__":
    main()
