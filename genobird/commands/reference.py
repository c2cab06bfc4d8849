"""`genobird demo-reference` and `genobird reference list|download|fetch`: the genome."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from genobird.commands.common import (
    EXIT_OK,
    command_group,
    subcommand,
)
from genobird.commands.options import add_shared
from genobird.errors import GenobirdError

log = logging.getLogger("genobird")


def cmd_demo_reference(args: argparse.Namespace) -> int:
    from genobird.genome.demo import DemoSpec, generate_demo_reference

    if args.size_mb <= 0:
        raise GenobirdError(f"--size-mb must be positive, got {args.size_mb}")
    out = args.out
    manifest = generate_demo_reference(out, DemoSpec(seed=args.seed, size_mb=args.size_mb))
    total = sum(manifest["chromosomes"].values())
    print(
        f"wrote {out}: {len(manifest['chromosomes'])} chromosomes, {total:,} bp, "
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
        path = download(data_sets[name], args.out)
        print(f"{name}: {path}")
    return EXIT_OK


def cmd_reference_fetch(args: argparse.Namespace) -> int:
    from genobird.genome import Interval, Reference, parse_region

    with Reference(args.fasta) as reference:
        # a contig's own name (which may hold a colon) is the whole contig
        if args.region in reference.lengths:
            region = Interval(args.region, 0, reference.lengths[args.region])
        else:
            region = parse_region(args.region)
        sequence = reference.fetch(
            region.chrom, region.start, region.end, strand=args.strand, pad=args.pad
        )
    print(f">{args.region}({args.strand})")
    for i in range(0, len(sequence), 60):
        print(sequence[i : i + 60])
    return EXIT_OK


def add_demo_reference(commands) -> None:
    sub = subcommand(
        commands,
        "demo-reference",
        "Write the embedded default: a deterministic synthetic genome with promoters, "
        "repeats and chromatin features, and long-range structure: copies of segments "
        "0.2-4 kb apart (segmental, inverted, tandem), H3K27ac set by where a distal "
        "element lies relative to a promoter, H3K27me3 domains between boundary sites "
        "facing each other (each beside decoys of the same motifs).",
        cmd_demo_reference,
    )
    add_shared(sub, "out", "seed", out="output folder", seed="random seed (same seed: same files)")
    sub.add_argument("--size-mb", type=float, default=4.2, help="total genome size in Mb")


def add_reference(commands) -> None:
    actions = command_group(commands, "reference", "Download and read reference data sets.")
    listing = subcommand(actions, "list", "List the data sets of a manifest.", cmd_reference_list)
    add_shared(listing, "manifest")
    get = subcommand(
        actions,
        "download",
        "Download, verify (checksum), post-process and index data sets; resumes.",
        cmd_reference_download,
    )
    get.add_argument("names", nargs="+", metavar="NAME", help="data set names (see list)")
    add_shared(
        get,
        "out",
        "manifest",
        out={"required": False, "default": Path("reference/data"), "help": "folder"},
    )
    fetch = subcommand(
        actions, "fetch", "Print a region of a FASTA (1-based chr:start-end).", cmd_reference_fetch
    )
    fetch.add_argument("fasta", type=Path, help="FASTA (plain or bgzipped)")
    fetch.add_argument(
        "region",
        help="chrom:start-end, 1-based inclusive (the coordinates "
        "follow the last colon), or a contig's name for all of it",
    )
    fetch.add_argument("--strand", choices=["+", "-"], default="+", help="'-': reverse complement")
    fetch.add_argument("--pad", action="store_true", help="fill with N past the contig ends")
