"""What every command module shares: exit codes, the subcommand factory and its help
format, and the one-line summaries of results."""

from __future__ import annotations

import argparse
import logging

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


def subcommand(commands, name: str, help_text: str, handler) -> argparse.ArgumentParser:
    sub = commands.add_parser(
        name,
        help=help_text,
        description=help_text,
        formatter_class=HelpFormatter,
    )
    sub.set_defaults(handler=handler)
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
