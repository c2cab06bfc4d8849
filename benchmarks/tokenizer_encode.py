"""BPE encoding speed on DNA sentences: sentencepiece's encoder and genobird's exact C
encoder (genobird.corpus._bpe), one thread and all threads.

    python benchmarks/tokenizer_encode.py TOKENIZER.model [--fasta FASTA]
    # another sentencepiece release, same model and sentences:
    pip install --target /tmp/sp0199 sentencepiece==0.1.99
    PYTHONPATH=/tmp/sp0199 python benchmarks/tokenizer_encode.py TOKENIZER.model

Sentences of U{500..1000} bp cut consecutively from the FASTA (those at least half N
are dropped), as the document builder makes them. Prints the best of three runs.

    python benchmarks/tokenizer_encode.py TOKENIZER.model --dropout 0.1 [--window 101]

BPE-dropout instead, one thread, each sentence (or its first --window bp) cut once:
sentencepiece's sampler, then genobird's merging loop in Python and in C on the same
draws (genobird.corpus.bpe_dropout), in merge order (a new seed per window, as training
draws them) and keyed by place (seeds 0-15 in turn, as evaluation's 16 cuts).
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
    parser.add_argument("--dropout", type=float, help="time BPE-dropout sampling instead")
    parser.add_argument("--window", type=int, help="with --dropout: each sentence's first bp")
    args = parser.parse_args(argv)
    processor = spm.SentencePieceProcessor()
    processor.Load(str(args.model))
    sentences = dna_sentences(args.fasta)
    if args.dropout is not None:
        windows = [sentence[: args.window] for sentence in sentences]
        return time_dropout(processor, windows, args.dropout)
    encoders = {
        f"sentencepiece {spm.__version__}": lambda batch, threads: processor.encode(
            batch, num_threads=threads
        )
    }
    fast = genobird_encoder(processor)
    if fast is not None:
        encoders["genobird _bpe"] = fast.encode
    cores = os.cpu_count() or 1
    for name, encode in encoders.items():
        for threads in (1, cores):
            rate, tokens = best_rate(encode, sentences, threads)
            print(
                f"{name}, {len(sentences)} sentences, {threads} thread(s): "
                f"{rate:.2f} Mbp/s ({tokens} tokens)"
            )
    return 0


def time_dropout(processor, windows: list[str], dropout: float) -> int:
    """Milliseconds per cut of each BPE-dropout sampler, best of three, one thread."""

    sys.path.insert(0, str(ROOT))
    from genobird.corpus.bpe_dropout import DropoutBPE
    from genobird.corpus.fast_bpe import FastBPE

    fast = DropoutBPE.create(processor, FastBPE.create(processor))
    python = DropoutBPE(fast._pieces)
    if fast._fast is None:
        print("genobird's C extension is not built: `pip install -e .`")
        return 1

    def sentencepiece(window, seed, by_position):
        return processor.encode(window, enable_sampling=True, alpha=dropout)

    def genobird(sampler):
        return lambda window, seed, by_position: sampler.encode_seeded(
            window, dropout, seed, by_position
        )

    samplers = {
        "sentencepiece's sampler": sentencepiece,
        "genobird, Python loop": genobird(python),
        "genobird, C loop": genobird(fast),
    }
    bp = sum(map(len, windows))
    print(f"{len(windows)} windows, {bp / len(windows):.0f} bp each on average, dropout {dropout}")
    for by_position in (False, True):
        times = {}
        for name, sample in samplers.items():
            if name.startswith("sentencepiece") and by_position:
                continue
            best = float("inf")
            for _ in range(3):
                started = time.perf_counter()
                for index, window in enumerate(windows):
                    # keyed cuts are seeded by the cut alone, as evaluation's 16 are
                    sample(window, index % 16 if by_position else index, by_position)
                best = min(best, time.perf_counter() - started)
            times[name] = best
            print(
                f"  {'keyed' if by_position else 'merge order'}, {name}: "
                f"{1e3 * best / len(windows):.4f} ms per cut, {bp / 1e6 / best:.2f} Mbp/s"
            )
        ratio = times["genobird, C loop"] / times["genobird, Python loop"]
        print(f"  C / Python: {ratio:.3f}")
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
