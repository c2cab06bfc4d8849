"""Every evaluation a results folder's report draws, run where its inputs are there and its
artifact is missing or out of date (`genobird evaluate all`; the pipeline runs each as its
own rule)."""

from __future__ import annotations

from genobird.artifacts import ResultsFolder, newer_than_inputs
from genobird.errors import InputError


def evaluate_results(results, settings: dict) -> list[str]:
    """Run the evaluations of `results` whose artifacts are missing or older than what
    they read (the pretrained model's also where made with other `settings`:
    artifacts.pretrained_evaluation_settings); returns the names of those run."""
    from genobird.evaluation.corpus_statistics import corpus_inputs, corpus_statistics
    from genobird.evaluation.pretrained import ensure_pretrained_evaluation
    from genobird.evaluation.run_comparisons import ensure_comparisons

    folder = ResultsFolder(results)
    if not folder.root.is_dir():
        raise InputError(f"{folder.root}: no such results folder; run the pipeline first")
    ran = []
    if folder.corpus.is_dir() and not newer_than_inputs(
        folder.corpus_statistics, corpus_inputs(folder)
    ):
        corpus_statistics(folder.root)
        ran.append("corpus")
    if ensure_pretrained_evaluation(folder.root, settings):
        ran.append("pretrained")
    if ensure_comparisons(folder.root):
        ran.append("runs")
    return ran
