"""A fine-tuning recipe resolved once, for one job: every setting given a value, and
where each value came from.

A recipe leaves some settings open (None): the strands and the loss's weights follow
the task kind (each setting's `run_default`, declared beside it in finetuning.recipe),
the context read follows the data set's windows, the input length is fitted to them,
the dropout is the start's own, the effective batch follows the batch, and the base
readers read the strands the run reads. `resolve` settles them all before anything runs;
the run then reads `Resolved.recipe`, which has no open leaf, and records
`Resolved.asked`: the recipe as given, with what was fitted to the data or decided on
the run (finetuning.decisions), which finetune.json saves and `--config` reads back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from functools import cached_property

from genobird.datasets.windows import default_max_tokens
from genobird.errors import ConfigError
from genobird.finetuning.recipe import SETTINGS, Recipe

log = logging.getLogger(__name__)

# where a value came from, as `Resolved.sources` names it
GIVEN = "given"  # in the recipe the run was given: an option, a config file or its default
TASK_KIND = "the task kind"  # a setting's run_default
FITTED = "fitted to the data set"
WINDOWS = "the data set's windows"
START = "the start's own"
FOLLOWS = "follows {}"
# settings whose None is a value of its own, not a setting left open
NONE_MEANS = {"base_cnn_minutes": "no cap"}


@dataclass(frozen=True)
class Resolved:
    """A recipe as asked (`asked`: open settings None) and as run (`recipe`: none open),
    for a data set of `task` whose windows are `window_bp` long, from a start whose
    hidden-state dropout is `start_dropout`. `chosen` names the source of each value
    fitted or decided since the recipe was given."""

    asked: Recipe
    task: str
    window_bp: int
    start_dropout: float
    chosen: tuple = ()  # (setting name, source) in the order they were settled

    @classmethod
    def of(cls, recipe: Recipe, meta: dict, start_dropout: float = 0.1) -> Resolved:
        """`recipe` resolved for a data set described by `meta` (read_metadata's)."""
        return cls(recipe, meta["task"], meta["window_bp"], start_dropout)

    def with_values(self, source: str | None = None, **values) -> Resolved:
        """The recipe asked with `values` set (by `source`: fitted or decided; None: a
        change of the recipe itself, as a probe's shorter budget)."""
        chosen = self.chosen + tuple((name, source) for name in values if source)
        return replace(self, asked=self.asked.with_values(**values), chosen=chosen)

    @cached_property
    def _settled(self) -> tuple[Recipe, dict]:
        values, chosen, sources = self.asked.values(), dict(self.chosen), {}
        for setting in SETTINGS:
            name = setting.name
            if values[name] is not None or name in NONE_MEANS:
                sources[name] = chosen.get(name, GIVEN)
            elif setting.run_default:
                values[name], sources[name] = setting.run_default[self.task], TASK_KIND
        open_values = {
            "window_bp": (self.window_bp, WINDOWS),
            "effective_batch_size": (values["batch_size"], FOLLOWS.format("batch_size")),
            "dropout": (self.start_dropout, START),
            "base_strands": (
                "both" if values["rc_average"] else "one",
                FOLLOWS.format("rc_average"),
            ),
        }
        for name, (value, source) in open_values.items():
            if values[name] is None:
                values[name], sources[name] = value, source
        if unsettled := [n for n, v in values.items() if v is None and n not in NONE_MEANS]:
            raise AssertionError(f"settings left open: {unsettled}")
        return self.asked.with_values(**values), sources

    @property
    def recipe(self) -> Recipe:
        """The recipe as run: every setting a value (`NONE_MEANS` aside)."""
        return self._settled[0]

    @property
    def sources(self) -> dict:
        """{setting name: where its value came from}."""
        return self._settled[1]


def resolve(recipe: Recipe, job) -> Resolved:
    """`recipe` resolved for `job` (finetuning.job.FinetuneJob): checked against the data
    set, its input length fitted to the windows where it is left open."""
    check_window(recipe, job.meta, job.data)
    resolved = Resolved.of(recipe, job.meta, job.encoder_dropout(recipe.fresh_shape))
    tokenizer = job.tokenizer
    if recipe.head.base.any and tokenizer.unk_id in tokenizer.encode("N"):
        log.warning(
            "the vocabulary has no piece for N: a run of N is one [UNK] token, "
            "whose bases the base readers cannot read, so windows with N do not "
            "start as the baselines (`genobird vocab train` gives N a piece)"
        )
    if recipe.data.max_tokens is None:
        resolved = resolved.with_values(FITTED, max_tokens=fitted_max_tokens(recipe, job))
    if recipe.data.bpe_dropout:  # a tokenizer that cannot sample is refused before any training
        tokenizer.check_sampling()
    return resolved


def fitted_max_tokens(recipe: Recipe, job) -> int:
    """What the data set's windows need (at most the pretrained model's max_position)."""
    if job.description is not None:
        config = job.description["config"]
        block = config["block_size"]
        # rotary positions have no table to outgrow (task_config)
        limit = None if config.get("position_encoding") == "rotary" else config["max_position"]
    else:
        block, limit = recipe.fresh_shape.get("block_size", 64), None
    max_tokens = default_max_tokens(
        job.data, job.tokenizer, block, limit, window_bp=recipe.data.window_bp
    )
    log.info("max_tokens %d (the data set's longest window)", max_tokens)
    return max_tokens


def check_window(recipe: Recipe, meta: dict, data_path) -> None:
    """A context wider than the data set's windows cannot be cut from them, and a profile
    head needs a data set of profile labels whose bins are no wider than the context read
    (it learns the central ones that fit: spec.profile_bins_read)."""
    if recipe.data.window_bp is not None and recipe.data.window_bp > meta["window_bp"]:
        raise ConfigError(
            f"--window-bp {recipe.data.window_bp} is wider than the windows of {data_path} "
            f"({meta['window_bp']} bp); rebuild the data set with that context or give at most "
            f"{meta['window_bp']}"
        )
    if recipe.head.pooling != "profile":
        return
    if not meta["profile_bins"]:
        raise ConfigError(
            f"--pooling profile needs profile labels, which {data_path} has "
            "not; rebuild it with `genobird dataset chromatin --profile-bins "
            "K`"
        )
    read = recipe.data.window_bp or meta["window_bp"]
    if meta["profile_bin_bp"] > read:
        raise ConfigError(
            f"--pooling profile: the data set's profile bins are "
            f"{meta['profile_bin_bp']} bp, wider than the {read} bp read; give "
            f"--window-bp {meta['profile_bin_bp']} or more"
        )
