"""Does fine-tuning hold up on tasks nobody tuned it for? genobird against the CNN and
k-mer LR baselines it ships, on labelled sequence tasks, one recipe for all of them.

    python benchmarks/carryover.py --model results/human-mini/pretrain/model \\
        --out results/carryover --tasks gue_tf2 gue_tf3 epdnew_tata

Each task is a data set built here from ../shared/data (GUE human TF 0-4: family "gue";
EPDnew TATA promoters with DeePromoter negatives: family "promoter"); a CSV task of
your own is added with `--csv NAME TRAIN DEV TEST` (sequence,label columns). Every task
runs, in one process, on the same splits:

  genobird       the documented recipe (pipelines/human-mini-gue.yaml's GUE recipe:
                 3,000 steps, lr 3e-4, batch 32, validation every 500, dropout 0.3, mean
                 pooling, strands as `genobird finetune` chooses for the task)
  genobird+cnn   the same with `--base-cnn-channels 128`: the CNN baseline's tower on
                 the bases beside the encoder (its width and learning rate are the
                 baseline's, chosen on no task here, so every family is held out)
  cnn            `genobird baseline cnn` (3-minute budget), k-mer LR: `baseline kmer-lr`

and prints test MCC and AUROC with paired 95% bootstrap intervals of genobird's arms
minus each baseline (`genobird baseline compare`), and the targets: on every family
the lower end of (genobird - CNN) above -0.02 and genobird above the k-mer LR.
`--max-steps` shortens the genobird arms (a smoke run; figures then mean little).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
GUE = SHARED / "tasks" / "gue_human_tf"
TASKS = {
    **{f"gue_tf{i}": ("gue", ("classify", GUE / str(i))) for i in range(5)},
    "epdnew_tata": ("promoter", ("promoter-sequences",
                                 SHARED / "promoters" / "hs_TATA_promoters_300bp.txt")),
}  # fmt: skip
RECIPE = {"max_steps": 3000, "learning_rate": 3e-4, "batch_size": 32, "eval_every": 500,
          "dropout": 0.3, "pooling": "mean"}  # fmt: skip
ARMS = {"genobird": [], "genobird+cnn": ["--base-cnn-channels", "128"]}


def genobird(*args: str) -> None:
    command = [sys.executable, "-m", "genobird.cli", "-q", *map(str, args)]
    subprocess.run(command, check=True, cwd=REPO)


def build_data(name: str, source: tuple, folder: Path) -> Path:
    data = folder / f"{name}.h5"
    if data.is_file():
        return data
    kind, path = source
    if kind == "classify":
        genobird("dataset", "classify", "--input", path / "train.csv", "--valid",
                 path / "dev.csv", "--test", path / "test.csv", "--out", data)  # fmt: skip
    elif kind == "csv":
        train, dev, test = path
        genobird("dataset", "classify", "--input", train, "--valid", dev, "--test", test,
                 "--out", data)  # fmt: skip
    else:
        genobird("dataset", "promoter-sequences", "--positives", path, "--out", data)
    return data


def run_arms(data: Path, kind: str, folder: Path, model: Path, max_steps: int | None) -> dict:
    runs, seconds = {}, {}
    settings = dict(RECIPE)
    if max_steps:  # six validation checks, as in the recipe
        settings.update(max_steps=max_steps, eval_every=max(1, max_steps // 6))
    recipe = [item for key, value in settings.items()
              for item in (f"--{key.replace('_', '-')}", str(value))]  # fmt: skip
    for arm, extra in ARMS.items():
        out = folder / arm.replace("+", "_")
        started = time.perf_counter()
        if not (out / "report" / "metrics.json").is_file():
            genobird("finetune", kind, "--data", data, "--out", out, "--model", model,
                     *recipe, *extra)  # fmt: skip
        runs[arm], seconds[arm] = out, time.perf_counter() - started
    for baseline, extra in (("cnn", ["--max-minutes", "3"]), ("kmer-lr", [])):
        out = folder / baseline
        started = time.perf_counter()
        if not (out / "report" / "metrics.json").is_file():
            genobird("baseline", baseline, "--data", data, "--out", out, *extra)
        runs[baseline], seconds[baseline] = out, time.perf_counter() - started
    return {"runs": runs, "seconds": seconds}


def metrics(run: Path) -> dict:
    report = json.loads((run / "report" / "metrics.json").read_text())
    return {key: report[key] for key in ("mcc", "auroc") if key in report}


def compare(a: Path, b: Path, out: Path) -> dict:
    genobird("baseline", "compare", a, b, "--out", out)
    return json.loads(out.read_text())


def difference(comparison: dict, metric: str) -> tuple[float, float, float]:
    """(A - B, low, high) of one metric from `baseline compare`'s JSON."""
    entry = comparison["metrics"][metric]
    return entry["difference"], entry["low"], entry["high"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="pretrained model directory")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=[])
    parser.add_argument("--csv", nargs=4, action="append", default=[],
                        metavar=("NAME", "TRAIN", "DEV", "TEST"),
                        help="a task of your own (family: its name)")  # fmt: skip
    parser.add_argument("--max-steps", type=int, help="shorter genobird arms (smoke runs)")
    args = parser.parse_args(argv)
    tasks = {name: TASKS[name] for name in args.tasks}
    for name, *paths in args.csv:
        tasks[name] = (name, ("csv", [Path(p).resolve() for p in paths]))
    if not tasks:
        parser.error("give --tasks and/or --csv")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, (family, source) in tasks.items():
        folder = args.out / name
        folder.mkdir(exist_ok=True)
        data = build_data(name, source, folder)
        kind = "promoter" if source[0] == "promoter-sequences" else "classify"
        result = run_arms(data, kind, folder, args.model.resolve(), args.max_steps)
        runs = result["runs"]
        figures = {arm: metrics(run) for arm, run in runs.items()}
        row = {"task": name, "family": family, "seconds": result["seconds"],
               "metrics": figures, "paired": {}}  # fmt: skip
        for arm in ARMS:
            for baseline in ("cnn", "kmer-lr"):
                saved = folder / f"{arm}_vs_{baseline}.json".replace("+", "_")
                comparison = compare(runs[arm], runs[baseline], saved)
                row["paired"][f"{arm} - {baseline}"] = {
                    metric: difference(comparison, metric) for metric in ("mcc", "auroc")
                }
        rows.append(row)
        (args.out / "carryover.json").write_text(json.dumps(rows, indent=2))
        print_row(row)
    print_targets(rows)
    return 0


def print_row(row: dict) -> None:
    figures = ", ".join(f"{arm} MCC {m['mcc']:.3f} (AUROC {m['auroc']:.3f})"
                        for arm, m in row["metrics"].items())  # fmt: skip
    print(f"{row['task']} ({row['family']}): {figures}")
    for label, paired in row["paired"].items():
        mcc = paired["mcc"]
        print(f"  {label}: MCC {mcc[0]:+.3f} [{mcc[1]:+.3f}, {mcc[2]:+.3f}]")


def print_targets(rows: list) -> None:
    for arm in ARMS:
        for row in rows:
            low = row["paired"][f"{arm} - cnn"]["mcc"][1]
            above_kmer = row["paired"][f"{arm} - kmer-lr"]["mcc"][0] > 0
            met = low > -0.02 and above_kmer
            verdict = "met" if met else "NOT met"
            print(f"target {arm} on {row['task']}: (genobird - CNN) lower end {low:+.3f} "
                  f"(> -0.02), above k-mer LR: {above_kmer} -> {verdict}")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
