"""Embeddings out (`genobird embed`, `genobird.Embedder`): the model's own forward pass,
any layer, per base exactly the token vectors spread over their bases, strands averaged
onto the forward bases, long records in windows, and the HDF5 a command writes."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch

from genobird import Embedder
from genobird.cli import main
from genobird.genome import reverse_complement
from tests.conftest import saved_model_dir, tiny_language_model, write


@pytest.fixture(scope="module")
def model_dir(pretraining_data, tmp_path_factory):
    """A fresh 2 x 32 language model over the demo's 500-piece vocabulary, 64 positions
    (so a few hundred bases are several windows)."""
    from genobird.corpus.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(pretraining_data["tokenizer"])
    model = tiny_language_model(tokenizer, max_position=64)
    return saved_model_dir(model, tokenizer, tmp_path_factory.mktemp("embed") / "model")


def dna(length: int, seed: int) -> str:
    return "".join(np.random.default_rng(seed).choice(list("ACGT"), length))


def own_states(embedder: Embedder, sequence: str, layer: int = -1) -> np.ndarray:
    """[CLS] + pieces + [SEP] states of one short sequence, from the model's own forward
    pass (one input, no padding): the oracle."""
    tokenizer = embedder.tokenizer
    ids = torch.tensor([[tokenizer.cls_id, *tokenizer.encode(sequence), tokenizer.sep_id]])
    with torch.no_grad():
        encoded = embedder.model.encoder(ids, None, None, all_layers=True)
    return encoded.layers[layer].numpy()[0]


def test_pooled_and_token_vectors_are_the_models_own_states(model_dir):
    embedder = Embedder(model_dir, device="cpu", batch_size=3)
    sequences = [dna(n, n) for n in (30, 90, 45, 120)]  # padded together in one batch
    pooled = embedder.embed(sequences)
    cls = embedder.embed(sequences, pooling="cls")
    tokens = embedder.embed(sequences, level="token")
    for index, sequence in enumerate(sequences):
        states = own_states(embedder, sequence)
        np.testing.assert_allclose(tokens[index].vectors, states[1:-1], atol=1e-5)
        np.testing.assert_allclose(pooled[index], states[1:-1].mean(0), atol=1e-5)
        np.testing.assert_allclose(cls[index], states[0], atol=1e-5)
        pieces = [embedder.tokenizer.id_to_piece(i) for i in tokens[index].ids]
        assert "".join(sequence[a:b] for a, b in tokens[index].spans) == sequence
        assert [sequence[a:b] for a, b in tokens[index].spans] == pieces


def test_any_layer_or_the_mean_of_the_last_ones(model_dir):
    sequence = dna(60, 1)
    for layer in (0, 1, -2):
        embedder = Embedder(model_dir, device="cpu", layer=layer)
        expected = own_states(embedder, sequence, layer)[1:-1].mean(0)
        np.testing.assert_allclose(embedder.embed([sequence])[0], expected, atol=1e-5)
    mean_last = Embedder(model_dir, device="cpu", mean_last=2).embed([sequence], "token")[0]
    last, before = (
        own_states(mean_last_embedder := Embedder(model_dir, device="cpu"), sequence, k)[1:-1]
        for k in (-1, -2)
    )
    np.testing.assert_allclose(mean_last.vectors, (last + before) / 2, atol=1e-5)
    assert mean_last_embedder.layers == [2]
    with pytest.raises(ValueError, match=r"layer must be in -3\.\.2"):
        Embedder(model_dir, device="cpu", layer=3)


def test_per_base_vectors_are_the_token_vectors_spread_over_their_bases(model_dir):
    """Exactly: base i holds the vector of the piece that spells it (built here base by
    base from the pieces), whatever the cuts; arrays line up with the sequence, N
    included; a record longer than the model's input is read in windows."""
    embedder = Embedder(model_dir, device="cpu")
    sequences = [dna(50, 2) + "NNNN" + dna(30, 3), dna(700, 4)]
    tokens = embedder.embed(sequences, level="token")
    bases = embedder.embed(sequences, level="base")
    for sequence, token, base in zip(sequences, tokens, bases, strict=True):
        assert base.shape == (len(sequence), embedder.hidden_size)
        expected = []
        for vector, piece_id in zip(token.vectors, token.ids, strict=True):
            expected += [vector] * len(embedder.tokenizer.id_to_piece(int(piece_id)))
        assert np.array_equal(base, np.stack(expected))
    windows = -(-len(tokens[1].ids) // (embedder.config.max_position - 2))
    assert windows >= 3  # several windows, each read between its own [CLS] and [SEP]


def test_the_strand_average_is_symmetric_on_a_palindrome_and_lies_on_the_forward_bases(
    model_dir,
):
    embedder = Embedder(model_dir, device="cpu", rc_average=True)
    half = dna(41, 5)
    palindrome = half + reverse_complement(half)
    assert palindrome == reverse_complement(palindrome)
    base = embedder.embed([palindrome], level="base")[0]
    np.testing.assert_allclose(base, base[::-1], atol=1e-6)
    sequence = dna(70, 6)
    one = Embedder(model_dir, device="cpu")
    forward = one.embed([sequence], level="base")[0]
    backward = one.embed([reverse_complement(sequence)], level="base")[0]
    np.testing.assert_allclose(
        embedder.embed([sequence], level="base")[0], (forward + backward[::-1]) / 2, atol=1e-6
    )
    np.testing.assert_allclose(
        embedder.embed([sequence])[0],
        (one.embed([sequence])[0] + one.embed([reverse_complement(sequence)])[0]) / 2,
        atol=1e-6,
    )
    with pytest.raises(ValueError, match="token level reads one strand"):
        embedder.embed([sequence], level="token")


def test_embed_writes_hdf5_for_fasta_bed_and_vcf(model_dir, demo_reference, tmp_path, capsys):
    fasta = write(tmp_path / "s.fa", f">a\n{dna(40, 7)}\n>gap\nNNNN\n>b\n{dna(300, 8)}\n")
    base = tmp_path / "b.h5"
    assert (
        main(
            [
                "-q",
                "embed",
                "--model",
                str(model_dir),
                "--fasta",
                str(fasta),
                "--level",
                "base",
                "--out",
                str(base),
            ]
        )
        == 0
    )
    embedder = Embedder(model_dir, device="cpu")
    with h5py.File(base, "r") as handle:
        assert handle.attrs["level"] == "base" and handle["base"].shape == (340, 32)
        assert handle["base_offsets"][:].tolist() == [0, 40, 340]
        assert handle["rows/name"][:].astype(str).tolist() == ["a", "b"]
        assert handle["rows/line"][:].tolist() == [1, 5]
        np.testing.assert_allclose(
            handle["base"][40:], embedder.embed([dna(300, 8)], level="base")[0]
        )
    assert "record 'gap' is 100% N" in (tmp_path / "b.h5.rejected.tsv").read_text()
    reference = str(demo_reference / "genome.fa")
    bed = write(tmp_path / "r.bed", "chr1\t50000\t50120\tr1\t0\t-\nchrZ\t1\t5\n")
    tokens = tmp_path / "t.h5"
    assert (
        main(
            [
                "-q",
                "embed",
                "--model",
                str(model_dir),
                "--bed",
                str(bed),
                "--reference",
                reference,
                "--level",
                "token",
                "--out",
                str(tokens),
            ]
        )
        == 0
    )
    from genobird.genome import Reference

    region = Reference(reference).fetch("chr1", 50000, 50120, "-")
    with h5py.File(tokens, "r") as handle:
        offsets = handle["token_offsets"][:]
        np.testing.assert_allclose(
            handle["token"][offsets[0] : offsets[1]],
            embedder.embed([region], level="token")[0].vectors,
        )
        assert handle["rows/strand"][:].astype(str).tolist() == ["-"]
    base_at = Reference(reference).fetch("chr1", 60000, 60001)
    other = "A" if base_at != "A" else "C"
    vcf = write(
        tmp_path / "v.vcf",
        "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\n"
        f"chr1\t60001\tv1\t{base_at}\t{other}\n"
        f"chr1\t60001\tbad\t{other}\t{base_at}\n",
    )
    pooled = tmp_path / "v.h5"
    assert (
        main(
            [
                "-q",
                "embed",
                "--model",
                str(model_dir),
                "--vcf",
                str(vcf),
                "--reference",
                reference,
                "--window-bp",
                "200",
                "--out",
                str(pooled),
            ]
        )
        == 0
    )
    with h5py.File(pooled, "r") as handle:
        assert handle["pooled"].shape == (2, 32)
        assert handle["rows/allele"][:].astype(str).tolist() == ["ref", "alt"]
        window = Reference(reference).fetch("chr1", 60000 - 100, 60000 + 100)
        np.testing.assert_allclose(handle["pooled"][0], embedder.embed([window])[0], atol=1e-6)
    rejected = (tmp_path / "v.h5.rejected.tsv").read_text()
    assert "is not the reference's bases at chr1" in rejected and "\t4\t" in rejected
    assert (
        main(
            [
                "-q",
                "embed",
                "--model",
                str(model_dir),
                "--fasta",
                str(fasta),
                "--out",
                str(tmp_path / "x.tsv"),
            ]
        )
        == 1
    )
    assert "embeddings are written as HDF5" in capsys.readouterr().err


def test_chunks_end_at_a_base_budget_and_the_file_is_the_same(model_dir, tmp_path, monkeypatch):
    """Long records are embedded a few at a time (CHUNK_BP), so memory follows the chunk,
    not the file; the HDF5 is the one a single chunk writes."""
    import genobird.scoring.embed as embed

    records = [({"name": str(i)}, "A" * length) for i, length in enumerate((50, 300, 20, 400))]
    sizes = [
        [len(s) for _, s in chunk] for chunk, _ in embed.chunked(iter(records), 256, bases=320)
    ]
    assert sizes == [[50, 300], [20, 400]]
    assert [len(c) for c, _ in embed.chunked(iter(records), 3, bases=10_000)] == [3, 1]
    fasta = write(tmp_path / "s.fa", "".join(f">r{i}\n{dna(150 + 40 * i, i)}\n" for i in range(6)))
    embedder = Embedder(model_dir, device="cpu")
    whole, chunked = tmp_path / "whole.h5", tmp_path / "chunked.h5"
    embed.write_embeddings(embedder, "fasta", fasta, whole, "base")
    chunks = []
    original = embed.chunked

    def counted(*args, **kwargs):
        for chunk, set_aside in original(*args, **kwargs):
            chunks.append(len(chunk))
            yield chunk, set_aside

    monkeypatch.setattr(embed, "chunked", counted)
    monkeypatch.setattr(embed, "CHUNK_BP", 400)
    embed.write_embeddings(embedder, "fasta", fasta, chunked, "base")
    assert len(chunks) > 1 and sum(chunks) == 6
    with h5py.File(whole, "r") as a, h5py.File(chunked, "r") as b:
        assert a["base_offsets"][:].tolist() == b["base_offsets"][:].tolist()
        np.testing.assert_allclose(a["base"][:], b["base"][:], atol=1e-6)


def test_worker_processes_tokenise_ahead_and_write_the_same_file(model_dir, tmp_path, monkeypatch):
    import genobird.scoring.embed as embed

    monkeypatch.setattr(embed, "CHUNK_RECORDS", 2)  # several chunks in flight
    fasta = write(tmp_path / "s.fa", "".join(f">r{i}\n{dna(120 + 30 * i, i)}\n" for i in range(7)))
    files = {}
    for workers in (0, 2):
        files[workers] = tmp_path / f"w{workers}.h5"
        assert (
            main(
                [
                    "-q",
                    "embed",
                    "--model",
                    str(model_dir),
                    "--fasta",
                    str(fasta),
                    "--level",
                    "base",
                    "--rc-average",
                    "--workers",
                    str(workers),
                    "--out",
                    str(files[workers]),
                ]
            )
            == 0
        )
    with h5py.File(files[0], "r") as a, h5py.File(files[2], "r") as b:
        assert a["rows/name"][:].tolist() == b["rows/name"][:].tolist()  # order kept
        assert a["base_offsets"][:].tolist() == b["base_offsets"][:].tolist()
        np.testing.assert_allclose(a["base"][:], b["base"][:], atol=1e-6)
