"""What every command module shares: exit codes, the subcommand factory and its help
format, and the one-line summaries of results."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

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


class _Renamed(argparse.Action):
    """An option's former name: does what the new one does, hidden from help, and says
    once on stderr what to write instead (the former names go in the next release)."""

    def __init__(self, option_strings, dest, new: str, value=None, **kwargs):
        self.new, self.value = new, value
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        import sys

        print(f"genobird: warning: {option_string} is now {self.new}; the old name goes in "
              "the next release", file=sys.stderr)  # fmt: skip
        setattr(namespace, self.dest, self.value if self.nargs == 0 else values)


def renamed(parser, old: str, new: str, dest: str, flag_value=None, **kwargs) -> None:
    """Accept `old` as a hidden alias of option `new` (stored in `dest`); a flag alias
    (`flag_value` given) stores that value."""
    if flag_value is not None:
        kwargs = {"nargs": 0, "value": flag_value}
    parser.add_argument(old, dest=dest, action=_Renamed, new=new, default=argparse.SUPPRESS,
                        **kwargs)  # fmt: skip


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
