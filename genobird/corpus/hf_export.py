"""genobird's sentencepiece BPE written as a HuggingFace tokenizer.json: BPE with every
split of every piece as a merge, ranked by the piece's sentencepiece score, plus the
tokenizer_config.json that `AutoTokenizer.from_pretrained` reads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from genobird.corpus.hf_tokenizer import SPECIAL_NAMES, HFTokenizer
from genobird.corpus.tokenizer import HF_TOKENIZER_FILE, Tokenizer
from genobird.fileio import atomic_write


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
        {
            "id": getattr(special, name),
            "content": token,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for name, token in SPECIAL_NAMES.items()
    ]
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
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": max_length,
        "do_lower_case": False,
        **tokens,
        "model_input_names": ["input_ids", "token_type_ids", "attention_mask"],
    }
    for name, content in (("tokenizer_config.json", config), ("special_tokens_map.json", tokens)):
        with atomic_write(directory / name) as handle:
            json.dump(content, handle, indent=2)
            handle.write("\n")
    return directory / HF_TOKENIZER_FILE
