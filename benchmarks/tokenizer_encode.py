"""BPE encoding speed on DNA sentences: sentencepiece's encoder and genobird's exact C
encoder (genobird.corpus._bpe), one thread and all threads.

    python benchmarks/tokenizer_encode.py TOKENIZER.model [--fasta FASTA]
    # another sentencepiece release, same model and sentences:
    pip install --target /tmp/sp0199 sentencepiece==0.1.99
    PYTHONPATH=/tmp/sp0199 python benchmarks/tokenizer_encode.py TOKENIZER.model

Sentences of U{500..1000} bp cut consecutively from the FASTA (those at least half N
are dropped), as the document builder makes them. Prints the best of three runs.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import sentencepiece as spm

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FASTA = ROOT.parent / "shared" / "data" / "genome" / "hg19_chr20_0-2Mb.fa"


def dna_sentences(fasta: Path, seed: int = 0) -> list[str]:
    lines = fasta.read_text().splitlines()
    sequence = "".join(line.strip() for line in lines if not line.startswith(">")).upper()
    rng, sentences, start = random.Random(seed), [], 0
    while start < len(sequence) - 1000:
        length = rng.randint(500, 1000)
        sentence = sequence[start : start + length]
        start += length
        if sentence.count("N") < length // 2:
            sentences.append(sentence)
    return sentences


def best_rate(encode, sentences: list[str], threads: int) -> tuple[float, int]:
    """(Mbp/s, tokens) of the fastest of three encodes."""
    best, tokens = 0.0, 0
    for _ in range(3):
        started = time.perf_counter()
        ids = encode(sentences, threads)
        best = max(best, sum(map(len, sentences)) / 1e6 / (time.perf_counter() - started))
        tokens = sum(map(len, ids))
    return best, tokens


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--fasta", type=Path, default=DEFAULT_FASTA)
    args = parser.parse_args(argv)
    processor = spm.SentencePieceProcessor()
    processor.Load(str(args.model))
    sentences = dna_sentences(args.fasta)
    encoders = {f"sentencepiece {spm.__version__}":
                lambda batch, threads: processor.encode(batch, num_threads=threads)}  # fmt: skip
    fast = genobird_encoder(processor)
    if fast is not None:
        encoders["genobird _bpe"] = fast.encode
    cores = os.cpu_count() or 1
    for name, encode in encoders.items():
        for threads in (1, cores):
            rate, tokens = best_rate(encode, sentences, threads)
            print(f"{name}, {len(sentences)} sentences, {threads} thread(s): "
                  f"{rate:.2f} Mbp/s ({tokens} tokens)")  # fmt: skip
    return 0


def genobird_encoder(processor):
    """genobird's C encoder for this model, or None (not built, or another release of
    sentencepiece on PYTHONPATH makes genobird unimportable)."""
    try:
        sys.path.insert(0, str(ROOT))
        from genobird.corpus.fast_bpe import FastBPE
    except ImportError:
        return None
    return FastBPE.create(processor)


if __name__ == "__main__":
    raise SystemExit(main())
