import gzip
import os
import pickle

import pytest
from Bio import bgzf

from genobird.errors import ContigError, FormatError, ReferenceFileError, RegionError
from genobird.genome import Reference
from tests.conftest import write

FASTA = ">chr1 first\nACGTACGTAC\nGGTTA\n>chrM\nttttcccc\n>2\nNNACGRYT\n"


@pytest.fixture
def fasta(tmp_path):
    return write(tmp_path / "ref.fa", FASTA)


def test_fetch_is_zero_based_half_open_and_builds_missing_index(fasta):
    reference = Reference(fasta)
    assert reference.fetch("chr1", 0, 4) == "ACGT"
    assert reference.fetch("chr1", 8, 12) == "ACGG"  # across a line break
    assert (fasta.parent / "ref.fa.fai").exists()
    assert reference.lengths == {"chr1": 15, "chrM": 8, "2": 8}


def test_fetch_minus_strand_is_reverse_complement(fasta):
    # chr1[0:6] is ACGTAC; read on the minus strand it is GTACGT
    assert Reference(fasta).fetch("chr1", 0, 6, strand="-") == "GTACGT"


def test_soft_masked_bases_come_back_uppercase_and_iupac_as_n(fasta):
    reference = Reference(fasta)
    assert reference.fetch("chrM", 0, 8) == "TTTTCCCC"
    assert reference.fetch("2", 0, 8) == "NNACGNNT"


@pytest.mark.parametrize("alias, name", [("1", "chr1"), ("MT", "chrM"), ("chr2", "2")])
def test_contig_aliases_resolve(fasta, alias, name):
    reference = Reference(fasta)
    assert reference.resolve(alias) == name
    assert reference.fetch(alias, 0, 2) == reference.fetch(name, 0, 2)


def test_unknown_contig_lists_close_names(fasta):
    with pytest.raises(ContigError, match="close names: chr1") as info:
        Reference(fasta).fetch("chr11", 0, 2)
    assert isinstance(info.value, KeyError)
    assert not str(info.value).startswith("'")  # plain message, not KeyError's repr


def test_out_of_bounds_is_an_error_unless_padding(fasta):
    reference = Reference(fasta)
    with pytest.raises(RegionError, match="outside the contig"):
        reference.fetch("chr1", 10, 20)
    with pytest.raises(RegionError, match="outside the contig"):
        reference.fetch("chr1", -1, 3)
    assert reference.fetch("chr1", -3, 2, pad=True) == "NNNAC"
    assert reference.fetch("chr1", 13, 18, pad=True) == "TANNN"
    assert reference.fetch("chr1", 20, 23, pad=True) == "NNN"
    assert reference.fetch("chr1", -2, 17, pad=True) == "NN" + "ACGTACGTACGGTTA" + "NN"


def test_padded_minus_strand_window_keeps_width(fasta):
    assert Reference(fasta).fetch("chr1", 13, 18, strand="-", pad=True) == "NNNTA"


def test_start_after_end_is_an_error(fasta):
    with pytest.raises(RegionError, match="start is greater than end"):
        Reference(fasta).fetch("chr1", 5, 4)


def test_reference_pickles_without_its_file_handle(fasta):
    reference = Reference(fasta)
    reference.fetch("chr1", 0, 1)
    clone = pickle.loads(pickle.dumps(reference))
    assert clone._fasta is None
    assert clone.fetch("chr1", 0, 4) == "ACGT"


def test_stale_index_older_than_fasta_is_rebuilt(fasta):
    reference = Reference(fasta)
    reference.ensure_index()
    write(fasta, ">chr1\nAAAACCCCGGGG\n")
    index = fasta.parent / "ref.fa.fai"
    os.utime(index, (1, 1))
    assert Reference(fasta).fetch("chr1", 4, 8) == "CCCC"


def test_index_that_does_not_fit_the_file_is_rejected(fasta, tmp_path):
    Reference(fasta).ensure_index()
    index = fasta.parent / "ref.fa.fai"
    write(index, "chr1\t5000\t6\t10\t11\n")
    os.utime(index)  # newer than the FASTA, so not rebuilt: must be checked
    with pytest.raises(ReferenceFileError, match=r"delete the \.fai"):
        Reference(fasta).fetch("chr1", 0, 2)


def test_unwritable_index_gives_a_clear_error(fasta, monkeypatch):
    import pyfaidx

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(pyfaidx, "Faidx", refuse)
    with pytest.raises(ReferenceFileError, match=r"cannot be written .* writable"):
        Reference(fasta).ensure_index()


def test_bgzipped_fasta_is_read(tmp_path):
    path = tmp_path / "ref.fa.gz"
    with bgzf.BgzfWriter(str(path), "wb") as handle:
        handle.write(FASTA.encode())
    assert Reference(path).fetch("chrM", 2, 6) == "TTCC"


def bgzf_fasta(path, text: str, block_bytes: int):
    """`text` written as BGZF in blocks of `block_bytes` uncompressed bytes: 65,536 as
    Biopython's writer makes them, 65,280 as htslib's bgzip does."""
    data = text.encode()
    with bgzf.BgzfWriter(str(path), "wb") as handle:
        if block_bytes == 65_536:  # the writer's own blocks
            handle.write(data)
            return path
        for first in range(0, len(data), block_bytes):
            handle.write(data[first : first + block_bytes])
            handle.flush()  # one block per chunk
    return path


def bgzf_block_starts(path) -> list[int]:
    """The uncompressed offset at which each BGZF block after the first starts, read from
    the blocks' own headers (BSIZE) and footers (ISIZE): the boundaries, independently of
    the index genobird and pyfaidx build."""
    import struct
    from pathlib import Path

    data, position, offset, starts = Path(path).read_bytes(), 0, 0, []
    while position < len(data):
        extra_length = struct.unpack_from("<H", data, position + 10)[0]
        extra, block_size = data[position + 12 : position + 12 + extra_length], None
        while extra:  # subfields: BC holds the block's size - 1
            tag, length = extra[:2], struct.unpack_from("<H", extra, 2)[0]
            if tag == b"BC":
                block_size = struct.unpack_from("<H", extra, 4)[0] + 1
            extra = extra[4 + length :]
        offset += struct.unpack_from("<I", data, position + block_size - 4)[0]  # ISIZE
        position += block_size
        starts.append(offset)
    return [start for start in starts if 0 < start < offset]  # each ends one; the last ends all


@pytest.mark.parametrize("block_bytes", [65_536, 65_280])
def test_bgzf_reads_alike_at_every_offset_around_block_ends(tmp_path, block_bytes):
    """A fetch may start or end exactly where a block does: each base around every block
    boundary reads as the plain text has it (with 65,536-byte blocks a fetch starting at
    a block's first base once stopped pyfaidx with 'within_block_offset ... 65536')."""
    import numpy as np

    rng = np.random.default_rng(block_bytes)
    sequence = "".join(rng.choice(list("ACGTacgtN"), 400_000))
    header, width = ">chr1\n", 60
    lines = [sequence[i : i + width] for i in range(0, len(sequence), width)]
    path = bgzf_fasta(tmp_path / "ref.fa.gz", header + "\n".join(lines) + "\n", block_bytes)
    reference = Reference(path)
    starts = bgzf_block_starts(path)
    assert len(starts) >= 5 and starts[1] - starts[0] == block_bytes
    upper = sequence.upper()
    for boundary in starts:
        base = (boundary - len(header)) * width // (width + 1)  # the base at the boundary
        for start in range(base - 3, base + 4):
            for length in (1, 2, 7):
                assert (
                    reference.fetch("chr1", start, start + length) == upper[start : start + length]
                )


@pytest.mark.shared_data
def test_the_shared_bgzf_chr22_piece_reads_whole(shared_data):
    """hg19_chr22_0-21Mb.fa.gz holds Biopython's 65,536-byte blocks: read whole, and at
    each block boundary, it is its decompressed text."""
    path = shared_data / "genome" / "hg19_chr22_0-21Mb.fa.gz"
    with gzip.open(path, "rt") as handle:
        text = handle.read()
    header, body = text.split("\n", 1)
    expected = "".join(body.split()).upper()
    reference = Reference(path)
    assert reference.fetch_contig("chr22") == expected
    width = len(body.split("\n", 1)[0])
    starts = 0
    for block_start in bgzf_block_starts(path):
        line, column = divmod(block_start - len(header) - 1, width + 1)
        if column < width:  # a base, not a newline, opens the block: fetch from it
            base = line * width + column
            assert reference.fetch("chr22", base, base + 3) == expected[base : base + 3]
            starts += 1
    assert starts > 100


def test_plain_gzip_fasta_says_to_bgzip(tmp_path):
    path = tmp_path / "ref.fa.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(FASTA)
    with pytest.raises(ReferenceFileError, match="bgzip"):
        Reference(path).ensure_index()


def test_duplicate_contig_names_are_a_format_error(tmp_path):
    path = write(tmp_path / "dup.fa", ">a\nACGT\n>a\nGGGG\n")
    with pytest.raises(FormatError, match=r"dup\.fa"):
        Reference(path).fetch("a", 0, 2)


def test_missing_fasta_is_a_reference_file_error(tmp_path):
    with pytest.raises(ReferenceFileError, match="not found"):
        Reference(tmp_path / "nope.fa")


def test_crlf_fasta_without_trailing_newline(tmp_path):
    path = write(tmp_path / "crlf.fa", ">a\r\nACGTA\r\nCC")
    assert Reference(path).fetch("a", 3, 7) == "TACC"
