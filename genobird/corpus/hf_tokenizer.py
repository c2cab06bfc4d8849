"""HuggingFace tokenizer.json files as genobird tokenizers, and genobird's vocabulary
written as one.

`HFTokenizer` reads a tokenizer.json (GENA-LM's BPE, say) through the `tokenizers`
library, the same code transformers runs, so it gives transformers' ids by
construction. It offers `Tokenizer`'s interface; its special-token ids are looked up by
name ([PAD], [UNK], [CLS], [SEP], [MASK]) wherever the file puts them. DNA is upper-cased
(normalised) before encoding, as genobird does for its own vocabulary: GENA-LM's
vocabulary has no lower-case pieces, so soft-masked sequence would otherwise be [UNK].

genobird's own vocabulary is written as a tokenizer.json by corpus.hf_export.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from genobird.corpus.tokenizer_base import HF_TOKENIZER_FILE, SpecialIds, TokenizerBase

if TYPE_CHECKING:  # a type only: corpus.tokenizer imports this module
    pass
from genobird.errors import CheckpointError

SPECIAL_NAMES = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}


class HFTokenizer(TokenizerBase):
    file_name = HF_TOKENIZER_FILE

    def __init__(self, path: str | Path):
        from tokenizers import Tokenizer as TokenizersTokenizer

        self.path = Path(path)
        if not self.path.is_file():
            raise CheckpointError(f"{self.path}: tokenizer.json not found")
        try:
            self._tokenizer = TokenizersTokenizer.from_file(str(self.path))
        except Exception as exc:  # tokenizers raises its own Exception subclass
            raise CheckpointError(
                f"{self.path}: not a HuggingFace tokenizer.json ({str(exc).splitlines()[0]})"
            ) from exc
        vocab = self._tokenizer.get_vocab(with_added_tokens=True)
        missing = [token for token in SPECIAL_NAMES.values() if token not in vocab]
        if missing:
            raise CheckpointError(
                f"{self.path}: no {missing[0]} token; genobird needs BERT's special tokens "
                f"{list(SPECIAL_NAMES.values())}"
            )
        self.special = SpecialIds(**{name: vocab[token] for name, token in SPECIAL_NAMES.items()})
        size = self.vocab_size
        self.pieces = [self._tokenizer.id_to_token(i) or "" for i in range(size)]
        lengths = np.array([len(piece) for piece in self.pieces], dtype=np.int64)
        lengths[self.special.all()] = 0
        self.piece_lengths = lengths

    @property
    def vocab_size(self) -> int:
        return self._tokenizer.get_vocab_size(with_added_tokens=True)

    def id_to_piece(self, token_id: int) -> str:
        return self.pieces[token_id]

    def encode_batch(self, sequences: list[str], threads: int = 1) -> list[list[int]]:
        """Ids of already-normalised sequences, no special tokens added (the `tokenizers`
        library picks its own thread count)."""
        encoded = self._tokenizer.encode_batch(sequences, add_special_tokens=False)
        return [encoding.ids for encoding in encoded]

    def decode(self, ids) -> str:
        """The pieces of the ids, concatenated; special tokens are skipped."""
        special = set(self.special.all().tolist())
        return "".join(self.pieces[int(i)] for i in ids if int(i) not in special)
