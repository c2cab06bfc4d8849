"""Settings declared once, as the typed fields of a tree of frozen dataclasses: each
leaf is a `setting(...)` field (its type, default, per-task defaults, bounds, help), each
inner node a `branch(...)` field. Walking the tree (`walk`) gives one `Setting` per leaf,
from which come a command's options (`add_options`), the checks and defaults of a run
(`resolve`), a config file's reading (`read_config`) and the nested record a run saves
(`nested`). finetuning.recipe declares the fine-tuning recipe this way, nlp.recipe the
NLP heads'. No torch here: Snakemake reads the recipe when it parses a workflow.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from genobird.errors import ConfigError

SETTING, BRANCH = "genobird.setting", "genobird.branch"


@dataclass(frozen=True)
class Setting:
    """One setting. `default` is what a run that does not give it gets (None: left open,
    settled when the run starts), `defaults` overrides it per task kind. `run_default`:
    where such a setting is left open, the value a run of each task kind settles it to
    (finetuning.resolve), which the recipe as run does not record unless a decision
    does (a recipe read back for another task kind follows that kind's).
    Bounds are inclusive unless `open_low` / `open_high`. `trainer`: a Trainer setting
    (training.TrainingConfig has a field of its name). `pipeline`: a pipeline's section
    takes it (`required`: every section gives it). `name` is the leaf's name with its
    branches' prefixes (the option's, the pipelines' and an error's), `path` the field
    names from the root to it, `group` the root branch it is under (--help's group)."""

    type: type
    help: str
    default: Any = None
    defaults: Mapping = field(default_factory=dict)
    run_default: Mapping = field(default_factory=dict)
    choices: tuple = ()
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    needs: str | None = None  # a setting that must be given (non-zero) with this one
    trainer: bool = False
    pipeline: bool = True
    required: bool = False
    toggle: bool = False  # --name / --no-name
    metavar: str | None = None
    name: str = ""
    path: tuple = ()
    group: str = ""

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    def default_for(self, task: str | None):
        return self.defaults.get(task, self.default)

    def check(self, value) -> None:
        """A one-line error naming the setting where `value` is of the wrong type or out
        of bounds (None, not given, passes)."""
        if value is None:
            return
        kind = {bool: "true or false", int: "a whole number", float: "a number", str: "text"}[
            self.type
        ]
        numeric = self.type in (int, float) and not isinstance(value, bool)
        if not (
            isinstance(value, self.type)
            or (self.type is float and numeric and isinstance(value, int))
        ):
            raise ConfigError(f"{self.name} must be {kind}, got {value!r}")
        if self.choices and value not in self.choices:
            raise ConfigError(
                f"{self.name} must be one of {', '.join(self.choices)}, got {value!r}"
            )
        if self.type in (int, float):
            if not math.isfinite(value):
                raise ConfigError(f"{self.name} must be finite, got {value!r}")
            below = self.low is not None and (
                value <= self.low if self.open_low else value < self.low
            )
            above = self.high is not None and (
                value >= self.high if self.open_high else value > self.high
            )
            if below or above:
                raise ConfigError(f"{self.name} must be in {self.bounds()}, got {value!r}")

    def bounds(self) -> str:
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        return f"{'(' if self.open_low or self.low is None else '['}{low}, {high}" + (
            ")" if self.open_high or self.high is None else "]"
        )

    def default_text(self, tasks: tuple = ()) -> str:
        """How --help says the default: one value, per task kind, or the run's choice."""
        if self.defaults and tasks:
            values = {task: self.default_for(task) for task in tasks}
            if len({json.dumps(v) for v in values.values()}) == 1:
                return f"default {next(iter(values.values()))}"
            return "default: " + ", ".join(f"{task} {value}" for task, value in values.items())
        return f"default {self.default}" if self.default is not None else ""


def setting(type: type, help: str, **declared) -> Any:
    """A leaf of a settings tree: a dataclass field whose default is the setting's, and
    whose metadata holds its `Setting` (named where the tree is walked)."""
    declared = Setting(type, help, **declared)
    return field(default=declared.default, metadata={SETTING: declared})


def branch(node: type, prefix: str = "") -> Any:
    """An inner node of a settings tree: a field holding a `node` of its defaults.
    `prefix` goes before its leaves' names (a branch `base` of prefix "base_" names its
    leaf `kmers` base_kmers)."""
    return field(default_factory=node, metadata={BRANCH: (node, prefix)})


def walk(node: type, prefix: str = "", path: tuple = (), group: str = "") -> Iterator[Setting]:
    """Every leaf under `node` (a dataclass type), named, in declaration order."""
    for item in fields(node):
        if SETTING in item.metadata:
            yield replace(
                item.metadata[SETTING],
                name=prefix + item.name,
                path=(*path, item.name),
                group=group or item.name,
            )
        elif BRANCH in item.metadata:
            child, more = item.metadata[BRANCH]
            yield from walk(child, prefix + more, (*path, item.name), group or item.name)


@functools.cache
def settings_of(root: type) -> tuple[Setting, ...]:
    """Every leaf of a tree type, named (`walk`), once per type."""
    return tuple(walk(root))


class Tree:
    """The root of a settings tree (a frozen dataclass deriving from this): made from
    settings by name (`of`), read back by name (`values`), changed by name
    (`with_values`), and checked when made: each leaf against its bounds, and each
    setting given with the one it needs. Root fields that are not settings are given to
    `of` by their field names."""

    def __post_init__(self):
        settings = settings_of(type(self))
        values = self.values()
        for one in settings:
            one.check(values[one.name])
        check_needs(values, settings)

    @classmethod
    def of(cls, **given):
        """A tree of the settings given by name (the rest at their fields' defaults, not
        a task kind's: `resolve` gives those) and of the root's other fields given."""
        settings = settings_of(cls)
        names = {s.name for s in settings}
        roots = {
            item.name
            for item in fields(cls)
            if SETTING not in item.metadata and BRANCH not in item.metadata
        }
        if unknown := sorted(set(given) - names - roots):
            raise ConfigError(f"no recipe setting {unknown[0]!r}")
        extra = {name: given.pop(name) for name in roots if name in given}
        return build(cls, given, settings, extra)

    def values(self) -> dict:
        """Every setting's value, by name."""
        return values_of(self, settings_of(type(self)))

    def with_values(self, **values):
        """This tree with the settings given by name replaced."""
        return with_values(self, values, settings_of(type(self)))


def values_of(tree, settings: tuple[Setting, ...]) -> dict:
    """{setting name: value} of every leaf of a tree instance."""
    return {s.name: leaf(tree, s.path) for s in settings}


def leaf(tree, path: tuple):
    for name in path:
        tree = getattr(tree, name)
    return tree


def build(
    node: type,
    values: Mapping,
    settings: tuple[Setting, ...],
    extra: Mapping | None = None,
    path: tuple = (),
):
    """A `node` of the leaves in `values` (by setting name; the rest at their defaults)
    and the non-setting fields in `extra` (by field name, at the root)."""
    by_path = {s.path: s.name for s in settings}
    kwargs = {}
    for item in fields(node):
        here = (*path, item.name)
        if BRANCH in item.metadata:
            kwargs[item.name] = build(item.metadata[BRANCH][0], values, settings, None, here)
        elif SETTING in item.metadata:
            if by_path[here] in values:
                kwargs[item.name] = values[by_path[here]]
        elif extra and item.name in extra:
            kwargs[item.name] = extra[item.name]
    return node(**kwargs)


def with_values(tree, values: Mapping, settings: tuple[Setting, ...]):
    """`tree` with the leaves in `values` (by setting name) replaced."""
    known = {s.name: s for s in settings}
    if unknown := sorted(set(values) - set(known)):
        raise ConfigError(f"no setting {unknown[0]!r}")
    changes = {}
    for name, value in values.items():
        changes.setdefault(known[name].path[0], {})[known[name].path[1:]] = value
    return _replaced(tree, changes)


def _replaced(tree, changes: dict):
    kwargs = {}
    for name, inner in changes.items():
        if () in inner:
            kwargs[name] = inner[()]
            continue
        below = {}
        for path, value in inner.items():
            below.setdefault(path[0], {})[path[1:]] = value
        kwargs[name] = _replaced(getattr(tree, name), below)
    return replace(tree, **kwargs)


def nested(values: Mapping, settings: tuple[Setting, ...]) -> dict:
    """The given values as the tree holds them: {branch: {... leaf name: value}} (a run's
    saved recipe, which `read_config` reads back)."""
    out = {}
    for s in settings:
        if s.name in values:
            place = out
            for name in s.path[:-1]:
                place = place.setdefault(name, {})
            place[s.path[-1]] = values[s.name]
    return out


def resolve(given: Mapping, settings: tuple[Setting, ...], task: str | None = None) -> dict:
    """Every setting's value for a run of `task`: the given ones (checked), the rest at
    their task kind's default; a setting given without the one it needs is refused."""
    known = {s.name: s for s in settings}
    if unknown := sorted(set(given) - set(known)):
        raise ConfigError(f"no recipe setting {unknown[0]!r}; the settings are: {', '.join(known)}")
    values = {}
    for name, setting_ in known.items():
        if given.get(name) is not None:
            setting_.check(given[name])
            values[name] = given[name]
        else:
            values[name] = setting_.default_for(task)
    check_needs(values, settings)
    return values


def check_needs(values: Mapping, settings: tuple[Setting, ...]) -> None:
    """A setting given (non-zero) without the one it needs is a one-line error."""
    known = {s.name: s for s in settings}
    for name, setting_ in known.items():
        if setting_.needs and values.get(name) and not values.get(setting_.needs):
            raise ConfigError(
                f"{name} needs {setting_.needs}: give {known[setting_.needs].option} too"
            )


def read_config(path: str | Path, settings: tuple[Setting, ...], containers: tuple = ()) -> dict:
    """The settings of a config file (YAML or JSON), by setting name: nested as `nested`
    writes them, flat, or flat under a name in `containers` (an older file's groups).
    Each is checked; an unknown name is a one-line error."""
    import yaml

    path = Path(path)
    try:
        content = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ConfigError(f"{path}: recipe file not found") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not YAML or JSON ({str(error).splitlines()[0]})") from None
    if not isinstance(content, dict):
        raise ConfigError(f"{path}: a recipe file maps setting names to values")
    by_name = {s.name: s for s in settings}
    by_path = {s.path: s for s in settings}
    branches = {s.path[:depth] for s in settings for depth in range(1, len(s.path))}
    flat = {}

    def take(mapping: dict, inside: tuple) -> None:
        for key, value in mapping.items():
            here = (*inside, key)
            if here in branches and isinstance(value, dict):
                take(value, here)
            elif here in by_path:
                flat[by_path[here].name] = value
            elif not inside and key in containers and isinstance(value, dict):
                flat.update(value)
            elif key in by_name:
                flat[key] = value
            else:
                where = f"under {'.'.join(inside)}: " if inside else ""
                raise ConfigError(
                    f"{path}: {where}no recipe setting {key!r}; the settings "
                    f"are: {', '.join(by_name)}"
                )

    take(content, ())
    for name, value in flat.items():
        if name not in by_name:
            raise ConfigError(
                f"{path}: no recipe setting {name!r}; the settings are: {', '.join(by_name)}"
            )
        if by_name[name].type is float and isinstance(value, int) and not isinstance(value, bool):
            flat[name] = float(value)
        by_name[name].check(flat[name])
    return flat


def add_options(
    groups: Mapping, settings: tuple[Setting, ...], tasks: tuple = (), given_only: bool = True
) -> None:
    """Each setting as an option of its group's argparse group. With `given_only`, every
    option's default is None (not given), so that a run tells the options given from its
    defaults; else the setting's default."""
    import argparse

    for setting_ in settings:
        text, default = setting_.help, setting_.default_text(tasks)
        if default and not setting_.toggle:
            text = f"{text} ({default})"
        kwargs = {
            "help": text.replace("%", "%%"),
            "default": None if given_only else setting_.default,
        }
        if setting_.toggle:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = setting_.type
            if setting_.choices:
                kwargs["choices"] = setting_.choices
            if setting_.metavar:
                kwargs["metavar"] = setting_.metavar
        groups[setting_.group].add_argument(setting_.option, **kwargs)
