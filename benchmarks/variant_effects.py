"""Zero-shot variant effects on real labels: ClinVar pathogenic against benign SNVs,
scored by human-mini's language model and by a Markov model of the same training DNA.

    python benchmarks/variant_effects.py --model results/human-mini/pretrain/model \\
        --train results/human-mini/corpus/train.txt \\
        --heldout results/human-mini/corpus/heldout.txt --out results/variant-effects

Both ClinVar files of ../shared/data/variants (release 2016-09-10; 320 SNVs on the hg19
pieces, 204 on GRCh38 chr20:0-10 Mb) are scored with `genobird likelihood --vcf`
(log2 P(ALT) - log2 P(REF) of the pieces that differ, 1 kb windows, both strands) and with
`genobird baseline markov --vcf` (the order chosen on validation DNA cut from the
training DNA; both strands). A lower score should mean pathogenic, so each model's
classifier is -score. Printed per file: AUROC and AUPRC with 95% bootstrap intervals
(2,000 resamples of the variants), genobird minus Markov paired over the same resamples,
and the same once more within genes: only the pathogenic-benign pairs of one gene are
ranked (STK11 alone is about 70% of the hg19 rows, so gene identity would otherwise
carry the figure), over the genes that have both labels.

Both files lie inside human-mini's pretraining DNA (hg19 chr19:0-3.1 Mb and GRCh38
chr20:0-10 Mb are among its training pieces): the model has read these sequences, though
never with labels.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
FILES = {
    "hg19 pieces": (
        SHARED / "variants" / "clinvar_20160910_hg19_pieces.vcf",
        [
            SHARED / "genome" / name
            for name in (
                "hg19_chr19_0-3119000_softmasked.fa",
                "hg19_chr20_0-2Mb.fa",
                "hg19_chr22_0-21Mb.fa.gz",
            )
        ],
    ),
    "GRCh38 chr20": (
        SHARED / "variants" / "clinvar_20160910_grch38_chr20_0-10Mb.vcf",
        [SHARED / "genome" / "grch38_chr20_chr21_0-10Mb.fa.gz"],
    ),
}
RESAMPLES = 2000


def genobird(*args) -> None:
    subprocess.run(
        [sys.executable, "-m", "genobird.cli", "-q", *map(str, args)], check=True, cwd=REPO
    )


def vcf_labels(path: Path) -> pd.DataFrame:
    """line, LABEL (1 pathogenic, 0 benign) and GENE of each VCF record."""
    rows = []
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if text.startswith("#") or not text.strip():
            continue
        info = dict(item.split("=", 1) for item in text.split("\t")[7].split(";") if "=" in item)
        rows.append({"line": number, "label": int(info["LABEL"]), "gene": info.get("GENE", "?")})
    return pd.DataFrame(rows)


def auroc(labels: np.ndarray, scores: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(labels, scores))


def auprc(labels: np.ndarray, scores: np.ndarray) -> float:
    from sklearn.metrics import average_precision_score

    return float(average_precision_score(labels, scores))


def within_gene_auroc(labels, scores, genes) -> float:
    """The share of (pathogenic, benign) pairs of one gene ranked right (ties half), over
    every gene that has both."""
    right = pairs = 0.0
    for gene in np.unique(genes):
        inside = genes == gene
        positive, negative = scores[inside & (labels == 1)], scores[inside & (labels == 0)]
        if len(positive) and len(negative):
            difference = positive[:, None] - negative[None, :]
            right += (difference > 0).sum() + 0.5 * (difference == 0).sum()
            pairs += difference.size
    return right / pairs if pairs else float("nan")


def bootstrap(table: pd.DataFrame, metric, seed: int = 0) -> dict:
    """Each model's figure and 95% interval, and genobird - Markov paired, over the
    same resamples of the variants."""
    rng = np.random.default_rng(seed)
    labels, genes = table["label"].to_numpy(), table["gene"].to_numpy()
    ours, theirs = -table["genobird"].to_numpy(), -table["markov"].to_numpy()
    draws = {"genobird": [], "markov": [], "difference": []}
    for _ in range(RESAMPLES):
        rows = rng.integers(0, len(table), len(table))
        if labels[rows].min() == labels[rows].max():
            continue
        a, b = (
            metric(labels[rows], ours[rows], genes[rows]),
            metric(labels[rows], theirs[rows], genes[rows]),
        )
        if np.isnan(a) or np.isnan(b):
            continue
        draws["genobird"].append(a)
        draws["markov"].append(b)
        draws["difference"].append(a - b)
    point = {"genobird": metric(labels, ours, genes), "markov": metric(labels, theirs, genes)}
    point["difference"] = point["genobird"] - point["markov"]
    return {
        name: (point[name], *np.percentile(values, [2.5, 97.5])) for name, values in draws.items()
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=REPO / "results/human-mini/pretrain/model")
    parser.add_argument(
        "--train", type=Path, nargs="+", default=[REPO / "results/human-mini/corpus/train.txt"]
    )
    parser.add_argument(
        "--heldout", type=Path, nargs="+", default=[REPO / "results/human-mini/corpus/heldout.txt"]
    )
    parser.add_argument("--out", type=Path, default=REPO / "results/variant-effects")
    parser.add_argument("--window-bp", type=int, default=1000)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name, (vcf, reference) in FILES.items():
        stem = args.out / name.replace(" ", "-")
        ours, theirs = Path(f"{stem}.genobird.tsv"), Path(f"{stem}.markov.tsv")
        if not ours.is_file():
            genobird(
                "likelihood",
                "--model",
                args.model,
                "--vcf",
                vcf,
                "--reference",
                *reference,
                "--window-bp",
                args.window_bp,
                "--out",
                ours,
            )
        if not theirs.is_file():
            genobird(
                "baseline",
                "markov",
                "--train",
                *args.train,
                "--heldout",
                *args.heldout,
                "--vcf",
                vcf,
                "--reference",
                *reference,
                "--window-bp",
                args.window_bp,
                "--scores",
                theirs,
            )
        table = vcf_labels(vcf)
        for model, path in (("genobird", ours), ("markov", theirs)):
            scores = pd.read_csv(path, sep="\t")[["line", "llr_bits"]]
            table = table.merge(scores.rename(columns={"llr_bits": model}), on="line")
        both = table.groupby("gene")["label"].nunique()
        shared_genes = table[table["gene"].isin(both[both == 2].index)]
        results[name] = {
            "variants": len(table),
            "pathogenic": int(table["label"].sum()),
            "auroc": bootstrap(table, lambda y, s, g: auroc(y, s)),
            "auprc": bootstrap(table, lambda y, s, g: auprc(y, s)),
            "within_gene_auroc": bootstrap(shared_genes, within_gene_auroc),
            "genes_with_both": int((both == 2).sum()),
            "variants_in_those_genes": len(shared_genes),
        }
        print_file(name, results[name])
    (args.out / "variant-effects.json").write_text(json.dumps(results, indent=2))
    return 0


def print_file(name: str, result: dict) -> None:
    print(
        f"{name}: {result['variants']} variants ({result['pathogenic']} pathogenic); within "
        f"genes: {result['genes_with_both']} genes with both labels, "
        f"{result['variants_in_those_genes']} variants"
    )
    for metric in ("auroc", "auprc", "within_gene_auroc"):
        row = result[metric]
        text = ", ".join(
            f"{model} {v:.3f} [{lo:.3f}, {hi:.3f}]"
            for model, (v, lo, hi) in row.items()
            if model != "difference"
        )
        d, lo, hi = row["difference"]
        print(f"  {metric}: {text}; genobird - Markov {d:+.3f} [{lo:+.3f}, {hi:+.3f}]")


if __name__ == "__main__":
    sys.exit(main())
