"""Downloading reference data sets: resume, checksum verification, post-processing, index.

The manifests live in reference/*.yaml (see reference/grch37.yaml for the fields). Works
for http(s):// and file:// URLs, so it is tested offline against a local server.
"""

from __future__ import annotations

import gzip
import json
import logging
import shutil
import subprocess
import tarfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from genobird.errors import ChecksumError, ConfigError, DownloadError
from genobird.fileio import atomic_path, atomic_write, file_digest

log = logging.getLogger(__name__)

CHUNK = 1 << 20
POST_STEPS = ("none", "decompress", "bgzip", "untar")
CHECKSUM_FORMATS = ("md5sum", "bsd-sum")
RECORDED_CHECKSUMS = "checksums.json"


@dataclass(frozen=True)
class DataSet:
    """One manifest entry."""

    name: str
    url: str
    description: str = ""
    md5: str | None = None
    sha256: str | None = None
    checksums_url: str | None = None
    checksums_format: str | None = None
    post: str = "none"
    index: bool = False

    @property
    def filename(self) -> str:
        return self.url.rstrip("/").rsplit("/", 1)[-1]


def default_manifest_path() -> Path:
    return Path(__file__).resolve().parents[2] / "reference" / "grch37.yaml"


def load_manifest(path: str | Path | None = None) -> dict[str, DataSet]:
    """Read a manifest YAML; unknown fields and bad values are ConfigErrors naming the entry."""
    path = Path(path) if path else default_manifest_path()
    try:
        document = yaml.safe_load(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: manifest not found; pass --manifest FILE") from exc
    entries = (document or {}).get("entries") or {}
    allowed = set(DataSet.__dataclass_fields__) - {"name"}
    data_sets = {}
    for name, fields in entries.items():
        unknown = set(fields) - allowed
        if unknown:
            raise ConfigError(f"{path}: entry {name!r} has unknown fields {sorted(unknown)}")
        data_set = DataSet(name=name, **fields)
        if data_set.post not in POST_STEPS:
            raise ConfigError(f"{path}: entry {name!r}: post must be one of {POST_STEPS}")
        if data_set.checksums_url and data_set.checksums_format not in CHECKSUM_FORMATS:
            raise ConfigError(
                f"{path}: entry {name!r}: checksums_format must be {CHECKSUM_FORMATS}"
            )
        data_sets[name] = data_set
    return data_sets


# --------------------------------------------------------------------------- transfer
def fetch_url(url: str, target: Path, timeout: float = 60.0) -> None:
    """Download `url` to `target`, resuming from `target`'s current size where the server
    honours HTTP Range requests (a 200 answer restarts the file from zero)."""
    offset = target.stat().st_size if target.exists() else 0
    request = urllib.request.Request(url)
    if offset and url.startswith(("http://", "https://")):
        request.add_header("Range", f"bytes={offset}-")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status = getattr(response, "status", 200)
            if status == 206:
                log.info("resuming %s at byte %d", url, offset)
                mode = "ab"
            else:
                mode = "wb"
            with open(target, mode) as handle:
                shutil.copyfileobj(response, handle, CHUNK)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:  # range past the end: the file is already complete
            return
        raise DownloadError(f"{url}: server answered {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise DownloadError(
            f"{url}: download failed ({getattr(exc, 'reason', exc)}); rerun the same "
            "command to resume, or download the file by hand into --dest"
        ) from exc


def fetch_text(url: str, timeout: float = 60.0) -> str:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read().decode("utf-8", errors="replace")
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise DownloadError(f"{url}: cannot fetch checksum file ({exc})") from exc


# --------------------------------------------------------------------------- checksums
def bsd_sum(path: Path) -> str:
    """The BSD `sum` checksum and 1 KiB block count, as Ensembl's CHECKSUMS files list them."""
    if shutil.which("sum"):
        output = subprocess.run(["sum", str(path)], capture_output=True, text=True, check=True)
        checksum, blocks = output.stdout.split()[:2]
        return f"{int(checksum)} {int(blocks)}"
    checksum = 0
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            for byte in chunk:
                checksum = ((checksum >> 1) + ((checksum & 1) << 15) + byte) & 0xFFFF
    blocks = -(-path.stat().st_size // 1024)
    return f"{checksum} {blocks}"


def published_checksum(data_set: DataSet) -> tuple[str, str] | None:
    """(algorithm, expected value) from the manifest or the publisher's checksum file."""
    if data_set.sha256:
        return "sha256", data_set.sha256.lower()
    if data_set.md5:
        return "md5", data_set.md5.lower()
    if not data_set.checksums_url:
        return None
    text = fetch_text(data_set.checksums_url)
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[-1].lstrip("*") == data_set.filename:
            if data_set.checksums_format == "md5sum":
                return "md5", fields[0].lower()
            return "bsd-sum", f"{int(fields[0])} {int(fields[1])}"
    raise DownloadError(
        f"{data_set.checksums_url} lists no checksum for {data_set.filename}; "
        "check the manifest URL"
    )


def compute_checksum(path: Path, algorithm: str) -> str:
    return bsd_sum(path) if algorithm == "bsd-sum" else file_digest(path, algorithm)


def _recorded(dest: Path) -> dict[str, str]:
    path = dest / RECORDED_CHECKSUMS
    return json.loads(path.read_text()) if path.exists() else {}


def _record(dest: Path, filename: str, sha256: str) -> None:
    recorded = _recorded(dest)
    recorded[filename] = sha256
    with atomic_write(dest / RECORDED_CHECKSUMS) as handle:
        json.dump(recorded, handle, indent=2, sort_keys=True)


def verify(data_set: DataSet, path: Path, dest: Path, fix: str) -> None:
    """Check `path` against the published checksum, or the one recorded on first download.

    `fix` ends the error message: what the user should do about a mismatch."""
    expected = published_checksum(data_set)
    if expected is None:
        recorded = _recorded(dest).get(data_set.filename)
        expected = ("sha256", recorded) if recorded else None
    if expected is None:
        sha256 = file_digest(path)
        _record(dest, data_set.filename, sha256)
        log.warning(
            "%s: no published checksum; recorded sha256 %s in %s (pin it in the manifest)",
            data_set.name,
            sha256,
            dest / RECORDED_CHECKSUMS,
        )
        return
    algorithm, value = expected
    actual = compute_checksum(path, algorithm)
    if actual != value:
        raise ChecksumError(
            f"{data_set.name}: {algorithm} of {data_set.filename} is {actual}, expected {value}; "
            f"the download is corrupt or the file changed upstream: {fix}"
        )
    log.info("%s: %s verified", data_set.name, algorithm)


# --------------------------------------------------------------------------- post-processing
def _decompressed_path(source: Path) -> Path:
    return source.with_suffix("")


def _bgzipped_path(source: Path) -> Path:
    return source.with_name(source.name.removesuffix(".gz") + ".bgz.gz")


def _untarred_path(source: Path) -> Path:
    return source.parent / source.name.split(".tar")[0]


def _decompress(source: Path, target: Path) -> None:
    with gzip.open(source, "rb") as reader, atomic_write(target, "wb") as writer:
        shutil.copyfileobj(reader, writer, CHUNK)


def _bgzip(source: Path, target: Path) -> None:
    """Recompress plain gzip as BGZF (pyfaidx can random-access only BGZF)."""
    from Bio import bgzf

    with (
        gzip.open(source, "rb") as reader,
        atomic_path(target) as tmp,
        bgzf.BgzfWriter(str(tmp), "wb") as writer,
    ):
        for chunk in iter(lambda: reader.read(CHUNK), b""):
            writer.write(chunk)


def _untar(source: Path, target: Path) -> None:
    staging = target.with_name(f".{target.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(source) as archive:
        archive.extractall(staging, filter="data")  # refuses absolute paths and links out
    staging.replace(target)


# post step -> (where its output goes, how to make it); each output is written atomically
POST_PROCESSORS = {
    "decompress": (_decompressed_path, _decompress),
    "bgzip": (_bgzipped_path, _bgzip),
    "untar": (_untarred_path, _untar),
}


def final_path(data_set: DataSet, dest: str | Path) -> Path:
    """Where `download` leaves a data set once post-processed (a folder for untar)."""
    downloaded = Path(dest) / data_set.filename
    if data_set.post == "none":
        return downloaded
    target_of, _ = POST_PROCESSORS[data_set.post]
    return target_of(downloaded)


def download(data_set: DataSet, dest: str | Path) -> Path:
    """Download, verify, post-process and index one data set into `dest`; returns the
    final path. Idempotent: a verified file already in `dest` is not downloaded again."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    final = dest / data_set.filename
    if not final.exists():
        partial = dest / (data_set.filename + ".part")
        log.info("downloading %s -> %s", data_set.url, final)
        fetch_url(data_set.url, partial)
        try:
            verify(data_set, partial, dest, fix="it was removed; rerun to download it again")
        except ChecksumError:
            partial.unlink()  # a corrupt partial must not be resumed
            raise
        partial.replace(final)
    else:
        verify(data_set, final, dest, fix=f"delete {final} and rerun")
    result = final_path(data_set, dest)
    if not result.exists():
        _, make = POST_PROCESSORS[data_set.post]
        log.info("%s: %s -> %s", data_set.name, data_set.post, result.name)
        make(final, result)
    if data_set.index:
        from genobird.genome.reference import Reference

        Reference(result).ensure_index()  # builds and checks the .fai (and .gzi for BGZF)
    return result
