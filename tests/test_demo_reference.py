"""The embedded default genome: deterministic, genome-like, and with learnable features."""

import json
import re

import numpy as np
import pytest

from genobird.fileio import file_digest
from genobird.genome import Reference, read_bed
from genobird.genome.alphabet import reverse_complement
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
    manifest = json.loads((demo_reference / "manifest.json").read_text())
    histone = {r[1] for r in rows if r[2] == "Histone"}
    assert set(manifest["long_range_features"]) == {"H3K27ac", "H3K36me3", "H3K27me3"} < histone
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


# ------------------------------------------------------------------ long-range structure
def _bed_rows(path):
    return [line.split("\t") for line in path.read_text().splitlines()]


def _covered(peaks, chrom, position):
    return any(c == chrom and s <= position < e for c, s, e in peaks)


def test_copies_lie_within_reach_of_their_source_and_diverge_a_few_percent(demo_reference):
    """Each copy reads as its source (reverse-complemented where inverted) up to a few
    percent of bases, 0.2-4 kb away (tandem units adjacent), read from the FASTA."""
    reference = Reference(demo_reference / "genome.fa")
    rows = _bed_rows(demo_reference / "copies.bed")
    pairs = {}
    for chrom, start, end, name, _score, strand in rows:
        pairs.setdefault(name.rsplit("_", 1)[0], {})[name.rsplit("_", 1)[1]] = (
            chrom,
            int(start),
            int(end),
            strand,
        )
    kinds, mismatches = set(), []
    for name, pair in pairs.items():
        kind = name.split("_")[0]
        kinds.add(kind)
        chrom, s0, s1, _ = pair["source"]
        _, c0, c1, strand = pair["copy"]
        gap = c0 - s1
        if kind == "tandem":
            assert c0 >= s1 and (c0 - s0) % (s1 - s0) == 0
        else:
            assert 200 <= gap < 4_000, name
        source = reference.fetch(chrom, s0, s1, strand=strand)
        copy = reference.fetch(chrom, c0, c1)
        mismatches.append(sum(a != b for a, b in zip(source, copy, strict=True)) / len(copy))
    assert kinds == {"segmental", "inverted", "tandem"}
    assert 0.01 <= np.median(mismatches) <= 0.05
    assert np.quantile(mismatches, 0.95) < 0.10  # elements written later touch a few
    manifest = json.loads((demo_reference / "manifest.json").read_text())
    total = sum(manifest["chromosomes"].values())
    assert 0.04 < manifest["long_range"]["copied_bp"] / total < 0.15


def _distal_motif_arrangement(reference, chrom, tss, strand):
    """How the distal motifs within 3.5 kb of a TSS lie, read from sequence alone:
    'engaged' (upstream, on the promoter's strand), 'downstream', 'reversed' or None."""
    from genobird.genome.demo_longrange import DISTAL_MOTIF

    oriented = reference.fetch(chrom, tss - 3_500, tss + 3_501, strand=strand)  # TSS at 3500
    forward = [m.start() for m in re.finditer(DISTAL_MOTIF, oriented)]
    reverse = [m.start() for m in re.finditer(reverse_complement(DISTAL_MOTIF), oriented)]
    if len(forward) == 3 and all(p < 3_500 for p in forward) and not reverse:
        return "engaged"
    if len(forward) == 3 and all(p > 3_500 for p in forward) and not reverse:
        return "downstream"
    if len(reverse) == 3 and all(p < 3_500 for p in reverse) and not forward:
        return "reversed"
    return None


def test_h3k27ac_marks_promoters_by_the_arrangement_of_a_distal_element(demo_reference):
    """The same three motifs lie near engaged and decoy promoters; only their side and
    strand (read here from sequence) decide H3K27ac at the TSS."""
    reference = Reference(demo_reference / "genome.fa")
    peaks = _peaks(demo_reference, "H3K27ac")
    marked = {}
    for chrom, _s, _e, _name, _score, strand, tss, _ in _epdnew_rows(demo_reference / "tss.bed"):
        arrangement = _distal_motif_arrangement(reference, chrom, int(tss), strand)
        if arrangement:
            marked.setdefault(arrangement, []).append(_covered(peaks, chrom, int(tss)))
    assert set(marked) == {"engaged", "downstream", "reversed"}
    assert np.mean(marked["engaged"]) > 0.9  # peak drop-out removes a few
    assert not any(marked["downstream"]) and not any(marked["reversed"])
    elements = [
        row for row in _bed_rows(demo_reference / "elements.bed") if row[3].startswith("distal_")
    ]
    share = np.mean([row[3] == "distal_engaged" for row in elements])
    assert 0.35 < share < 0.65  # a bag of motifs says nothing: half are decoys


def test_h3k27me3_covers_domains_between_convergent_boundary_sites_only(demo_reference):
    """A pair of CTCF-like sites facing each other (read from sequence) closes a domain
    marked from site to site; the same sites facing away close none."""
    reference = Reference(demo_reference / "genome.fa")
    peaks = _peaks(demo_reference, "H3K27me3")
    motif, width = MOTIFS["CTCF"], len(MOTIFS["CTCF"])
    inside = {"convergent": [], "divergent": []}
    for chrom, start, end, label in _bed_rows(demo_reference / "elements.bed"):
        if not label.startswith("boundary_"):
            continue
        start, end = int(start), int(end)
        left, right = (
            reference.fetch(chrom, start, start + width),
            reference.fetch(chrom, end - width, end),
        )
        facing = (left == motif, right == reverse_complement(motif))
        away = (left == reverse_complement(motif), right == motif)
        assert facing == (True, True) if label == "boundary_convergent" else away == (True, True)
        assert 2_000 <= end - start - 2 * width < 5_000
        middle = (start + end) // 2
        inside[label.removeprefix("boundary_")].append(_covered(peaks, chrom, middle))
    assert inside["convergent"] and inside["divergent"]
    assert np.mean(inside["convergent"]) > 0.85
    assert np.mean(inside["divergent"]) < 0.15  # poised promoters' marks may reach one


def test_the_motifs_planted_in_promoters_are_written_for_motif_discovery(demo_reference):
    """promoter_motifs.meme holds each motif planted in promoters, its consensus the
    matrix's best base at each position, read back as `genobird motifs --known` reads
    it."""
    from genobird.genome.demo_sequence import PROMOTER_MOTIFS
    from genobird.interpret.motifs import KnownMotifs

    known = KnownMotifs.read(demo_reference / "promoter_motifs.meme")
    assert known.names == PROMOTER_MOTIFS
    for name, ppm in zip(known.names, known.ppms, strict=True):
        assert "".join("ACGT"[i] for i in ppm.argmax(axis=0)) == MOTIFS[name]
        np.testing.assert_allclose(ppm.sum(axis=0), 1)
