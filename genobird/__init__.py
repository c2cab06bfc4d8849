"""genobird: BigBird block-sparse transformers for long DNA sequences."""

from genobird.version import __version__

__all__ = [
    "ChromatinPredictor",
    "Embedder",
    "LikelihoodScorer",
    "Predictor",
    "PromoterPredictor",
    "__version__",
    "load_predictor",
]


def __getattr__(name: str):
    # Lazy: `import genobird` stays light (no torch) for the command line's start-up.
    if name in ("load_predictor", "Predictor", "PromoterPredictor", "ChromatinPredictor"):
        from genobird.scoring import predict

        return getattr(predict, name)
    if name == "LikelihoodScorer":
        from genobird.scoring.likelihood import LikelihoodScorer

        return LikelihoodScorer
    if name == "Embedder":
        from genobird.scoring.embed import Embedder

        return Embedder
    raise AttributeError(f"module 'genobird' has no attribute {name!r}")
