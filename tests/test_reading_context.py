"""A language model pretrained through `genobird pretrain` reads its context: on instances
whose pieces repeat with a period, a masked piece is given away only by its copy one
period before or after, and a tiny model must learn to read it there."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from genobird.cli import main


def periodic_instances(folder, tokenizer, count: int, length: int, period: int, seed: int):
    """`count` instances of `length` tokens, each a random stretch of `period` regular
    pieces repeated, masked as pretraining masks (15%, 80/10/10), as one shard."""
    from genobird.corpus.instances import Instance, InstanceSpec, mask_tokens, write_shard

    spec = InstanceSpec(max_seq_length=length, seed=seed)
    rng = np.random.default_rng(seed)
    special, regular = tokenizer.special, tokenizer.special.regular(tokenizer.vocab_size)
    instances = []
    for number in range(count):
        stretch = rng.choice(regular, period)
        tokens = np.array([special.cls, *np.resize(stretch, length - 2), special.sep])
        instance = Instance(tokens, np.zeros(length, np.uint8), True, number, number)
        instance.tokens, instance.masked_positions, instance.masked_labels = mask_tokens(
            tokens, rng, tokenizer.vocab_size, spec, special
        )
        instances.append(instance)
    folder.mkdir(parents=True)
    write_shard(
        folder / "shard-00000.h5",
        instances,
        spec,
        tokenizer.vocab_size,
        special,
        tokenizer.vocabulary_digest,
    )
    (folder / "manifest.json").write_text(json.dumps({"shards": [{"file": "shard-00000.h5"}]}))
    return folder


@pytest.fixture(scope="module")
def random_dna_tokenizer(tmp_path_factory):
    """64 pieces of uniformly random DNA: every regular piece is equally likely."""
    from genobird.corpus import DocumentSpec, VocabSpec, train_vocabulary, write_documents

    folder = tmp_path_factory.mktemp("random-dna")
    rng = np.random.default_rng(0)
    with open(folder / "genome.fa", "w") as handle:
        for chrom in ("chr1", "chr2"):
            handle.write(f">{chrom}\n{''.join(rng.choice(list('ACGT'), 200_000))}\n")
    write_documents(
        folder / "genome.fa", folder / "documents.txt", DocumentSpec(passes=1), progress=False
    )
    return train_vocabulary(folder / "documents.txt", folder / "tokenizer.model", VocabSpec(64))


@pytest.mark.slow
def test_pretraining_reads_a_copy_one_period_away_through_the_sparse_pattern(
    random_dna_tokenizer, tmp_path
):
    """1,024 tokens in 32 blocks of 32 (2 global, 3 window and 3 random key blocks a
    query block: block-sparse, through the kernel `auto` picks), a period of 40 pieces:
    the copy lies in the next or the previous block. Measured here in 500 steps: held-out
    MLM loss 0.41 nats (accuracy 0.96) against ln 59 = 4.08 for a model that ignores its
    input. With the demo's learned position table (sinusoidal start) instead of rotary
    positions, the same run stays at the unigram level and the collapse watch says so: a
    learned table is why the demo's model reads no context in its 600 steps."""
    tokenizer = random_dna_tokenizer
    train = periodic_instances(tmp_path / "train", tokenizer, 400, 1024, period=40, seed=1)
    held_out = periodic_instances(tmp_path / "eval", tokenizer, 40, 1024, period=40, seed=2)
    config = tmp_path / "pretrain.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "model": {
                    "hidden_size": 64,
                    "num_layers": 2,
                    "num_heads": 4,
                    "intermediate_size": 256,
                    "max_position": 1024,
                    "block_size": 32,
                    "num_random_blocks": 3,
                    "hidden_dropout": 0.0,
                    "attention_dropout": 0.0,
                    "attention_impl": "auto",
                    "composed_token_embeddings": True,
                    "position_encoding": "rotary",
                },
                "training": {
                    "max_steps": 500,
                    "batch_size": 1,
                    "effective_batch_size": 1,
                    "learning_rate": 1e-3,
                    "warmup_steps": 20,
                    "log_every": 50,
                    "checkpoint_every": 10_000,
                    "progress": False,
                },
                "data": {
                    "train": str(train),
                    "eval": str(held_out),
                    "tokenizer": str(tokenizer.path),
                },
            }
        )
    )
    out = tmp_path / "run"
    assert main(["-q", "pretrain", "--config", str(config), "--out", str(out)]) == 0
    summary = json.loads((out / "model" / "training_summary.json").read_text())
    unigram = math.log(len(tokenizer.special.regular(tokenizer.vocab_size)))
    assert summary["attention_kernel_check"]["kernel"] == "block_sparse"
    assert not summary["mlm_collapse"]["collapsed"]
    # every held-out masked piece shown as [MASK]: only the copy tells it
    assert summary["eval"]["mlm_loss"] < unigram - 2.0, summary["eval"]
