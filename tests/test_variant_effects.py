"""Zero-shot variant effects (`genobird likelihood --vcf`): the pieces that differ between
the alleles, masked together and scored; equal to the same bits computed the slow way,
averaged over strands; rejections with their reasons; the Markov yardstick."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from genobird.cli import main
from genobird.genome import Reference, reverse_complement
from genobird.scoring.variant_effects import (
    AlleleWindows,
    VariantEffectScorer,
    differing_pieces,
    markov_variant_effects,
)
from tests.conftest import write

HEADER = "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"


@pytest.fixture(scope="module")
def model_dir(language_model_dir):
    """This module's model is the language model (conftest's `model_dir` is a classifier)."""
    return language_model_dir


def test_the_pieces_scored_are_those_not_shared_at_either_end():
    ref, alt = [5, 6, 7, 8, 9, 10], [5, 6, 11, 12, 9, 10]
    assert [a.tolist() for a in differing_pieces(ref, alt)] == [[2, 3], [2, 3]]
    # an insertion re-cut into more pieces; identical windows have nothing to score
    assert [a.tolist() for a in differing_pieces([5, 6, 9], [5, 7, 8, 9])] == [[1], [1, 2]]
    assert [a.tolist() for a in differing_pieces([5, 6], [5, 6])] == [[], []]


def slow_bits(model, tokenizer, text: str, other: str) -> float:
    """Bits of `text`'s pieces that differ from `other`'s, each masked with the others,
    computed by hand: the pieces found by comparing the spelled bases of both cuts, the
    input built and the MLM head's log-softmax read here."""
    ids, other_ids = tokenizer.encode(text), tokenizer.encode(other)
    spans = [tokenizer.id_to_piece(i) for i in ids]
    other_spans = [tokenizer.id_to_piece(i) for i in other_ids]
    first = next(
        (k for k, (a, b) in enumerate(zip(spans, other_spans, strict=False)) if a != b),
        min(len(spans), len(other_spans)),
    )
    last = 0
    while (
        last < min(len(spans), len(other_spans)) - first
        and spans[-1 - last] == other_spans[-1 - last]
    ):
        last += 1
    masked = list(range(first, len(ids) - last))
    inputs = [tokenizer.cls_id, *ids, tokenizer.sep_id]
    for index in masked:
        inputs[index + 1] = tokenizer.mask_id
    positions = torch.tensor([[index + 1 for index in masked]])
    with torch.no_grad():
        logits = model(torch.tensor([inputs]), masked_positions=positions).mlm_logits
    log_p = torch.log_softmax(logits.double(), dim=-1)
    nats = -sum(log_p[row, ids[index]] for row, index in enumerate(masked))
    return float(nats) / math.log(2)


def test_the_score_is_the_bits_of_the_differing_pieces_computed_the_slow_way(
    model_dir, demo_reference
):
    from genobird.genome.regions import Variant
    from genobird.model.io import from_pretrained
    from genobird.scoring.windows import variant_windows

    reference = Reference(demo_reference / "genome.fa")
    model = from_pretrained(model_dir).eval()
    scorer = VariantEffectScorer(model_dir, device="cpu", rc_average=False)
    one_and_both = VariantEffectScorer(model_dir, device="cpu", rc_average=True)
    windows = []
    for position, alt in ((50_001, None), (52_345, None), (61_000, "AT")):
        ref = reference.fetch("chr1", position - 1, position)
        alt = alt or next(b for b in "ACGT" if b != ref)
        variant = Variant("chr1", position, ".", ref, alt)
        ref_window, alt_window, matched = variant_windows(variant, reference, 300)
        assert matched
        windows.append(
            AlleleWindows(variant, ref_window, alt_window, position - 151, position + 149)
        )
    table = scorer.score(windows)
    tokenizer = scorer.language_model.tokenizer
    for row, w in zip(table.itertuples(), windows, strict=True):
        ref_bits = slow_bits(model, tokenizer, w.ref, w.alt)
        alt_bits = slow_bits(model, tokenizer, w.alt, w.ref)
        assert row.ref_bits == pytest.approx(ref_bits, rel=1e-4)
        assert row.alt_bits == pytest.approx(alt_bits, rel=1e-4)
        assert row.llr_bits == pytest.approx(ref_bits - alt_bits, abs=1e-3)  # float32, batched
    reverse = [
        AlleleWindows(
            w.variant, reverse_complement(w.ref), reverse_complement(w.alt), w.start, w.end
        )
        for w in windows
    ]
    both = one_and_both.score(windows)["llr_bits"]
    expected = (table["llr_bits"] + scorer.score(reverse)["llr_bits"]) / 2
    np.testing.assert_allclose(both, expected, atol=1e-9)


def test_likelihood_vcf_scores_and_rejects_with_reasons_and_lines(
    model_dir, demo_reference, tmp_path, capsys
):
    reference = Reference(demo_reference / "genome.fa")
    ref = reference.fetch("chr1", 50_000, 50_001)
    alt = next(b for b in "ACGT" if b != ref)
    wrong = next(b for b in "ACGT" if b not in (ref, alt))
    # the demo's contigs end in gaps, whose bases are no alleles: a contig of bases to its
    # ends beside chr1 holds the variant whose window runs past an end
    edge = reference.fetch("chr1", 20_000, 21_000)
    genome = write(
        tmp_path / "genome.fa", f">chr1\n{reference.fetch('chr1', 0, 60_000)}\n>edge\n{edge}\n"
    )
    vcf = write(
        tmp_path / "v.vcf",
        HEADER
        + "".join(
            f"{chrom}\t{pos}\t{name}\t{r}\t{a}\t.\t.\t.\n"
            for chrom, pos, name, r, a in (
                ("chr1", 50_001, "ok", ref, alt),  # line 3
                ("chr1", 50_001, "mismatch", wrong, alt),
                ("chr1", 50_001, "multi", ref, f"{alt},{wrong}"),
                ("chr1", 50_001, "long", ref, ref + "A" * 25),
                ("edge", 10, "end", edge[9], next(b for b in "ACGT" if b != edge[9])),
                ("chrZ", 100, "contig", "A", "C"),
            )
        ),
    )
    out = tmp_path / "v.tsv"
    assert (
        main(
            [
                "-q",
                "likelihood",
                "--model",
                str(model_dir),
                "--vcf",
                str(vcf),
                "--reference",
                str(genome),
                "--window-bp",
                "300",
                "--out",
                str(out),
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    table = pd.read_csv(out, sep="\t")
    # each ALT of a record on its own row, as `score --vcf` scores it
    assert table["id"].tolist() == ["ok", "multi", "multi", "end"]
    assert table["line"].tolist() == [3, 5, 5, 7] and table["alt"].tolist()[1:3] == [alt, wrong]
    # a window past a contig's start is N-padded there and scored, as `score --vcf` scores
    # it: 141 of its 300 bases are padding, under the half that rejects a window
    assert table["window_start"][3] == 9 - 150 and table["window_end"][3] == 9 + 150
    assert table.columns.tolist()[-5:] == [
        "llr_bits",
        "ref_bits",
        "alt_bits",
        "ref_pieces",
        "alt_pieces",
    ]
    assert table["window_end"][0] - table["window_start"][0] == 300
    rejected = pd.read_csv(f"{out}.rejected.tsv", sep="\t")
    reasons = dict(zip(rejected["line"], rejected["reason"], strict=True))
    assert f"REF {wrong} is not the reference's bases at chr1:50,001" in reasons[4]
    assert "longer than 20 bp" in reasons[6]
    assert 7 not in reasons and "chrZ" in reasons[8]
    assert "scored 4 variants, rejected 3" in capsys.readouterr().out


def test_variant_effects_stream_through_the_one_score_writer_to_tsv_and_hdf5(
    model_dir, demo_reference, tmp_path
):
    """`likelihood --vcf` writes as `score` does (scoring.tables.write_scores): HDF5 holds
    the TSV's rows and scores; a scorer refuses the input it has no reader for before a
    file is opened."""
    import h5py

    from genobird.errors import ConfigError
    from genobird.scoring.likelihood import LikelihoodScorer
    from genobird.scoring.tables import write_scores

    reference = Reference(demo_reference / "genome.fa")
    lines = []
    for position in (40_001, 45_001, 47_001):
        ref = reference.fetch("chr3", position - 1, position)
        alt = next(b for b in "ACGT" if b != ref)
        lines.append(f"chr3\t{position}\tv{position}\t{ref}\t{alt}\t.\t.\t.\n")
    lines.append(f"chr3\t{position}\twrong\t{alt}\t{ref}\t.\t.\t.\n")
    vcf = write(tmp_path / "v.vcf", HEADER + "".join(lines))
    base = [
        "-q",
        "likelihood",
        "--model",
        str(model_dir),
        "--vcf",
        str(vcf),
        "--reference",
        str(demo_reference / "genome.fa"),
        "--window-bp",
        "200",
        "--device",
        "cpu",
    ]
    assert main([*base, "--out", str(tmp_path / "v.tsv")]) == 0
    assert main([*base, "--out", str(tmp_path / "v.h5")]) == 0
    table = pd.read_csv(tmp_path / "v.tsv", sep="\t")
    assert table["id"].tolist() == ["v40001", "v45001", "v47001"]
    with h5py.File(tmp_path / "v.h5") as h5:
        names = [n.decode() for n in h5["feature_names"][()]]
        assert names == ["llr_bits", "ref_bits", "alt_bits", "ref_pieces", "alt_pieces"]
        np.testing.assert_allclose(h5["effects"][()], table[names].to_numpy(), rtol=1e-6)
        assert [i.decode() for i in h5["rows/id"][()]] == table["id"].tolist()
        assert h5["rows/window_start"][()].tolist() == table["window_start"].tolist()
    assert "\t6\tREF " in (tmp_path / "v.h5.rejected.tsv").read_text()  # the wrong REF
    # streamed a variant at a time, the same file as in one chunk
    one_by_one = VariantEffectScorer(model_dir, device="cpu", window_bp=200, chunk_size=1)
    summary = write_scores(
        one_by_one, "vcf", vcf, tmp_path / "c.tsv", None, None, demo_reference / "genome.fa"
    )
    assert (summary.scored, summary.rejected) == (3, 1)
    streamed = pd.read_csv(tmp_path / "c.tsv", sep="\t")
    assert streamed.drop(columns=names).equals(table.drop(columns=names))  # ids and index
    np.testing.assert_allclose(streamed[names], table[names], rtol=1e-4, atol=1e-3)  # batched
    scorer = LikelihoodScorer(model_dir, device="cpu")
    with pytest.raises(
        ConfigError, match="LikelihoodScorer scores FASTA and BED records, not VCF variants"
    ):
        write_scores(
            scorer, "vcf", vcf, tmp_path / "x.tsv", None, None, demo_reference / "genome.fa"
        )
    effects = VariantEffectScorer(model_dir, device="cpu")
    with pytest.raises(ConfigError, match="VariantEffectScorer scores VCF variants, not FASTA"):
        write_scores(effects, "fasta", vcf, tmp_path / "y.tsv", None, None)
    assert not (tmp_path / "x.tsv").exists() and not (tmp_path / "y.tsv").exists()
    with pytest.raises(ConfigError, match="--window-bp must be at least 40"):
        VariantEffectScorer(model_dir, device="cpu", window_bp=30)


def test_the_markov_yardstick_is_the_bits_of_the_ref_window_minus_the_alt_windows():
    from genobird.baselines.markov import dna_codes, fit_counts, sequence_bits
    from genobird.genome.regions import Variant

    rng = np.random.default_rng(0)
    train = [dna_codes("".join(rng.choice(list("ACGT"), 5000)))]
    counts = fit_counts(train, 3, both_strands=True)
    ref = "".join(rng.choice(list("ACGT"), 101))
    alt = ref[:50] + ("A" if ref[50] != "A" else "C") + ref[51:]
    window = AlleleWindows(Variant("c", 51, ".", ref[50], alt[50]), ref, alt, 0, 101)
    score = markov_variant_effects(counts, 3, 1.0, [window], both_strands=False)[0]
    expected = sequence_bits(counts, dna_codes(ref), 3, 1.0) - sequence_bits(
        counts, dna_codes(alt), 3, 1.0
    )
    assert score == pytest.approx(expected) and score != 0
    both = markov_variant_effects(counts, 3, 1.0, [window])[0]
    rc = AlleleWindows(window.variant, reverse_complement(ref), reverse_complement(alt), 0, 101)
    other = markov_variant_effects(counts, 3, 1.0, [rc], both_strands=False)[0]
    assert both == pytest.approx((score + other) / 2)


def test_baseline_markov_scores_a_vcf_as_likelihood_does(demo_reference, tmp_path, capsys):
    reference = Reference(demo_reference / "genome.fa")
    ref = reference.fetch("chr2", 50_000, 50_001)
    alt = next(b for b in "ACGT" if b != ref)
    vcf = write(
        tmp_path / "v.vcf",
        HEADER + f"chr2\t50001\tv\t{ref}\t{alt}\t.\t.\t.\n"
        f"chr2\t50001\tbad\t{alt}\t{ref}\t.\t.\t.\n",
    )
    genome = str(demo_reference / "genome.fa")
    scores = tmp_path / "m.tsv"
    assert (
        main(
            [
                "-q",
                "baseline",
                "markov",
                "--train",
                genome,
                "--heldout",
                genome,
                "--orders",
                "0-4",
                "--vcf",
                str(vcf),
                "--reference",
                genome,
                "--window-bp",
                "200",
                "--scores",
                str(scores),
            ]
        )
        == 0
    )
    table = pd.read_csv(scores, sep="\t")
    assert table["id"].tolist() == ["v"] and np.isfinite(table["llr_bits"]).all()
    assert (
        f"REF {alt} is not the reference's bases" in (tmp_path / "m.tsv.rejected.tsv").read_text()
    )
    assert (
        main(
            ["-q", "baseline", "markov", "--train", genome, "--heldout", genome, "--vcf", str(vcf)]
        )
        == 2
    )
    assert "--vcf needs --reference FASTA and --scores" in capsys.readouterr().err
