"""What every command module shares: exit codes, the subcommand factory and its help
format, and the one-line summaries of results."""

from __future__ import annotations

import argparse
import difflib
import logging
import re

log = logging.getLogger("genobird")

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class HelpFormatter(argparse.HelpFormatter):
    """Help with each option's default where it has one worth saying: not for flags off
    by default, options without a default (None), or help that states its own default."""

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

    def parse_known_args(self, args=None, namespace=None):
        import sys

        self.given = list(sys.argv[1:] if args is None else args)  # what error() points at
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        choice = re.match(r"argument \S+: invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            options = re.findall(r"'([^']*)'", choice.group(2))
            message += did_you_mean(choice.group(1), options)
        elif message.startswith("the following arguments are required"):
            # a required option given under another name: say so, not only that it is missing
            given = [a.split("=", 1)[0] for a in getattr(self, "given", []) if a.startswith("--")]
            for option in given:
                if option not in self._option_string_actions:
                    message += f"; unrecognized {option}{closest_option(self, option)}"
        super().error(message)


def did_you_mean(given: str, known, names=None) -> str:
    """'; did you mean ...?' with the closest of `known` to `given` ('' when none is
    close), each shown as `names` spells it (default: as it is)."""
    close = difflib.get_close_matches(given, list(known), n=2, cutoff=0.6)
    shown = [names[c] if names else c for c in close]
    return f"; did you mean {' or '.join(map(repr, shown))}?" if close else ""


def closest_option(parser: argparse.ArgumentParser | None, given: str) -> str:
    """'; did you mean ...?' with `parser`'s options closest to the option `given`."""
    options = [o for action in parser._actions for o in action.option_strings] if parser else []
    by_name = {option.lstrip("-"): option for option in options}  # '--' is no likeness
    return did_you_mean(given.split("=", 1)[0].lstrip("-"), by_name, by_name)


def unknown_options(args: argparse.Namespace, extras: list[str]) -> None:
    """Arguments no parser took (`parse_known_args`' extras): an error with the usage of
    the command they were given to and, for each option, the closest it has."""
    parser = getattr(args, "parser", None)
    hints = "".join(closest_option(parser, extra) for extra in extras if extra.startswith("-"))
    (parser or argparse.ArgumentParser(prog="genobird")).error(
        f"unrecognized arguments: {' '.join(extras)}{hints}"
    )


def command_group(
    commands, name: str, help_text: str, dest: str = "action", metavar: str = "ACTION"
):
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
    """The figures a run prints: F1, MCC (at the threshold chosen on validation, then at
    0.5), AUROC, AUPRC (binary) or median AUROCs."""
    headline = ("f1", "mcc", "auroc", "auprc") if "f1" in report else ("median_auroc",)
    figures = ", ".join(
        f"{k} {report[k]:.3f}"
        if report[k] is not None
        else f"{k} undefined ({report['undefined'][k]})"
        for k in headline
        if k in report
    )
    if "threshold" in report:
        half = report["at_0.5"]
        figures += (
            f" (called at {report['threshold']:.3g}, chosen on validation; at 0.5: "
            f"f1 {half['f1']:.3f}, mcc {half['mcc']:.3f})"
        )
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


def write_run_page(out) -> None:
    """The run's own page, OUT/report.html (genobird.report.run_page), written as the run
    ends, so that every finetune and baseline folder has one."""
    from pathlib import Path

    from genobird.report.run_page import build_run_page

    build_run_page(Path(out), Path(out) / "report.html")
