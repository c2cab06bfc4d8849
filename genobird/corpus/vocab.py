"""Training the DNA vocabulary: sentencepiece BPE, 32,000 pieces by default (paper F.1).

Whole-genome input (31 Gbp over 10 passes) does not fit sentencepiece's trainer in
24 GB, so it trains on a seeded uniform sample of sentences drawn by reservoir sampling
in one streaming pass (our own sampler, so the sample and the vocabulary are
reproducible from the seed).
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sentencepiece as spm

from genobird.corpus.tokenizer import SPECIAL_TOKENS, Tokenizer
from genobird.errors import ConfigError, InputError
from genobird.fileio import atomic_path

log = logging.getLogger(__name__)
# the characters of normalised DNA, each a piece of every vocabulary
DNA_CHARACTERS = "ACGTN"


@dataclass(frozen=True)
class VocabSpec:
    vocab_size: int = 32_000
    sample_sentences: int = 1_000_000
    max_piece_length: int = 64  # DNA pieces grow long in repeats; sentencepiece caps at 16
    seed: int = 0
    threads: int = 1


def sample_sentences(documents_text: str | Path, count: int, seed: int) -> list[str]:
    """A uniform sample of `count` sentences (all of them if fewer), in file order."""
    rng = np.random.default_rng(seed)
    reservoir: list[tuple[int, str]] = []
    seen = 0
    with open(documents_text) as handle:
        for line in handle:
            sentence = line.rstrip("\n")
            if not sentence:
                continue
            if len(reservoir) < count:
                reservoir.append((seen, sentence))
            else:
                slot = int(rng.integers(0, seen + 1))
                if slot < count:
                    reservoir[slot] = (seen, sentence)
            seen += 1
    return [sentence for _, sentence in sorted(reservoir)]


def train_vocabulary(
    documents_text: str | Path, out_model: str | Path, spec: VocabSpec
) -> Tokenizer:
    """Train a BPE tokenizer on a sample of the documents' sentences; write `out_model`."""
    if spec.vocab_size <= len(SPECIAL_TOKENS) + 5:
        raise ConfigError(
            f"vocab_size must exceed {len(SPECIAL_TOKENS) + 5}, got {spec.vocab_size}"
        )
    started = time.perf_counter()
    sentences = sample_sentences(documents_text, spec.sample_sentences, spec.seed)
    if not sentences:
        raise InputError(f"{documents_text}: no sentences to train a vocabulary on")
    # Every base and N gets a piece, even where the sample lacks it (sentencepiece's BPE
    # ignores required_chars for a character it never sees): otherwise a window's N runs
    # become [UNK], which spells no bases, and the tokens no longer say what the window is.
    seen = set().union(*map(set, sentences))
    sentences += [base for base in DNA_CHARACTERS if base not in seen]
    workdir = Path(tempfile.mkdtemp(prefix="genobird-vocab-"))
    try:
        sample = workdir / "sample.txt"
        sample.write_text("\n".join(sentences) + "\n")
        _train(sample, workdir / "bpe", spec, max(len(s) for s in sentences))
        with atomic_path(out_model) as tmp:
            shutil.copyfile(workdir / "bpe.model", tmp)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    tokenizer = Tokenizer(out_model)
    log.info(
        "vocabulary: %d pieces from %d sentences in %.1f s",
        tokenizer.vocab_size,
        len(sentences),
        time.perf_counter() - started,
    )
    return tokenizer


def _train(sample: Path, prefix: Path, spec: VocabSpec, longest: int) -> None:
    run_sentencepiece_trainer(
        input=str(sample),
        model_prefix=str(prefix),
        model_type="bpe",
        vocab_size=spec.vocab_size,
        character_coverage=1.0,
        required_chars=DNA_CHARACTERS,
        split_by_whitespace=False,
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
        normalization_rule_name="identity",
        max_sentence_length=max(longest + 1, 4192),
        max_sentencepiece_length=spec.max_piece_length,
        input_sentence_size=0,  # our own seeded sample is the whole input
        shuffle_input_sentence=False,
        num_threads=spec.threads,
    )


def run_sentencepiece_trainer(**options) -> None:
    """SentencePieceTrainer.train with BERT's special tokens at fixed ids (as
    `SPECIAL_TOKENS`), quiet; a vocabulary larger than the data supports is a ConfigError."""
    try:
        spm.SentencePieceTrainer.train(
            pad_id=0,
            unk_id=1,
            bos_id=-1,
            eos_id=-1,
            pad_piece=SPECIAL_TOKENS[0],
            unk_piece=SPECIAL_TOKENS[1],
            control_symbols=list(SPECIAL_TOKENS[2:]),
            minloglevel=2,
            **options,
        )
    except RuntimeError as exc:
        limit = re.search(r"<= (\d+)", str(exc))
        if "Vocabulary size too high" in str(exc) and limit:
            raise ConfigError(
                f"vocab_size {options.get('vocab_size')} is larger than these sentences "
                f"support (at most {limit.group(1)}); lower --vocab-size or train on more "
                "sentences"
            ) from exc
        raise
