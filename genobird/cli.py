"""The `genobird` command line. `main(argv=None)` returns the exit code, so tests call it.

Exit codes: 0 success, 1 a problem with the input or the run (one line on stderr, no
traceback), 2 a usage error (argparse), 130 interrupted. `--debug` shows tracebacks.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

# Long-sequence attention allocates GBs of short-lived CPU tensors; backing them with
# transparent huge pages removes the first-touch page faults that made time grow
# super-linearly with length (benchmarks/README.md: 32k tokens 1.8x faster). torch
# reads this at its first allocation, so it is set here, before torch is imported.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

from genobird.commands import build_parser
from genobird.commands.common import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    unknown_options,
)
from genobird.errors import GenobirdError, UsageError

log = logging.getLogger("genobird")


# =========================================================================== entry point
def _configure_logging(args: argparse.Namespace) -> None:
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


# Options of the genobird command itself, accepted after the subcommand too: a user who
# sees an error adds --debug at the end of the line they ran.
ANYWHERE = ("--debug", "--quiet", "--verbose")


def hoisted(argv: list[str]) -> list[str]:
    """argv with the options of ANYWHERE moved in front of the subcommand (up to a
    `--`, after which arguments are left alone)."""
    end = argv.index("--") if "--" in argv else len(argv)
    flags = [arg for arg in argv[:end] if arg in ANYWHERE]
    rest = [arg for arg in argv[:end] if arg not in ANYWHERE]
    return flags + rest + argv[end:]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = hoisted(list(sys.argv[1:] if argv is None else argv))
    args, extras = parser.parse_known_args(argv)
    if extras:  # named with the command's usage and the closest options it has
        unknown_options(args, extras)
    _configure_logging(args)
    try:
        return args.handler(args)
    except UsageError as exc:
        _fail(f"error: {exc}", args)
        return EXIT_USAGE
    except GenobirdError as exc:
        _fail(f"error: {exc}", args)
    except KeyboardInterrupt:
        print("genobird: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader left (`| head`): stop quietly, as Unix tools do
        _discard_stdout()
        return EXIT_FAILURE
    except OSError as exc:  # files the user named: missing, unreadable, disk full
        name = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        _fail(f"error:{name} {exc.strerror or exc}", args)
    except Exception as exc:  # a bug: still one line unless --debug
        _fail(
            f"internal error: {type(exc).__name__}: {exc} "
            "(rerun with --debug for the traceback and report it)",
            args,
        )
    return EXIT_FAILURE


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that Python's flush at exit finds no closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _fail(message: str, args: argparse.Namespace) -> None:
    if args.debug:
        raise
    print(f"genobird: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
