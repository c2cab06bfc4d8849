"""The pipeline's report: one self-contained HTML page over a results folder.

It shows the corpus and vocabulary statistics, the pretraining curves, masked-token
accuracy against context length (the pretrained model evaluated on held-out instances
cut to each length), the fine-tuning metrics with their ROC/PR plots, and links to the
score tables. Plots are embedded (base64 PNG), so the page can be mailed or archived
alone; score tables are linked relative to the page.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import statistics
from pathlib import Path

from genobird.errors import ConfigError, InputError
from genobird.fileio import atomic_write
from genobird.report_checks import (
    checks,
    checks_path,
    demo_manifest,
    demo_notes,
    write_checks,
)

TASKS = ("promoter", "chromatin")
PROMOTER_KEYS = ("examples", "positives", "auroc", "auprc", "f1", "mcc", "f1_at_valid_threshold")
HELDOUT_SENTENCES = 2000  # held-out sentences for bp/token (enough for two decimals)


# --------------------------------------------------------------------------- html helpers
def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape(str(value))


def _table(rows: list[tuple], header: tuple | None = None) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header or ())
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table>{f'<tr>{head}</tr>' if head else ''}{body}</table>"


def _image(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _figure_png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


# --------------------------------------------------------------------------- sections
# What each long-range structure of the demo genome is, by its manifest count's name.
DEMO_STRUCTURES = {
    "copies_segmental": "segmental duplications: a segment copied 0.2-4 kb downstream",
    "copies_inverted": "inverted repeats: the same, reverse-complemented",
    "copies_tandem": "tandem array units: 200-500 bp, side by side",
    "distal_engaged": "distal elements upstream of a promoter on its strand: H3K27ac",
    "distal_downstream": "decoys: the same element downstream (no mark)",
    "distal_reversed": "decoys: the same element upstream on the other strand (no mark)",
    "boundaries_convergent": "boundary sites facing each other: an H3K27me3 domain between",
    "boundaries_divergent": "decoys: the same sites facing away (no domain)",
}


def genome_section(results: Path) -> str:
    """For a run on the demo genome: what it is, what it holds, and where the figures on
    real DNA are. Nothing for a run on a real genome."""
    manifest = demo_manifest(results)
    if manifest is None:
        return ""
    counts = manifest.get("long_range", {})
    size = sum(manifest["chromosomes"].values())
    rows = [(DEMO_STRUCTURES[name], counts[name]) for name in DEMO_STRUCTURES if name in counts]
    if "copied_bp" in counts:
        rows.append(
            (
                "bases written as a copy",
                f"{counts['copied_bp']:,} ({counts['copied_bp'] / size:.1%})",
            )
        )
    return (
        "<h2>The demo genome</h2><p>This genome is <b>synthetic</b> "
        f"(<code>genobird demo-reference</code>, seed {manifest['seed']}, {size:,} bp): a "
        "miniature built to carry the long-range structure real genomes have and that "
        "attention over kilobases exists to read: copies of segments a few hundred to a few "
        "thousand bp apart, a mark set by where a distal element lies relative to a promoter, "
        "and domains closed by boundary sites facing each other, each beside decoys of the "
        "same motifs. The figures below show whether genobird found these structures; what it "
        "does on real genomes is in docs/results.md (human-mini pretraining, the GUE and "
        "EPDnew tasks, the real chromatin peaks).</p>"
        + (_table(rows, ("structure", "count")) if rows else "")
    )


def corpus_section(results: Path) -> str:
    from genobird.corpus import Tokenizer, read_documents

    if not (results / "corpus").is_dir():
        return ""
    rows = []
    for part in ("train", "heldout"):
        index_path = results / "corpus" / f"{part}.txt.index.json"
        if not index_path.is_file():
            continue
        index = json.loads(index_path.read_text())
        documents = index["documents"]
        bp = sum(end - start for _, start, end, *_ in documents)
        sentences = sum(row[4] for row in documents)
        rows.append((part, ", ".join(index["chromosomes"]), len(documents), sentences, bp))
    text = "<h2>Corpus</h2>" + _table(rows, ("part", "chromosomes", "documents", "sentences", "bp"))
    tokenizer_path = results / "corpus" / "tokenizer.model"
    heldout = results / "corpus" / "heldout.txt"
    if tokenizer_path.is_file() and heldout.is_file():
        tokenizer = Tokenizer(tokenizer_path)
        sentences = [s for document in read_documents(heldout) for s in document]
        sample = sentences[:HELDOUT_SENTENCES]
        rows = [
            ("pieces", tokenizer.vocab_size),
            (f"bp per token on {len(sample):,} held-out sentences", tokenizer.bp_per_token(sample)),
            ("longest piece (bp)", int(tokenizer.piece_lengths.max())),
        ]
        text += "<h3>Vocabulary (sentencepiece BPE)</h3>" + _table(rows)
    return text


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def markov_comparison(results: Path, evaluation: dict, findings: dict | None = None,
                      steps: int | None = None) -> str:  # fmt: skip
    """genobird's held-out bits per base beside the Markov baseline's on the same DNA
    (the pair also goes into `findings`, with the Markov model's order, the best order-0
    figure on its validation DNA, the bases' composition, and the pretraining `steps`)."""
    path = results / "baselines" / "markov.json"
    if not path.is_file() or "bits_per_character" not in evaluation:
        return ""
    markov = json.loads(path.read_text())
    if findings is not None:
        order0 = [bits for key, bits in markov.get("validation_bits_per_bp", {}).items()
                  if key.split(",")[0] == "0"]  # fmt: skip
        findings["held_out"] = {"genobird": evaluation["bits_per_character"],
                                "markov": markov["bits_per_bp"], "order": markov["order"],
                                "composition": min(order0) if order0 else None,
                                "steps": steps}  # fmt: skip
    rows = [
        ("genobird (masked tokens, both-sided context)", evaluation["bits_per_character"]),
        (f"order-{markov['order']} Markov (alpha {markov['alpha']:g}, chosen on validation "
         "DNA; every base, preceding context)", markov["bits_per_bp"]),
        ("uniform over A, C, G, T", 2.0),
    ]  # fmt: skip
    return "<h3>Bits per base on the held-out chromosomes</h3>" + _table(
        rows, ("model", "bits per bp")
    )


def held_out_evaluation(summary: dict, model_dir: Path, instances: Path) -> tuple[dict, str]:
    """(held-out figures, HTML note): the training summary's own, or, for a summary
    written before every scored token was shown as [MASK] (its figures let the model
    read a tenth of the answers), the saved model scored again, or nothing."""
    from genobird.model.io import CONFIG_FILE
    from genobird.training.pretraining import HELDOUT_SCORING, evaluate_saved_model

    final = summary.get("eval") or {}
    if not final or summary.get("heldout_scoring") == HELDOUT_SCORING:
        return final, ""
    if instances.is_dir() and (model_dir / CONFIG_FILE).is_file():
        note = ("<p>Scored again for this report: the training summary was written when "
                "scoring let the model see a tenth of the masked tokens.</p>")  # fmt: skip
        return evaluate_saved_model(model_dir, instances), note
    note = ("<p>Not shown: the training summary was written when scoring let the model see "
            "a tenth of the masked tokens, and the held-out instances to score it again "
            f"are missing ({instances}).</p>")  # fmt: skip
    return {}, note


def pretraining_section(results: Path, context_lengths: list[int], context_windows: int,
                        findings: dict | None = None) -> str:  # fmt: skip
    """Training curves, held-out figures beside the Markov model's, and accuracy and bits
    by context length; the figures the checks read go into `findings`."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from genobird.training.pretraining import mlm_accuracy_by_context

    folder = results / "pretrain"
    if not folder.is_dir():
        return ""
    text = "<h2>Pretraining (MLM + NSP)</h2>"
    history = _read_jsonl(folder / "metrics.jsonl") if (folder / "metrics.jsonl").is_file() else []
    steps = [row for row in history if "mlm_loss" in row]
    if steps:
        figure, axis = plt.subplots(figsize=(6, 3.5))
        for key in ("loss", "mlm_loss", "nsp_loss"):
            points = [(row["step"], row[key]) for row in steps if key in row]
            axis.plot(*zip(*points, strict=True), label=key)
        axis.set_xlabel("step")
        axis.set_ylabel("training loss (nats)")
        axis.legend()
        text += _image(_figure_png(figure), "pretraining curves")
        plt.close(figure)
    summary_path = folder / "model" / "training_summary.json"
    instances = results / "corpus" / "instances-heldout"
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text())
        final, note = held_out_evaluation(summary, folder / "model", instances)
        text += "<h3>Held-out evaluation</h3>" + note
        if final:
            text += _table(sorted(final.items())) + markov_comparison(
                results, final, findings, summary.get("steps")
            )
    if context_lengths and (folder / "model").is_dir() and instances.is_dir():
        rows = mlm_accuracy_by_context(
            folder / "model", instances, context_lengths, max_windows=context_windows
        )
        if findings is not None:
            findings["context"] = rows
        figure, axis = plt.subplots(figsize=(5, 3.5))
        axis.plot([r["context_length"] for r in rows], [r["mlm_accuracy"] for r in rows], "o-")
        axis.set_xscale("log", base=2)
        axis.set_xlabel("context length (tokens)")
        axis.set_ylabel("masked-token accuracy")
        text += "<h3>Masked-token accuracy against context length</h3>"
        text += _image(_figure_png(figure), "MLM accuracy against context length")
        plt.close(figure)
        text += _table(
            [(r["context_length"], r["mlm_accuracy"], r["bits_per_character"],
              context_gain_text(r, "accuracy_gain"), context_gain_text(r, "bits_gain"),
              r["windows"]) for r in rows],
            ("tokens", "MLM accuracy", "bits per character",
             "accuracy gain over the previous length [95% interval]",
             "bits per bp saved over the previous length [95% interval]", "windows"),
        )  # fmt: skip
    return text


def structure_auroc_section(results: Path, resamples: int = 1000,
                            findings: dict | None = None) -> str:  # fmt: skip
    """On the demo genome: the chromatin predictor's median test AUROC over the features
    whose labels need kilobases of context and over the local ones, beside each
    baseline, with paired 95% intervals (test bins resampled); the long-range rows go
    into `findings`."""
    from dataclasses import replace

    from genobird.tasks.compare import paired_median_auroc, read_feature_predictions

    manifest_path = results / "reference" / "manifest.json"
    ours_path = results / "chromatin" / "report" / "test_predictions.npz"
    if not (manifest_path.is_file() and ours_path.is_file()):
        return ""
    long_range = set(json.loads(manifest_path.read_text()).get("long_range_features", []))
    if not long_range:
        return ""

    def by_reach(run):
        groups = ["long-range" if name in long_range else "local" for name in run.feature_names]
        return replace(run, categories=groups)

    ours = by_reach(read_feature_predictions(ours_path))
    rows = []
    for kind in ("cnn", "kmer-lr"):
        theirs_path = results / "chromatin" / "baselines" / kind / "report" / "test_predictions.npz"
        if not theirs_path.is_file():
            continue
        theirs = by_reach(read_feature_predictions(theirs_path))
        paired = paired_median_auroc(ours, theirs, resamples)["categories"]
        if findings is not None and "long-range" in paired:
            findings.setdefault("long_range", {})[SHORT_NAMES[kind]] = paired["long-range"]
        for group in ("long-range", "local"):
            if group in paired:
                row = paired[group]
                rows.append((group, row["features"], MODEL_NAMES.get(kind, kind), row["a"],
                             row["b"], _difference_cell(row)))  # fmt: skip
    if not rows:
        return ""
    names = ", ".join(sorted(long_range))
    return (
        "<h3>Chromatin features by the context their labels need</h3><p>Median test AUROC "
        f"over the long-range features ({names}: set by DNA kilobases from the bin) and "
        "over the local ones, genobird beside each baseline; the difference with its 95% "
        f"interval over {resamples:,} paired resamples of the test bins.</p>"
        + _table(
            rows,
            ("features", "count", "baseline", "genobird", "baseline's", "genobird minus baseline"),
        )
    )


def copy_context_section(results: Path, lengths, windows: int) -> str:
    """On a genome with copies (results/reference/copies.bed): bits per bp of the
    pretrained model on held-out bases in copies and on the others, by context length,
    beside the pipeline's Markov model on the same bases."""
    from genobird.baselines.markov import fit_counts, read_dna
    from genobird.copy_context import bits_by_copy_context

    copies = results / "reference" / "copies.bed"
    model = results / "pretrain" / "model"
    index_path = results / "corpus" / "heldout.txt.index.json"
    if not (copies.is_file() and model.is_dir() and index_path.is_file()) or not lengths:
        return ""
    chromosomes = json.loads(index_path.read_text())["chromosomes"]
    markov, markov_path = None, results / "baselines" / "markov.json"
    if markov_path.is_file() and (results / "corpus" / "train.txt").is_file():
        fitted = json.loads(markov_path.read_text())
        counts = fit_counts(read_dna(results / "corpus" / "train.txt"), fitted["order"],
                            fitted.get("both_strands", True))  # fmt: skip
        markov = (counts, fitted["order"], fitted["alpha"])
    fasta = results / "reference" / "genome.fa"
    rows = bits_by_copy_context(model, fasta, copies, chromosomes, list(lengths), markov,
                                max_windows=windows)  # fmt: skip

    def saved(entry):
        if "saved_over_previous" not in entry:
            return ""
        value, low, high = entry["saved_over_previous"]
        return f"{value:+.4f} [{low:+.4f}, {high:+.4f}]"

    table = [(r["context_length"], r["copy"]["bits_per_bp"], saved(r["copy"]),
              r["other"]["bits_per_bp"], saved(r["other"]),
              *((r["markov"]["copy"], r["markov"]["other"]) if markov else ()))
             for r in rows]  # fmt: skip
    header = ("tokens", "genobird, in copies", "saved over the previous length [95%]",
              "genobird, elsewhere", "saved over the previous length [95%]",
              *(("Markov, in copies", "Markov, elsewhere") if markov else ()))  # fmt: skip
    first = rows[0]
    return (
        "<h3>Reading copies from context</h3><p>Bits per bp of held-out bases "
        f"({', '.join(chromosomes)}) that lie in a copy or its source (copies.bed: "
        f"{first['copy']['bp']:,} bp scored) and of the others ({first['other']['bp']:,} bp), "
        f"the same {first['stretches']:,} stretches at every context length; a model that "
        "reads a masked piece from its copy gains more from context in copies than "
        "elsewhere, where a Markov model of the training chromosomes cannot.</p>"
        + _table(table, header)
    )


def context_gain_text(row: dict, gain: str = "accuracy_gain") -> str:
    """'+0.0123 [+0.0050, +0.0196]': a context length's `gain` ("accuracy_gain" or
    "bits_gain") over the previous length with its 95% interval; '' for the first."""
    if gain not in row:
        return ""
    low, high = row[gain + "_ci95"]
    return f"{row[gain]:+.4f} [{low:+.4f}, {high:+.4f}]"


BINARY_COLUMNS = ("mcc", "f1", "f1_at_valid_threshold", "auroc", "auprc")
MULTILABEL_COLUMNS = ("median_auroc", "median_auprc")
GENOBIRD_NAME = "genobird (fine-tuned BigBird)"
MODEL_NAMES = {"kmer-lr": "k-mer (3-6) logistic regression", "cnn": "3-layer CNN, one-hot"}
SHORT_NAMES = {"kmer-lr": "k-mer LR", "cnn": "CNN"}
ZERO_SHOT_NAMES = {"genobird": "genobird zero-shot (pretrained BigBird)",
                   "markov": "order-k Markov model zero-shot"}  # fmt: skip


def task_folders(results: Path) -> list[str]:
    """Results-relative folders of every fine-tuning task that has a report."""
    folders = [task for task in TASKS if (results / task / "report" / "metrics.json").is_file()]
    tasks = results / "tasks"
    if tasks.is_dir():
        folders += [
            f"tasks/{folder.name}"
            for folder in sorted(tasks.iterdir())
            if (folder / "report" / "metrics.json").is_file()
        ]
    return folders


def comparison_table(results: Path, folder: str) -> str:
    """genobird against each baseline that ran on the same data set (test split); with
    further fine-tuning seeds, each seed and their mean."""
    main = results / folder / "report" / "metrics.json"
    seeds = seed_runs(results / folder)
    genobird = [("genobird, seed 0", main), *seeds] if seeds else [(GENOBIRD_NAME, main)]
    baselines = [
        (MODEL_NAMES.get(path.parts[-3], path.parts[-3]), path)
        for path in sorted((results / folder / "baselines").glob("*/report/metrics.json"))
    ]
    return runs_table(genobird + baselines, seeds=len(genobird))


def seed_runs(task: Path) -> list[tuple[str, Path]]:
    """The further fine-tuning seeds of a task (a sequence task's `seeds`), by seed."""
    found = [path for path in task.glob("seeds/*/report/metrics.json") if path.parts[-3].isdigit()]
    found.sort(key=lambda path: int(path.parts[-3]))
    return [(f"genobird, seed {path.parts[-3]}", path) for path in found]


def zero_shot_table(results: Path, folder: str) -> str:
    """The data set classified by likelihood alone (genobird zero-shot): the pretrained
    model against the Markov models of the same DNA; empty where neither ran."""
    runs = [(name, results / folder / "zero-shot" / kind / "report" / "metrics.json")
            for kind, name in ZERO_SHOT_NAMES.items()]  # fmt: skip
    runs = [(name, path) for name, path in runs if path.is_file()]
    if not runs:
        return ""
    markov = results / folder / "zero-shot" / "markov" / "report" / "metrics.json"
    order = json.loads(markov.read_text()).get("order") if markov.is_file() else "k"
    note = (
        "<p>No fine-tuning: each test sequence's bits per bp under the pretrained model, "
        "and under order-k Markov models of the DNA it was pretrained on (order "
        f"{order} chosen on the validation split), made a probability by a one-feature "
        "logistic fit on the training split.</p>"
    )
    return "<h3>Zero-shot, by likelihood alone</h3>" + note + runs_table(runs)


def runs_table(runs: list[tuple[str, Path]], seeds: int = 1) -> str:
    """The test metrics of runs on one data set, and the first minus each other, paired.
    The first `seeds` runs are one recipe's seeds: they get a row of their mean, and it is
    their mean that is paired with each other run."""
    reports = [(name, json.loads(path.read_text())) for name, path in runs]
    columns = BINARY_COLUMNS if "f1" in reports[0][1] else MULTILABEL_COLUMNS
    rows = [(name, *(report.get(key, "-") for key in columns)) for name, report in reports]
    if seeds > 1:
        means = [mean_cell([report.get(key) for _, report in reports[:seeds]]) for key in columns]
        rows.insert(seeds, (f"{GENOBIRD_NAME}, mean of {seeds} seeds", *means))
    text = _table(rows, ("model", *columns))
    if "f1" in reports[0][1]:
        text += paired_difference_table([(name, path.parent) for name, path in runs], seeds)
    return text


def mean_cell(values: list):
    """The mean of a column's figures, or '-' where a run lacks one."""
    if any(value is None for value in values):
        return "-"
    return round(statistics.fmean(values), 4)


def paired_difference_table(
    reports: list[tuple[str, Path]], seeds: int = 1, resamples: int = 2000
) -> str:
    """genobird (the mean of its first `seeds` runs) minus each baseline on the same test
    sequences, with 95% intervals (genobird.tasks.compare); empty where genobird's first
    run wrote no test predictions."""
    from genobird.tasks.compare import (
        METRICS,
        describe_difference,
        paired_bootstrap,
        read_predictions,
    )
    from genobird.tasks.metrics import PREDICTIONS

    present = {folder for _, folder in reports if (folder / PREDICTIONS).is_file()}
    others = [(name, folder) for name, folder in reports[seeds:] if folder in present]
    if reports[0][1] not in present or not others:
        return ""
    genobird = [read_predictions(folder) for _, folder in reports[:seeds] if folder in present]
    rows = []
    for name, folder in others:
        try:
            result = paired_bootstrap(genobird, read_predictions(folder), resamples)
        except InputError as error:  # another data set's split: no pairing, say why
            rows.append((name, *["-"] * (len(METRICS) - 1), str(error)))
            continue
        rows.append((name, *(describe_difference(result["metrics"][m]) for m in METRICS)))
    side = "genobird" if len(genobird) == 1 else f"The mean of genobird's {len(genobird)} seeds"
    note = (f"<p>{side} minus each baseline on the same {genobird[0].labels.size:,} test "
            f"sequences, with 95% paired bootstrap intervals ({resamples:,} resamples); "
            "an interval that holds 0 is a tie on this split.</p>")  # fmt: skip
    return note + _table(rows, ("genobird minus", *METRICS))


def spread_rows(metrics: dict, shown: int = 20) -> list[tuple]:
    spread = metrics.get("prediction_spread")
    if not spread:
        return []
    rows = [(f"prediction std over test sequences, {k.removesuffix('_std')}", spread[k])
            for k in ("min_std", "median_std", "max_std")]  # fmt: skip
    by_feature = spread["std_by_feature"]
    if len(by_feature) > 1:
        rows += [(f"prediction std, {name}", value)
                 for name, value in list(by_feature.items())[:shown]]  # fmt: skip
    return rows


# what a promoter predictor of genobird's promoter data sets has learnt to tell apart
PROMOTER_SCOPE = (
    "What this model knows: its negatives are DeePromoter's, each promoter with 12 of its "
    "20 segments replaced by random bases (unless the data set was built with "
    "--hard-negatives). It tells a promoter from its scramble, not a promoter from the rest "
    "of the genome, and scores most genomic windows high: judge it on genomic negatives "
    "before scanning a genome with it (docs/scoring.md)."
)


def finetune_section(results: Path, folder: str) -> str:
    report_dir = results / folder / "report"
    metrics = json.loads((report_dir / "metrics.json").read_text())
    name = folder.removeprefix("tasks/")
    split = html.escape(metrics.get("split", "?"))
    text = f"<h2>Fine-tuning: {html.escape(name)} (split: {split})</h2>"
    text += how_evaluated(metrics)
    if metrics.get("task") == "promoter":
        text += f"<p>{PROMOTER_SCOPE}</p>"
    text += "<h3>Against baselines on the same data</h3>" + comparison_table(results, folder)
    text += zero_shot_table(results, folder)
    if "f1" in metrics:
        rows = [(key, metrics[key]) for key in PROMOTER_KEYS if key in metrics]
    else:
        rows = [("examples", metrics["examples"]), ("median AUROC", metrics["median_auroc"]),
                ("median AUPRC", metrics["median_auprc"])]  # fmt: skip
        rows += [
            (f"median AUROC, {category}", value)
            for category, value in sorted(metrics.get("median_auroc_by_category", {}).items())
        ]
    text += _table(rows + spread_rows(metrics))
    for png in sorted(report_dir.glob("*.png")):
        text += _image(png.read_bytes(), f"{name} {png.stem}")
    return text


def chromatin_task_section(task: Path) -> str:
    """A chromatin task fine-tuned at several contexts (the pipeline's chromatin_tasks):
    positives per split, every arm at every context by category (and by scale, where the
    feature tables give one), each context's gain over the narrowest per arm, and genobird
    against each baseline at the same context and at each one's best, paired over the test
    bins."""
    from genobird.tasks.context_ablation import (
        feature_scales,
        plot_context_ablation,
        summarise,
        targets,
    )

    summary = summarise(task)
    text = f"<h2>Chromatin profiles: {html.escape(task.name)}</h2>"
    text += positives_table(task / "data.h5")
    first = json.loads((context_runs_metrics(task, summary)).read_text())
    text += how_evaluated(first)
    pretrained = (first.get("training") or {}).get("pretrained")
    if pretrained:
        text += f"<p>Every context fine-tunes the pretrained model {html.escape(pretrained)}.</p>"
    text += context_ablation_tables(summary)
    claims = "".join(f"<li>{'met' if t.met else 'NOT met'}: {html.escape(t.claim)} "
                     f"({html.escape(t.detail)})</li>" for t in targets(task, summary))  # fmt: skip
    text += f"<p>Targets:</p><ul>{claims}</ul>"
    if any(feature_scales(task).values()):
        text += "<h3>By scale</h3>" + context_ablation_tables(summarise(task, by="scale"))
    text += _image(_figure_png(plot_context_ablation(summary)), "median AUROC by context")
    return text


def context_ablation_tables(summary: dict) -> str:
    """The ablation's tables, grouped as the summary is (by category or by scale)."""
    groups = sorted({g for arm in summary["arms"].values()
                     for row in arm["contexts"].values() for g in row["medians"]})  # fmt: skip
    rows = []
    for arm in summary["arms"].values():
        for bp, row in arm["contexts"].items():
            best = " (best on validation)" if bp == arm["best_context"] else ""
            valid = row["validation_auroc"]
            rows.append((f"{arm['name']}, {bp:,} bp{best}",
                         "-" if valid is None else f"{valid:.3f}",
                         "-" if row["seconds"] is None else f"{row['seconds'] / 60:.1f}",
                         *(_median_cell(row["medians"].get(g)) for g in groups)))  # fmt: skip
    text = (f"<p>Test median AUROC / AUPRC by {summary['by']} over the features with at least "
            f"{summary['min_positives']} test positives (their count in brackets), beside "
            "each run's mean validation AUROC (what chooses an arm's best context) and wall "
            "time.</p>")  # fmt: skip
    text += _table(rows, ("model", "validation AUROC", "minutes", *groups))
    gains = []
    for arm, runs in summary["gain_over_narrowest"].items():
        narrowest = min(summary["arms"][arm]["contexts"])
        gains += [(f"{summary['arms'][arm]['name']}, {bp:,} bp minus {narrowest:,} bp",
                   *(_difference_cell(row.get(g)) for g in groups))
                  for bp, row in runs.items()]  # fmt: skip
    if gains:
        text += ("<p>What more context adds to each arm: the median AUROC difference with "
                 f"its 95% interval over {summary['resamples']:,} paired resamples of the test "
                 "bins.</p>" + _table(gains, ("comparison", *groups)))  # fmt: skip
    against = [(f"genobird minus {row['name']}, both at {row['context']:,} bp",
                *(_difference_cell(row["categories"].get(g)) for g in groups))
               for row in summary["same_context"]]  # fmt: skip
    against += [(f"genobird {row['genobird_context']:,} bp minus {row['name']} "
                 f"{row['context']:,} bp, each at its best",
                 *(_difference_cell(row["categories"].get(g)) for g in groups))
                for row in summary["best_against_best"]]  # fmt: skip
    if against:
        text += _table(against, ("comparison", *groups))
    return text


def context_runs_metrics(task: Path, summary: dict) -> Path:
    return task / f"context-{summary['chosen_context']}" / "report" / "metrics.json"


def positives_table(data: Path) -> str:
    """Positives per feature in each split, by category (a held-out split whose features
    have few positives cannot evaluate them)."""
    from genobird.tasks.data import read_metadata

    if not data.is_file():
        return ""
    meta = read_metadata(data)
    categories = meta["categories"] or ["all"] * len(meta["feature_names"])
    rows = []
    for split, positives in meta["positives_by_split"].items():
        for category in sorted(set(categories)):
            counts = [p for p, c in zip(positives, categories, strict=True) if c == category]
            rows.append((split, category, meta["counts"][split], len(counts),
                         int(statistics.median(counts)), min(counts),
                         sum(count >= 20 for count in counts)))  # fmt: skip
    header = ("split", "category", "windows", "features", "median positives", "fewest",
              "features with 20+")  # fmt: skip
    return _table(rows, header)


def _median_cell(value) -> str:
    if value is None:
        return "-"
    auroc, auprc, features = value
    return f"{auroc:.3f} / {auprc:.3f} ({features})"


def _difference_cell(row) -> str:
    from genobird.tasks.compare import describe_difference

    return describe_difference(row) if row else "-"


def chromatin_task_folders(results: Path) -> list[Path]:
    folder = results / "chromatin_tasks"
    if not folder.is_dir():
        return []
    return [task for task in sorted(folder.iterdir()) if list(task.glob("context-*/report"))]


def how_evaluated(metrics: dict) -> str:
    """How genobird's figures of a task were made, from its metrics.json: the training a
    reader needs to repeat them and what each test prediction averages (the fields an
    older report lacks are left out)."""
    parts = _recipe_parts(metrics)
    if "rc_average" in metrics:
        parts.append(_prediction_part(metrics))
    return f"<p>genobird: {html.escape('; '.join(parts))}.</p>" if parts else ""


def _recipe_parts(metrics: dict) -> list[str]:
    training, parts = metrics.get("training") or {}, []
    if training.get("steps"):
        steps = f"{training['steps']:,} fine-tuning steps"
        selected = training.get("best_step") not in (None, training["steps"])
        parts.append(f"{steps}, the best validation check's weights kept" if selected else steps)
    if metrics.get("learning_rate"):
        parts.append(f"learning rate {metrics['learning_rate']:g}")
    if metrics.get("pooling"):
        parts.append(f"{metrics['pooling']} pooling")
    if metrics.get("base_cnn_channels"):
        parts.append(f"a {metrics['base_cnn_channels']}-filter CNN on the bases beside the "
                     "encoder")  # fmt: skip
    if metrics.get("base_kmers"):
        parts.append(f"the counts of its 3- to {metrics['base_kmers']}-mers beside the encoder")
    if blend := training.get("base_blend"):
        weight = blend["cnn_weight"]
        parts.append(f"started from {weight:g} x the base CNN + {1 - weight:g} x the k-mer LR "
                     "(chosen on validation)")  # fmt: skip
    if metrics.get("base_cnn_channels") or metrics.get("base_kmers"):
        parts.append(_start_part(training))
        if training.get("best_step") == 0:
            parts.append("the start kept: the encoder added nothing on validation")
    if metrics.get("bpe_dropout"):
        parts.append(f"BPE-dropout {metrics['bpe_dropout']:g} on the training windows")
    if choice := metrics.get("recipe_choice"):
        answers = "; ".join(_answer(q, choice[q]) for q in choice["asked"])
        parts.append(f"chosen on validation with probes of at most {choice['probe_steps']} "
                     "steps, a default changed only for a lead beyond one standard error: "
                     f"{answers}")  # fmt: skip
    return parts


def _start_part(training: dict) -> str:
    """Whether the classifier started as its baselines: its check before the first step
    against their own validation AUROC (tasks.finetune.start_check)."""
    check = training.get("start_check")
    if check is None:
        if "start_validation_auroc" in training:
            return "the start not checked (no validation check before the first step)"
        return (
            "the start not checked against the baselines: fine-tuned before genobird "
            "checked it, and such a start was not always the baselines' (rerun to check)"
        )
    figures = (
        f"validation AUROC {check['step_0']:.4f} at step 0, the baselines' {check['baselines']:.4f}"
    )
    if check["agree"]:
        return f"the start checked: {figures}"
    return f"WARNING: the start was not the baselines ({figures})"


# how the report names each question that tasks.probes answers on validation
QUESTION_NAMES = {"strands": "trained on", "learning_rate": "learning rate", "pooling": "pooling"}


def _answer(question: str, answer: dict) -> str:
    """e.g. 'learning rate 0.0001 (AUROC 0.912 vs 0.0003 0.905)': the kept one first."""
    if "not_probed" in answer:
        return f"{QUESTION_NAMES[question]} {answer['chosen']} ({answer['not_probed']})"
    scores, chosen = answer["validation_auroc"], answer["chosen"]
    others = ", ".join(f"{name} {score:.3f}" for name, score in scores.items() if name != chosen)
    return f"{QUESTION_NAMES[question]} {chosen} (AUROC {scores[chosen]:.3f} vs {others})"


def _prediction_part(metrics: dict) -> str:
    cuts, both = metrics.get("segmentations") or 0, metrics["rc_average"]
    if cuts:
        over = f"both strands and {cuts} sampled cuts per strand" if both else (
            f"{cuts} sampled cuts of one strand")  # fmt: skip
        return f"each test prediction is the mean over {over}"
    if both:
        return "each test prediction is the mean over both strands (the tokenizer's cut)"
    return "each test prediction reads one strand (the tokenizer's cut)"


def scores_section(results: Path, out: Path, preview_rows: int = 5) -> str:
    tables = sorted((results / "score").glob("*.tsv"))
    tables = [t for t in tables if not t.name.endswith(".rejected.tsv")]
    if not tables:
        return ""
    text = "<h2>Score tables</h2>"
    for table in tables:
        lines = table.read_text().splitlines()
        link = html.escape(os.path.relpath(table.resolve(), out.parent.resolve()))
        text += f'<h3><a href="{link}">{html.escape(table.name)}</a> ({len(lines) - 1:,} rows)</h3>'
        header = lines[0].split("\t") if lines else []
        shown = header[:8]
        rows = [tuple(line.split("\t")[: len(shown)]) for line in lines[1 : 1 + preview_rows]]
        text += _table(rows, tuple(shown))
    return text


STYLE = """body{font-family:sans-serif;max-width:960px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ccc;padding:2px 8px;
font-size:90%;text-align:right}th{background:#f3f3f3}img{max-width:100%;margin:.5em 0}"""


def build_report(
    results,
    out,
    context_lengths=(128, 256, 512, 1024),
    title=None,
    context_windows=4000,
    copy_context=((32, 128, 512, 1024), 300),
) -> Path:
    """Write the HTML report of the pipeline results in `results` to `out`; the context
    ablation scores at most `context_windows` held-out windows per length; on a genome
    with copies.bed, `copy_context` = (lengths, stretches) of the copy section."""
    results, out = Path(results), Path(out)
    if not results.is_dir():
        raise InputError(f"{results}: no such results folder; run the pipeline first")
    if context_windows < 1:
        raise ConfigError(f"context windows must be at least 1, got {context_windows}")
    findings: dict = {}
    sections = [
        genome_section(results),
        corpus_section(results),
        pretraining_section(results, list(context_lengths), context_windows, findings),
        copy_context_section(results, *copy_context),
        *(finetune_section(results, folder) for folder in task_folders(results)),
        *(chromatin_task_section(task) for task in chromatin_task_folders(results)),
        structure_auroc_section(results, findings=findings),
        scores_section(results, out),
    ]
    rows = checks(results, findings)
    if not any(sections) and not rows:
        raise InputError(
            f"{results}: nothing to report (no reference, corpus, pretrain, tasks or "
            "chromatin results in it); give the folder a pipeline wrote, e.g. results/demo"
        )
    notes = demo_notes(results, rows, findings)
    sections.insert(1, checks_section(rows, notes))
    title = html.escape(title or f"genobird report: {results}")
    page = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{STYLE}</style></head><body><h1>{title}</h1>{''.join(sections)}</body></html>\n"
    )
    with atomic_write(out) as handle:
        handle.write(page)
    write_checks(checks_path(out), rows, notes)
    return out


def checks_section(rows: list[dict], notes: list[str] = ()) -> str:
    """The checks against the baselines (`genobird.report_checks`), each met or not, and
    `notes` on what kept the unmet ones out of the run's reach."""
    if not rows:
        return ""

    def figure(value):
        return "-" if value is None else value

    def difference(value):
        if value is None:
            return "-"
        point, low, high = value
        return f"{point:+.4f}" if low is None else f"{point:+.4f} [{low:+.4f}, {high:+.4f}]"

    table = [(row["check"], figure(row["genobird"]), figure(row["baseline"]),
              difference(row["difference"]), "met" if row["met"] else "not met")
             for row in rows]  # fmt: skip
    met = sum(row["met"] for row in rows)
    return (
        f"<h2>Checks against the baselines: {met} of {len(rows)} met</h2><p>Each check "
        "compares genobird with a baseline run on the same data in this pipeline; "
        "differences are genobird minus the baseline, with paired 95% intervals where "
        "resampling gives one. The sections below hold the figures.</p>"
        + _table(table, ("check", "genobird", "baseline", "difference [95%]", "result"))
        + _notes(notes)
    )


def _notes(notes: list[str]) -> str:
    if not notes:
        return ""
    items = "".join(f"<li>{html.escape(note)}</li>" for note in notes)
    return (
        f"<p>Why on this run:</p><ul>{items}</ul><p>What each check needs on the demo "
        "genome, and what was tried: benchmarks/README.md (the demo pipeline).</p>"
    )
