"""genobird's version: a module of its own, so that any layer can name it without
importing the package's facade (genobird/__init__.py names its top-level API)."""

__version__ = "0.1.0"
