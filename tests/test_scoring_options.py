"""One ScoringOptions for every scorer: each role's defaults declared once (and the
command line's taken from them), options given as an object or as keywords alike, a
misspelt option refused, and one protocol that `score` and `likelihood` write through."""

from __future__ import annotations

import pytest

from genobird.cli import build_parser
from genobird.errors import ConfigError
from genobird.scoring.options import BATCH_SIZES, STRANDS, ScoringOptions
from genobird.scoring.tables import RecordScorer
from tests.conftest import saved_model_dir, tiny_language_model


def parsed(*argv: str):
    return build_parser().parse_args(list(argv))


def test_each_commands_defaults_are_its_roles():
    """The command line's batch sizes and strands are the roles' (BATCH_SIZES, STRANDS),
    and the options a command was given become the scorer's."""
    common = ("--model", "m", "--out", "o.tsv")
    for argv, role in (
        (("score", "--fasta", "x.fa", *common), "predict"),
        (("embed", "--fasta", "x.fa", *common), "embed"),
        (("likelihood", "--fasta", "x.fa", *common), "likelihood"),
    ):
        args = parsed(*argv)
        options = ScoringOptions.from_args(args)
        assert args.batch_size == BATCH_SIZES[role] == options.batch_for(role), role
    assert parsed("likelihood", "--fasta", "x.fa", *common).rc_average is STRANDS["likelihood"]
    assert parsed("embed", "--fasta", "x.fa", *common).rc_average is STRANDS["embed"]
    given = ScoringOptions.from_args(
        parsed(
            "score",
            "--fasta",
            "x.fa",
            *common,
            "--workers",
            "3",
            "--batch-size",
            "5",
            "--no-rc-average",
            "--device",
            "cpu",
            "--precision",
            "no",
        )
    )
    assert given == ScoringOptions(
        device="cpu", precision="no", batch_size=5, num_workers=3, rc_average=False
    )


def test_options_are_checked_and_a_misspelt_one_is_named():
    assert ScoringOptions().batch_for("likelihood") == BATCH_SIZES["likelihood"]
    assert ScoringOptions(rc_average=False).strands_for("likelihood") is False
    assert ScoringOptions().strands_for("predict", recorded=True) is True
    assert ScoringOptions().strands_for("embed") is False
    assert ScoringOptions.of(ScoringOptions(device="cpu"), batch_size=4) == ScoringOptions(
        device="cpu", batch_size=4
    )
    with pytest.raises(TypeError, match="unexpected scoring option 'batchsize'"):
        ScoringOptions.of(batchsize=4)
    for bad in ({"batch_size": 0}, {"num_workers": -1}, {"batch_size": 2.5}):
        with pytest.raises(ConfigError, match="must be a whole number"):
            ScoringOptions(**bad)


def test_a_predictor_takes_an_options_object_or_keywords_alike(model_dir, predictor):
    from genobird import load_predictor

    assert isinstance(predictor, RecordScorer)
    assert predictor.batch_size == BATCH_SIZES["predict"]
    keywords = load_predictor(model_dir, device="cpu", batch_size=3, rc_average=False)
    options = load_predictor(
        model_dir, ScoringOptions(device="cpu", batch_size=3, rc_average=False)
    )
    for scorer in (keywords, options):
        assert (scorer.batch_size, scorer.rc_average, str(scorer.device)) == (3, False, "cpu")
    sequence = "ACGT" * 100
    assert (keywords.predict([sequence]) == options.predict([sequence])).all()
    with pytest.raises(TypeError, match="unexpected scoring option 'workers'"):
        load_predictor(model_dir, device="cpu", workers=2)


def test_the_language_model_and_the_embedder_take_the_same_options(pretraining_data, tmp_path):
    from genobird.corpus.tokenizer import load_tokenizer
    from genobird.scoring.embed import Embedder
    from genobird.scoring.likelihood import LikelihoodScorer
    from genobird.scoring.variant_effects import VariantEffectScorer

    tokenizer = load_tokenizer(pretraining_data["tokenizer"])
    model_dir = saved_model_dir(tiny_language_model(tokenizer, 128), tokenizer, tmp_path / "lm")
    scorer = LikelihoodScorer(model_dir, device="cpu")
    assert isinstance(scorer, RecordScorer)
    assert (scorer.batch_size, scorer.both_strands) == (BATCH_SIZES["likelihood"], True)
    one = LikelihoodScorer(model_dir, ScoringOptions(device="cpu", rc_average=False, batch_size=2))
    assert (one.batch_size, one.both_strands) == (2, False)
    embedder = Embedder(model_dir, ScoringOptions(device="cpu", batch_size=5), layer=-1)
    assert (embedder.batch_size, embedder.rc_average) == (5, STRANDS["embed"])
    effects = VariantEffectScorer(model_dir, device="cpu", rc_average=False)
    assert effects.both_strands is False and effects.language_model.both_strands is False
    assert effects.language_model.batch_size == BATCH_SIZES["variant_effects"]
