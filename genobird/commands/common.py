"""What every command module shares: exit codes, the subcommand factory and its help
format, and the one-line summaries of results."""

from __future__ import annotations

import argparse
import difflib
import logging
import re
from pathlib import Path

log = logging.getLogger("genobird")

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class HelpFormatter(argparse.HelpFormatter):
    """Help with each option's default where it has one worth saying: not for flags off
    by default, options without a default (None), or help that states its own default;
    former option names (`renamed`) are not shown."""

    def _format_action_invocation(self, action) -> str:
        hidden = getattr(action, "hidden_aliases", None)
        if not hidden:
            return super()._format_action_invocation(action)
        shown = [option for option in action.option_strings if option not in hidden]
        original, action.option_strings = action.option_strings, shown
        try:
            return super()._format_action_invocation(action)
        finally:
            action.option_strings = original

    def _get_help_string(self, action) -> str:
        text = action.help or ""
        if (
            action.default in (None, False, argparse.SUPPRESS)
            or "default" in text
            or not action.option_strings
            or action.help == argparse.SUPPRESS
        ):
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors suggest the closest command or option: `scroe`
    gets "did you mean 'score'?", and an option unknown to a command is reported with
    that command's usage and its closest options (`unknown_options`)."""

    def error(self, message: str):
        choice = re.match(r"argument \S+: invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            options = re.findall(r"'([^']*)'", choice.group(2))
            message += did_you_mean(choice.group(1), options)
        super().error(message)


def did_you_mean(given: str, known, names=None) -> str:
    """'; did you mean ...?' with the closest of `known` to `given` ('' when none is
    close), each shown as `names` spells it (default: as it is)."""
    close = difflib.get_close_matches(given, list(known), n=2, cutoff=0.6)
    shown = [names[c] if names else c for c in close]
    return f"; did you mean {' or '.join(map(repr, shown))}?" if close else ""


def unknown_options(args: argparse.Namespace, extras: list[str]) -> None:
    """Arguments no parser took (`parse_known_args`' extras): an error with the usage of
    the command they were given to and, for each option, the closest it has."""
    parser = getattr(args, "parser", None)
    options = [o for action in parser._actions for o in action.option_strings] if parser else []
    by_name = {option.lstrip("-"): option for option in options}  # '--' is no likeness
    hints = "".join(did_you_mean(extra.split("=", 1)[0].lstrip("-"), by_name, by_name)
                    for extra in extras if extra.startswith("-"))  # fmt: skip
    (parser or argparse.ArgumentParser(prog="genobird")).error(
        f"unrecognized arguments: {' '.join(extras)}{hints}"
    )


def command_group(commands, name: str, help_text: str, dest: str = "action",
                  metavar: str = "ACTION"):  # fmt: skip
    """A command whose own commands follow it (`genobird dataset chromatin`): the
    subparsers to add them to."""
    group = commands.add_parser(name, help=help_text.replace("%", "%%"))
    return group.add_subparsers(dest=dest, metavar=metavar, required=True)


def subcommand(commands, name: str, help_text: str, handler) -> argparse.ArgumentParser:
    sub = commands.add_parser(
        name,
        help=help_text.replace("%", "%%"),  # argparse %-formats help, not descriptions
        description=help_text,
        formatter_class=HelpFormatter,
    )
    sub.set_defaults(handler=handler, parser=sub)
    return sub


def headline(report: dict) -> str:
    """The figures a run prints: F1, MCC, AUROC, AUPRC (binary) or median AUROCs."""
    headline = ("f1", "mcc", "auroc", "auprc") if "f1" in report else ("median_auroc",)
    figures = ", ".join(f"{k} {report[k]:.3f}" for k in headline if k in report)
    if "median_auroc_by_category" in report:
        figures += ", by category " + ", ".join(
            f"{c} {v:.3f}" for c, v in report["median_auroc_by_category"].items()
        )
    return figures


def report_rejected(problems, limit: int = 5) -> None:
    for problem in problems[:limit]:
        log.warning("skipped: %s", problem)
    if len(problems) > limit:
        log.warning("... and %d more skipped records", len(problems) - limit)


# former option names -> what to write instead, for the warning `main` prints
RENAMED: dict[str, str] = {}


def renamed(parser, old: str, new: str, note: str = "") -> None:
    """Accept `old` as another spelling of the existing option `new` (the same action, so
    a required option given by its old name is given), hidden from help; `main` warns
    when it is used. For a --flag/--no-flag pair, name the spelling of the same sense."""
    action = parser._option_string_actions[new]
    action.option_strings.append(old)
    parser._option_string_actions[old] = action
    hidden = getattr(action, "hidden_aliases", set()) | {old}
    action.hidden_aliases = hidden
    if isinstance(action, argparse.BooleanOptionalAction):  # its usage lists every spelling
        action.format_usage = lambda: " | ".join(
            option for option in action.option_strings if option not in hidden
        )
    RENAMED[old] = f"{new}{' ' + note if note else ''}"


def warn_renamed(argv: list[str]) -> None:
    """One line on stderr for each former option name on the command line."""
    import sys

    for arg in argv:
        if arg == "--":
            break
        name = arg.split("=", 1)[0]
        if name in RENAMED:
            print(f"genobird: warning: {name} is now {RENAMED[name]}; the old name goes in the "
                  "next release", file=sys.stderr)  # fmt: skip


def add_out(parser, help_text: str, legacy: str | None = None) -> None:
    """`--out`, and (where a command took its output as a positional before) the old
    positional, accepted with a warning: `out_from(args)` reads either."""
    parser.add_argument("--out", type=Path, help=help_text)
    if legacy:
        parser.add_argument(legacy, type=Path, nargs="?", help=argparse.SUPPRESS)


def out_from(args, legacy: str | None = None) -> Path:
    """The output of a command given `--out` or, formerly, a positional."""
    import sys

    from genobird.errors import UsageError

    old = getattr(args, legacy, None) if legacy else None
    if args.out is not None and old is not None:
        raise UsageError(f"give the output once: --out {args.out} (not also {old})")
    if old is not None:
        print(f"genobird: warning: the output is now given as --out {old}; the positional "
              "goes in the next release", file=sys.stderr)  # fmt: skip
        return old
    if args.out is None:
        raise UsageError("give the output with --out")
    return args.out
