"""What the report draws from the evaluations: each artifact (genobird.artifacts) read where
the results folder holds what it evaluates, or refused, naming the command that writes it.
The report computes none of them."""

from __future__ import annotations

import dataclasses

from genobird.artifacts import (
    CorpusStatistics,
    PretrainedEvaluation,
    ResultsFolder,
    RunComparisons,
)
from genobird.errors import InputError


def corpus_statistics(results) -> CorpusStatistics | None:
    """The corpus's statistics; None where the folder has no corpus."""
    return CorpusStatistics.read(results) if ResultsFolder(results).corpus.is_dir() else None


def pretrained_evaluation(results, settings: dict | None = None) -> PretrainedEvaluation | None:
    """The pretrained model's evaluation; None where the folder has no pretraining. With
    `settings` (artifacts.pretrained_evaluation_settings), one made with other settings is
    refused."""
    if not ResultsFolder(results).pretrain.is_dir():
        return None
    found = PretrainedEvaluation.read(results)
    if settings is not None and found.settings != settings:
        asked = " ".join(_option(key, value) for key, value in settings.items())
        raise InputError(
            f"{PretrainedEvaluation.path(results)}: evaluated with {found.settings}, not the "
            f"settings asked; run `{PretrainedEvaluation.command(results)} {asked}`"
        )
    return found


def _option(name: str, value) -> str:
    """A setting as `genobird evaluate pretrained` takes it (context_tokens [128, 256] ->
    --context-tokens 128 256)."""
    values = value if isinstance(value, list) else [value]
    return f"--{name.replace('_', '-')} " + " ".join(map(str, values))


def comparisons(results) -> RunComparisons | None:
    """The runs' comparisons with their baselines; None where the folder has no run."""
    return RunComparisons.read(results) if ResultsFolder(results).has_runs() else None


def ablation(results, task: str) -> dict:
    """A chromatin task's context ablation, its contexts' keys made numbers again (JSON
    keeps them as text)."""
    found = comparisons(results).chromatin_tasks.get(task)
    if found is None:
        raise InputError(
            f"{RunComparisons.path(results)}: no context ablation of chromatin task {task}; "
            f"run `{RunComparisons.command(results)}` again"
        )
    return {
        **found,
        "summary": _numbered(found["summary"]),
        "by_scale": _numbered(found["by_scale"]) if found["by_scale"] else None,
    }


def _numbered(summary: dict) -> dict:
    """A context ablation's summary with its context lengths as ints, as summarised."""

    def by_bp(mapping: dict) -> dict:
        return {int(bp): value for bp, value in mapping.items()}

    arms = {
        arm: {**row, "contexts": by_bp(row["contexts"])} for arm, row in summary["arms"].items()
    }
    gains = {arm: by_bp(runs) for arm, runs in summary["gain_over_narrowest"].items()}
    return {
        **summary,
        "arms": arms,
        "gain_over_narrowest": gains,
        "genobird": by_bp(summary["genobird"]),
    }


def task_table(results, key: str) -> dict | None:
    """A task's paired table (evaluation.run_comparisons.paired_table) by its key."""
    tables = comparisons(results).tables
    if key not in tables:
        raise InputError(
            f"{RunComparisons.path(results)}: no paired table of {key}; run "
            f"`{RunComparisons.command(results)}` again"
        )
    return tables[key]


def pretrained_record(results) -> dict | None:
    """The pretrained model's evaluation as its file holds it (None: no pretraining)."""
    found = pretrained_evaluation(results)
    return None if found is None else dataclasses.asdict(found)


def comparisons_record(results) -> dict:
    """The runs' comparisons as their file holds them ({}: no run to compare)."""
    found = comparisons(results)
    return {} if found is None else dataclasses.asdict(found)
