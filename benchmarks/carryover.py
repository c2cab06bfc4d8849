"""Does fine-tuning hold up on tasks nobody tuned it for? genobird against the CNN and
k-mer LR baselines it ships, on labelled sequence tasks, one recipe for all of them.

    python benchmarks/carryover.py --model results/human-mini/pretrain/model \\
        --out results/carryover --tasks gue_tf2 gue_tf3 epdnew_tata

Each task is a data set built here from ../shared/data (GUE human TF 0-4: family "gue";
EPDnew TATA promoters with DeePromoter negatives: family "promoter"; ENCODE-DREAM peak
tasks, CTCF, any TF, and one per TF with enough peaks: family "chromatin"); a CSV task
of your own is added with `--csv NAME TRAIN DEV TEST` (sequence,label columns). Every
task runs, in one process, on the same splits:

  genobird       the pipelines' GUE recipe (pipelines/human-mini.yaml: 3,000 steps, lr
                 3e-4, batch 32, validation every 500, dropout 0.3, mean pooling, strands
                 as the task kind sets them), no base CNN
  defaults       `genobird finetune classify` with no recipe option, as a user first
                 runs it (genobird.finetuning.recipe's TASK_DEFAULTS): the same with base
                 readers under the encoder, started from the baselines (a CNN of 128
                 filters, the CNN baseline's tower, trained alone first, and the k-mer
                 LR's 3- to 6-mer counts, fitted first, blended on validation, on both
                 strands or one as the better start on validation), a stop after 3
                 validation checks without improvement; its settings are the
                 baselines', chosen on no task here, so every family is held out (a
                 promoter data set is read on its strand; it gets the same settings as
                 options, the next arm's command)
  genobird+cnn+kmers
                 the same with both strands, no choice
  genobird+cnn   the same without the k-mer counts
  cnn            `genobird baseline cnn` (at most 30 epochs, stopped by validation),
                 k-mer LR: `baseline kmer-lr`

`--read-baselines` runs the baselines first and lets the genobird arms read the base
readers they fitted exactly as the arm would (`--base-start-from`): the same models,
whose minutes are then spent once.

and prints test MCC and AUROC with paired 95% bootstrap intervals of genobird's arms
minus each baseline (`genobird baseline compare`), the targets (on every family the
lower end of (genobird - CNN) above -0.02 and genobird above the k-mer LR), and the
leave-one-family-out protocol: for each family (gue, promoter, chromatin: ENCODE peak
tasks), the recipe among `--arms` that the other families' validation AUROC chooses,
and its figures on the held-out family.
`--max-steps` shortens the genobird arms (a smoke run; figures then mean little).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from bisect import bisect
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
GUE = SHARED / "tasks" / "gue_human_tf"
ENCODE = SHARED / "chromatin" / "encode_hg19"
TASKS = {
    **{f"gue_tf{i}": ("gue", ("classify", GUE / str(i))) for i in range(5)},
    "epdnew_tata": (
        "promoter",
        ("promoter-sequences", SHARED / "promoters" / "hs_TATA_promoters_300bp.txt"),
    ),
    # Binary tasks from the real ENCODE-DREAM peaks: 500 bp windows centred on a peak
    # against windows 1 kb or more from any TF peak of the table (test chr22, valid chr20)
    "ctcf_peaks": ("chromatin", ("peaks", "CTCF")),
    "tf_peaks": ("chromatin", ("peaks", None)),
    # One task per TF with at least 50 peak windows in test and 30 in validation
    # (merged across cell lines; MYC has 20 in validation, EP300 42 in test)
    **{
        f"{tf.lower()}_peaks": ("chromatin", ("peaks", tf))
        for tf in ("MAX", "ATF7", "CEBPB", "ATF3", "JUND", "CREB1", "TEAD4")
    },
}
# Strands as the task kind sets them (classify: both), as the figures below were made;
# the validation probe that `finetune classify` now runs by default is its own arm.
RECIPE = {
    "max_steps": 3000,
    "learning_rate": 3e-4,
    "batch_size": 32,
    "eval_every": 500,
    "dropout": 0.3,
    "pooling": "mean",
    "probe_steps": 0,
    "base_cnn_channels": 0,
    "patience": 0,
    "base_kmers": 0,
}
# classify's base readers and early stop (TASK_DEFAULTS), as options
BASE_READERS = {"base_cnn_channels": 128, "patience": 3, "base_kmers": 6}
# Recipe candidates: the pipelines' one, and variants of it with base readers, each as
# the settings it changes. `--arms` picks; by default the first two (the pipelines'
# recipe, and `finetune classify`'s defaults).
CANDIDATES = {
    "genobird": {},
    # `genobird finetune classify` with no recipe option at all, as a user first runs it:
    # TASK_DEFAULTS, the strands chosen with the start
    "defaults": None,
    "genobird+cnn+kmers": BASE_READERS,
    "genobird+cnn": {"base_cnn_channels": 128, "patience": 3},
    "genobird+cnn/one-strand": {"base_cnn_channels": 128, "rc_augment": False},
    "genobird+cnn/lr1e-3": {"base_cnn_channels": 128, "learning_rate": 1e-3},
    "genobird+cnn/strand-probe": {"base_cnn_channels": 128, "probe_steps": 500},
    "genobird+cnn/6000": {"base_cnn_channels": 128, "max_steps": 6000, "eval_every": 1000},
    "genobird+cnn+kmers/lr1e-4": {**BASE_READERS, "learning_rate": 1e-4},
    "genobird+cnn+kmers/lr1e-3": {**BASE_READERS, "learning_rate": 1e-3},
    "genobird+cnn+kmers/cls": {**BASE_READERS, "pooling": "cls"},
}
ARMS = {arm: CANDIDATES[arm] for arm in ("genobird", "defaults")}
# classify's defaults, given as options (no probes): the defaults arm on a promoter data set
DEFAULTS_AS_OPTIONS = "genobird+cnn+kmers"
# The hg19 pieces with sequence, and how the peak tasks split them.
PIECES = {
    "chr19": (0, 3_119_000),
    "chr20": (1_000_000, 2_000_000),
    "chr22": (20_000_000, 21_000_000),
}
PEAK_SPLITS = {"train": "chr19", "dev": "chr20", "test": "chr22"}
PEAK_WINDOW_BP = 500


def genobird(*args: str) -> None:
    command = [sys.executable, "-m", "genobird.cli", "-q", *map(str, args)]
    subprocess.run(command, check=True, cwd=REPO)


def build_data(name: str, source: tuple, folder: Path) -> Path:
    data = folder / f"{name}.h5"
    if data.is_file():
        return data
    kind, path = source
    if kind == "classify":
        genobird(
            "dataset",
            "classify",
            "--input",
            path / "train.csv",
            "--valid",
            path / "dev.csv",
            "--test",
            path / "test.csv",
            "--out",
            data,
        )
    elif kind in ("csv", "peaks"):
        train, dev, test = path if kind == "csv" else peak_task(path, folder)
        genobird(
            "dataset", "classify", "--input", train, "--valid", dev, "--test", test, "--out", data
        )
    else:
        genobird("dataset", "promoter-sequences", "--positives", path, "--out", data)
    return data


def peak_task(target: str | None, folder: Path) -> list[Path]:
    """train/dev/test CSVs (sequence,label): 500 bp windows centred on the peaks of
    `target` (every TF when None), merged across cell lines, and as many windows drawn
    uniformly from the same piece whose centre lies 1 kb or more from any TF peak; at
    most 5% N. Seeded: the same files every run."""
    import csv
    import random

    from genobird.genome import open_reference

    genome_dir = SHARED / "genome"
    reference = open_reference(
        [
            genome_dir / "hg19_chr19_0-3119000_softmasked.fa",
            genome_dir / "hg19_chr20_0-2Mb.fa",
            genome_dir / "hg19_chr22_0-21Mb.fa.gz",
        ]
    )
    table = list(csv.DictReader((ENCODE / "features_tf.tsv").open(), delimiter="\t"))
    every, chosen = {}, {}
    for row in table:
        for line in (ENCODE / row["peak_file"]).read_text().splitlines():
            chrom, start, end = line.split("\t")[:3]
            centre = (int(start) + int(end)) // 2
            every.setdefault(chrom, []).append(centre)
            if target is None or row["target"] == target:
                chosen.setdefault(chrom, []).append(centre)
    half = PEAK_WINDOW_BP // 2
    paths = []
    for split, chrom in PEAK_SPLITS.items():
        low, high = PIECES[chrom]
        centres, merged = sorted(chosen.get(chrom, [])), []
        for centre in centres:  # one window per cluster of peaks within half a window
            if not merged or centre - merged[-1] > half:
                merged.append(centre)
        occupied = sorted(every.get(chrom, []))
        rng = random.Random(f"{target}-{split}")
        rows = [(reference.fetch(chrom, c - half, c + half, pad=True), 1) for c in merged]
        rows = [row for row in rows if row[0].count("N") <= 0.05 * PEAK_WINDOW_BP]
        negatives, tries = [], 0
        while len(negatives) < len(rows) and tries < 100 * len(rows):
            tries += 1
            centre = rng.randrange(low + half, high - half)
            at = bisect(occupied, centre)
            if any(abs(centre - o) < 1000 for o in occupied[max(0, at - 1) : at + 1]):
                continue
            sequence = reference.fetch(chrom, centre - half, centre + half)
            if sequence.count("N") <= 0.05 * PEAK_WINDOW_BP:
                negatives.append((sequence, 0))
        rows += negatives
        rng.shuffle(rows)
        path = folder / f"{split}.csv"
        with path.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["sequence", "label"])
            writer.writerows(rows)
        print(
            f"{folder.name} {split} ({chrom}): {len(rows) - len(negatives)} peak windows, "
            f"{len(negatives)} background"
        )
        paths.append(path)
    return paths


def run_folder(folder: Path, arm: str) -> Path:
    return folder / arm.replace("+", "_").replace("/", "_")


def arm_command(
    arm: str,
    data: Path,
    kind: str,
    out: Path,
    model: Path,
    max_steps: int | None,
    baselines: tuple = (),
) -> list[str]:
    """The genobird command of one arm: the recipe with the candidate's own settings; a
    genobird arm given `baselines` (the task's baseline runs) reads the base readers they
    fitted exactly as it would (`--base-start-from`: the same model, its minutes spent
    once)."""
    if arm in ("cnn", "kmer-lr"):
        return ["baseline", arm, "--data", data, "--out", out]
    reads = ["--base-start-from", *baselines] if baselines else []
    candidate = CANDIDATES[arm]
    if candidate is None and kind != "classify":
        # A promoter data set (EPDnew's) takes the promoter pipeline's short recipe by
        # default, and is not asked (its strand is known): it gets classify's defaults as
        # options, which makes it the + base k-mers arm's command
        candidate = CANDIDATES[DEFAULTS_AS_OPTIONS]
    settings = {} if candidate is None else {**RECIPE, **candidate}
    if max_steps:  # six validation checks, as in the recipe
        settings.update(max_steps=max_steps, eval_every=max(1, max_steps // 6))
    recipe = []
    for key, value in settings.items():
        if key == "rc_augment":  # scored on the strands it was trained on
            strands = "" if value else "no-"
            recipe += [f"--{strands}rc-augment", f"--{strands}rc-average"]
        else:
            recipe += [f"--{key.replace('_', '-')}", str(value)]
    return ["finetune", kind, "--data", data, "--out", out, "--model", model, *recipe, *reads]


def run_jobs(jobs: list, parallel: int) -> dict:
    """Run (key, folder, command) jobs, `parallel` at a time; a finished run (its
    report/metrics.json) is not run again. Returns each key's seconds."""
    from concurrent.futures import ThreadPoolExecutor

    def one(job):
        key, out, command = job
        started = time.perf_counter()
        if not (out / "report" / "metrics.json").is_file():
            genobird(*command)
        return key, time.perf_counter() - started

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        return dict(pool.map(one, jobs))


def metrics(run: Path) -> dict:
    report = json.loads((run / "report" / "metrics.json").read_text())
    figures = {key: report[key] for key in ("mcc", "auroc") if key in report}
    training = report.get("training", {})
    if (validation := training.get("best_validation_auroc")) is not None:
        figures["validation_auroc"] = validation
    if (start := training.get("start_test_auroc")) is not None:  # base readers' start
        figures["start_auroc"] = start
        figures["start_agrees"] = (training.get("start_check") or {}).get("agree")
    return figures


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
    parser.add_argument(
        "--csv",
        nargs=4,
        action="append",
        default=[],
        metavar=("NAME", "TRAIN", "DEV", "TEST"),
        help="a task of your own (family: its name)",
    )
    parser.add_argument(
        "--arms",
        nargs="+",
        choices=CANDIDATES,
        default=list(ARMS),
        help="genobird recipes to run (default: %(default)s)",
    )
    parser.add_argument(
        "--no-baselines",
        action="store_true",
        help="genobird arms only (the baselines run elsewhere)",
    )
    parser.add_argument("--data-only", action="store_true", help="build the data sets, stop")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs at a time (a GPU holds several small fine-tunings)",
    )
    parser.add_argument("--max-steps", type=int, help="shorter genobird arms (smoke runs)")
    parser.add_argument(
        "--read-baselines",
        action="store_true",
        help="genobird arms read the base readers the baseline arms fitted "
        "(the same models: a run reads only one fitted exactly as its own "
        "would be), the baselines run first",
    )
    args = parser.parse_args(argv)
    tasks = {name: TASKS[name] for name in args.tasks}
    for name, *paths in args.csv:
        tasks[name] = (name, ("csv", [Path(p).resolve() for p in paths]))
    if not tasks:
        parser.error("give --tasks and/or --csv")
    args.out.mkdir(parents=True, exist_ok=True)
    model = args.model.resolve()
    arms = list(args.arms) + ([] if args.no_baselines else ["cnn", "kmer-lr"])
    jobs, prepared = [], {}
    for name, (family, source) in tasks.items():
        folder = args.out / name
        folder.mkdir(exist_ok=True)
        data = build_data(name, source, folder)
        kind = "promoter" if source[0] == "promoter-sequences" else "classify"
        prepared[name] = (family, folder)
        baselines = tuple(run_folder(folder, b) for b in ("cnn", "kmer-lr"))
        for arm in arms:
            out = run_folder(folder, arm)
            jobs.append(
                (
                    (name, arm),
                    out,
                    arm_command(
                        arm,
                        data,
                        kind,
                        out,
                        model,
                        args.max_steps,
                        baselines if args.read_baselines else (),
                    ),
                )
            )
    if args.data_only:
        return 0
    if args.read_baselines:  # the baselines first, every genobird arm reading them
        arms = [a for a in arms if a in ("cnn", "kmer-lr")] + [
            a for a in arms if a not in ("cnn", "kmer-lr")
        ]
        args.jobs = 1
    jobs.sort(key=lambda job: arms.index(job[0][1]))  # each arm on every task, in turn
    seconds = run_jobs(jobs, args.jobs)
    rows = []
    for name, (family, folder) in prepared.items():
        runs = {arm: run_folder(folder, arm) for arm in [*args.arms, "cnn", "kmer-lr"]}
        missing = [
            arm for arm, run in runs.items() if not (run / "report" / "metrics.json").is_file()
        ]
        if missing:
            print(f"{name}: no {', '.join(missing)} yet; compared when every arm has run")
            continue
        row = {
            "task": name,
            "family": family,
            "seconds": {arm: seconds.get((name, arm)) for arm in runs},
            "metrics": {arm: metrics(run) for arm, run in runs.items()},
            "paired": {},
        }
        for arm in args.arms:
            for baseline in ("cnn", "kmer-lr"):
                saved = run_folder(folder, f"{arm}_vs_{baseline}").with_suffix(".json")
                comparison = compare(runs[arm], runs[baseline], saved)
                row["paired"][f"{arm} - {baseline}"] = {
                    metric: difference(comparison, metric) for metric in ("mcc", "auroc")
                }
        rows.append(row)
        print_row(row)
    (args.out / "carryover.json").write_text(json.dumps(rows, indent=2))
    print_targets(rows, args.arms)
    print_protocol(rows, args.arms, args.out)
    return 0


def leave_one_family_out(rows: list, arms: list) -> list:
    """For each family, the recipe the other families choose (the highest mean
    validation AUROC over their tasks; the held-out family's own figures unread), and
    that recipe's figures on the held-out family's tasks."""
    families = sorted({row["family"] for row in rows})
    chosen = []
    for family in families:
        others = [row for row in rows if row["family"] != family]
        if not others:
            continue

        def validation(arm, others=others):
            scores = [row["metrics"][arm].get("validation_auroc") for row in others]
            return sum(scores) / len(scores) if None not in scores else float("-inf")

        arm = max(arms, key=validation)
        for row in rows:
            if row["family"] == family:
                chosen.append(
                    {
                        "family": family,
                        "task": row["task"],
                        "arm": arm,
                        "mcc": row["metrics"][arm]["mcc"],
                        "cnn": row["metrics"]["cnn"]["mcc"],
                        "kmer-lr": row["metrics"]["kmer-lr"]["mcc"],
                        "minus_cnn": row["paired"][f"{arm} - cnn"]["mcc"],
                        "minus_kmer": row["paired"][f"{arm} - kmer-lr"]["mcc"],
                    }
                )
    return chosen


def print_protocol(rows: list, arms: list, out: Path) -> None:
    print("leave one family out (recipe chosen on the other families' validation AUROC):")
    chosen = leave_one_family_out(rows, arms)
    for entry in chosen:
        low = entry["minus_cnn"][1]
        print(
            f"  {entry['family']}/{entry['task']}: {entry['arm']} MCC {entry['mcc']:.3f}, "
            f"CNN {entry['cnn']:.3f}, k-mer LR {entry['kmer-lr']:.3f}; - CNN "
            f"{entry['minus_cnn'][0]:+.3f} [{low:+.3f}, {entry['minus_cnn'][2]:+.3f}], - k-mer "
            f"{entry['minus_kmer'][0]:+.3f}"
        )
    print(
        "targets by family (the mean over its tasks of the test MCC difference, each "
        "task's test windows resampled):"
    )
    for family in sorted({entry["family"] for entry in chosen}):
        tasks = [entry["task"] for entry in chosen if entry["family"] == family]
        arm = next(entry["arm"] for entry in chosen if entry["family"] == family)
        runs = [run_folder(out / task, arm) for task in tasks]
        cnn = family_difference(runs, [run_folder(out / task, "cnn") for task in tasks])
        kmer = family_difference(runs, [run_folder(out / task, "kmer-lr") for task in tasks])
        met = cnn[1] > -0.02 and kmer[0] > 0
        print(
            f"  {family} ({len(tasks)} tasks, {arm}): - CNN {cnn[0]:+.3f} [{cnn[1]:+.3f}, "
            f"{cnn[2]:+.3f}], - k-mer LR {kmer[0]:+.3f} [{kmer[1]:+.3f}, {kmer[2]:+.3f}] -> "
            f"{'met' if met else 'NOT met'} (CNN: lower end above -0.02; k-mer LR: above)"
        )
        for name in ("cnn", "kmer-lr"):
            auroc = family_difference(
                runs, [run_folder(out / task, name) for task in tasks], "auroc"
            )
            print(f"    AUROC - {name}: {auroc[0]:+.3f} [{auroc[1]:+.3f}, {auroc[2]:+.3f}]")
        family_rows = [row for row in rows if row["family"] == family]
        means = {
            a: sum(row["metrics"][a]["mcc"] for row in family_rows) / len(family_rows) for a in arms
        }
        best = max(means, key=means.get)
        gap = means[arm] - means[best]
        print(
            "    mean test MCC by recipe: "
            + ", ".join(f"{a} {m:.3f}" for a, m in means.items())
            + f"; the chosen minus the best ({best}) {gap:+.3f} -> "
            + ("met" if gap >= -0.02 else "NOT met")
            + " (at least -0.02)"
        )


def family_difference(
    runs: list[Path],
    baselines: list[Path],
    metric: str = "mcc",
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(mean, low, high): the mean over tasks of the test `metric` (MCC at the threshold
    each run chose on validation, or AUROC) of each run minus its baseline on the same
    test windows, with a 95% interval from resampling each task's test windows with
    replacement (paired: the same draws for both; `genobird baseline compare`'s
    resampling, one task at a time)."""
    import numpy as np

    from genobird.evaluation.compare import (
        check_same_split,
        interval,
        read_predictions,
        resample_counts,
        resampled,
    )

    rng = np.random.default_rng(seed)
    observed, draws = [], []
    for run, baseline in zip(runs, baselines, strict=True):
        ours, theirs = read_predictions(run), read_predictions(baseline)
        check_same_split(ours, theirs)

        def difference(counts, ours=ours, theirs=theirs):
            return resampled(metric, counts, ours) - resampled(metric, counts, theirs)

        observed.append(float(difference(np.ones((1, len(ours.labels))))[0]))
        batches = resample_counts(rng, len(ours.labels), resamples)
        draws.append(np.concatenate([difference(counts) for counts in batches]))
    return float(np.mean(observed)), *interval(np.mean(draws, axis=0))


def print_row(row: dict) -> None:
    figures = ", ".join(
        f"{arm} MCC {m['mcc']:.3f} (AUROC {m['auroc']:.3f})" for arm, m in row["metrics"].items()
    )
    print(f"{row['task']} ({row['family']}): {figures}")
    for label, paired in row["paired"].items():
        mcc = paired["mcc"]
        print(f"  {label}: MCC {mcc[0]:+.3f} [{mcc[1]:+.3f}, {mcc[2]:+.3f}]")


def print_targets(rows: list, arms: list) -> None:
    for arm in arms:
        for row in rows:
            figures = row["metrics"][arm]
            if "start_auroc" in figures:  # fine-tuning kept or improved on its start
                kept = round(figures["auroc"], 4) >= round(figures["start_auroc"], 4)
                print(
                    f"start {arm} on {row['task']}: test AUROC {figures['auroc']:.4f}, its "
                    f"start's {figures['start_auroc']:.4f} (step-0 check agreed with the "
                    f"baselines: {figures['start_agrees']}) -> "
                    f"{'met' if kept else 'NOT met'} (at least the start's)"
                )
            low = row["paired"][f"{arm} - cnn"]["mcc"][1]
            above_kmer = row["paired"][f"{arm} - kmer-lr"]["mcc"][0] > 0
            met = low > -0.02 and above_kmer
            verdict = "met" if met else "NOT met"
            print(
                f"target {arm} on {row['task']}: (genobird - CNN) lower end {low:+.3f} "
                f"(> -0.02), above k-mer LR: {above_kmer} -> {verdict}"
            )


if __name__ == "__main__":
    raise SystemExit(main())
