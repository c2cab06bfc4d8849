"""`genobird reference download` offline: a Range-capable local HTTP server, and file:// URLs."""

import gzip
import hashlib
import http.server
import io
import json
import tarfile
import threading
import typing

import pytest

from genobird.errors import ChecksumError, ConfigError, DownloadError
from genobird.genome import Reference
from genobird.genome.download import DataSet, bsd_sum, download, final_path, load_manifest

FASTA = b">chr1\n" + b"ACGTTGCA" * 40 + b"\n>chr2\nGGGGCCCC\n"


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files from `directory`, honouring 'Range: bytes=N-' like real mirrors do."""

    requests: typing.ClassVar[list] = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        path = self.translate_path(self.path)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            self.send_error(404)
            return
        header = self.headers.get("Range")
        RangeHandler.requests.append((self.path, header))
        if header:
            offset = int(header.split("=")[1].rstrip("-"))
            if offset >= len(data):
                self.send_error(416)
                return
            self.send_response(206)
            data = data[offset:]
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    RangeHandler.requests = []
    handler = lambda *a, **k: RangeHandler(*a, directory=str(root), **k)  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _gzip(data: bytes) -> bytes:
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as handle:
        handle.write(data)
    return buffer.getvalue()


def test_md5sum_file_verifies_then_bgzip_and_index(server, tmp_path):
    root, url = server
    (root / "genome.fa.gz").write_bytes(_gzip(FASTA))
    md5 = hashlib.md5((root / "genome.fa.gz").read_bytes()).hexdigest()
    (root / "md5sum.txt").write_text(f"0000  other.fa.gz\n{md5}  genome.fa.gz\n")
    data_set = DataSet(
        "g",
        f"{url}/genome.fa.gz",
        checksums_url=f"{url}/md5sum.txt",
        checksums_format="md5sum",
        post="bgzip",
        index=True,
    )
    result = download(data_set, tmp_path / "dest")
    assert result.name == "genome.fa.bgz.gz" == final_path(data_set, tmp_path / "dest").name
    assert Reference(result).fetch("chr2", 0, 4) == "GGGG"
    assert (tmp_path / "dest" / "genome.fa.bgz.gz.fai").exists()


def test_partial_download_resumes_with_a_range_request(server, tmp_path):
    root, url = server
    payload = bytes(range(256)) * 100
    (root / "blob.bin").write_bytes(payload)
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "blob.bin.part").write_bytes(payload[:1000])  # an interrupted earlier run
    data_set = DataSet("b", f"{url}/blob.bin", sha256=hashlib.sha256(payload).hexdigest())
    assert download(data_set, dest).read_bytes() == payload
    assert RangeHandler.requests == [("/blob.bin", "bytes=1000-")]
    assert not (dest / "blob.bin.part").exists()


def test_checksum_mismatch_fails_and_discards_the_partial(server, tmp_path):
    root, url = server
    (root / "f.txt").write_bytes(b"tampered")
    data_set = DataSet("f", f"{url}/f.txt", md5="0" * 32)
    with pytest.raises(ChecksumError, match=r"md5 of f\.txt is .* expected 0000"):
        download(data_set, tmp_path / "dest")
    assert list((tmp_path / "dest").iterdir()) == []  # nothing that looks complete


def test_no_published_checksum_records_one_then_enforces_it(server, tmp_path):
    root, url = server
    (root / "epd.bed").write_bytes(b"chr1\t1\t2\n")
    dest = tmp_path / "dest"
    data_set = DataSet("epd", f"{url}/epd.bed")
    download(data_set, dest)
    recorded = json.loads((dest / "checksums.json").read_text())
    assert recorded == {"epd.bed": hashlib.sha256(b"chr1\t1\t2\n").hexdigest()}
    (dest / "epd.bed").write_bytes(b"changed\n")  # the local copy is later corrupted
    with pytest.raises(ChecksumError):
        download(data_set, dest)


def test_file_url_and_untar(tmp_path):
    archive = tmp_path / "bundle.tar.gz"
    member = tmp_path / "train.mat"
    member.write_bytes(b"matlab")
    with tarfile.open(archive, "w:gz") as handle:
        handle.add(member, arcname="bundle/train.mat")
    data_set = DataSet("d", archive.as_uri(), post="untar")
    result = download(data_set, tmp_path / "dest")
    assert (result / "bundle" / "train.mat").read_bytes() == b"matlab"
    assert result == final_path(data_set, tmp_path / "dest") == tmp_path / "dest" / "bundle"
    assert download(data_set, tmp_path / "dest") == result  # second run: nothing to do


def test_unreachable_server_is_a_download_error(tmp_path):
    data_set = DataSet("x", "http://127.0.0.1:9/nothing.fa", sha256="0" * 64)
    with pytest.raises(DownloadError, match="rerun the same command to resume"):
        download(data_set, tmp_path)


def test_bsd_sum_matches_the_sum_command_algorithm(tmp_path, monkeypatch):
    path = tmp_path / "x"
    path.write_bytes(b"hello world\n" * 500)
    with_command = bsd_sum(path)
    monkeypatch.setattr("shutil.which", lambda name: None)  # pure-Python fallback
    assert bsd_sum(path) == with_command


def test_grch37_manifest_has_the_paper_data_sets():
    data_sets = load_manifest()
    assert {
        "hg19",
        "grch37-ensembl",
        "hg38ToHg19-chain",
        "epdnew-hs006-hg19",
        "deepsea-bundle",
        "deepsea-coordinates",
    } <= set(data_sets)
    assert data_sets["hg19"].post == "bgzip" and data_sets["hg19"].index


def test_manifest_with_unknown_field_is_a_config_error(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("entries:\n  x:\n    url: http://a/b\n    colour: red\n")
    with pytest.raises(ConfigError, match="entry 'x' has unknown fields \\['colour'\\]"):
        load_manifest(path)
