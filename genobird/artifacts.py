"""A pipeline's results folder: where each thing the evaluations and the report read is
kept (the workflows write them there: workflows/*.smk), and the evaluations' artifacts.

An artifact is what one `genobird evaluate WHAT` writes and `genobird report` draws. Each
is declared once here, as a dataclass: the file it is, the command and pipeline rule that
write it, and its fields, from which its JSON schema is generated (`json_schema`;
`python -m genobird.artifacts` prints them). The report reads artifacts and draws them;
where one it needs is missing, it refuses and names the command that writes it.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from genobird.errors import ConfigError, InputError
from genobird.fileio import atomic_write
from genobird.interpret import RUN_MOTIFS_FOLDER

# the artifacts' files, relative to the results folder (the workflows name their outputs so)
PRETRAINED_EVALUATION = "pretrain/evaluation.json"
RUN_COMPARISONS = "comparisons.json"
CORPUS_STATISTICS = "corpus/statistics.json"


@dataclass(frozen=True)
class ResultsFolder:
    """A pipeline's results folder (results/NAME) and the paths inside it."""

    root: Path

    def __post_init__(self):
        object.__setattr__(self, "root", Path(self.root))

    # the reference
    @property
    def manifest(self) -> Path:
        return self.root / "reference" / "manifest.json"

    @property
    def genome(self) -> Path:
        return self.root / "reference" / "genome.fa"

    @property
    def copies(self) -> Path:
        return self.root / "reference" / "copies.bed"

    # the corpus
    @property
    def corpus(self) -> Path:
        return self.root / "corpus"

    def corpus_index(self, part: str) -> Path:
        """The index of the corpus's `part` (train, valid, heldout) documents."""
        return self.corpus / f"{part}.txt.index.json"

    @property
    def train_documents(self) -> Path:
        return self.corpus / "train.txt"

    @property
    def heldout_documents(self) -> Path:
        return self.corpus / "heldout.txt"

    @property
    def heldout_instances(self) -> Path:
        return self.corpus / "instances-heldout"

    @property
    def tokenizer(self) -> Path:
        return self.corpus / "tokenizer.model"

    @property
    def corpus_statistics(self) -> Path:
        return self.root / CORPUS_STATISTICS

    # pretraining and its evaluations
    @property
    def pretrain(self) -> Path:
        return self.root / "pretrain"

    @property
    def pretrained_model(self) -> Path:
        return self.pretrain / "model"

    @property
    def pretrained_evaluation(self) -> Path:
        return self.root / PRETRAINED_EVALUATION

    @property
    def markov(self) -> Path:
        return self.root / "baselines" / "markov.json"

    # fine-tuned tasks and their baselines
    def task_report(self, task: str) -> Path:
        """A fine-tuned task's report folder (promoter, chromatin, tasks/NAME)."""
        return self.root / task / "report"

    def baseline_report(self, task: str, kind: str) -> Path:
        return self.root / task / "baselines" / kind / "report"

    @property
    def chromatin_data(self) -> Path:
        return self.root / "chromatin" / "data.h5"

    @property
    def chromatin_tasks(self) -> Path:
        return self.root / "chromatin_tasks"

    @property
    def tasks(self) -> Path:
        return self.root / "tasks"

    @property
    def scores(self) -> Path:
        return self.root / "score"

    @property
    def comparisons(self) -> Path:
        return self.root / RUN_COMPARISONS

    def task_folders(self) -> list[str]:
        """Results-relative folders of every fine-tuning task that has a report."""
        folders = [
            task
            for task in ("promoter", "chromatin")
            if (self.task_report(task) / "metrics.json").is_file()
        ]
        if self.tasks.is_dir():
            folders += [
                f"tasks/{folder.name}"
                for folder in sorted(self.tasks.iterdir())
                if (folder / "report" / "metrics.json").is_file()
            ]
        return folders

    def task_motifs(self, folder: str) -> Path:
        """The motifs `genobird motifs` found in a task's model (its motifs.json)."""
        return self.root / folder / RUN_MOTIFS_FOLDER / "motifs.json"

    def seed_reports(self, folder: str) -> list[Path]:
        """The report folders of a task's further fine-tuning seeds (a sequence task's
        `seeds`), by seed."""
        found = [
            path.parent
            for path in (self.root / folder).glob("seeds/*/report/metrics.json")
            if path.parts[-3].isdigit()
        ]
        return sorted(found, key=lambda path: int(path.parts[-2]))

    def baseline_reports(self, folder: str) -> list[Path]:
        """The report folders of the baselines run on a task's data, by kind."""
        return [
            p.parent for p in sorted((self.root / folder).glob("baselines/*/report/metrics.json"))
        ]

    def zero_shot_report(self, folder: str, kind: str) -> Path:
        """A task's zero-shot run's report folder (kind genobird or markov)."""
        return self.root / folder / "zero-shot" / kind / "report"

    def chromatin_task_folders(self) -> list[Path]:
        """The chromatin tasks (the pipeline's chromatin_tasks) with a fine-tuned context."""
        if not self.chromatin_tasks.is_dir():
            return []
        return [
            task
            for task in sorted(self.chromatin_tasks.iterdir())
            if list(task.glob("context-*/report"))
        ]

    def has_runs(self) -> bool:
        """Whether the folder holds a fine-tuned task, a chromatin task, or the promoter
        or chromatin predictor's test predictions (what the run comparisons pair with
        their baselines)."""
        from genobird.datasets.metrics import PREDICTIONS

        predictions = (self.task_report(task) / PREDICTIONS for task in ("promoter", "chromatin"))
        return bool(
            self.task_folders()
            or self.chromatin_task_folders()
            or any(p.is_file() for p in predictions)
        )

    def relative(self, path: Path) -> str:
        return Path(path).relative_to(self.root).as_posix()


def newer_than_inputs(artifact: Path, inputs) -> bool:
    """Whether `artifact` exists and was written after every one of `inputs` that exists
    (an evaluation of files changed since is out of date)."""
    if not artifact.is_file():
        return False
    written = artifact.stat().st_mtime
    return all(path.stat().st_mtime <= written for path in map(Path, inputs) if path.exists())


def describe_difference(row: dict) -> str:
    """'+0.012 [-0.020, +0.045]', the difference with its interval."""
    return f"{row['difference']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]"


def describe_value(row: dict, side: str) -> str:
    """'0.951 [0.930, 0.970]', one predictor's figure with its interval."""
    return f"{row[side]:.3f} [{row[side + '_low']:.3f}, {row[side + '_high']:.3f}]"


def pretrained_evaluation_settings(
    context_tokens, context_windows: int, copy_context_tokens, copy_windows: int
) -> dict:
    """The settings the pretrained model's evaluation runs with, as its artifact records
    them (the report asks for the same ones)."""
    if context_windows < 1:
        raise ConfigError(f"context windows must be at least 1, got {context_windows}")
    return {
        "context_tokens": list(context_tokens),
        "context_windows": context_windows,
        "copy_context_tokens": list(copy_context_tokens),
        "copy_windows": copy_windows,
    }


# =========================================================================== the artifacts
@dataclass(frozen=True)
class Artifact:
    """What every artifact shares: where it is, and what writes it."""

    FILE: ClassVar[str]
    WHAT: ClassVar[str]  # `genobird evaluate WHAT`
    RULE: ClassVar[str]  # the pipeline's rule (workflows/report.smk)

    @classmethod
    def path(cls, results) -> Path:
        return Path(results) / cls.FILE

    @classmethod
    def command(cls, results) -> str:
        return f"genobird evaluate {cls.WHAT} --results {results}"

    def write(self, results) -> Path:
        path = self.path(results)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path) as handle:
            json.dump(dataclasses.asdict(self), handle, indent=1)
        return path

    @classmethod
    def read(cls, results):
        """The artifact of `results`; refuses, naming the command that writes it, where
        it is missing or not of this form."""
        path = cls.path(results)
        if not path.is_file():
            raise InputError(
                f"{path}: missing; the report draws it: run `{cls.command(results)}` "
                f"(the pipeline's {cls.RULE} rule) first"
            )
        record = json.loads(path.read_text())
        names = {field.name for field in dataclasses.fields(cls)}
        if not isinstance(record, dict) or set(record) != names:
            raise InputError(
                f"{path}: not an artifact of this genobird (fields {sorted(record)}); run "
                f"`{cls.command(results)}` again"
            )
        return cls(**record)


@dataclass(frozen=True)
class CorpusStatistics(Artifact):
    """The corpus's documents by part, and its vocabulary read on held-out sentences."""

    FILE: ClassVar[str] = CORPUS_STATISTICS
    WHAT: ClassVar[str] = "corpus"
    RULE: ClassVar[str] = "evaluate_corpus"

    # one row per part: part, chromosomes, documents, sentences, bp
    parts: list[dict]
    # the vocabulary: pieces, held-out sentences read, bp per token on them, longest piece
    # (None without a tokenizer and held-out documents)
    vocabulary: dict | None


@dataclass(frozen=True)
class PretrainedEvaluation(Artifact):
    """The pretrained model's held-out figures, its accuracy by context length, and on a
    genome with copies its bits per bp in copies and elsewhere
    (genobird.evaluation.pretrained)."""

    FILE: ClassVar[str] = PRETRAINED_EVALUATION
    WHAT: ClassVar[str] = "pretrained"
    RULE: ClassVar[str] = "evaluate_pretrained"

    settings: dict
    held_out: dict | None
    context: list[dict] | None
    copy_context: dict | None


@dataclass(frozen=True)
class RunComparisons(Artifact):
    """The fine-tuned models paired with their baselines (genobird.evaluation.run_comparisons)."""

    FILE: ClassVar[str] = RUN_COMPARISONS
    WHAT: ClassVar[str] = "runs"
    RULE: ClassVar[str] = "compare_runs"

    # the chromatin predictor on long-range features and local ones, beside each baseline
    long_range: dict | None
    # the promoter predictor's test MCC beside the k-mer LR's
    promoter: dict | None
    # each task's paired table ({task folder, or task folder/zero-shot: table})
    tables: dict[str, dict | None]
    # each chromatin task's context ablation ({task name: ablation})
    chromatin_tasks: dict[str, dict]


ARTIFACTS = (CorpusStatistics, PretrainedEvaluation, RunComparisons)

# the JSON schema of a field's Python type
_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def _schema_of(kind) -> dict:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_schema_of(arg) for arg in args]}
    if kind in _TYPES:
        return {"type": _TYPES[kind]}
    if kind is dict or origin is dict:
        entry = {"type": "object"}
        if args:
            entry["additionalProperties"] = _schema_of(args[1])
        return entry
    if kind is list or origin is list:
        return {"type": "array", "items": _schema_of(args[0])} if args else {"type": "array"}
    raise TypeError(f"no JSON schema for {kind!r}")


def json_schema(cls: type[Artifact]) -> dict:
    """The JSON schema of an artifact's file, generated from its dataclass."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": cls.__name__,
        "description": " ".join((cls.__doc__ or "").split()),
        "type": "object",
        "properties": {field.name: _schema_of(hints[field.name]) for field in fields},
        "required": [field.name for field in fields],
        "additionalProperties": False,
    }


if __name__ == "__main__":  # python -m genobird.artifacts: every artifact's schema
    print(json.dumps({cls.FILE: json_schema(cls) for cls in ARTIFACTS}, indent=1))
