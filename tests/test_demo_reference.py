"""The embedded default genome: deterministic, genome-like, and with learnable features."""

import json
import re

import numpy as np
import pytest

from genobird.fileio import file_digest
from genobird.genome import Reference, read_bed
from genobird.genome.demo import MOTIFS, DemoSpec, feature_table, generate_demo_reference


def _files(outdir):
    return {str(p.relative_to(outdir)): p.read_bytes() for p in outdir.rglob("*") if p.is_file()}


def test_same_seed_gives_byte_identical_files_and_another_seed_does_not(tmp_path):
    spec = DemoSpec(seed=3, size_mb=0.4)
    generate_demo_reference(tmp_path / "a", spec)
    generate_demo_reference(tmp_path / "b", spec)
    generate_demo_reference(tmp_path / "c", DemoSpec(seed=4, size_mb=0.4))
    first, second, other = (_files(tmp_path / name) for name in "abc")
    assert first == second
    assert first["genome.fa"] != other["genome.fa"]


def test_manifest_lists_every_file_with_its_checksum(demo_reference):
    manifest = json.loads((demo_reference / "manifest.json").read_text())
    on_disk = {
        str(p.relative_to(demo_reference))
        for p in demo_reference.rglob("*")
        if p.is_file() and p.name != "manifest.json"
    }
    assert set(manifest["files"]) == on_disk
    for name, digest in manifest["files"].items():
        assert file_digest(demo_reference / name) == digest


def test_fasta_index_and_chrom_sizes_agree_with_pyfaidx(demo_reference):
    import pyfaidx

    ours = (demo_reference / "genome.fa.fai").read_text()
    (demo_reference / "genome.fa.fai").rename(demo_reference / "ours.fai")
    try:
        pyfaidx.Faidx(str(demo_reference / "genome.fa")).close()
        assert (demo_reference / "genome.fa.fai").read_text() == ours
    finally:
        (demo_reference / "ours.fai").replace(demo_reference / "genome.fa.fai")
    sizes = dict(line.split() for line in (demo_reference / "chrom.sizes").read_text().splitlines())
    assert {k: int(v) for k, v in sizes.items()} == Reference(demo_reference / "genome.fa").lengths


def test_sequence_looks_like_a_genome(demo_reference):
    raw = "".join(
        line
        for line in (demo_reference / "genome.fa").read_text().splitlines()
        if not line.startswith(">")
    )
    upper = raw.upper()
    n_fraction = upper.count("N") / len(raw)
    masked_fraction = sum(c.islower() for c in raw) / len(raw)
    called = len(raw) - upper.count("N")
    gc = (upper.count("G") + upper.count("C")) / called
    cpg_observed_expected = upper.count("CG") * called / (upper.count("C") * upper.count("G"))
    assert 0.02 < n_fraction < 0.15  # telomeres, centromere, small gaps
    assert 0.15 < masked_fraction < 0.45  # soft-masked repeats
    assert 0.37 < gc < 0.50
    assert cpg_observed_expected < 0.75  # CpG depletion outside islands


def test_gc_varies_between_isochores(demo_reference):
    reference = Reference(demo_reference / "genome.fa")
    windows = []
    for chrom in reference.contigs:
        sequence = reference.fetch_contig(chrom)
        windows += [sequence[i : i + 20_000] for i in range(0, len(sequence), 20_000)]
    gc = [
        (w.count("G") + w.count("C")) / max(1, len(w) - w.count("N"))
        for w in windows
        if w.count("N") < 1000
    ]
    assert max(gc) - min(gc) > 0.04


def test_repeat_copies_recur_so_long_kmers_repeat(demo_reference):
    sequence = Reference(demo_reference / "genome.fa").fetch_contig("chr1")
    kmers = [
        sequence[i : i + 24]
        for i in range(0, len(sequence) - 24, 7)
        if "N" not in sequence[i : i + 24]
    ]
    _, counts = np.unique(kmers, return_counts=True)
    # uniform random DNA would repeat essentially no 24-mer; repeat families do
    assert (counts > 1).sum() > 200


def _epdnew_rows(path):
    return [line.split("\t") for line in path.read_text().splitlines()]


def test_tss_bed_is_epdnew_style_and_planted_promoters_sit_on_it(demo_reference):
    reference = Reference(demo_reference / "genome.fa")
    rows = _epdnew_rows(demo_reference / "tss.bed")
    annotations = {
        line.split("\t")[0]: line.split("\t")
        for line in (demo_reference / "promoters.tsv").read_text().splitlines()[1:]
    }
    strands, tata_hits, tata_total = set(), 0, 0
    for chrom, start, end, name, _score, strand, thick_start, thick_end in rows:
        start, end, tss = int(start), int(end), int(thick_start)
        assert int(thick_end) == tss + 1 and end - start == 60
        assert (tss - start, end - tss) == ((49, 11) if strand == "+" else (10, 50))
        strands.add(strand)
        oriented = reference.fetch(chrom, tss - 40, tss + 41, strand=strand)  # TSS at index 40
        if annotations[name][6] == "0":  # not poised: initiator on the TSS
            assert oriented[38:46] == MOTIFS["INR"]
        if annotations[name][5] == "1":
            tata_total += 1
            tata_hits += oriented[40 - 31 : 40 - 31 + 8] == MOTIFS["TATA"]
    assert strands == {"+", "-"}
    assert tata_total > 0 and tata_hits / tata_total > 0.95


def test_cpg_islands_raise_gc_around_their_tss(demo_reference):
    reference = Reference(demo_reference / "genome.fa")
    rows = (demo_reference / "promoters.tsv").read_text().splitlines()[1:]
    island, plain = [], []
    for row in rows:
        _, chrom, tss, _strand, cpg, *_ = row.split("\t")
        window = reference.fetch(chrom, int(tss) - 400, int(tss) + 300)
        gc = (window.count("G") + window.count("C")) / len(window)
        (island if cpg == "1" else plain).append(gc)
    assert np.mean(island) > np.mean(plain) + 0.1


def test_feature_table_has_categories_and_a_peak_file_each(demo_reference):
    lines = (demo_reference / "features.tsv").read_text().splitlines()
    assert lines[0] == "index\tname\tcategory\tpeak_file"
    rows = [line.split("\t") for line in lines[1:]]
    assert [(r[1], r[2]) for r in rows] == feature_table()
    assert 12 <= len(rows) <= 24
    assert {r[2] for r in rows} == {"DNase", "TF", "Histone"}
    contigs = Reference(demo_reference / "genome.fa").lengths
    for _, name, _, peak_file in rows:
        peaks = list(read_bed(demo_reference / peak_file, contigs=contigs))
        assert peaks, f"{name} has no peaks"


def _peaks(demo_reference, name):
    return [
        (iv.chrom, iv.start, iv.end) for iv in read_bed(demo_reference / "peaks" / f"{name}.bed")
    ]


def test_tf_peaks_contain_their_motif(demo_reference):
    reference = Reference(demo_reference / "genome.fa")
    for tf in ("CTCF", "GATA", "AP1", "ETS"):
        motif = MOTIFS[tf]
        for chrom, start, end in _peaks(demo_reference, tf)[:40]:
            window = reference.fetch(chrom, start, end)
            assert re.search(motif, window) or re.search(
                motif, reference.fetch(chrom, start, end, "-")
            )


def test_some_histone_marks_need_kilobases_of_context(demo_reference):
    """H3K36me3 bins lie 1.5-4 kb downstream of a TSS: the promoter is out of a 1 kb view."""
    tss = {}
    for row in _epdnew_rows(demo_reference / "tss.bed"):
        tss.setdefault(row[0], []).append(int(row[6]))
    distances = []
    for chrom, start, end in _peaks(demo_reference, "H3K36me3"):
        centre = (start + end) // 2
        distances.append(min(abs(centre - t) for t in tss[chrom]))
    assert np.median(distances) > 1_000


@pytest.mark.parametrize("size_mb", [0.4, 1.0])
def test_size_scales_the_genome(tmp_path, size_mb):
    manifest = generate_demo_reference(tmp_path / "r", DemoSpec(size_mb=size_mb))
    assert sum(manifest["chromosomes"].values()) == pytest.approx(size_mb * 1e6, rel=0.25)


def test_scoring_samples_are_genome_slices_and_variants_match_the_reference(demo_reference):
    """samples.fa records are the genome at their stated coordinates (read back with
    Biopython and pyfaidx); every variants.vcf REF is the reference base, ALT differs."""
    from Bio import SeqIO

    reference = Reference(demo_reference / "genome.fa")
    records = list(SeqIO.parse(demo_reference / "samples.fa", "fasta"))
    assert len(records) >= 12 and any(r.id.startswith("DEMO_") for r in records)
    for record in records:
        chrom, span = record.description.split()[1].split(":")
        start, end = map(int, span.split("-"))
        assert str(record.seq).upper() == reference.fetch(chrom, start, end).upper()
        assert end - start == 2000
    rows = [
        line.split("\t")
        for line in (demo_reference / "variants.vcf").read_text().splitlines()
        if not line.startswith("#")
    ]
    assert len(rows) >= 10
    for chrom, pos, _name, ref, alt, *_ in rows:
        assert reference.fetch(chrom, int(pos) - 1, int(pos)).upper() == ref != alt
        assert alt in "ACGT"
