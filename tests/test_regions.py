import gzip

import pytest

from genobird.errors import FormatError, RegionError
from genobird.genome import (
    Interval,
    Reference,
    centered_window,
    oriented_window,
    parse_region,
    point_window,
    read_bed,
    read_fasta,
    read_vcf,
)
from tests.conftest import write

CONTIGS = {"chr1": 1000, "chr2": 500}


def test_bed3_and_bed6_with_header_track_and_browser_lines(tmp_path):
    path = write(
        tmp_path / "a.bed",
        "#comment\ntrack name=x\nbrowser position chr1\nchr1\t10\t20\n"
        "chr2\t5\t50\tpeak1\t7\t-\textra\n\n",
    )
    intervals = list(read_bed(path))
    assert intervals == [Interval("chr1", 10, 20), Interval("chr2", 5, 50, "peak1", "-")]


def test_gzipped_bed(tmp_path):
    path = tmp_path / "a.bed.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("chr1\t1\t2\n")
    assert list(read_bed(path)) == [Interval("chr1", 1, 2)]


BAD_BED_LINES = [
    ("chr1\t20\t10", "start 20 is greater than end 10"),
    ("chr1\t-5\t10", "negative start"),
    ("chrZ\t1\t10", "unknown contig 'chrZ'"),
    ("chr1\t990\t1010", "past the end of chr1"),
    ("chr1\t10", "at least 3 columns"),
    ("chr1\tten\t20", "must be integers"),
    ("chr1\t1\t5\tn\t0\t?", "strand must be"),
]


@pytest.mark.parametrize("line, reason", BAD_BED_LINES)
def test_bad_bed_lines_are_reported_with_file_line_and_reason(tmp_path, line, reason):
    path = write(tmp_path / "bad.bed", f"chr1\t0\t5\n{line}\nchr2\t0\t5\n")
    problems = []
    intervals = list(read_bed(path, contigs=CONTIGS, problems=problems))
    assert [iv.chrom for iv in intervals] == ["chr1", "chr2"]  # reading went on
    assert len(problems) == 1
    assert problems[0].line == 2 and reason in problems[0].reason
    assert str(problems[0]).startswith(f"{path}:2: ")


def test_bad_bed_line_raises_when_no_problem_list_is_given(tmp_path):
    path = write(tmp_path / "bad.bed", "chr1\t20\t10\n")
    with pytest.raises(RegionError, match=r"bad.bed:1: start 20 is greater"):
        list(read_bed(path))


def test_bed_contig_aliases_resolve_to_reference_names(tmp_path):
    path = write(tmp_path / "a.bed", "1\t0\t5\nMT\t0\t3\n")
    intervals = list(read_bed(path, contigs={"chr1": 10, "chrM": 10}))
    assert [iv.chrom for iv in intervals] == ["chr1", "chrM"]


def test_unreadable_file_is_an_os_error(tmp_path):
    with pytest.raises(OSError, match="not found"):
        list(read_bed(tmp_path / "missing.bed"))


# ------------------------------------------------------------------ FASTA
def test_fasta_records_are_normalised_crlf_lowercase_iupac_no_final_newline(tmp_path):
    path = write(tmp_path / "a.fa", ">s1 desc here\r\nacgu\r\nRYN\r\n>s2\r\nGG")
    records = list(read_fasta(path))
    assert [(r.name, r.description, r.sequence) for r in records] == [
        ("s1", "desc here", "ACGTNNN"),
        ("s2", "", "GG"),
    ]


def test_gzipped_fasta(tmp_path):
    path = tmp_path / "a.fa.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(">x\nACGT\n")
    assert next(read_fasta(path)).sequence == "ACGT"


def test_bad_fasta_records_are_reported_and_reading_goes_on(tmp_path):
    path = write(tmp_path / "a.fa", ">empty\n>ok\nACGT\n>ok\nGG\n>bad\nAC*T\n>last\nT\n")
    problems = []
    names = [r.name for r in read_fasta(path, problems=problems)]
    assert names == ["ok", "last"]
    reasons = [p.reason for p in problems]
    assert "empty sequence" in reasons[0]
    assert "duplicate record name 'ok'" in reasons[1]
    assert "invalid DNA character '*' at 0-based position 2" in reasons[2]
    assert [p.line for p in problems] == [1, 4, 6]  # the lines of their headers
    assert [r.line for r in read_fasta(path, problems=[])] == [2, 8]
    # multi-line records, blank lines and CRLF are read as Biopython reads them
    from Bio.SeqIO.FastaIO import SimpleFastaParser

    text = ">a one\r\nAC GT\r\n\r\nacgt\n>b\n\nTTNN\n"
    path = write(tmp_path / "b.fa", text)
    records = list(read_fasta(path))
    with open(path) as handle:
        expected = list(SimpleFastaParser(handle))
    assert [(r.name + " " + r.description).strip() for r in records] == [t for t, _ in expected]
    assert [r.sequence for r in records] == [s.upper().replace(" ", "") for _, s in expected]
    assert [r.line for r in records] == [1, 5]


def test_text_that_is_not_fasta_is_a_format_error(tmp_path):
    path = write(tmp_path / "a.fa", "hello\n>x\nAC\n")
    with pytest.raises(FormatError, match="not a FASTA"):
        list(read_fasta(path))


# ------------------------------------------------------------------ VCF
VCF = (
    "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
    "chr1\t10\trs1\tA\tG,T\t.\t.\t.\n"
    "chr1\t20\t.\tAC\tA\t.\t.\t.\n"
    "chr1\t30\t.\tA\t<DEL>\t.\t.\t.\n"
    "chr1\t0\t.\tA\tG\t.\t.\t.\n"
)


def test_vcf_is_split_per_alt_and_converted_to_zero_based(tmp_path):
    problems = []
    variants = list(read_vcf(write(tmp_path / "a.vcf", VCF), problems=problems))
    assert [(v.pos, v.start, v.end, v.ref, v.alt) for v in variants] == [
        (10, 9, 10, "A", "G"),
        (10, 9, 10, "A", "T"),
        (20, 19, 21, "AC", "A"),
    ]
    assert variants[0].is_snv and not variants[2].is_snv
    assert [p.line for p in problems] == [5, 6]
    assert "unsupported ALT '<DEL>'" in problems[0].reason
    assert "POS must be a positive integer" in problems[1].reason


# ------------------------------------------------------------------ windows
def test_centered_window_keeps_width_and_centres_on_midpoint():
    window = centered_window(Interval("chr1", 100, 201, "x", "+"), 10)
    assert (window.start, window.end, window.name, window.strand) == (145, 155, "x", "+")
    assert window.midpoint == 150 == Interval("chr1", 100, 201).midpoint


def test_point_window_puts_the_position_at_width_half():
    window = point_window("chr1", 50, 8)
    assert (window.start, window.end) == (46, 54) and 50 - window.start == 4


def test_oriented_window_puts_tss_at_index_upstream_on_both_strands(tmp_path):
    sequence = "AAAAAAAAAAGCCCCCCCCC"  # G at index 10 is the '+' TSS
    reference = Reference(write(tmp_path / "r.fa", f">c\n{sequence}\n"))
    plus = oriented_window("c", 10, upstream=3, downstream=2, strand="+")
    assert reference.fetch(plus.chrom, plus.start, plus.end, plus.strand) == "AAAGC"
    minus = oriented_window("c", 10, upstream=3, downstream=2, strand="-")
    # on '-' upstream is to the right: reads CCC (rc GGG) then the TSS G (rc C), then A (rc T)
    assert reference.fetch(minus.chrom, minus.start, minus.end, minus.strand) == "GGGCT"


def test_parse_region_converts_one_based_inclusive():
    assert parse_region("chr2:1,001-2,000") == Interval("chr2", 1000, 2000)
    with pytest.raises(RegionError, match="chrom:start-end"):
        parse_region("chr2:5")


def test_intervals_go_through_pybedtools_for_interval_arithmetic(tmp_path):
    from genobird.genome.regions import to_bedtool

    path = write(tmp_path / "a.bed", "chr1\t0\t100\tx\t0\t+\nchr1\t50\t150\ty\t0\t-\nchr2\t0\t10\n")
    intervals = list(read_bed(path))
    merged = to_bedtool(intervals).sort().merge()
    assert [(iv.chrom, iv.start, iv.end) for iv in merged] == [("chr1", 0, 150), ("chr2", 0, 10)]
    overlap = to_bedtool(intervals[:1]).intersect(to_bedtool(intervals[1:2]))
    assert [(iv.start, iv.end, iv.strand) for iv in overlap] == [(50, 100, "+")]
