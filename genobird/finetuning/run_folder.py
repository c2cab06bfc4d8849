"""Where a fine-tuning run (`genobird finetune --out OUT`) keeps each thing it writes,
named once: the model, its report, checkpoints, the base readers' cache and reports, the
start they chose, the probes and their answers. Readers of a run folder (a context
ablation, `genobird finetune`'s pairing with its base readers) find the same paths here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunFolder:
    """A fine-tuning run's output folder and the paths inside it."""

    root: Path

    def __post_init__(self):
        object.__setattr__(self, "root", Path(self.root))

    @classmethod
    def of_report(cls, report: Path) -> RunFolder:
        """The run whose report folder (OUT/report) this is."""
        return cls(Path(report).parent)

    @property
    def model(self) -> Path:
        return self.root / "model"

    @property
    def report(self) -> Path:
        return self.root / "report"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def base_cnn_cache(self) -> Path:
        """The base readers each trained for this run's data and settings, read again by
        a later run (and by the probes) rather than trained again."""
        return self.root / "base-cnn"

    @property
    def readers(self) -> Path:
        """Each base reader's test predictions, and the start's, as a baseline run writes
        its own (readers/<reader>/report/test_predictions.npz): the run's model is paired
        with them (report/compare.json)."""
        return self.root / "base-readers"

    def reader(self, name: str) -> Path:
        return self.readers / name

    @property
    def base_start(self) -> Path:
        """What the base readers' start trained or read, and chose."""
        return self.root / "base-start.json"

    @property
    def probes(self) -> Path:
        return self.root / "probes"

    def probe(self, question: str, candidate: str) -> Path:
        return self.probes / question / candidate.replace(" ", "-")

    @property
    def recipe_choice(self) -> Path:
        """The probes' answers, read again by a resumed run that asks the same questions."""
        return self.root / "recipe-choice.json"
