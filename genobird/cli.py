"""The `genobird` command line. `main(argv=None)` returns the exit code, so tests call it.

Exit codes: 0 success, 1 a problem with the input or the run (one line on stderr, no
traceback), 2 a usage error (argparse), 130 interrupted. `--debug` shows tracebacks.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from genobird import __version__
from genobird.errors import GenobirdError

log = logging.getLogger("genobird")

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


# =========================================================================== commands
def cmd_demo_reference(args: argparse.Namespace) -> int:
    from genobird.genome.demo import DemoSpec, generate_demo_reference

    if args.size_mb <= 0:
        raise GenobirdError(f"--size-mb must be positive, got {args.size_mb}")
    manifest = generate_demo_reference(args.outdir, DemoSpec(seed=args.seed, size_mb=args.size_mb))
    total = sum(manifest["chromosomes"].values())
    print(
        f"wrote {args.outdir}: {len(manifest['chromosomes'])} chromosomes, {total:,} bp, "
        f"{manifest['promoters']} promoters, {len(manifest['features'])} chromatin features"
    )
    return EXIT_OK


def cmd_reference_list(args: argparse.Namespace) -> int:
    from genobird.genome.download import load_manifest

    for name, data_set in load_manifest(args.manifest).items():
        print(f"{name}\t{data_set.description}\t{data_set.url}")
    return EXIT_OK


def cmd_reference_download(args: argparse.Namespace) -> int:
    from genobird.genome.download import download, load_manifest

    data_sets = load_manifest(args.manifest)
    unknown = [name for name in args.names if name not in data_sets]
    if unknown:
        raise GenobirdError(
            f"unknown data set(s) {', '.join(unknown)}; available: {', '.join(data_sets)}"
        )
    for name in args.names:
        path = download(data_sets[name], args.dest)
        print(f"{name}: {path}")
    return EXIT_OK


def cmd_reference_fetch(args: argparse.Namespace) -> int:
    from genobird.genome import Reference, parse_region

    region = parse_region(args.region)
    with Reference(args.fasta) as reference:
        sequence = reference.fetch(
            region.chrom, region.start, region.end, strand=args.strand, pad=args.pad
        )
    print(f">{args.region}({args.strand})")
    for i in range(0, len(sequence), 60):
        print(sequence[i : i + 60])
    return EXIT_OK


# =========================================================================== parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="genobird",
        description="BigBird block-sparse transformers for long DNA sequences.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"genobird {__version__}")
    output = parser.add_argument_group("output")
    output.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    output.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    output.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_demo_reference(commands)
    _add_reference(commands)
    return parser


def _subparser(commands, name: str, help_text: str, handler) -> argparse.ArgumentParser:
    sub = commands.add_parser(
        name,
        help=help_text,
        description=help_text,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    sub.set_defaults(handler=handler)
    return sub


def _add_demo_reference(commands) -> None:
    sub = _subparser(
        commands,
        "demo-reference",
        "Write the embedded default: a deterministic synthetic genome with promoters, "
        "repeats and chromatin features.",
        cmd_demo_reference,
    )
    sub.add_argument("outdir", type=Path, help="output folder")
    sub.add_argument("--seed", type=int, default=0, help="random seed (same seed: same files)")
    sub.add_argument("--size-mb", type=float, default=4.2, help="total genome size in Mb")


def _add_reference(commands) -> None:
    reference = commands.add_parser("reference", help="Download and read reference data sets.")
    actions = reference.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = _subparser(actions, "list", "List the data sets of a manifest.", cmd_reference_list)
    listing.add_argument("--manifest", type=Path, help="manifest YAML (default: GRCh37)")
    get = _subparser(
        actions,
        "download",
        "Download, verify (checksum), post-process and index data sets; resumes.",
        cmd_reference_download,
    )
    get.add_argument("names", nargs="+", metavar="NAME", help="data set names (see list)")
    get.add_argument("--dest", type=Path, default=Path("reference/data"), help="folder")
    get.add_argument("--manifest", type=Path, help="manifest YAML (default: GRCh37)")
    fetch = _subparser(
        actions, "fetch", "Print a region of a FASTA (1-based chr:start-end).", cmd_reference_fetch
    )
    fetch.add_argument("fasta", type=Path, help="FASTA (plain or bgzipped)")
    fetch.add_argument("region", help="chrom:start-end, 1-based inclusive")
    fetch.add_argument("--strand", choices=["+", "-"], default="+", help="'-': reverse complement")
    fetch.add_argument("--pad", action="store_true", help="fill with N past the contig ends")


# =========================================================================== entry point
def _configure_logging(args: argparse.Namespace) -> None:
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(args)
    try:
        return args.handler(args)
    except GenobirdError as exc:
        _fail(f"error: {exc}", args)
    except KeyboardInterrupt:
        print("genobird: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
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


def _fail(message: str, args: argparse.Namespace) -> None:
    if args.debug:
        raise
    print(f"genobird: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
