"""Where a genome's predictable bits lie: soft-masked repeats against the rest.

    python benchmarks/repeats.py                       # the demo genome, after `make demo`
    python benchmarks/repeats.py --reference G.fa --train chr1 chr2 --heldout chr3 \
        --tokenizer T.model

On the held-out chromosomes of a soft-masked reference (repeat copies in lowercase), it
prints bits per bp of two kinds of model fitted on the training chromosomes, split into
repeat bases and the rest:

1. order-k Markov models of the bases (both strands, add-4 smoothing), the baseline of
   `genobird baseline markov`;
2. count models of the tokenizer's pieces: each piece's frequency (the level of a masked
   language model that ignores its context), and each piece given the pieces either side
   of it (interpolated Witten-Bell, backing off to the left neighbour, then the
   frequency), the most a model can draw from its two neighbours, counted. A piece is a
   repeat piece when most of its bases are lowercase;
3. with --model, a pretrained genobird model: the held-out pieces in windows of its
   max_position, every piece scored once with [MASK] in its place and one piece in
   `MASK_EVERY` masked around it (the scoring of `genobird pretrain`'s evaluation).

A language model below a Markov baseline must beat it where the baseline's bits are
saved. Counting them tells how much a model must learn, and of what kind, before it can.
"""

from __future__ import annotations

import argparse
import itertools
import math
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from genobird.baselines.markov import base_counts, dna_codes, fit_counts
from genobird.corpus.tokenizer import load_tokenizer
from genobird.scoring.likelihood import DEFAULT_STRIDE

REPO = Path(__file__).resolve().parents[1]
MARKOV_ORDERS = (0, 2, 5, 8, 10)
ALPHA = 4.0
CHUNK_BP = 100_000  # tokenised in chunks, as the corpus cuts documents
MASK_EVERY = DEFAULT_STRIDE  # about the 15% of pieces masked in training


def read_chromosomes(reference: Path, names: list[str]) -> dict[str, str]:
    import pyfaidx

    fasta = pyfaidx.Fasta(str(reference), sequence_always_upper=False)
    missing = [name for name in names if name not in fasta]
    if missing:
        raise SystemExit(f"{reference}: no chromosome {missing[0]}; give names it holds")
    return {name: str(fasta[name][:]) for name in names}


def is_lowercase(sequence: str) -> np.ndarray:
    return np.frombuffer(sequence.encode("ascii"), dtype=np.uint8) >= ord("a")


def markov_bits_by_case(train: list[str], heldout: list[str]) -> dict[int, dict[str, float]]:
    """Bits per bp of each order on the held-out A/C/G/T bases: all, repeat, other."""
    counts = fit_counts([dna_codes(s) for s in train], max(MARKOV_ORDERS), both_strands=True)
    codes = [dna_codes(s) for s in heldout]
    lowercase = np.concatenate(
        [is_lowercase(s)[c < 4] for s, c in zip(heldout, codes, strict=True)]
    )
    result = {}
    for order in MARKOV_ORDERS:
        per_sequence = [base_counts(counts, c, order) for c in codes]
        hits = np.concatenate([h for h, _ in per_sequence])
        seen = np.concatenate([n for _, n in per_sequence])
        bits = -np.log2((hits + ALPHA) / (seen + 4 * ALPHA))
        result[order] = split_mean(bits, np.ones_like(bits), lowercase)
    return result


def split_mean(bits: np.ndarray, bases: np.ndarray, repeat: np.ndarray) -> dict[str, float]:
    """Bits per bp over everything, the repeat entries and the others."""
    return {
        "all": float(bits.sum() / bases.sum()),
        "repeat": float(bits[repeat].sum() / bases[repeat].sum()),
        "other": float(bits[~repeat].sum() / bases[~repeat].sum()),
        "repeat_share": float(bases[repeat].sum() / bases.sum()),
    }


def tokenised_runs(sequence: str, tokenizer) -> list[tuple[list[int], np.ndarray]]:
    """(piece ids, whether each piece is mostly lowercase) of every N-free stretch."""
    runs = []
    for start in range(0, len(sequence), CHUNK_BP):
        chunk = sequence[start : start + CHUNK_BP]
        for match in re.finditer(r"[ACGT]+", chunk.upper()):
            ids = tokenizer.encode(match.group())
            spans = tokenizer.token_offsets(ids)
            lower = is_lowercase(chunk[match.start() : match.end()])
            repeat = np.array([lower[a:b].mean() > 0.5 for a, b in spans], dtype=bool)
            runs.append((list(ids), repeat))
    return runs


class PieceCounts:
    """Piece, (left, piece) and (left, right, piece) counts of training runs."""

    def __init__(self, runs, vocab_size: int):
        self.vocab_size = vocab_size
        self.single, self.after, self.between = Counter(), Counter(), Counter()
        for ids, _ in runs:
            self.single.update(ids)
            self.after.update(itertools.pairwise(ids))
            self.between.update(zip(ids, ids[2:], ids[1:], strict=False))
        self.total = sum(self.single.values())
        self.left_seen, self.left_types = Counter(), Counter()
        for (left, _), count in self.after.items():
            self.left_seen[left] += count
            self.left_types[left] += 1
        self.pair_seen, self.pair_types = Counter(), Counter()
        for (left, right, _), count in self.between.items():
            self.pair_seen[left, right] += count
            self.pair_types[left, right] += 1

    def frequency(self, piece: int) -> float:
        return (self.single[piece] + 0.5) / (self.total + 0.5 * self.vocab_size)

    def given_neighbours(self, left: int, piece: int, right: int) -> float:
        """Witten-Bell: each context keeps, for pieces it has not shown, the share of its
        count that its number of distinct followers makes up."""
        p = self.frequency(piece)
        if self.left_seen[left]:
            types = self.left_types[left]
            p = (self.after[left, piece] + types * p) / (self.left_seen[left] + types)
        pair = (left, right)
        if self.pair_seen[pair]:
            types = self.pair_types[pair]
            p = (self.between[left, right, piece] + types * p) / (self.pair_seen[pair] + types)
        return p


def piece_bits_by_case(train_runs, heldout_runs, tokenizer) -> dict[str, dict[str, float]]:
    counts = PieceCounts(train_runs, tokenizer.vocab_size)
    lengths = tokenizer.piece_lengths
    freq, near, bases, repeat = [], [], [], []
    for ids, is_repeat in heldout_runs:
        for i in range(1, len(ids) - 1):  # pieces with a neighbour on each side
            freq.append(-math.log2(counts.frequency(ids[i])))
            near.append(-math.log2(counts.given_neighbours(ids[i - 1], ids[i], ids[i + 1])))
            bases.append(lengths[ids[i]])
            repeat.append(is_repeat[i])
    bases, repeat = np.array(bases, dtype=float), np.array(repeat)
    return {
        "piece frequency": split_mean(np.array(freq), bases, repeat),
        "piece given both neighbours": split_mean(np.array(near), bases, repeat),
    }


def model_bits_by_case(
    model_dir: Path, heldout_runs, tokenizer, batch_size: int = 8
) -> dict[str, float]:
    """Bits per bp of a pretrained model's masked-piece predictions, all pieces scored;
    `heldout_runs` were cut into pieces by `tokenizer`, the model's (require_vocabulary)."""
    from genobird.model.io import from_pretrained
    from genobird.scoring.likelihood import piece_bits
    from genobird.training import distributed

    device = distributed.default_device()  # a GPU where there is one
    model = from_pretrained(model_dir, device).eval()
    width = model.config.max_position - 2  # [CLS] window [SEP]
    windows = [
        (ids[i : i + width], repeat[i : i + width])
        for ids, repeat in heldout_runs
        for i in range(0, len(ids), width)
    ]
    bits = piece_bits(
        model, tokenizer, [list(ids) for ids, _ in windows], MASK_EVERY, batch_size, device
    )
    pieces = np.concatenate([np.asarray(ids) for ids, _ in windows])
    repeat = np.concatenate([np.asarray(flags) for _, flags in windows])
    return split_mean(np.concatenate(bits), tokenizer.piece_lengths[pieces].astype(float), repeat)


def require_vocabulary(model_dir: Path, tokenizer) -> None:
    """Pieces cut by another vocabulary would be scored as garbage, without an error."""
    if load_tokenizer(model_dir).vocabulary_digest != tokenizer.vocabulary_digest:
        raise SystemExit(
            f"{model_dir} was trained with another vocabulary than {tokenizer.path}; "
            "give its corpus's tokenizer with --tokenizer"
        )


def scored_model(model_dir: Path, given: bool) -> Path | None:
    """The model to score: the pipeline's only if it has been trained, but one named with
    --model must be a model directory (skipping it would drop its row without a word)."""
    if (model_dir / "config.json").is_file():
        return model_dir
    if given:
        raise SystemExit(f"--model {model_dir}: not a genobird model directory (no config.json)")
    return None


def defaults_from(config_path: Path) -> dict:
    config = yaml.safe_load(config_path.read_text())
    results = REPO / config["results"]
    return {
        "reference": results / "reference" / "genome.fa",
        "tokenizer": results / "corpus" / "tokenizer.model",
        "train": config["corpus"]["train_chromosomes"],
        "heldout": config["corpus"]["heldout_chromosomes"],
        "model": results / "pretrain" / "model",
    }


def print_table(title: str, rows: dict[str, dict[str, float]]) -> None:
    print(f"\n{title}\n")
    print("| model | all | repeat bases | other bases |")
    print("| --- | ---: | ---: | ---: |")
    for name, row in rows.items():
        print(f"| {name} | {row['all']:.3f} | {row['repeat']:.3f} | {row['other']:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--config",
        type=Path,
        default=REPO / "pipelines" / "demo.yaml",
        help="pipeline config giving the defaults of the options below",
    )
    parser.add_argument("--reference", type=Path, help="soft-masked FASTA (indexed by pyfaidx)")
    parser.add_argument("--tokenizer", type=Path)
    parser.add_argument("--train", nargs="+", help="training chromosomes")
    parser.add_argument("--heldout", nargs="+", help="held-out chromosomes")
    parser.add_argument(
        "--model",
        type=Path,
        help="a pretrained genobird model directory with the same tokenizer "
        "(default: the pipeline's, if it exists)",
    )
    args = parser.parse_args()
    options = {
        **defaults_from(args.config),
        **{k: v for k, v in vars(args).items() if v is not None},
    }
    for key in ("reference", "tokenizer"):
        if not Path(options[key]).is_file():
            raise SystemExit(f"{options[key]} is missing: run the pipeline first (make demo)")
    tokenizer = load_tokenizer(options["tokenizer"])
    model = scored_model(Path(options["model"]), given=args.model is not None)
    if model is not None:
        require_vocabulary(model, tokenizer)  # before minutes of counting
    sequences = read_chromosomes(Path(options["reference"]), options["train"] + options["heldout"])
    train = [sequences[name] for name in options["train"]]
    heldout = [sequences[name] for name in options["heldout"]]

    markov = markov_bits_by_case(train, heldout)
    share = markov[0]["repeat_share"]
    print(f"held-out {', '.join(options['heldout'])}: {share:.1%} of bases in repeat copies")
    print_table(
        "Bits per bp, Markov models of the bases (both strands, add-4)",
        {f"order {k}": row for k, row in markov.items()},
    )

    train_runs = [run for s in train for run in tokenised_runs(s, tokenizer)]
    heldout_runs = [run for s in heldout for run in tokenised_runs(s, tokenizer)]
    pieces = piece_bits_by_case(train_runs, heldout_runs, tokenizer)
    if model is not None:
        pieces[f"genobird {model}"] = model_bits_by_case(model, heldout_runs, tokenizer)
    print_table(
        f"Bits per bp, count models of the {tokenizer.vocab_size} pieces "
        "(pieces with a neighbour on each side)",
        pieces,
    )


if __name__ == "__main__":
    main()
