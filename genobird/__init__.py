"""genobird: BigBird block-sparse transformers for long DNA sequences."""

__version__ = "0.1.0"
