"""DNA tokenizers: genobird's sentencepiece BPE (`Tokenizer`) and HuggingFace
tokenizer.json files (`HFTokenizer`, e.g. GENA-LM's), behind one interface; every
caller takes special-token ids from the tokenizer (`tokenizer.special`), never from
constants, since an imported vocabulary numbers them its own way.

genobird's own DNA is tokenised as is: no whitespace handling, no dummy prefix, identity
normalisation, so decode(encode(x)) == x for any A/C/G/T/N string and every token maps
back to a span of base pairs (`token_offsets`), i.e. to genome coordinates.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import sentencepiece as spm

from genobird.corpus.bpe_dropout import DropoutBPE
from genobird.corpus.fast_bpe import FastBPE
from genobird.corpus.hf_tokenizer import HFTokenizer

# Re-exported: callers read them from here, the home of `load_tokenizer`.
from genobird.corpus.tokenizer_base import (
    CLS_ID,
    GENOBIRD_SPECIAL_IDS,
    HF_TOKENIZER_FILE,
    MASK_ID,
    PAD_ID,
    SEP_ID,
    SPECIAL_TOKENS,
    TOKENIZER_FILE,
    UNK_ID,
    SpecialIds,
    TokenizerBase,
)
from genobird.errors import CheckpointError

# the shared names, read from here by callers (this module is the home of load_tokenizer)
__all__ = [
    "CLS_ID",
    "GENOBIRD_SPECIAL_IDS",
    "HF_TOKENIZER_FILE",
    "MASK_ID",
    "PAD_ID",
    "SEP_ID",
    "SPECIAL_TOKENS",
    "TOKENIZER_FILE",
    "UNK_ID",
    "HFTokenizer",
    "SpecialIds",
    "Tokenizer",
    "TokenizerBase",
    "load_tokenizer",
]


def load_tokenizer(path_or_directory: str | Path) -> TokenizerBase:
    """A tokenizer from a file (tokenizer.model: sentencepiece; *.json: HuggingFace) or
    from a model directory holding one of them."""
    path = Path(path_or_directory)
    if path.is_dir():
        candidates = [path / TOKENIZER_FILE, path / HF_TOKENIZER_FILE]
        found = [candidate for candidate in candidates if candidate.is_file()]
        if not found:
            raise CheckpointError(
                f"{path}: no {TOKENIZER_FILE} or {HF_TOKENIZER_FILE}; copy the tokenizer "
                "the model was trained with into it"
            )
        path = found[0]
    if path.suffix == ".json":
        return HFTokenizer(path)
    return Tokenizer(path)


class Tokenizer(TokenizerBase):
    """genobird's sentencepiece BPE, its special tokens at ids 0-4 (`SPECIAL_TOKENS`)."""

    special = GENOBIRD_SPECIAL_IDS
    file_name = TOKENIZER_FILE

    def __init__(self, model_path: str | Path):
        self.path = Path(model_path)
        if not self.path.is_file():
            raise CheckpointError(f"{self.path}: tokenizer model not found")
        self._processor = spm.SentencePieceProcessor()
        try:
            self._processor.Load(str(self.path))
        except (OSError, RuntimeError) as exc:
            raise CheckpointError(
                f"{self.path}: not a sentencepiece model ({exc}); "
                "retrain with `genobird vocab train`"
            ) from exc
        self._check_special_tokens()
        self.pieces = [self._processor.id_to_piece(i) for i in range(self.vocab_size)]
        lengths = [0 if i < len(SPECIAL_TOKENS) else len(p) for i, p in enumerate(self.pieces)]
        self.piece_lengths = np.array(lengths, dtype=np.int64)
        # sentencepiece's own encoding, computed about twice as fast (None: not built)
        self._fast = FastBPE.create(self._processor)

    def _check_special_tokens(self) -> None:
        for expected_id, piece in enumerate(SPECIAL_TOKENS):
            if self._processor.id_to_piece(expected_id) != piece:
                raise CheckpointError(
                    f"{self.path}: id {expected_id} should be {piece} but is "
                    f"{self._processor.id_to_piece(expected_id)!r}; this tokenizer was not "
                    "trained by genobird (retrain with `genobird vocab train`)"
                )

    @staticmethod
    def load(path_or_directory: str | Path) -> TokenizerBase:
        """`load_tokenizer`: sentencepiece or tokenizer.json, file or model directory."""
        return load_tokenizer(path_or_directory)

    # ------------------------------------------------------------------ ids
    @property
    def vocab_size(self) -> int:
        return self._processor.get_piece_size()

    @property
    def first_regular_id(self) -> int:
        return len(SPECIAL_TOKENS)

    def id_to_piece(self, token_id: int) -> str:
        return self._processor.id_to_piece(token_id)

    @property
    def piece_scores(self) -> np.ndarray:
        """sentencepiece's score of each piece (BPE: the higher, the earlier merged)."""
        return np.array([self._processor.GetScore(i) for i in range(self.vocab_size)])

    # ------------------------------------------------------------------ coding
    def encode_batch(self, sequences: list[str], threads: int = 1) -> list[list[int]]:
        """Ids of already-normalised sequences, encoded in C with `threads` threads."""
        if self._fast is not None:
            return self._fast.encode(sequences, threads)
        return self._processor.encode(sequences, num_threads=threads)

    @functools.cached_property
    def _dropout_bpe(self) -> DropoutBPE:
        """Built on first use: most loads never sample (about 20 ms for 16,000 pieces)."""
        return DropoutBPE.create(self._processor, self._fast)

    def check_sampling(self) -> None:
        """A sentencepiece BPE vocabulary cuts with BPE-dropout."""

    def encode_sampled(
        self, sequence: str, dropout: float, seed: int, by_position: bool = False
    ) -> list[int]:
        # genobird's own sampler: sentencepiece's gives other cuts in every process for
        # one seed (genobird.corpus.bpe_dropout). A character without a piece leaves the
        # window to sentencepiece's unknown rules and sampler, which do not repeat.
        if self._dropout_bpe.spells(sequence):
            return self._dropout_bpe.encode_seeded(sequence, dropout, seed, by_position)
        spm.set_random_generator_seed(seed)
        return self._processor.encode(sequence, enable_sampling=True, alpha=dropout)

    def decode(self, ids) -> str:
        """DNA of the ids; special tokens are skipped."""
        regular = [int(i) for i in ids if int(i) >= len(SPECIAL_TOKENS)]
        return self._processor.decode(regular)
