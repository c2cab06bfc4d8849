"""The C extension only; everything else about the package is in pyproject.toml.

genobird.corpus._bpe is the exact, faster BPE encoder for DNA (genobird/corpus/fast_bpe.py).
It is optional: without a C compiler the install goes on, and genobird encodes with
sentencepiece's own encoder (the same tokens, about half as fast).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "genobird.corpus._bpe",
            sources=["genobird/corpus/_bpe.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
