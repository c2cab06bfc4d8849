"""The pipeline's evaluations of its pretrained model, written as one artifact
(results/pretrain/evaluation.json, `genobird evaluate pretrained`) that the report draws:

- held-out figures: the training summary's own, or, for a summary written before every
  scored token was shown as [MASK] (its figures let the model read a tenth of the
  answers), the saved model scored again on the held-out instances, or none;
- masked-token accuracy and bits per bp against context length (held-out instances cut
  to each length, paired gains between lengths);
- on a genome with copies (reference/copies.bed, the demo's): bits per bp on held-out
  bases in copies and elsewhere by context length, beside the pipeline's Markov model.

The settings it ran with are recorded, so that `genobird report` can tell an artifact
of other settings (and refuse it, naming the command) from one it can draw.
"""

from __future__ import annotations

import json

from genobird.artifacts import PretrainedEvaluation, ResultsFolder, newer_than_inputs

# what the held-out figures are: the summary's own, scored again, or withheld (no
# instances to score again)
HELD_OUT_SOURCES = ("summary", "rescored", "withheld")


def evaluate_pretrained(results, settings: dict) -> PretrainedEvaluation | None:
    """Every evaluation of the results folder's pretrained model that its files allow,
    written to results/pretrain/evaluation.json; returns the record (None, and nothing
    written, where the folder has no pretraining)."""
    folder = ResultsFolder(results)
    if not folder.pretrain.is_dir():
        return None
    record = PretrainedEvaluation(
        settings=settings,
        held_out=held_out_figures(folder),
        context=context_rows(folder, settings),
        copy_context=copy_context_rows(folder, settings),
    )
    record.write(folder.root)
    return record


def held_out_figures(folder: ResultsFolder) -> dict | None:
    """{"source": one of HELD_OUT_SOURCES, "figures": {...}, "steps": N} of the training
    summary (None without one)."""
    from genobird.model.io import CONFIG_FILE
    from genobird.training.context import evaluate_saved_model
    from genobird.training.mlm import HELDOUT_SCORING

    path = folder.pretrained_model / "training_summary.json"
    if not path.is_file():
        return None
    summary = json.loads(path.read_text())
    figures, source = summary.get("eval") or {}, "summary"
    if figures and summary.get("heldout_scoring") != HELDOUT_SCORING:
        instances = folder.heldout_instances
        if instances.is_dir() and (folder.pretrained_model / CONFIG_FILE).is_file():
            figures, source = evaluate_saved_model(folder.pretrained_model, instances), "rescored"
        else:
            figures, source = {}, "withheld"
    return {"source": source, "figures": figures, "steps": summary.get("steps")}


def context_rows(folder: ResultsFolder, settings: dict) -> list[dict] | None:
    """Masked-token accuracy and bits per bp at each context length (None: nothing to
    score, or no lengths asked)."""
    from genobird.training.context import mlm_accuracy_by_context

    lengths = settings["context_tokens"]
    if not (lengths and folder.pretrained_model.is_dir() and folder.heldout_instances.is_dir()):
        return None
    return mlm_accuracy_by_context(
        folder.pretrained_model,
        folder.heldout_instances,
        lengths,
        max_windows=settings["context_windows"],
    )


def copy_context_rows(folder: ResultsFolder, settings: dict) -> dict | None:
    """On a genome with copies.bed: {"chromosomes": the held-out ones, "markov": whether
    the Markov model's figures are beside, "rows": one per context length}."""
    from genobird.baselines.markov import fit_counts, read_dna
    from genobird.evaluation.copy_context import bits_by_copy_context

    lengths, index = settings["copy_context_tokens"], folder.corpus_index("heldout")
    if not (
        folder.copies.is_file() and folder.pretrained_model.is_dir() and index.is_file() and lengths
    ):
        return None
    chromosomes = json.loads(index.read_text())["chromosomes"]
    markov = None
    if folder.markov.is_file() and folder.train_documents.is_file():
        fitted = json.loads(folder.markov.read_text())
        counts = fit_counts(
            read_dna(folder.train_documents), fitted["order"], fitted.get("both_strands", True)
        )
        markov = (counts, fitted["order"], fitted["alpha"])
    rows = bits_by_copy_context(
        folder.pretrained_model,
        folder.genome,
        folder.copies,
        chromosomes,
        list(lengths),
        markov,
        max_windows=settings["copy_windows"],
    )
    return {"chromosomes": chromosomes, "markov": markov is not None, "rows": rows}


def evaluation_inputs(folder: ResultsFolder) -> list:
    """The files an evaluation of the pretrained model reads."""
    model = folder.pretrained_model
    return [
        model / "config.json",
        model / "training_summary.json",
        folder.markov,
        folder.heldout_instances / "manifest.json",
        folder.copies,
    ]


def ensure_pretrained_evaluation(results, settings: dict) -> bool:
    """Evaluate the pretrained model unless results/pretrain/evaluation.json holds an
    evaluation of these settings written after the files it reads (a pipeline's
    evaluation rule wrote it); True when it ran."""
    folder = ResultsFolder(results)
    current = newer_than_inputs(folder.pretrained_evaluation, evaluation_inputs(folder))
    if current and json.loads(folder.pretrained_evaluation.read_text()).get("settings") == settings:
        return False
    return evaluate_pretrained(results, settings) is not None
