"""Small file helpers shared by every layer: atomic writes, gzip-aware text reading, hashing."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from genobird.errors import InputError, ReferenceFileError

GZIP_MAGIC = b"\x1f\x8b"


def is_gzipped(path: str | os.PathLike) -> bool:
    """True when the file starts with the gzip magic bytes (plain gzip and bgzip alike)."""
    with open(path, "rb") as handle:
        return handle.read(2) == GZIP_MAGIC


def open_text(path: str | os.PathLike) -> IO[str]:
    """Open a plain or gzipped text file for reading, with universal newlines (CRLF -> LF).

    Raises ReferenceFileError (an OSError) with the path and the reason when it cannot be read.
    """
    path = Path(path)
    try:
        if is_gzipped(path):
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline=None)
        return open(path, encoding="utf-8", newline=None)
    except FileNotFoundError as exc:
        raise ReferenceFileError(f"{path}: file not found") from exc
    except IsADirectoryError as exc:
        raise ReferenceFileError(f"{path}: is a folder, expected a file") from exc
    except PermissionError as exc:
        raise ReferenceFileError(f"{path}: permission denied; check the file's mode") from exc


def _umask() -> int:
    """The process's umask (read by setting it, then putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def as_umask_allows(path: str | os.PathLike, folder: bool = False) -> None:
    """Give a file or folder made by tempfile (private: 0600 / 0700) the mode the user's
    umask gives a new one, so that results are readable by whoever else should read them."""
    os.chmod(path, (0o777 if folder else 0o666) & ~_umask())


def staging_folder(beside: str | os.PathLike) -> Path:
    """A new folder beside `beside`, to be renamed to it once complete, with the mode the
    umask gives."""
    beside = Path(beside)
    folder = Path(tempfile.mkdtemp(prefix=f".{beside.name}.", dir=beside.parent))
    as_umask_allows(folder, folder=True)
    return folder


def utf8_names(names):
    """Names as an array HDF5 stores as fixed-length UTF-8: `.asstr()` reads any name
    back, and ASCII ones also read as plain bytes. numpy's "S" arrays are ASCII only, and
    a feature of DeepSEA's own table stopped them."""
    import h5py
    import numpy as np

    encoded = [str(name).encode("utf-8") for name in names]
    width = max((len(value) for value in encoded), default=1) or 1
    return np.array(encoded, dtype=h5py.string_dtype("utf-8", width))


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", **open_kwargs) -> Iterator[IO]:
    """Write to a temporary file beside `path` and rename it into place only on success.

    A crash or exception leaves the previous file (or no file), never a half-written one
    that looks complete. The rename is atomic because the temp file is in the same folder.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    as_umask_allows(tmp_name)
    try:
        with open(tmp_name, mode, **open_kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path` for a library that writes by file name
    (h5py, sentencepiece, safetensors); renamed into place only on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp_name)
        # after the library wrote it: some (safetensors) make their file 0600 themselves
        as_umask_allows(tmp_name)
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise


def file_digest(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    """Hex digest of a file, read in 1 MiB chunks so memory stays flat for large genomes."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def duplicated(names) -> list[str]:
    """The names that occur more than once, in order of first occurrence."""
    counts = Counter(names)
    return [name for name in counts if counts[name] > 1]


def require_unique_names(names, what: str, source, fix: str) -> None:
    """One-line error naming the repeated names: a reader keyed by name would keep only
    the last of each, silently losing the others."""
    repeated = duplicated(names)
    if repeated:
        shown = ", ".join(repr(name) for name in repeated[:5])
        more = f" and {len(repeated) - 5} more" if len(repeated) > 5 else ""
        raise InputError(f"{source}: duplicate {what} {shown}{more}; {fix}")


def require_unique_columns(columns, source) -> None:
    require_unique_names(columns, "column names", source, "give each column its own name")


def read_small_tsv(path: str | Path) -> tuple[list[str], list[dict]]:
    """(header, rows as dicts) of a small TSV table; repeated column names are an error."""
    lines = Path(path).read_text().splitlines()
    header = lines[0].split("\t") if lines else []
    require_unique_columns(header, path)
    return header, [dict(zip(header, line.split("\t"), strict=False)) for line in lines[1:] if line]
