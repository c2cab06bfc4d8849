"""The cost of the route from a model to named motifs, on 2 cores.

    python benchmarks/motifs.py --pretrained results/demo/pretrain/model --out /tmp/motifs

A classify model is fine-tuned with the default recipe (steps capped) on 101 bp windows,
half holding a site drawn from JASPAR's CTCF matrix (tests/test_motifs.py's windows).
Then, in one process: `genobird attribute`'s ISM of `--windows` (1,000) windows beside
`genobird ism`'s one-record-at-a-time ISM of the first `--baseline-windows` (100) of
them (the baseline; ratio = attribute / ism, per window), and the whole route
(`genobird motifs --model`: ISM, TF-MoDISco, TOMTOM, the page) for `--route-windows`
(2,000) windows, with what it named.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pretrained", type=Path, default=REPO / "results/demo/pretrain/model")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--windows", type=int, default=1000)
    parser.add_argument("--route-windows", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--baseline-windows", type=int, default=100)
    args = parser.parse_args()

    import h5py
    import pandas as pd

    from genobird.cli import main as genobird
    from genobird.interpret.attributions import ism_attributions
    from genobird.scoring.mutagenesis import Region, mutagenesis
    from genobird.scoring.predict import load_predictor
    from tests.test_motifs import PLANTED, planted_windows

    args.out.mkdir(parents=True, exist_ok=True)
    train = max(args.route_windows, args.windows)
    data = planted_windows(args.out, [PLANTED], windows=train + 400, train=train)
    run = args.out / "run"
    started = time.perf_counter()
    fine_tune = ["-q", "finetune", "classify", "--data", str(data), "--out", str(run)]
    assert (
        genobird([*fine_tune, "--model", str(args.pretrained), "--max-steps", str(args.steps)]) == 0
    )
    figures = {"finetune_s": round(time.perf_counter() - started, 1)}

    predictor = load_predictor(run / "model", device="cpu")
    with h5py.File(data) as handle:
        sequences = [s.decode() for s in handle["sequences"][: args.windows]]
    ids = [str(i) for i in range(len(sequences))]
    started = time.perf_counter()
    ism_attributions(predictor, ids, sequences)
    figures["attribute_s"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    baseline = list(zip(ids, sequences, strict=True))[: args.baseline_windows]
    for name, sequence in baseline:
        mutagenesis(predictor, Region(name, name, 0, sequence), len(sequence), "log_odds")
    seconds = time.perf_counter() - started
    figures["ism_one_at_a_time_s_per_window"] = round(seconds / len(baseline), 4)
    per_window = figures["attribute_s"] / len(sequences)
    figures["attribute_over_ism"] = round(per_window / (seconds / len(baseline)), 3)
    figures["mutants_per_s"] = round(len(sequences) * 303 / figures["attribute_s"])

    route = ["-q", "motifs", "--model", str(run / "model"), "--data", str(data), "--split"]
    route += ["train", "--limit", str(args.route_windows), "--out", str(args.out / "motifs")]
    started = time.perf_counter()
    assert genobird([*route, "--device", "cpu"]) == 0
    figures["route_s"] = round(time.perf_counter() - started, 1)
    table = pd.read_csv(args.out / "motifs" / "motifs.tsv", sep="\t")
    figures["top_pattern"] = table.iloc[0][
        ["consensus", "best_match_name", "best_match_q"]
    ].to_dict()
    figures["windows"], figures["route_windows"] = args.windows, args.route_windows
    print(json.dumps(figures, indent=2, default=str))


if __name__ == "__main__":
    main()
