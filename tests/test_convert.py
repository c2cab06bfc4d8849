"""`genobird convert from-hf / to-hf` against transformers itself: a GENA-LM-shaped
checkpoint (randomly initialised here, with a DNA BPE tokenizer.json trained here with
GENA-LM's special ids and N-run rule) stands in for a hub download."""

from __future__ import annotations

import json
import random

import numpy as np
import pandas as pd
import pytest
import torch

from genobird.cli import main
from genobird.corpus import InstanceSpec, read_documents, write_instances
from genobird.corpus.tokenizer import load_tokenizer
from genobird.errors import ConfigError
from genobird.model import from_pretrained
from genobird.scoring.predict import load_predictor

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

GENA_SPECIAL = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]  # ids 0-4, as GENA-LM's


def dna(length: int, seed: int, alphabet: str = "ACGT") -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(length))


def sentences(pretraining_data) -> list[str]:
    documents = read_documents(pretraining_data["folder"] / "train.txt")
    return [sentence for document in documents for sentence in document]


def gena_lm_tokenizer(texts: list[str], path, vocab_size: int = 120):
    """BPE on DNA with GENA-LM's layout: specials first, runs of 10+ N -> '-' (a piece of
    its own), saved as tokenizer.json."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers
    from tokenizers.processors import TemplateProcessing

    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Replace(Regex("N{10,}"), "-")
    tokenizer.pre_tokenizer = pre_tokenizers.Split("-", behavior="isolated")
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=GENA_SPECIAL, initial_alphabet=list("ACGTN-")
    )
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 1), ("[SEP]", 2)],
    )
    tokenizer.save(str(path))
    return tokenizer


def hf_config(vocab_size: int, **changes):
    values = dict(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=1024,
        block_size=16,
        num_random_blocks=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=3,
    )
    return transformers.BigBirdConfig(**{**values, **changes})  # sep_token_id stays 66


@pytest.fixture(scope="module")
def gena_like(pretraining_data, tmp_path_factory):
    """A transformers BigBirdForPreTraining directory with a GENA-LM-shaped tokenizer."""
    folder = tmp_path_factory.mktemp("hf") / "gena-like"
    folder.mkdir()
    tokenizer = gena_lm_tokenizer(sentences(pretraining_data)[:3000], folder / "tokenizer.json")
    torch.manual_seed(3)
    model = transformers.BigBirdForPreTraining(hf_config(tokenizer.get_vocab_size()))
    model.save_pretrained(folder)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(folder / "tokenizer.json"),
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        mask_token="[MASK]",
    )
    fast.save_pretrained(folder)
    return folder, model


def same_outputs(ours, theirs, length: int, batch: int = 2) -> None:
    """Hidden states and MLM logits at real positions agree to 1e-5 (both in training
    mode, dropout 0: transformers' eval mode drops its random blocks)."""
    generator = torch.Generator().manual_seed(length)
    ids = torch.randint(5, ours.config.vocab_size, (batch, length), generator=generator)
    mask = torch.ones_like(ids)
    mask[-1, length - 30 :] = 0
    segments = torch.zeros_like(ids)
    theirs.train()
    ours.train()
    with torch.no_grad():
        expected = theirs(
            input_ids=ids, token_type_ids=segments, attention_mask=mask, output_hidden_states=True
        )
        hidden = ours.encoder(ids, segments, mask.bool()).sequence
        logits = ours(ids, segments, mask.bool(), torch.arange(length).expand_as(ids)).mlm_logits
    real = mask.bool()
    assert (hidden - expected.hidden_states[-1])[real].abs().max() <= 1e-5
    logits = logits.view(batch, length, -1)
    assert (logits - expected.prediction_logits)[real].abs().max() <= 1e-5


def test_a_gena_lm_shaped_checkpoint_converts_and_computes_the_same(gena_like, tmp_path, capsys):
    hf_dir, theirs = gena_like
    out = tmp_path / "genobird"
    assert main(["convert", "from-hf", str(hf_dir), "--out", str(out)]) == 0
    assert "attention hf" in capsys.readouterr().out
    ours = from_pretrained(out)
    assert ours.config.attention_type == "hf" and ours.config.pad_token_id == 3
    for length in (1024, 700):
        same_outputs(ours, theirs, length)


def test_the_imported_tokenizer_encodes_as_transformers_does(gena_like, tmp_path):
    hf_dir, _ = gena_like
    out = tmp_path / "genobird"
    main(["convert", "from-hf", str(hf_dir), "--out", str(out)])
    ours = load_tokenizer(out)
    theirs = transformers.AutoTokenizer.from_pretrained(hf_dir)
    assert (ours.unk_id, ours.cls_id, ours.sep_id, ours.pad_id, ours.mask_id) == (0, 1, 2, 3, 4)
    texts = [dna(300, seed) for seed in range(20)]
    texts += [dna(50, 1) + "N" * 12 + dna(40, 2), "N" * 9 + dna(30, 3), dna(200, 4, "ACGTN")]
    expected = theirs(texts, add_special_tokens=False)["input_ids"]
    assert ours.encode_batch(texts) == expected
    dash = theirs.convert_tokens_to_ids("-")
    assert dash in expected[20]  # the N run became GENA-LM's '-' piece
    # genobird upper-cases first: soft-masked DNA is not [UNK] (transformers' would be)
    assert ours.encode("acgt" * 20) == ours.encode("ACGT" * 20)
    assert 0 in theirs("acgt" * 20, add_special_tokens=False)["input_ids"]


def test_continued_pretraining_starts_from_the_converted_model(
    gena_like, pretraining_data, tmp_path
):
    """Instances built with the imported tokenizer (its special ids: [PAD] 3, [MASK] 4)
    and `pretrain --init` on the converted directory."""
    hf_dir, _ = gena_like
    model_dir = tmp_path / "converted"
    main(["convert", "from-hf", str(hf_dir), "--out", str(model_dir)])
    tokenizer_path = model_dir / "tokenizer.json"
    instances = InstanceSpec(max_seq_length=256, documents_per_chunk=50, seed=1)
    write_instances(
        pretraining_data["folder"] / "eval.txt",
        tokenizer_path,
        tmp_path / "inst",
        instances,
        progress=False,
    )
    config = tmp_path / "continue.yaml"
    config.write_text(
        "training:\n  max_steps: 3\n  batch_size: 2\n  effective_batch_size: 2\n"
        "  warmup_steps: 1\n  log_every: 1\n  checkpoint_every: 100\n"
    )
    code = main(
        [
            "-q",
            "pretrain",
            "--config",
            str(config),
            "--out",
            str(tmp_path / "run"),
            "--model",
            str(model_dir),
            "--train",
            str(tmp_path / "inst"),
            "--eval",
            str(tmp_path / "inst"),
        ]
    )
    assert code == 0
    before, after = from_pretrained(model_dir), from_pretrained(tmp_path / "run" / "model")
    assert after.config == before.config
    moved = (
        after.encoder.layers[0].attention.qkv.weight - before.encoder.layers[0].attention.qkv.weight
    )
    assert moved.abs().max() > 0
    assert load_tokenizer(tmp_path / "run" / "model").pad_id == 3
    from genobird.corpus import PretrainingDataset, shard_paths

    item = PretrainingDataset(shard_paths(tmp_path / "inst"))[0]
    assert item["input_ids"][0] == 1 and (item["input_ids"][~item["attention_mask"]] == 3).all()
    assert (item["input_ids"] == 4).any()  # [MASK] is GENA-LM's id


def test_masked_lm_from_pytorch_bin_gets_a_fresh_nsp_head(gena_like, tmp_path, capsys):
    hf_dir, pretraining = gena_like
    folder = tmp_path / "mlm"
    torch.manual_seed(0)
    model = transformers.BigBirdForMaskedLM(pretraining.config)
    model.config.save_pretrained(folder)  # weights as older checkpoints ship them: a pickle
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((hf_dir / name).read_bytes())
    out = tmp_path / "converted"
    assert main(["convert", "from-hf", str(folder), "--out", str(out)]) == 0
    assert "fresh heads (not in the file): nsp" in capsys.readouterr().out
    ours = from_pretrained(out)
    torch.testing.assert_close(ours.mlm.bias, model.cls.predictions.bias, rtol=0, atol=0)


def test_a_sequence_classifier_converts_to_a_predictor(gena_like, tmp_path):
    hf_dir, pretraining = gena_like
    folder = tmp_path / "classifier"
    config = hf_config(
        pretraining.config.vocab_size,
        num_labels=2,
        id2label={0: "background", 1: "promoter"},
        label2id={"background": 0, "promoter": 1},
        architectures=["BigBirdForSequenceClassification"],
    )
    torch.manual_seed(1)
    theirs = transformers.BigBirdForSequenceClassification(config)
    theirs.save_pretrained(folder)
    (folder / "tokenizer.json").write_bytes((hf_dir / "tokenizer.json").read_bytes())
    out = tmp_path / "converted"
    assert main(["convert", "from-hf", str(folder), "--out", str(out)]) == 1  # --window-bp missing
    assert not out.exists()
    assert main(["convert", "from-hf", str(folder), "--out", str(out), "--window-bp", "300"]) == 0
    ours = from_pretrained(out).train()
    ids = torch.randint(5, config.vocab_size, (2, 800), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = theirs.train()(input_ids=ids).logits
        logits = ours(ids).logits
    assert (logits - expected).abs().max() <= 1e-5
    predictor = load_predictor(out, device="cpu")
    assert predictor.feature_names == ["background", "promoter"]
    scores = predictor.predict([dna(300, 5), dna(250, 6)])
    np.testing.assert_allclose(scores.sum(axis=1), 1.0, rtol=1e-6)  # softmax classes
    fasta = tmp_path / "s.fa"
    fasta.write_text(f">a\n{dna(300, 5)}\n>b\n{dna(250, 6)}\n")
    table = tmp_path / "s.tsv"
    assert (
        main(["-q", "score", "--model", str(out), "--fasta", str(fasta), "--out", str(table)]) == 0
    )
    scored = pd.read_csv(table, sep="\t")
    np.testing.assert_allclose(scored[["background", "promoter"]], scores, rtol=1e-5)
    assert scored.columns.tolist()[-2:] == ["background", "promoter"]


def test_genobird_models_export_to_transformers(pretraining_data, tmp_path):
    """A genobird pretraining model with its sentencepiece vocabulary -> BigBirdForMaskedLM
    with no missing or unexpected tensor, the same logits, and AutoTokenizer giving
    genobird's ids (its special tokens included)."""
    from genobird.model import BigBirdConfig, BigBirdForPretraining, save_pretrained

    tokenizer = load_tokenizer(pretraining_data["tokenizer"])
    config = BigBirdConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        max_position=1024,
        block_size=16,
        num_random_blocks=2,
        attention_type="hf",
        hidden_dropout=0.0,
        attention_dropout=0.0,
        composed_token_embeddings=True,
    )
    torch.manual_seed(4)
    model = BigBirdForPretraining(config)
    model.encoder.embeddings.set_vocabulary(tokenizer.pieces)
    save_pretrained(model, tmp_path / "model")
    tokenizer.save(tmp_path / "model")
    out = tmp_path / "hf"
    assert main(["convert", "to-hf", "--model", str(tmp_path / "model"), "--out", str(out)]) == 0
    theirs, info = transformers.BigBirdForMaskedLM.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    same_outputs(model, PretrainingLogits(theirs), 1024)
    auto = transformers.AutoTokenizer.from_pretrained(out)
    texts = [*sentences(pretraining_data)[:200], dna(100, 9, "ACGTN")]
    assert auto(texts, add_special_tokens=False)["input_ids"] == tokenizer.encode_batch(texts)
    pair = auto("ACGT", "TTGA")["input_ids"]
    assert pair[0] == tokenizer.cls_id and pair.count(tokenizer.sep_id) == 2
    assert auto.pad_token_id == tokenizer.pad_id and auto.mask_token_id == tokenizer.mask_id


class PretrainingLogits(torch.nn.Module):
    """A BigBirdForMaskedLM answering like BigBirdForPreTraining (prediction_logits)."""

    def __init__(self, masked_lm):
        super().__init__()
        self.masked_lm = masked_lm

    def forward(self, **inputs):
        out = self.masked_lm(**inputs)
        out.prediction_logits = out.logits
        return out


def test_hf_to_genobird_to_hf_gives_the_same_files(gena_like, tmp_path):
    hf_dir, theirs = gena_like
    main(["convert", "from-hf", str(hf_dir), "--out", str(tmp_path / "genobird")])
    main(
        ["convert", "to-hf", "--model", str(tmp_path / "genobird"), "--out", str(tmp_path / "back")]
    )
    load = transformers.BigBirdForMaskedLM.from_pretrained
    back, info = load(tmp_path / "back", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    original = theirs.state_dict()
    for name, tensor in back.state_dict().items():
        assert torch.equal(tensor, original[name]), name
    config = json.loads((tmp_path / "back" / "config.json").read_text())
    source = json.loads((hf_dir / "config.json").read_text())
    for key in ("attention_type", "block_size", "num_random_blocks", "hidden_act", "vocab_size"):
        assert config[key] == source[key], key
    assert (tmp_path / "back" / "tokenizer.json").read_bytes() == (
        hf_dir / "tokenizer.json"
    ).read_bytes()


def test_conversion_errors_are_one_line_and_write_nothing(gena_like, tmp_path, capsys):
    hf_dir, _ = gena_like
    bad = tmp_path / "bert"
    bad.mkdir()
    source = json.loads((hf_dir / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps({**source, "model_type": "bert"}))
    out = tmp_path / "out"
    assert main(["convert", "from-hf", str(bad), "--out", str(out)]) == 1
    message = capsys.readouterr().err
    assert "model_type = 'bert' is not supported" in message and message.count("\n") == 1
    assert not out.exists()
    (out / "x").parent.mkdir()
    (out / "x").write_text("keep")
    assert main(["convert", "from-hf", str(hf_dir), "--out", str(out)]) == 1
    assert "is not empty" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["x"]
    assert (
        main(["convert", "from-hf", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o2")]) == 1
    )
    assert "no config.json" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_classifier_fine_tuned_from_the_import_goes_back_to_transformers(
    gena_like, tmp_path, capsys
):
    """finetune classify --pretrained (converted) --pooling hf, then to-hf: transformers'
    BigBirdForSequenceClassification loads it whole and computes the same logits."""
    from genobird.datasets.windows import WindowSet

    hf_dir, _ = gena_like
    model_dir = tmp_path / "converted"
    main(["convert", "from-hf", str(hf_dir), "--out", str(model_dir)])
    windows = WindowSet("classify", ["bound"], ["label"])
    for index in range(40):
        windows.add(
            dna(200, index),
            [index % 2],
            f"s{index}",
            0,
            200,
            "+",
            ("train", "train", "train", "valid", "test")[index % 5],
        )
    data = windows.write(tmp_path / "x.h5")
    for pooling in ("hf", "mean"):
        assert (
            main(
                [
                    "-q",
                    "finetune",
                    "classify",
                    "--data",
                    str(data),
                    "--model",
                    str(model_dir),
                    "--out",
                    str(tmp_path / pooling),
                    "--max-steps",
                    "3",
                    "--pooling",
                    pooling,
                    "--dropout",
                    "0",
                    "--base-cnn-channels",
                    "0",
                    "--base-kmers",
                    "0",
                ]
            )
            == 0
        )
    out = tmp_path / "hf-classifier"
    assert (
        main(["convert", "to-hf", "--model", str(tmp_path / "hf" / "model"), "--out", str(out)])
        == 0
    )
    # the model card goes with it, told how transformers loads it
    card = (out / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: transformers\n")
    assert "BigBirdForSequenceClassification.from_pretrained" in card and "## Trained on" in card
    load = transformers.BigBirdForSequenceClassification.from_pretrained
    theirs, info = load(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert theirs.config.id2label == {0: "bound"} and theirs.config.problem_type == (
        "multi_label_classification"
    )
    # in training mode: the converted model brings no dropout of its own, and none is given
    ours = from_pretrained(tmp_path / "hf" / "model").train()
    ids = torch.randint(5, ours.config.vocab_size, (2, 300), generator=torch.Generator())
    with torch.no_grad():
        assert (ours(ids).logits - theirs.train()(input_ids=ids).logits).abs().max() <= 1e-5
    capsys.readouterr()
    assert (
        main(
            [
                "convert",
                "to-hf",
                "--model",
                str(tmp_path / "mean" / "model"),
                "--out",
                str(tmp_path / "m"),
            ]
        )
        == 1
    )
    assert "pooling 'mean' has no HuggingFace counterpart" in capsys.readouterr().err


@pytest.mark.shared_data
@pytest.mark.slow
def test_exported_vocabulary_encodes_real_human_dna_as_genobird(shared_data, tmp_path):
    """A 2,000-piece vocabulary trained on GRCh37 22:20-21 Mb, exported as tokenizer.json:
    transformers' ids equal genobird's on 1 kb windows of another chromosome (hg19 chr20,
    repeats and N runs included)."""
    from genobird.corpus import DocumentSpec, VocabSpec, train_vocabulary, write_documents
    from genobird.genome import Reference
    from genobird.genome.alphabet import normalise_dna

    genome = shared_data / "genome"
    documents = tmp_path / "docs.txt"
    write_documents(
        genome / "grch37_22_20-21Mb.fa",
        documents,
        DocumentSpec(passes=1, seed=0),
        ["22:20000001-21000000"],
        progress=False,
    )
    tokenizer = train_vocabulary(documents, tmp_path / "tokenizer.model", VocabSpec(2000))
    model = tmp_path / "model"
    tokenizer.save(model)
    from genobird.corpus.hf_export import write_hf_tokenizer

    write_hf_tokenizer(tokenizer, model, 4096)
    reference = Reference(genome / "hg19_chr20_0-2Mb.fa")
    contig = next(iter(reference.lengths))
    windows = [
        normalise_dna(reference.fetch(contig, start, start + 1000))
        for start in range(0, 2_000_000, 2_000)
    ]
    auto = transformers.AutoTokenizer.from_pretrained(model)
    assert auto(windows, add_special_tokens=False)["input_ids"] == tokenizer.encode_batch(windows)


def test_bpe_dropout_needs_a_sentencepiece_tokenizer(pretraining_data, tmp_path):
    gena_lm_tokenizer(sentences(pretraining_data)[:300], tmp_path / "tokenizer.json")
    with pytest.raises(ConfigError, match="BPE dropout needs a sentencepiece tokenizer"):
        load_tokenizer(tmp_path / "tokenizer.json").encode_sampled("ACGT", 0.1, seed=0)


def test_a_classifier_with_base_readers_is_refused_export_naming_the_options():
    from genobird.convert import _hf_config
    from genobird.model import BigBirdConfig, BigBirdForSequenceClassification

    config = BigBirdConfig(
        vocab_size=20,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
        max_position=128,
        base_conv_channels=4,
    )
    for reader in ({"base_cnn_channels": 4}, {"base_kmers": 3}):
        model = BigBirdForSequenceClassification(config, 2, pooling="mean", **reader)
        with pytest.raises(ConfigError, match="--base-cnn-channels 0 --base-kmers 0"):
            _hf_config(model, {}, None)


def test_a_converted_checkpoint_embeds_as_transformers_computes(gena_like, tmp_path):
    """`genobird embed` of a GENA-LM-shaped model converted from transformers: each
    layer's vectors of a sequence's pieces are transformers' hidden states."""
    from genobird.corpus.tokenizer import load_tokenizer
    from genobird.scoring.embed import Embedder

    hf_dir, theirs = gena_like
    out = tmp_path / "genobird"
    assert main(["-q", "convert", "from-hf", str(hf_dir), "--out", str(out)]) == 0
    sequence = dna(300, 11)
    tokenizer = load_tokenizer(out)
    ids = [tokenizer.cls_id, *tokenizer.encode(sequence), tokenizer.sep_id]
    theirs.eval()
    with torch.no_grad():
        expected = theirs(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
    for layer in (0, 1, -1):
        tokens = Embedder(out, device="cpu", layer=layer).embed([sequence], level="token")[0]
        np.testing.assert_allclose(tokens.vectors, expected[layer][0, 1:-1].numpy(), atol=1e-5)
