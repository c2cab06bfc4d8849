"""What every DNA tokenizer shares: the special tokens, their ids in one vocabulary, and
the interface (`TokenizerBase`) that genobird's sentencepiece BPE (corpus.tokenizer) and
HuggingFace tokenizer.json files (corpus.hf_tokenizer) both offer."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from genobird.errors import ConfigError
from genobird.genome.alphabet import normalise_dna

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(len(SPECIAL_TOKENS))
TOKENIZER_FILE = "tokenizer.model"
HF_TOKENIZER_FILE = "tokenizer.json"


@dataclass(frozen=True)
class SpecialIds:
    """Ids of BERT's five special tokens in one vocabulary (genobird's order by default;
    GENA-LM's is [UNK] 0, [CLS] 1, [SEP] 2, [PAD] 3, [MASK] 4)."""

    pad: int = PAD_ID
    unk: int = UNK_ID
    cls: int = CLS_ID
    sep: int = SEP_ID
    mask: int = MASK_ID

    def all(self) -> np.ndarray:
        return np.array(sorted(set(asdict(self).values())), dtype=np.int64)

    def regular(self, vocab_size: int) -> np.ndarray:
        """The ids that are DNA pieces, ascending (MLM's random replacements)."""
        return np.setdiff1d(np.arange(vocab_size), self.all())

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values) -> SpecialIds:
        """From a dict (or HDF5 attrs) with some of the five names; the rest default."""
        return cls(**{name: int(values[name]) for name in asdict(cls()) if name in values})


GENOBIRD_SPECIAL_IDS = SpecialIds()


class TokenizerBase:
    """What every DNA tokenizer offers on top of `encode_batch`, `pieces`,
    `piece_lengths` and `special`."""

    special: SpecialIds
    piece_lengths: np.ndarray
    path: Path
    file_name: str  # what a model directory calls this kind of tokenizer file

    def save(self, directory: str | Path) -> Path:
        """Copy the tokenizer file into a model directory."""
        target = Path(directory) / self.file_name
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.resolve() != self.path.resolve():
            shutil.copyfile(self.path, target)
        return target

    @property
    def vocabulary_digest(self) -> str:
        """Identifies the pieces and their order: two vocabularies of the same size and
        special ids can still map ids to different pieces."""
        return hashlib.sha256("\n".join(self.pieces).encode()).hexdigest()[:16]

    @property
    def pad_id(self) -> int:
        return self.special.pad

    @property
    def unk_id(self) -> int:
        return self.special.unk

    @property
    def cls_id(self) -> int:
        return self.special.cls

    @property
    def sep_id(self) -> int:
        return self.special.sep

    @property
    def mask_id(self) -> int:
        return self.special.mask

    def encode_batch(self, sequences: list[str], threads: int = 1) -> list[list[int]]:
        raise NotImplementedError

    def encode(self, sequence: str, normalise: bool = True) -> list[int]:
        """Token ids of a DNA sequence (normalised first unless told it already is)."""
        if normalise:
            sequence = normalise_dna(sequence)
        return self.encode_batch([sequence])[0]

    def encode_sampled(
        self, sequence: str, dropout: float, seed: int, by_position: bool = False
    ) -> list[int]:
        """Ids of a normalised sequence with BPE-dropout (Provilkov et al., 2020): each merge
        skipped with probability `dropout`, the draws fixed by `seed` (and, with
        `by_position`, keyed by each merge's place: genobird.corpus.bpe_dropout). Every
        segmentation spells the same bases."""
        self.check_sampling()
        raise NotImplementedError

    def check_sampling(self) -> None:
        """Refuses, in one line, a tokenizer that cannot cut with BPE-dropout."""
        raise ConfigError(
            f"{self.path}: BPE dropout needs a sentencepiece tokenizer (tokenizer.model); "
            "fine-tune without --bpe-dropout"
        )

    def token_offsets(self, ids) -> np.ndarray:
        """[T, 2] base-pair (start, end) of each token within the decoded sequence;
        special tokens get an empty span at their position."""
        lengths = self.piece_lengths[np.asarray(ids, dtype=np.int64)]
        ends = np.cumsum(lengths)
        return np.stack([ends - lengths, ends], axis=1)

    def bp_per_token(self, sequences: list[str], threads: int = 1) -> float:
        tokens = sum(len(ids) for ids in self.encode_batch(sequences, threads))
        return sum(len(s) for s in sequences) / tokens if tokens else 0.0
