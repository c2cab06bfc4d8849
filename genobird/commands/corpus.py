"""`genobird corpus documents|instances` and `genobird vocab train`: pretraining data."""

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

log = logging.getLogger("genobird")


def cmd_corpus_documents(args: argparse.Namespace) -> int:
    from genobird.corpus import DocumentSpec, write_documents

    spec = DocumentSpec(
        passes=args.passes,
        min_sentence_bp=args.min_sentence_bp,
        max_sentence_bp=args.max_sentence_bp,
        max_n_fraction=args.max_n_fraction,
        seed=args.seed,
    )
    summary = write_documents(
        args.reference, args.out, spec, args.chromosomes, args.threads, progress=not args.quiet
    )
    print(
        f"wrote {args.out}: {summary.documents:,} documents, {summary.sentences:,} sentences, "
        f"{summary.bp / 1e6:,.1f} Mbp from {summary.chromosomes} chromosomes in "
        f"{summary.seconds:.1f} s ({summary.mbp_per_second:.1f} Mbp/s scanned)"
    )
    return EXIT_OK


def cmd_corpus_instances(args: argparse.Namespace) -> int:
    from genobird.corpus import InstanceSpec, write_instances

    spec = InstanceSpec(
        max_seq_length=args.max_tokens,
        max_predictions=args.max_predictions,
        masked_lm_prob=args.masked_lm_prob,
        dupe_factor=args.dupe_factor,
        short_seq_prob=args.short_seq_prob,
        documents_per_chunk=args.documents_per_chunk,
        dynamic_masking=args.dynamic_masking,
        seed=args.seed,
    )
    manifest = write_instances(
        args.documents, args.tokenizer, args.out, spec, args.threads, progress=not args.quiet
    )
    print(
        f"wrote {args.out}: {manifest['instances']:,} instances in {len(manifest['shards'])} "
        f"shards from {manifest['bp'] / 1e6:,.1f} Mbp in {manifest['seconds']:.1f} s"
    )
    return EXIT_OK


def cmd_vocab_train(args: argparse.Namespace) -> int:
    from genobird.corpus import VocabSpec, read_documents, train_vocabulary

    spec = VocabSpec(
        vocab_size=args.vocab_size,
        sample_sentences=args.sample_sentences,
        seed=args.seed,
        threads=args.threads,
    )
    tokenizer = train_vocabulary(args.documents, args.out, spec)
    message = f"wrote {args.out}: {tokenizer.vocab_size:,} pieces"
    if args.heldout:
        sentences = [s for document in read_documents(args.heldout) for s in document]
        bp_per_token = tokenizer.bp_per_token(sentences, threads=args.threads)
        message += f"; {bp_per_token:.2f} bp/token on {len(sentences):,} held-out sentences"
    print(message)
    return EXIT_OK


def add_corpus(commands) -> None:
    actions = command_group(commands, "corpus", "Build pretraining documents and instances.")
    docs = subcommand(
        actions,
        "documents",
        "Cut a genome into documents of consecutive sentences (paper appendix F.1).",
        cmd_corpus_documents,
    )
    add_shared(
        docs,
        "reference",
        "out",
        "chromosomes",
        reference={
            "required": True,
            "help": "genome FASTA (several: one documents file, in file order)",
        },
        out="documents text file",
        chromosomes="contigs to use (default: 1-22, X, Y; aliases ok)",
    )
    docs.add_argument("--passes", type=int, default=10, help="passes over each chromosome")
    docs.add_argument("--min-sentence-bp", type=int, default=500)
    docs.add_argument("--max-sentence-bp", type=int, default=1000)
    docs.add_argument(
        "--max-n-fraction", type=float, default=0.5, help="drop sentences with more N"
    )
    add_shared(docs, "seed", "threads", threads="chromosomes in parallel")
    inst = subcommand(
        actions,
        "instances",
        "Write MLM+NSP pretraining instances as HDF5 shards.",
        cmd_corpus_instances,
    )
    add_shared(
        inst,
        "documents",
        "tokenizer",
        "out",
        "max_tokens",
        tokenizer={"required": True},
        out="output folder",
        max_tokens={"default": 4096, "help": "tokens per instance"},
    )
    inst.add_argument("--max-predictions", type=int, help="default: 15%% of max-seq-length")
    inst.add_argument("--masked-lm-prob", type=float, default=0.15)
    inst.add_argument("--dupe-factor", type=int, default=1)
    inst.add_argument("--short-seq-prob", type=float, default=0.1)
    inst.add_argument("--documents-per-chunk", type=int, default=2000)
    inst.add_argument(
        "--dynamic-masking", action="store_true", help="store no masks; mask when loading"
    )
    add_shared(inst, "seed", "threads", threads="chunks in parallel")


def add_vocab(commands) -> None:
    actions = command_group(commands, "vocab", "Train the sentencepiece BPE vocabulary.")
    train = subcommand(
        actions,
        "train",
        "Train a BPE vocabulary on a seeded sample of document sentences.",
        cmd_vocab_train,
    )
    add_shared(
        train,
        "documents",
        "out",
        "vocab_size",
        out="tokenizer.model to write",
        vocab_size={"default": 32_000},
    )
    train.add_argument("--sample-sentences", type=int, default=1_000_000)
    train.add_argument("--heldout", type=Path, help="documents to report bp/token on")
    add_shared(train, "seed", "threads")
