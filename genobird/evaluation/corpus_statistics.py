"""The corpus's statistics, written as one artifact (results/corpus/statistics.json,
`genobird evaluate corpus`) that the report draws: documents, sentences and bases of each
part, and the vocabulary's bp per token on held-out sentences."""

from __future__ import annotations

import json

from genobird.artifacts import CorpusStatistics, ResultsFolder

HELDOUT_SENTENCES = 2000  # held-out sentences for bp/token (enough for two decimals)


def corpus_statistics(results) -> CorpusStatistics | None:
    """The statistics of the results folder's corpus, written to its artifact; None (and
    nothing written) where the folder has no corpus."""
    from genobird.corpus import Tokenizer, read_documents

    folder = ResultsFolder(results)
    if not folder.corpus.is_dir():
        return None
    parts = []
    for part in ("train", "heldout"):
        index_path = folder.corpus_index(part)
        if not index_path.is_file():
            continue
        index = json.loads(index_path.read_text())
        documents = index["documents"]
        parts.append(
            {
                "part": part,
                "chromosomes": index["chromosomes"],
                "documents": len(documents),
                "sentences": sum(row[4] for row in documents),
                "bp": sum(end - start for _, start, end, *_ in documents),
            }
        )
    vocabulary = None
    if folder.tokenizer.is_file() and folder.heldout_documents.is_file():
        tokenizer = Tokenizer(folder.tokenizer)
        sentences = [s for document in read_documents(folder.heldout_documents) for s in document]
        sample = sentences[:HELDOUT_SENTENCES]
        vocabulary = {
            "pieces": tokenizer.vocab_size,
            "heldout_sentences": len(sample),
            "bp_per_token": tokenizer.bp_per_token(sample),
            "longest_piece_bp": int(tokenizer.piece_lengths.max()),
        }
    record = CorpusStatistics(parts=parts, vocabulary=vocabulary)
    record.write(folder.root)
    return record


def corpus_inputs(folder: ResultsFolder) -> list:
    """The files the statistics read."""
    indexes = [folder.corpus_index(part) for part in ("train", "heldout")]
    return [*indexes, folder.tokenizer, folder.heldout_documents]
