"""The page of one run (`genobird report --results RUN` on a `finetune` or `baseline`
output): one self-contained HTML page drawn from the run's own files, computing nothing
a run did not write. It shows what the run planned and what stopped it, what each base
reader, blend and probe chose, the start check, the test figures at the threshold chosen
on validation and at 0.5, the model beside the baselines it was paired with
(report/compare.json, with paired 95% intervals), validation by step, ROC/PR,
calibration, and links to the model card, the files and the motifs it reads, where
`genobird motifs` wrote them into RUN/motifs."""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np

from genobird.errors import InputError
from genobird.interpret import RUN_MOTIFS_FOLDER
from genobird.report.page import STYLE, figure_png, html_image, html_table

METRICS = Path("report") / "metrics.json"
# bins of predicted probability in the calibration plot
CALIBRATION_BINS = 10


def is_run_folder(results: Path) -> bool:
    """Whether `results` is one run's output (a finetune or baseline --out folder)."""
    return (Path(results) / METRICS).is_file()


def build_run_page(run: Path, out: Path) -> Path:
    from genobird.fileio import atomic_write

    run, out = Path(run), Path(out)
    metrics = read_json(run / METRICS)
    if metrics is None:
        raise InputError(f"{run}: no {METRICS}; give a finetune or baseline --out folder")
    kind = run_kind(metrics)
    title = html.escape(f"genobird {kind}: {run}")
    sections = [
        headline_section(metrics),
        plan_section(metrics),
        readers_section(metrics),
        compare_section(read_json(run / "report" / "compare.json")),
        curves_section(run, metrics),
        links_section(run, out),
    ]
    page = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{STYLE}</style></head><body><h1>{title}</h1>"
        f"{''.join(s for s in sections if s)}</body></html>\n"
    )
    with atomic_write(out) as handle:
        handle.write(page)
    return out


def read_json(path: Path):
    return json.loads(path.read_text()) if path.is_file() else None


def run_kind(metrics: dict) -> str:
    if "baseline" in metrics:
        return f"baseline {metrics['baseline'].get('model', '')} ({metrics['task']})"
    return f"finetune {metrics['task']}"


def number(value, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


# --------------------------------------------------------------------------- sections
def headline_section(metrics: dict) -> str:
    if "median_auroc" in metrics:
        rows = [
            ("median AUROC", number(metrics["median_auroc"])),
            ("median AUPRC", number(metrics.get("median_auprc"))),
        ]
        by_category = metrics.get("median_auroc_by_category") or {}
        rows += [
            (f"median AUROC, {category}", number(value)) for category, value in by_category.items()
        ]
        return "<h2>Test figures</h2>" + html_table(rows, ("figure", "value"))
    half = metrics.get("at_0.5") or {}
    threshold = metrics.get("threshold")
    rows = [
        (name, number(metrics.get(key)), number(half.get(key)) if key in half else "")
        for name, key in (
            ("AUROC", "auroc"),
            ("AUPRC", "auprc"),
            ("MCC", "mcc"),
            ("F1", "f1"),
            ("precision", "precision"),
            ("recall", "recall"),
            ("accuracy", "accuracy"),
        )
    ]
    at = (
        f"at {threshold:.4g}, chosen by {metrics.get('threshold_chosen_by', '-')}"
        if threshold is not None
        else "at 0.5"
    )
    return (
        f"<h2>Test figures ({metrics.get('examples', 0):,} windows, "
        f"{metrics.get('positives', 0):,} positive)</h2>"
        f"<p>Thresholded figures {html.escape(at)}; beside them, at 0.5.</p>"
        + html_table(rows, ("figure", "at the threshold", "at 0.5"))
    )


def plan_section(metrics: dict) -> str:
    training = metrics.get("training") or {}
    baseline = metrics.get("baseline") or {}
    rows = []
    if "plan" in training:
        rows.append(("plan", training["plan"]))
    if cost := training.get("estimated_cost"):
        rows.append(
            (
                "estimated minutes (likely / at most)",
                f"{cost.get('likely_minutes')} / {cost.get('at_most_minutes')}",
            )
        )
    if "steps" in training:
        rows += [
            ("steps", training["steps"]),
            ("weights kept: step", training.get("best_step")),
            ("best validation AUROC", number(training.get("best_validation_auroc"))),
            ("stopped by", training.get("stopped_by", "-")),
        ]
    if "epochs" in baseline:
        rows += [
            ("epochs", baseline["epochs"]),
            ("weights kept: epoch", baseline.get("best_epoch")),
            ("stopped by", baseline.get("stopped_by", "-")),
        ]
    if "C" in baseline:
        rows.append(("C chosen on validation", baseline["C"]))
    if baseline.get("validation_auroc") is not None:
        rows.append(("validation AUROC", number(baseline["validation_auroc"])))
    if check := training.get("attention_kernel_check"):
        rows.append(
            (
                "attention kernel",
                f"{check.get('kernel')}: "
                + (
                    "checked against the reference"
                    if check.get("checked")
                    else check.get("why", "not checked")
                ),
            )
        )
    if not rows:
        return ""
    return "<h2>What the run did</h2>" + html_table([(k, str(v)) for k, v in rows])


def readers_section(metrics: dict) -> str:
    """What each base reader, the blend, the strands and the probes chose."""
    training = metrics.get("training") or {}
    rows = []
    if cnn := training.get("base_cnn"):
        rows.append(
            (
                "base CNN",
                f"{cnn.get('channels')} filters, {cnn.get('epochs')} epochs "
                f"(best {cnn.get('best_epoch')}, stopped by {cnn.get('stopped_by')}); "
                + (f"read from {cnn['read_from']}" if cnn.get("read_from") else "trained"),
            )
        )
    if kmer := training.get("base_kmer_lr"):
        by_c = ", ".join(
            f"C {c}: {number(v)}" for c, v in kmer.get("validation_auroc_by_C", {}).items()
        )
        rows.append(
            (
                "base k-mer LR",
                f"k {kmer.get('k')}, C {kmer.get('C')} chosen on "
                f"validation ({by_c}); strands {kmer.get('strands', '-')}",
            )
        )
    if blend := training.get("base_blend"):
        weights = ", ".join(
            f"{w}: {number(v)}" for w, v in blend.get("validation_auroc_by_cnn_weight", {}).items()
        )
        weight = blend.get("cnn_weight_by_category", blend.get("cnn_weight"))
        rows.append(("blend", f"CNN weight {weight} (validation AUROC by weight: {weights})"))
    strands = metrics.get("strands") or {}
    if strands.get("chosen"):
        by = ", ".join(
            f"{k}: {number(v)}" for k, v in strands.get("start_validation_auroc", {}).items()
        )
        rows.append(
            (
                "strands",
                f"{strands['chosen']}, chosen by {strands.get('chosen_by')}"
                + (f" ({by})" if by else ""),
            )
        )
    for question, answer in (metrics.get("recipe_choice") or {}).items():
        rows.append((f"probe: {question}", json.dumps(answer)))
    if check := training.get("start_check"):
        rows.append(
            (
                "start check",
                f"validation AUROC before the first step "
                f"{check.get('step_0')}, its baselines {check.get('baselines')}: "
                f"{'agree' if check.get('agree') else 'DISAGREE'}",
            )
        )
    if "start_test_auroc" in training:
        rows.append(("the start's test AUROC", number(training["start_test_auroc"])))
    if not rows:
        return ""
    return (
        "<h2>Base readers, strands and probes</h2><p>What the run chose on validation "
        "before and while fine-tuning.</p>" + html_table(rows, ("choice", "what was chosen"))
    )


def compare_section(comparisons: dict | None) -> str:
    """The model beside each baseline it was paired with (`evaluation.compare.compare_run`)."""
    if not comparisons:
        return (
            "<h2>Beside its baselines</h2><p>No baseline was paired with this run (a run "
            "without base readers or --base-start-from); `genobird baseline compare RUN "
            "BASELINE` pairs two runs.</p>"
        )
    rows = []
    for name, result in comparisons.items():
        for metric, row in (result.get("metrics") or {}).items():
            rows.append(
                (
                    name,
                    metric,
                    interval_cell(row, "a"),
                    interval_cell(row, "b"),
                    difference_cell(row),
                )
            )
        for category, row in (result.get("categories") or {}).items():
            rows.append(
                (
                    name,
                    f"median AUROC, {category}",
                    interval_cell(row, "a"),
                    interval_cell(row, "b"),
                    difference_cell(row),
                )
            )
    examples = next(iter(comparisons.values())).get("examples", 0)
    return (
        "<h2>Beside its baselines</h2><p>On the same "
        f"{examples:,} test windows, paired: the model minus each baseline with the 95% "
        "interval of paired bootstrap resamples; MCC and F1 at each side's own threshold "
        "chosen on validation.</p>"
        + html_table(
            rows, ("baseline", "figure", "this run [95%]", "baseline [95%]", "difference [95%]")
        )
    )


def difference_cell(row: dict) -> str:
    return f"{row['difference']:+.4f} [{row['low']:+.4f}, {row['high']:+.4f}]"


def interval_cell(row: dict, side: str) -> str:
    if f"{side}_low" not in row:
        return number(row.get(side))
    return f"{row[side]:.4f} [{row[side + '_low']:.4f}, {row[side + '_high']:.4f}]"


def curves_section(run: Path, metrics: dict) -> str:
    images = [validation_figure(run, metrics), calibration_figure(run)]
    images += [
        html_image(path.read_bytes(), path.stem) for path in sorted((run / "report").glob("*.png"))
    ]
    images = [image for image in images if image]
    if not images:
        return ""
    return (
        "<h2>Curves</h2><p>Validation AUROC by step (or epoch), the test split's ROC and "
        "precision-recall curves, and calibration: the share of positives among test "
        "windows by predicted probability (on the diagonal: probabilities read as "
        "chances).</p>" + "".join(images)
    )


def validation_figure(run: Path, metrics: dict) -> str:
    from matplotlib import pyplot as plt

    points = []
    if (path := run / "metrics.jsonl").is_file():
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        points = [(row["step"], row["eval_auroc"]) for row in rows if "eval_auroc" in row]
    unit = "step"
    if not points and (
        by_epoch := (metrics.get("baseline") or {}).get("validation_auroc_by_epoch")
    ):
        points, unit = list(enumerate(by_epoch, start=1)), "epoch"
    if not points:
        return ""
    figure, axis = plt.subplots(figsize=(5, 3))
    axis.plot(*zip(*points, strict=True), marker="o")
    axis.set_xlabel(unit)
    axis.set_ylabel("validation AUROC")
    png = figure_png(figure)
    plt.close(figure)
    return html_image(png, f"validation AUROC by {unit}")


def calibration_figure(run: Path) -> str:
    from matplotlib import pyplot as plt

    from genobird.datasets.metrics import PREDICTIONS

    path = run / "report" / PREDICTIONS
    if not path.is_file():
        return ""
    with np.load(path, allow_pickle=False) as saved:
        labels, probabilities = saved["labels"], saved["probabilities"]
    if labels.shape[1] != 1:
        return ""
    labels, probabilities = labels[:, 0].astype(float), probabilities[:, 0].astype(float)
    edges = np.linspace(0, 1, CALIBRATION_BINS + 1)
    which = np.clip(np.digitize(probabilities, edges) - 1, 0, CALIBRATION_BINS - 1)
    counts = np.bincount(which, minlength=CALIBRATION_BINS)
    filled = counts > 0
    mean_p = np.bincount(which, probabilities, CALIBRATION_BINS)[filled] / counts[filled]
    share = np.bincount(which, labels, CALIBRATION_BINS)[filled] / counts[filled]
    figure, axis = plt.subplots(figsize=(4, 4))
    axis.plot([0, 1], [0, 1], color="#aaa", linestyle="--")
    axis.plot(mean_p, share, marker="o")
    for x, y, n in zip(mean_p, share, counts[filled], strict=True):
        axis.annotate(f"{n}", (x, y), textcoords="offset points", xytext=(4, -10), fontsize=7)
    axis.set_xlabel("predicted probability (bin mean)")
    axis.set_ylabel("share of positives")
    axis.set_xlim(0, 1)
    axis.set_ylim(0, 1)
    png = figure_png(figure)
    plt.close(figure)
    return html_image(png, "calibration")


def links_section(run: Path, out: Path) -> str:
    import os

    links = []
    files = (
        (run / "model" / "README.md", "the model card"),
        (run / "model", "the model directory"),
        (run / METRICS, "metrics.json"),
        (run / "report" / "compare.json", "the paired comparisons (JSON)"),
        (run / RUN_MOTIFS_FOLDER / "motifs.html", "the motifs it reads (genobird motifs)"),
    )
    for path, text in files:
        if path.exists():
            target = os.path.relpath(path, out.parent)
            links.append(f"<li><a href='{html.escape(target)}'>{html.escape(text)}</a></li>")
    return f"<h2>Files</h2><ul>{''.join(links)}</ul>" if links else ""
