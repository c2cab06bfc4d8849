"""What travels with a fine-tuning run besides its recipe: the data set (and its
description), the start (a pretrained model's directory and description, or fresh
weights and a tokenizer), the run folder, the baseline runs its base readers may be read
from, and whether checkpoints of a run with other settings are discarded. Each is read
once, here, before anything runs."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from genobird.corpus.tokenizer import load_tokenizer
from genobird.datasets.windows import read_metadata
from genobird.errors import ConfigError
from genobird.finetuning.run_folder import RunFolder
from genobird.model.config import BigBirdConfig
from genobird.model.io import read_model_description

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FinetuneJob:
    """A fine-tuning run's inputs and output folder, read and checked."""

    data: Path
    folder: RunFolder
    meta: dict  # the data set's description (datasets.windows.read_metadata)
    tokenizer: object
    pretrained: Path | None = None
    description: dict | None = None  # the pretrained model's (model.io)
    baseline_runs: tuple = ()
    restart_changed: bool = False

    @classmethod
    def open(
        cls,
        data,
        output,
        pretrained=None,
        tokenizer_path=None,
        baseline_runs=(),
        restart_changed: bool = False,
        meta: dict | None = None,
    ) -> FinetuneJob:
        """The job of fine-tuning on `data` (described by `meta`, where the caller has
        read it) into `output` from `pretrained` (or fresh weights with the tokenizer at
        `tokenizer_path`), refused in one line when the data set cannot be fine-tuned
        on."""
        data, pretrained = Path(data), Path(pretrained) if pretrained else None
        if pretrained is None and tokenizer_path is None:
            raise ConfigError("give --pretrained DIR, or --from-scratch with --tokenizer")
        meta = meta or read_metadata(data)
        if not meta["counts"]["train"] or not meta["counts"]["test"]:
            raise ConfigError(f"{data}: needs train and test windows, has {meta['counts']}")
        return cls(
            data,
            RunFolder(output),
            meta,
            load_tokenizer(pretrained if pretrained else tokenizer_path),
            pretrained,
            read_model_description(pretrained) if pretrained else None,
            tuple(baseline_runs),
            restart_changed,
        )

    @property
    def task(self) -> str:
        return self.meta["task"]

    def encoder_dropout(self, fresh_shape: dict) -> float:
        """The dropout on hidden states the start was made with: the pretrained model's,
        or a fresh model's of `fresh_shape`."""
        shape = self.description["config"] if self.description else fresh_shape
        return shape.get("hidden_dropout", BigBirdConfig.hidden_dropout)
