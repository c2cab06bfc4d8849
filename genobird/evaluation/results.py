"""Where a pipeline's results folder keeps each thing the evaluations and the report
read, named once (the workflows write them there: workflows/*.smk). A new study adds its
paths here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# the evaluations of a results folder, each a pipeline rule's JSON output that the
# report draws (genobird.evaluation.pretrained, genobird.evaluation.pipeline_compare)
PRETRAINED_EVALUATION = "pretrain/evaluation.json"
RUN_COMPARISONS = "comparisons.json"


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


def newer_than_inputs(artifact: Path, inputs) -> bool:
    """Whether `artifact` exists and was written after every one of `inputs` that exists
    (an evaluation of files changed since is run again)."""
    if not artifact.is_file():
        return False
    written = artifact.stat().st_mtime
    return all(path.stat().st_mtime <= written for path in map(Path, inputs) if path.exists())
