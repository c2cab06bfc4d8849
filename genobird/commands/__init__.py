"""The `genobird` command line as a package: one module per command group, each with its
parser and its handlers side by side; genobird.cli keeps `main`. Building the parser
imports no torch (the handlers import what they need), so every --help comes at once."""

from __future__ import annotations

import argparse

from genobird.commands.common import HelpFormatter, Parser
from genobird.commands.convert import add_convert
from genobird.commands.corpus import add_corpus, add_vocab
from genobird.commands.dataset import add_dataset
from genobird.commands.evaluate import add_baseline, add_zero_shot
from genobird.commands.finetune import add_finetune
from genobird.commands.interpret import add_attribute, add_motifs
from genobird.commands.layout import add_layout
from genobird.commands.nlp import add_nlp
from genobird.commands.pretrain import add_pretrain
from genobird.commands.reference import add_demo_reference, add_reference
from genobird.commands.report import add_evaluate, add_report
from genobird.commands.scoring import add_embed, add_ism, add_likelihood, add_score, add_tracks
from genobird.version import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="genobird",
        description="BigBird block-sparse transformers for long DNA sequences.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"genobird {__version__}")
    output = parser.add_argument_group("output (also accepted after the command)")
    output.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    output.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    output.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in (
        add_demo_reference,
        add_reference,
        add_corpus,
        add_vocab,
        add_pretrain,
        add_dataset,
        add_finetune,
        add_score,
        add_tracks,
        add_embed,
        add_likelihood,
        add_zero_shot,
        add_ism,
        add_attribute,
        add_motifs,
        add_baseline,
        add_evaluate,
        add_report,
        add_layout,
        add_convert,
        add_nlp,
    ):
        add(commands)
    return parser
