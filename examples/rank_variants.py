"""Rank variants by their predicted effect on chromatin features.

    python examples/rank_variants.py results/demo/chromatin/model variants.vcf genome.fa

Scores every variant with a fine-tuned chromatin predictor, takes for each variant the
feature it changes most (largest |alt - ref|), and prints the top variants. Variants
whose REF does not match the genome are reported and left out of the ranking.
"""

from __future__ import annotations

import sys

from genobird import load_predictor


def rank_variants(model_dir: str, vcf: str, reference: str, top: int = 10):
    predictor = load_predictor(model_dir, device="auto")
    diff = predictor.score_variants(vcf, reference=reference)  # alt - ref per feature
    features = predictor.feature_names
    mismatched = diff[~diff["ref_match"]]
    for _, row in mismatched.iterrows():
        variant = f"{row['chrom']}:{row['pos']} {row['ref']}>{row['alt']}"
        print(f"skipped {variant}: REF differs from the genome")
    usable = diff[diff["ref_match"]].copy()
    magnitude = usable[features].abs()
    usable["top_feature"] = magnitude.idxmax(axis=1)
    usable["effect"] = [
        usable.at[i, f] for i, f in zip(usable.index, usable["top_feature"], strict=True)
    ]
    usable["abs_effect"] = usable["effect"].abs()
    return usable.sort_values("abs_effect", ascending=False).head(top)


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__)
        return 2
    ranked = rank_variants(argv[1], argv[2], argv[3])
    columns = ["chrom", "pos", "id", "ref", "alt", "top_feature", "effect"]
    print(ranked[columns].to_string(index=False, float_format=lambda x: f"{x:+.4f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
