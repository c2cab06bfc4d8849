"""The genome layer on real hg19 pieces from ../shared/data (skips without them)."""

import pytest

from genobird.genome import Reference, oriented_window, read_fasta
from genobird.genome.alphabet import reverse_complement

pytestmark = pytest.mark.shared_data


@pytest.fixture(scope="module")
def chr20(shared_data):
    return Reference(shared_data / "genome" / "hg19_chr20_0-2Mb.fa")


def _tss_rows(shared_data):
    lines = (shared_data / "annotations" / "hg19_chr20_1-2Mb_tss.tsv").read_text().splitlines()
    header = lines[0].split("\t")
    return header, [dict(zip(header, line.split("\t"), strict=False)) for line in lines[1:]]


def test_windows_around_real_tss_on_both_strands(shared_data, chr20):
    _, rows = _tss_rows(shared_data)
    strands = set()
    for row in rows:
        strand = row["strand"]
        tss = int(row["tss_1based"]) - 1  # published 1-based
        window = oriented_window("chr20", tss, upstream=1000, downstream=500, strand=strand)
        sequence = chr20.fetch(window.chrom, window.start, window.end, window.strand)
        assert len(sequence) == 1500 and "N" not in sequence
        genomic = chr20.fetch("chr20", window.start, window.end)
        assert sequence == (genomic if strand == "+" else reverse_complement(genomic))
        # the oriented TSS base is the genome's base at the TSS (complemented on '-')
        base = chr20.fetch("chr20", tss, tss + 1, strand=strand)
        assert sequence[1000] == base
        strands.add(strand)
    assert len(rows) == 16 and strands == {"+", "-"}


def test_padding_into_the_1mb_n_run_and_past_the_contig_start(chr20):
    assert set(chr20.fetch("chr20", 999_990, 1_000_000)) == {"N"}
    assert "N" not in chr20.fetch("chr20", 1_000_000, 1_000_100)
    padded = chr20.fetch("chr20", -50, 50, pad=True)
    assert padded == "N" * 100


def test_hg19_region_fetched_by_ensembl_style_name(chr20):
    assert chr20.fetch("20", 1_500_000, 1_500_050) == chr20.fetch("chr20", 1_500_000, 1_500_050)


def test_chrm_and_mt_naming(shared_data, tmp_path):
    source = shared_data / "genome" / "rCRS_chrM.fa"
    record = next(read_fasta(source))
    assert record.name == "MT_human" and len(record.sequence) == 16_569
    renamed = tmp_path / "mt.fa"
    renamed.write_text(">MT\n" + record.sequence + "\n")
    reference = Reference(renamed)
    assert reference.fetch("chrM", 0, 20) == reference.fetch("MT", 0, 20) == record.sequence[:20]


def test_soft_masked_input_is_uppercased_with_mask_positions_kept_as_bases(shared_data, tmp_path):
    source = shared_data / "genome" / "hg19_chr17_part_softmasked.fa"
    raw = "".join(
        line.strip() for line in source.read_text().splitlines() if not line.startswith(">")
    )
    assert any(c.islower() for c in raw)
    copy = tmp_path / "chr17.fa"  # ../shared is read-only: the .fai must be built elsewhere
    copy.write_text(source.read_text())
    reference = Reference(copy)
    name = reference.contigs[0]
    assert reference.fetch_contig(name) == raw.upper()
