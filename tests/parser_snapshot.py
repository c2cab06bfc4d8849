"""Every option of every command, as argparse holds it, help aside: the command line's
spellings, types, defaults and choices. tests/data/parser_snapshot.json keeps the
snapshot a change is held to (test_cli: a refactor changes no option); a deliberate
change of the command line writes it again:

    python -m tests.parser_snapshot --write
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SNAPSHOT = Path(__file__).parent / "data" / "parser_snapshot.json"


def describe(value):
    """A default, type or choice as plain JSON (a callable by its name)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [describe(item) for item in value]
    return getattr(value, "__name__", type(value).__name__)


def options(parser: argparse.ArgumentParser, path: str = "genobird") -> dict:
    """{command path: [option, ...]} of `parser` and every subcommand under it."""
    found, rows = {}, []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(options(sub, f"{path} {name}"))
            continue
        if isinstance(action, argparse._HelpAction):
            continue
        rows.append(
            {
                "options": list(action.option_strings),
                "dest": action.dest,
                "action": type(action).__name__,
                "type": describe(action.type),
                "default": describe(action.default),
                "choices": describe(action.choices),
                "nargs": describe(action.nargs),
                "const": describe(action.const),
                "required": action.required,
                "metavar": describe(action.metavar),
            }
        )
    # positionals in their order (it is their meaning), options by name (their order is
    # --help's only)
    found[path] = [row for row in rows if not row["options"]] + sorted(
        (row for row in rows if row["options"]), key=lambda row: row["options"]
    )
    return found


def snapshot() -> dict:
    from genobird.cli import build_parser

    return options(build_parser())


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.parser_snapshot --write")
    SNAPSHOT.write_text(json.dumps(snapshot(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}")
