"""NLP task heads on the same block-sparse encoder (paper section 4, appendix E):
extractive QA, multiple choice, GLUE-style classification, encoder-decoder summarisation,
ETC-style global tokens, and a sentencepiece text tokenizer."""

from genobird.nlp.text import TextTokenizer, train_text_tokenizer

__all__ = ["TextTokenizer", "train_text_tokenizer"]
