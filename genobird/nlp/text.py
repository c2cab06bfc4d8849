"""`TextTokenizer`: sentencepiece over natural-language text, with the DNA tokenizer's
special tokens at the same ids ([PAD] [UNK] [CLS] [SEP] [MASK] = 0-4).

Every token maps back to a character span of the original text (`encode_with_offsets`),
which extractive QA needs to return answers as character offsets. To keep that mapping
exact, normalisation is the identity and text is split on whitespace first: a token never
spans two words, and its characters are exactly the word's.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import sentencepiece as spm

from genobird.corpus.tokenizer import CLS_ID, MASK_ID, PAD_ID, SEP_ID, SPECIAL_TOKENS, UNK_ID
from genobird.corpus.vocab import run_sentencepiece_trainer
from genobird.errors import CheckpointError, InputError

WORD = re.compile(r"\S+")
WORD_START = "\u2581"  # sentencepiece's marker for "a word starts here"


def train_text_tokenizer(
    texts: Iterable[str],
    out: str | Path,
    vocab_size: int = 8000,
    model_type: str = "bpe",
) -> TextTokenizer:
    """Train on `texts` (one document or sentence each) and write OUT (.model). The whole
    input is used, unshuffled, so the same texts give the same model."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as scratch:
        corpus = Path(scratch) / "corpus.txt"
        lines = 0
        with open(corpus, "w", encoding="utf-8") as handle:
            for text in texts:
                for line in text.splitlines():
                    if line.strip():
                        handle.write(line.strip() + "\n")
                        lines += 1
        if lines == 0:
            raise InputError("no text to train a tokenizer on: every document is empty")
        prefix = Path(scratch) / "text"
        run_sentencepiece_trainer(
            input=str(corpus),
            model_prefix=str(prefix),
            model_type=model_type,
            vocab_size=vocab_size,
            character_coverage=0.9995,
            normalization_rule_name="identity",  # offsets stay exact
            split_by_whitespace=True,
            input_sentence_size=0,
            shuffle_input_sentence=False,
            # an upper bound: a small corpus gets the pieces it supports, not an error
            hard_vocab_limit=False,
        )
        prefix.with_suffix(".model").replace(out)
    return TextTokenizer(out)


class TextTokenizer:
    special_tokens = SPECIAL_TOKENS
    pad_id, unk_id, cls_id, sep_id, mask_id = PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID

    def __init__(self, model_path: str | Path):
        self.path = Path(model_path)
        if not self.path.is_file():
            raise CheckpointError(f"{self.path}: text tokenizer model not found")
        self._processor = spm.SentencePieceProcessor()
        try:
            self._processor.Load(str(self.path))
        except (OSError, RuntimeError) as exc:
            raise CheckpointError(f"{self.path}: not a sentencepiece model ({exc})") from exc
        for expected, piece in enumerate(SPECIAL_TOKENS):
            if self._processor.piece_to_id(piece) != expected:
                raise CheckpointError(
                    f"{self.path}: {piece} is not id {expected}; train it with genobird nlp "
                    "tokenizer"
                )

    @property
    def vocab_size(self) -> int:
        return self._processor.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self.encode_with_offsets(text)[0]

    def encode_with_offsets(self, text: str) -> tuple[list[int], np.ndarray]:
        """Token ids and their [T, 2] character (start, end) spans in `text`."""
        matches = list(WORD.finditer(text))
        if not matches:
            return [], np.zeros((0, 2), dtype=np.int64)
        words = [m.group() for m in matches]
        ids, offsets = [], []
        for match, pieces, piece_ids in zip(
            matches,
            self._processor.encode(words, out_type=str),
            self._processor.encode(words),
            strict=True,
        ):
            position = match.start()
            for piece, piece_id in zip(pieces, piece_ids, strict=True):
                # a bare word-start marker keeps its token (decoding needs it) with an
                # empty span: it has no characters of its own
                length = len(piece.removeprefix(WORD_START))
                ids.append(piece_id)
                offsets.append((position, position + length))
                position += length
            if position != match.end():  # unknown characters come through as their surface
                raise InputError(f"cannot map tokens of {match.group()!r} back to the text")
        return ids, np.asarray(offsets, dtype=np.int64).reshape(-1, 2)

    def decode(self, ids) -> str:
        regular = [int(i) for i in ids if int(i) >= len(SPECIAL_TOKENS)]
        return self._processor.decode(regular)

    def save(self, directory: str | Path) -> Path:
        target = Path(directory) / "tokenizer.model"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(self.path.read_bytes())
        return target


def iter_texts(paths: list[Path]) -> Iterator[str]:
    """Text of plain files line by line; of JSON / JSON lines files, every string value
    longer than one word (SQuAD's contexts and questions, documents, summaries...)."""
    for path in paths:
        if not path.is_file():
            raise InputError(f"{path}: file not found")
        if path.suffix in (".json", ".jsonl"):
            text = path.read_text(encoding="utf-8")
            try:
                documents = [json.loads(text)]
            except json.JSONDecodeError:
                documents = [json.loads(line) for line in text.splitlines() if line.strip()]
            for document in documents:
                yield from _strings(document)
        else:
            with open(path, encoding="utf-8") as handle:
                yield from handle


def _strings(value) -> Iterator[str]:
    if isinstance(value, str):
        if " " in value.strip():
            yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


# =========================================================================== handlers
