"""The model card (README.md) of every fine-tuned model directory: what the model scores,
what it was trained and tested on, how its recipe and threshold were chosen, its test
figures beside the baselines of the same run, and what it does not know. Written from
the data set (its counts, splits and the `genobird dataset` command that built it), the
recipe as run and the run's report, as HuggingFace model cards and Kipoi's model.yaml
say the same things."""

from __future__ import annotations

import json
from pathlib import Path

CARD_FILE = "README.md"
# sources listed by name per split; more are counted (sequences given without coordinates)
LISTED_SOURCES = 12
# features listed by name; more are counted by category
LISTED_FEATURES = 20


def model_card(
    meta: dict, recipe: dict, report: dict, sources: dict, baselines: dict, pos_weight: float = 1.0
) -> str:
    """The card's Markdown. `recipe`: the recipe's settings by name; `report`: metrics.json;
    `sources`: each split's windows by contig or file (`windows.split_sources`);
    `baselines`: {name: metrics.json} of the baseline runs the start was read from;
    `pos_weight`: the weight of a positive in the loss."""
    task = meta["task"]
    provenance = meta.get("provenance") or {}
    front = [
        "---",
        "library_name: genobird",
        "tags:",
        "- genomics",
        "- dna",
        "- bigbird",
        f"- {task}",
        "---",
        "",
    ]
    title = f"# genobird {task} model: {len(meta['feature_names']):,} output" + (
        "s" if len(meta["feature_names"]) != 1 else ""
    )
    parts = [
        title,
        what_it_scores(meta, report),
        trained_on(meta, sources, provenance, report),
        how_it_was_chosen(recipe, report),
        figures(report, baselines),
        limits(meta, provenance, pos_weight),
        usage(),
    ]
    return "\n".join(front) + "\n\n".join(part.rstrip() for part in parts) + "\n"


def what_it_scores(meta: dict, report: dict) -> str:
    names = meta["feature_names"]
    listed = ", ".join(f"`{name}`" for name in names[:LISTED_FEATURES])
    if len(names) > LISTED_FEATURES:
        by_category = {}
        for category in meta["categories"]:
            by_category[category] = by_category.get(category, 0) + 1
        listed += f", ... ({', '.join(f'{c} {n:,}' for c, n in by_category.items())})"
    strands = (
        "the mean of both strands' probabilities"
        if report.get("rc_average")
        else "the strand given (its reverse complement is another input)"
    )
    return (
        "## What it scores\n\n"
        f"- Probabilities of: {listed}.\n"
        f"- Windows of {report.get('window_bp', meta['window_bp']):,} bp: a longer record is "
        "centre-cropped, a shorter one N-padded on both sides, and a window more than half "
        "N is refused, not scored.\n"
        f"- Each window is read as {strands}.\n"
    )


def trained_on(meta: dict, sources: dict, provenance: dict, report: dict) -> str:
    lines = ["## Trained on", ""]
    if provenance:
        options = provenance.get("options", {})
        shown = " ".join(
            f"--{key.replace('_', '-')} {_option(value)}"
            for key, value in options.items()
            if value not in (None, False, [], "")
        )
        lines.append(
            f"- Data set built by `{provenance['command']} {shown}` "
            f"(genobird {provenance.get('genobird', '?')})."
        )
    else:
        lines.append(
            "- Data set: how it was built is not recorded in it (built before "
            "genobird recorded it, or by hand)."
        )
    positives = meta.get("positives_by_split", {})
    for split in ("train", "valid", "test"):
        count = meta["counts"].get(split, 0)
        found = sources.get(split, {})
        if len(found) > LISTED_SOURCES:
            where = f"{len(found):,} records or sources"
        else:
            where = ", ".join(f"{name} ({n:,})" for name, n in found.items()) or "none"
        positive = positives.get(split)
        share = f"; positives {positive[0]:,}" if positive and len(positive) == 1 else ""
        lines.append(f"- {split}: {count:,} windows{share}; from {where}.")
    pretrained = (report.get("training") or {}).get("pretrained")
    lines.append(
        f"- Encoder: {'pretrained at ' + pretrained if pretrained else 'trained from scratch'}."
    )
    return "\n".join(lines) + "\n"


def _option(value) -> str:
    if isinstance(value, list):
        return " ".join(map(str, value))
    return "" if value is True else str(value)


def how_it_was_chosen(recipe: dict, report: dict) -> str:
    training = report.get("training") or {}
    lines = ["## How it was chosen", ""]
    settings = ", ".join(f"{key} {value}" for key, value in recipe.items() if value is not None)
    lines.append(f"- Recipe (finetune.json, `genobird finetune --config` reads it): {settings}.")
    if strands := report.get("strands", {}).get("chosen"):
        lines.append(f"- Strands: {strands}, chosen by {report['strands'].get('chosen_by')}.")
    if blend := training.get("base_blend"):
        lines.append(
            f"- Started from its baselines: the CNN weighted {blend['cnn_weight']} "
            f"against the k-mer LR, chosen on validation (AUROC "
            f"{blend['validation_auroc']:.4f})."
        )
    if check := training.get("start_check"):
        lines.append(
            f"- Start check: validation AUROC {check['step_0']} before the first "
            f"step, its baselines {check['baselines']} "
            f"({'agree' if check['agree'] else 'DISAGREE'})."
        )
    if "steps" in training:
        kept = (
            f"the weights of step {training.get('best_step')} kept (best validation "
            f"AUROC {_number(training['best_validation_auroc'])})"
            if training.get("best_validation_auroc") is not None
            else "the last step's weights kept (no validation checks)"
        )
        lines.append(
            f"- Training: {training['steps']:,} steps, {kept}; stopped by "
            f"{training.get('stopped_by', '?')}."
        )
    if "threshold" in report:
        lines.append(
            f"- Threshold: {report['threshold']:.4g}, chosen by "
            f"{report.get('threshold_chosen_by')}."
        )
    return "\n".join(lines) + "\n"


def _number(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def figures(report: dict, baselines: dict) -> str:
    """The test split's figures of the model and of each baseline run beside it."""
    lines = [f"## Figures on the test split ({report.get('examples', 0):,} windows)", ""]
    if "median_auroc" in report:
        header = ("model", "median AUROC", "median AUPRC")
        rows = [("this model", report.get("median_auroc"), report.get("median_auprc"))]
        rows += [
            (name, other.get("median_auroc"), other.get("median_auprc"))
            for name, other in baselines.items()
        ]
    else:
        header = ("model", "AUROC", "AUPRC", "MCC", "F1", "MCC at 0.5")
        rows = [
            (
                "this model",
                *(report.get(key) for key in ("auroc", "auprc", "mcc", "f1")),
                (report.get("at_0.5") or {}).get("mcc"),
            )
        ]
        start = (report.get("training") or {}).get("start_test_auroc")
        if start is not None:
            rows.append(("its start (the blend of its baselines)", start, None, None, None, None))
        rows += [
            (
                name,
                *(other.get(key) for key in ("auroc", "auprc", "mcc", "f1")),
                (other.get("at_0.5") or {}).get("mcc"),
            )
            for name, other in baselines.items()
        ]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + " --- |" * len(header))
    lines += ["| " + " | ".join([row[0], *(_number(v) for v in row[1:])]) + " |" for row in rows]
    lines += [
        "",
        "Thresholded figures are at the threshold chosen on validation; a figure "
        "means something only beside a baseline of the same split (`genobird baseline "
        "compare` pairs two runs' predictions with bootstrap intervals).",
    ]
    return "\n".join(lines) + "\n"


def limits(meta: dict, provenance: dict, pos_weight: float) -> str:
    """What the model does not know, from how its data set was built and its recipe."""
    command = provenance.get("command", "")
    options = provenance.get("options", {})
    lines = ["## Scope and limits", ""]
    if meta["task"] == "promoter" and command.endswith("promoter-sequences"):
        lines.append(
            "- Its negatives are scrambled copies of promoters (DeePromoter's): it "
            "tells a promoter from a scrambled one. It has not seen random genomic "
            "DNA, so on genome-wide windows its probabilities are not calibrated and "
            "false positives are likely."
        )
    elif meta["task"] == "promoter":
        hard = options.get("hard_negatives") or 0
        lines.append(
            "- Its negatives are scrambled copies of promoters (DeePromoter's)"
            + (
                f" and {hard} genomic window(s) per promoter far from any TSS."
                if hard
                else ": it has not seen random genomic DNA, so on "
                "genome-wide windows its probabilities are not calibrated."
            )
        )
        lines.append(
            "- Promoter windows are read on the TSS's strand: give sequences "
            "5'->3' on the strand of the transcript."
        )
    elif meta["task"] == "chromatin":
        ratio = options.get("negative_ratio")
        lines.append(
            "- Its windows are genome bins with a peak of some feature, plus "
            + (
                f"{ratio} times as many bins without any"
                if ratio is not None
                else "bins without any"
            )
            + ": its base rate is not the genome's, so "
            "rank by its probabilities rather than read them as chances."
        )
    else:
        lines.append(
            "- Its labels are the data set's own: what its negatives are, and what "
            "it has not seen, is whatever that data set says."
        )
    if pos_weight != 1:
        lines.append(
            f"- Positives weighed {pos_weight:g} times a negative in the loss, so its "
            "probabilities overstate the chance of a positive."
        )
    reference = options.get("reference")
    if reference:
        lines.append(
            f"- DNA from {_option(reference)}: another species or assembly is "
            "outside what it was trained and tested on."
        )
    lines.append(
        "- Test figures hold for windows like its test split's, which no choice of the "
        "run saw; validation figures chose its steps, start and threshold, so they are no "
        "independent test."
    )
    return "\n".join(lines) + "\n"


def usage() -> str:
    return (
        "## Use\n\n"
        "```\n"
        "genobird score --model THIS_DIR --fasta regions.fa --out scores.tsv\n"
        "genobird score --model THIS_DIR --bed regions.bed --reference genome.fa --out scores.tsv\n"
        "```\n\n"
        "```python\n"
        "from genobird import load_predictor\n"
        'predictor = load_predictor("THIS_DIR")\n'
        'table = predictor.score_fasta("regions.fa")\n'
        "```\n"
    )


def reader_reports(folder: Path) -> dict:
    """{"base <reader>": its test figures} of the base readers a run wrote
    (base_start.write_reader_predictions), at the threshold each chose on validation, as
    their baseline runs' metrics.json would hold them (binary tasks; the start itself is
    in the report as start_test_auroc)."""
    import numpy as np

    from genobird.datasets.metrics import PREDICTIONS, thresholded_metrics

    found = {}
    for name in ("cnn", "kmer-lr"):
        path = Path(folder) / name / "report" / PREDICTIONS
        if not path.is_file():
            continue
        with np.load(path, allow_pickle=False) as saved:
            labels, probabilities = saved["labels"], saved["probabilities"]
            threshold = float(saved["threshold"])
        if labels.shape[1] != 1 or not np.isfinite(threshold):
            continue
        found[f"base {name}"] = thresholded_metrics(
            (labels, probabilities), threshold, "the best MCC on validation"
        )
    return found


def baseline_reports(baseline_runs) -> dict:
    """{folder name: metrics.json} of the baseline runs a start was read from."""
    found = {}
    for run in baseline_runs:
        path = Path(run) / "report" / "metrics.json"
        if path.is_file():
            found[Path(run).name] = json.loads(path.read_text())
    return found
