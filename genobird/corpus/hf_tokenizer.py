"""HuggingFace tokenizer.json files as genobird tokenizers, and genobird's vocabulary
written as one.

`HFTokenizer` reads a tokenizer.json (GENA-LM's BPE, say) through the `tokenizers`
library, the same code transformers runs, so it gives transformers' ids by
construction. It offers `Tokenizer`'s interface; its special-token ids are looked up by
name ([PAD], [UNK], [CLS], [SEP], [MASK]) wherever the file puts them. DNA is upper-cased
(normalised) before encoding, as genobird does for its own vocabulary: GENA-LM's
vocabulary has no lower-case pieces, so soft-masked sequence would otherwise be [UNK].

`write_hf_tokenizer` turns genobird's sentencepiece BPE into a tokenizer.json (BPE with
every split of every piece as a merge, ranked by the piece's sentencepiece score) plus
the tokenizer_config.json that `AutoTokenizer.from_pretrained` reads.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from genobird.corpus.tokenizer import (
    HF_TOKENIZER_FILE,
    SpecialIds,
    Tokenizer,
    TokenizerBase,
)
from genobird.errors import CheckpointError
from genobird.fileio import atomic_write

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


# =========================================================================== export
def _merges(tokenizer: Tokenizer) -> list[list[str]]:
    """Every split of every piece into two pieces, best-scoring piece first: the BPE
    merges that rebuild sentencepiece's encoding (it merges the best-scoring pair)."""
    pieces = tokenizer.pieces
    index = {piece: i for i, piece in enumerate(pieces)}
    special = set(tokenizer.special.all().tolist())
    merges = []
    for piece_id in np.argsort(-tokenizer.piece_scores, kind="stable"):
        piece = pieces[piece_id]
        if piece_id in special or len(piece) < 2:
            continue
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in index and right in index:
                merges.append([left, right])
    return merges


def hf_tokenizer_json(tokenizer: Tokenizer) -> dict:
    """tokenizer.json (the `tokenizers` format) encoding DNA as `tokenizer` does."""
    special = tokenizer.special
    added = [
        {"id": getattr(special, name), "content": token, "single_word": False,
         "lstrip": False, "rstrip": False, "normalized": False, "special": True}
        for name, token in SPECIAL_NAMES.items()
    ]  # fmt: skip
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": sorted(added, key=lambda token: token["id"]),
        "normalizer": None,
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 1}},
                {"SpecialToken": {"id": "[SEP]", "type_id": 1}},
            ],
            "special_tokens": {
                token: {"id": token, "ids": [getattr(special, name)], "tokens": [token]}
                for name, token in SPECIAL_NAMES.items()
                if name in ("cls", "sep")
            },
        },
        "decoder": None,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": "[UNK]",
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,  # sentencepiece: a run of unknown characters is one [UNK]
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {piece: i for i, piece in enumerate(tokenizer.pieces)},
            "merges": _merges(tokenizer),
        },
    }


def write_hf_tokenizer(tokenizer: Tokenizer, directory: str | Path, max_length: int) -> Path:
    """tokenizer.json, tokenizer_config.json and special_tokens_map.json in `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if isinstance(tokenizer, HFTokenizer):
        tokenizer.save(directory)
    else:
        with atomic_write(directory / HF_TOKENIZER_FILE) as handle:
            json.dump(hf_tokenizer_json(tokenizer), handle)
    tokens = {f"{name}_token": token for name, token in SPECIAL_NAMES.items()}
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_length,
              "do_lower_case": False, **tokens,
              "model_input_names": ["input_ids", "token_type_ids", "attention_mask"]}  # fmt: skip
    for name, content in (("tokenizer_config.json", config), ("special_tokens_map.json", tokens)):
        with atomic_write(directory / name) as handle:
            json.dump(content, handle, indent=2)
            handle.write("\n")
    return directory / HF_TOKENIZER_FILE
