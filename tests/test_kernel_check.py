"""Every training run whose attention kernel is not the reference checks it against the
reference on its own first batch: a kernel given by name that differs stops the run,
naming both kernels; `auto` then trains with the reference. FlexAttention runs eagerly
on the CPU, so the check runs here too; a wrong kernel is injected to see it caught."""

from __future__ import annotations

import json
import warnings

import pytest
import yaml

from genobird.cli import main


def pretrain_config(tmp_path, pretraining_data, impl: str):
    config = tmp_path / f"{impl}.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                # 16-token blocks: 256-token instances are 16 blocks, sparse under the pattern
                "model": {
                    "hidden_size": 32,
                    "num_layers": 2,
                    "num_heads": 2,
                    "intermediate_size": 64,
                    "max_position": 256,
                    "block_size": 16,
                    "attention_dropout": 0.0,
                    "attention_impl": impl,
                },
                "training": {
                    "max_steps": 2,
                    "batch_size": 2,
                    "effective_batch_size": 2,
                    "warmup_steps": 1,
                    "log_every": 1,
                    "checkpoint_every": 1000,
                    "progress": False,
                },
                "data": {
                    "train": str(pretraining_data["train"]),
                    "tokenizer": str(pretraining_data["tokenizer"]),
                },
            }
        )
    )
    return config


def kernel_rows(out):
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [row["attention_kernel_check"] for row in rows if "attention_kernel_check" in row]


@pytest.fixture
def wrong_flex(monkeypatch):
    """FlexAttention off by 5% of every output: a kernel fault the check must catch."""
    import genobird.attention.flex as flex

    right = flex.flex_block_sparse_attention
    monkeypatch.setattr(
        flex, "flex_block_sparse_attention", lambda *args, **kwargs: right(*args, **kwargs) * 1.05
    )


@pytest.fixture
def checked_as_on_a_gpu(monkeypatch):
    """The check sees `auto` resolve to FlexAttention, as on a GPU; training itself runs
    as on this CPU (FlexAttention has no backward here)."""
    import genobird.training.kernel_check as kernel_check

    resolve = kernel_check.resolve_impl

    def as_on_cuda(impl, device, dropout_p, block_size=64):
        return "flex" if impl == "auto" else resolve(impl, device, dropout_p, block_size)

    monkeypatch.setattr(kernel_check, "resolve_impl", as_on_cuda)


def run(tmp_path, pretraining_data, impl: str, argv=("-q",)) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager FlexAttention warns that it is unfused
        return main(
            [
                *argv,
                "pretrain",
                "--config",
                str(pretrain_config(tmp_path, pretraining_data, impl)),
                "--out",
                str(tmp_path / impl),
            ]
        )


def test_a_run_checks_flex_on_its_first_batch(pretraining_data, tmp_path, checked_as_on_a_gpu):
    assert run(tmp_path, pretraining_data, "auto") == 0
    (check,) = kernel_rows(tmp_path / "auto")
    assert check["kernel"] == "flex" and check["reference"] == "block_sparse"
    assert check["checked"] and check["passed"] and check["dtype"] == "float32"
    assert check["relative_errors"]["output"] < 1e-5
    assert check["gradients"] == "not compared: flex has no backward on the cpu"
    summary = json.loads((tmp_path / "auto" / "model" / "training_summary.json").read_text())
    assert summary["attention_kernel_check"] == check
    # the reference kernel itself has nothing to be checked against
    assert run(tmp_path, pretraining_data, "block_sparse") == 0
    assert kernel_rows(tmp_path / "block_sparse")[0]["checked"] is False


def test_a_wrong_kernel_given_by_name_stops_the_run_naming_both(
    pretraining_data, tmp_path, wrong_flex, capsys
):
    assert run(tmp_path, pretraining_data, "flex", argv=()) == 1
    err = capsys.readouterr().err  # the progress bar's line may come before it
    error = err[err.index("genobird: error: ") :].splitlines()[0]
    assert (
        "the attention kernel flex differs from the reference block_sparse on this run's "
        "first batch: output 0.0"
    ) in error
    assert "train with attention_impl block_sparse" in error
    assert not (tmp_path / "flex" / "model").exists()


def test_auto_trains_with_the_reference_where_flex_fails_its_check(
    pretraining_data, tmp_path, wrong_flex, checked_as_on_a_gpu, caplog
):
    with caplog.at_level("WARNING"):
        assert run(tmp_path, pretraining_data, "auto") == 0
    (check,) = kernel_rows(tmp_path / "auto")
    assert check["kernel"] == "flex" and not check["passed"]
    assert check["relative_errors"]["output"] == pytest.approx(0.05, rel=1e-3)
    assert check["trained_with"] == "block_sparse"
    assert "training with block_sparse instead" in caplog.text


def test_the_check_compares_gradients_where_the_kernel_has_them():
    """Two kernels that both have a backward on the CPU (the dense oracle against the
    reference): outputs and the gradients of q, k and v agree to float rounding."""
    import torch

    from genobird.model import BigBirdConfig
    from genobird.model.bigbird import SelfAttention
    from genobird.training.kernel_check import compare_kernels

    config = BigBirdConfig(
        vocab_size=10, hidden_size=32, num_heads=2, block_size=16, num_random_blocks=1
    )
    torch.manual_seed(0)
    layer = SelfAttention(config, 0)
    x = torch.randn(2, 256, 32)
    mask = torch.ones(2, 256, dtype=torch.bool)
    mask[1, 200:] = False
    found = compare_kernels(layer, x, mask, "dense")
    assert set(found["relative_errors"]) == {"output", "grad_q", "grad_k", "grad_v"}
    assert max(found["relative_errors"].values()) < 1e-5 and "gradients" not in found
    assert compare_kernels(layer, x[:, :32], mask[:, :32], "dense") is None  # dense: no kernel
