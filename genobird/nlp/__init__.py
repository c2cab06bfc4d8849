"""NLP task heads on the same block-sparse encoder (paper section 4, appendix E):
extractive QA, multiple choice, GLUE-style classification, encoder-decoder summarisation,
ETC-style global tokens, and a sentencepiece text tokenizer.

The names below load on first use, so that `genobird --help` (whose `genobird nlp`
commands are in genobird.commands.nlp) imports no torch."""

__all__ = ["TextTokenizer", "train_text_tokenizer"]


def __getattr__(name: str):
    if name in __all__:
        from genobird.nlp import text

        return getattr(text, name)
    raise AttributeError(f"module 'genobird.nlp' has no attribute {name!r}")
