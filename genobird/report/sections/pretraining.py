"""The pretraining curves, held-out bits per bp beside the Markov model, and
masked-token accuracy and bits per bp against context length."""

from __future__ import annotations

import json
from pathlib import Path

from genobird.artifacts import ResultsFolder
from genobird.report.checks import CONTEXT_LENGTHS_NEEDED, held_out_pair, rising_lengths
from genobird.report.page import figure_png, html_image, html_table
from genobird.report.sources import pretrained_record


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def markov_comparison(results: Path, evaluation: dict) -> str:
    """genobird's held-out bits per base beside the Markov baseline's on the same DNA."""
    path = ResultsFolder(results).markov
    if not path.is_file() or "bits_per_character" not in evaluation:
        return ""
    markov = json.loads(path.read_text())
    rows = [
        ("genobird (masked tokens, both-sided context)", evaluation["bits_per_character"]),
        (
            f"order-{markov['order']} Markov (alpha {markov['alpha']:g}, chosen on validation "
            "DNA; every base, preceding context)",
            markov["bits_per_bp"],
        ),
        ("uniform over A, C, G, T", 2.0),
    ]
    return "<h3>Bits per base on the held-out chromosomes</h3>" + html_table(
        rows, ("model", "bits per bp")
    )


def collapse_note(summary: dict) -> str:
    """A warning where pretraining ended at the level of a model that ignores its input
    (training_summary.json's `mlm_collapse`, training.collapse)."""
    collapse = summary.get("mlm_collapse") or {}
    if not collapse.get("collapsed"):
        return ""
    return (
        f"<p class='warning'>The MLM loss ended at {collapse['final_mlm_loss']} nats, "
        f"within {collapse['margin_nats']} of the {collapse['unigram_entropy_nats']} of a "
        "model that ignores its input: pretraining learnt nothing from the sequence.</p>"
    )


def held_out_note(held: dict, instances: Path) -> str:
    """What the held-out figures are, where they are not the training summary's own
    (genobird.evaluation.pretrained: scored again, or withheld)."""
    if held["source"] == "rescored":
        return (
            "<p>Scored again for this report: the training summary was written when "
            "scoring let the model see a tenth of the masked tokens.</p>"
        )
    if held["source"] == "withheld":
        return (
            "<p>Not shown: the training summary was written when scoring let the model "
            "see a tenth of the masked tokens, and the held-out instances to score it "
            f"again are missing ({instances}).</p>"
        )
    return ""


def pretraining_section(results: Path) -> str:
    """Training curves, held-out figures beside the Markov model's, and accuracy and bits
    by context length (the pipeline's pretrain/evaluation.json:
    genobird.evaluation.pretrained)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from genobird.training.collapse import context_blind_note

    layout = ResultsFolder(results)
    folder = layout.pretrain
    if not folder.is_dir():
        return ""
    text = "<h2>Pretraining (MLM + NSP)</h2>"
    history = read_jsonl(folder / "metrics.jsonl") if (folder / "metrics.jsonl").is_file() else []
    steps = [row for row in history if "mlm_loss" in row]
    if steps:
        figure, axis = plt.subplots(figsize=(6, 3.5))
        for key in ("loss", "mlm_loss", "nsp_loss"):
            points = [(row["step"], row[key]) for row in steps if key in row]
            axis.plot(*zip(*points, strict=True), label=key)
        axis.set_xlabel("step")
        axis.set_ylabel("training loss (nats)")
        axis.legend()
        text += html_image(figure_png(figure), "pretraining curves")
        plt.close(figure)
    evaluation = pretrained_record(results) or {}
    summary_path = layout.pretrained_model / "training_summary.json"
    if (held := evaluation.get("held_out")) and summary_path.is_file():
        summary = json.loads(summary_path.read_text())
        final = held["figures"]
        text += (
            "<h3>Held-out evaluation</h3>"
            + held_out_note(held, layout.heldout_instances)
            + collapse_note(summary)
        )
        if final:
            text += html_table(sorted(final.items())) + markov_comparison(results, final)
    if (rows := evaluation.get("context")) is not None:
        figure, axis = plt.subplots(figsize=(5, 3.5))
        axis.plot([r["context_length"] for r in rows], [r["mlm_accuracy"] for r in rows], "o-")
        axis.set_xscale("log", base=2)
        axis.set_xlabel("context length (tokens)")
        axis.set_ylabel("masked-token accuracy")
        text += "<h3>Masked-token accuracy against context length</h3>"
        text += html_image(figure_png(figure), "MLM accuracy against context length")
        plt.close(figure)
        blind = context_blind_note({r["context_length"]: r["bits_per_character"] for r in rows})
        text += f"<p class='warning'>{blind}</p>" if blind else ""
        text += html_table(
            [
                (
                    r["context_length"],
                    r["mlm_accuracy"],
                    r["bits_per_character"],
                    context_gain_text(r, "accuracy_gain"),
                    context_gain_text(r, "bits_gain"),
                    r["windows"],
                )
                for r in rows
            ],
            (
                "tokens",
                "MLM accuracy",
                "bits per character",
                "accuracy gain over the previous length [95% interval]",
                "bits per bp saved over the previous length [95% interval]",
                "windows",
            ),
        )
    return text


def context_gain_text(row: dict, gain: str = "accuracy_gain") -> str:
    """'+0.0123 [+0.0050, +0.0196]': a context length's `gain` ("accuracy_gain" or
    "bits_gain") over the previous length with its 95% interval; '' for the first."""
    if gain not in row:
        return ""
    low, high = row[gain + "_ci95"]
    return f"{row[gain]:+.4f} [{low:+.4f}, {high:+.4f}]"


ORDER = 30


def held_out_check(results: Path) -> dict | None:
    held = held_out_pair(results)
    if not held:
        return None
    ours, markov = held["genobird"], held["markov"]
    return {
        "name": "held_out",
        "check": "held-out bits per bp below the Markov model's",
        "genobird": ours,
        "baseline": markov,
        "difference": [ours - markov, None, None],
        "met": ours < markov,
    }


def context_check(results: Path) -> dict | None:
    rows = (pretrained_record(results) or {}).get("context")
    if not rows:
        return None
    by_gain = {gain: rising_lengths(rows, gain) for gain in ("bits_gain", "accuracy_gain")}
    gain = max(by_gain, key=lambda name: len(by_gain[name]))
    lengths = by_gain[gain]
    measure = "bits per bp" if gain == "bits_gain" else "masked-token accuracy"
    return {
        "name": "context",
        "check": f"better with more context at >= {CONTEXT_LENGTHS_NEEDED} increasing "
        "lengths, each paired interval above zero",
        "genobird": f"{measure}: {' < '.join(map(str, lengths))} tokens",
        "baseline": None,
        "difference": None,
        "met": len(lengths) >= CONTEXT_LENGTHS_NEEDED,
    }


# the checks this section's figures answer, in the report's order (report.checks)
CHECKS = ((10, held_out_check), (20, context_check))


def section(report) -> str:
    return pretraining_section(report.results)
