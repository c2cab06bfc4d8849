"""How a fine-tuned run's figures were made, in words: steps, model selection,
pooling, the start from the baselines, the strands and cuts each prediction averages."""

from __future__ import annotations

import html


def how_evaluated(metrics: dict) -> str:
    """How genobird's figures of a task were made, from its metrics.json: the training a
    reader needs to repeat them and what each test prediction averages (the fields an
    older report lacks are left out)."""
    parts = recipe_parts(metrics)
    if "rc_average" in metrics:
        parts.append(prediction_part(metrics))
    return f"<p>genobird: {html.escape('; '.join(parts))}.</p>" if parts else ""


def recipe_parts(metrics: dict) -> list[str]:
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
        kind = "DeepSEA " if metrics.get("base_cnn_architecture") == "deepsea-cnn" else ""
        parts.append(
            f"a {metrics['base_cnn_channels']}-filter {kind}CNN on the bases beside the encoder"
        )
    if metrics.get("base_kmers"):
        parts.append(f"the counts of its 3- to {metrics['base_kmers']}-mers beside the encoder")
    if blend := training.get("base_blend"):
        parts.append(blend_text(blend))
    if metrics.get("base_cnn_channels") or metrics.get("base_kmers"):
        parts.append(start_part(training))
        if training.get("best_step") == 0:
            parts.append("the start kept: the encoder added nothing on validation")
    if metrics.get("bpe_dropout"):
        parts.append(f"BPE-dropout {metrics['bpe_dropout']:g} on the training windows")
    if choice := metrics.get("recipe_choice"):
        answers = "; ".join(answer_text(q, choice[q]) for q in choice["asked"])
        parts.append(
            f"chosen on validation with probes of at most {choice['probe_steps']} "
            "steps, a default changed only for a lead beyond one standard error: "
            f"{answers}"
        )
    return parts


def start_part(training: dict) -> str:
    """Whether the classifier started as its baselines: its check before the first step
    against their own validation AUROC (finetuning.evaluation.start_check)."""
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


# how the report names each question that finetuning.probes answers on validation
QUESTION_NAMES = {"strands": "trained on", "learning_rate": "learning rate", "pooling": "pooling"}


def answer_text(question: str, answer: dict) -> str:
    """e.g. 'learning rate 0.0001 (AUROC 0.912 vs 0.0003 0.905)': the kept one first."""
    if "not_probed" in answer:
        return f"{QUESTION_NAMES[question]} {answer['chosen']} ({answer['not_probed']})"
    scores, chosen = answer["validation_auroc"], answer["chosen"]
    others = ", ".join(f"{name} {score:.3f}" for name, score in scores.items() if name != chosen)
    return f"{QUESTION_NAMES[question]} {chosen} (AUROC {scores[chosen]:.3f} vs {others})"


def prediction_part(metrics: dict) -> str:
    cuts, both = metrics.get("segmentations") or 0, metrics["rc_average"]
    if cuts:
        over = (
            f"both strands and {cuts} sampled cuts per strand"
            if both
            else (f"{cuts} sampled cuts of one strand")
        )
        return f"each test prediction is the mean over {over}"
    if both:
        return "each test prediction is the mean over both strands (the tokenizer's cut)"
    return "each test prediction reads one strand (the tokenizer's cut)"


def blend_text(blend: dict) -> str:
    """How a start blended the base CNN and the k-mer LR (base-start.json's base_blend)."""
    if by_category := blend.get("cnn_weight_by_category"):
        weights = ", ".join(f"{category} {w:g}" for category, w in by_category.items())
        return (
            f"started from the base CNN and the k-mer LR blended per feature category, "
            f"the CNN's weight chosen on validation: {weights}"
        )
    weight = blend["cnn_weight"]
    return (
        f"started from {weight:g} x the base CNN + {1 - weight:g} x the k-mer LR "
        "(chosen on validation)"
    )
