"""A training run's attention kernel checked against the reference on its own first batch.

The PyTorch block-sparse kernel (`attention.kernel`) is held to the dense oracle by the
tests; FlexAttention, which trains on CUDA, is a second implementation of the same
layout, compiled per shape. A 4,096-token pretraining through Flex once learnt nothing
while the same shape at 512 tokens, through dense SDPA, learnt: so before the first step
of a run whose kernel is not the reference, `KernelCheck` takes the first attention
layer's input on the run's real batch (a forward pre-hook, under the run's own autocast),
computes its attention and the gradients of q, k and v through the run's kernel and
through the reference, and compares them, relative to the reference's largest value,
against the precision's tolerance (`TOLERANCE`: float rounding of two orders of
summation). A kernel given by name (`attention_impl flex`) that differs stops the run,
naming both kernels; `auto` then trains with the reference instead, and says so.
"""

from __future__ import annotations

import logging

import torch

from genobird.attention import attention
from genobird.attention.dispatch import resolve_impl
from genobird.errors import GenobirdError

log = logging.getLogger(__name__)

REFERENCE = "block_sparse"
# the largest difference allowed, relative to the reference's largest value, by the
# dtype the kernels compute in (the CUDA test holds Flex's bf16 gradients to 0.05 of the
# fp64 oracle's largest)
TOLERANCE = {torch.float32: 1e-3, torch.float64: 1e-9, torch.bfloat16: 0.05, torch.float16: 0.02}


class KernelMismatch(GenobirdError, RuntimeError):
    """The run's attention kernel does not compute the reference's attention."""


def attention_layers(model) -> list:
    """The model's BigBird self-attention modules, in order."""
    from genobird.model.bigbird import SelfAttention

    return [module for module in model.modules() if isinstance(module, SelfAttention)]


def compare_kernels(
    layer, x: torch.Tensor, key_padding_mask, kernel: str, seed: int = 0
) -> dict | None:
    """The largest differences, relative to the reference's largest values, between
    `kernel` and the reference on one layer's input x [B, N, C]: of the outputs and of
    the gradients of q, k and v under one seeded upstream gradient. None where the layout
    is dense at this length (both kernels defer to SDPA)."""
    layout = layer.layout_for(x.shape[1], x.device)
    if layout is None or layout.is_dense:
        return None
    # FlexAttention has no backward on the CPU: there, the outputs alone are compared
    gradients = has_backward(kernel, x.device)
    with torch.enable_grad():
        q, k, v = (t.detach() for t in layer.project(x.detach()))
        generator = torch.Generator(device=q.device).manual_seed(seed)
        upstream = torch.randn(q.shape, generator=generator, device=q.device, dtype=q.dtype)
        found = {}
        for impl in (kernel, REFERENCE):
            inputs = [t.clone().requires_grad_(gradients) for t in (q, k, v)]
            out = attention(*inputs, layout, key_padding_mask, impl=impl, dropout_p=0.0)
            found[impl] = [out.detach().float()]
            if gradients:
                out.backward(upstream)
                found[impl] += [t.grad.float() for t in inputs]
    names = ("output", "grad_q", "grad_k", "grad_v")
    errors = {}
    for name, got, expected in zip(names, found[kernel], found[REFERENCE], strict=False):
        scale = expected.abs().max().clamp(min=1e-12)
        errors[name] = float((got - expected).abs().max() / scale)
    result = {"dtype": str(q.dtype).removeprefix("torch."), "relative_errors": errors}
    if not gradients:
        result["gradients"] = f"not compared: {kernel} has no backward on the {x.device.type}"
    return result


def has_backward(kernel: str, device: torch.device) -> bool:
    """Whether `kernel` computes gradients on `device` (FlexAttention: CUDA only)."""
    return kernel != "flex" or device.type == "cuda"


class KernelCheck:
    """Installed on a model about to train: its first attention layer's first training
    forward compares the run's kernel with the reference (`compare_kernels`), once.
    `result` then says what was checked and what was found; a mismatch raises
    KernelMismatch for a kernel given by name, and makes an `auto` run train with the
    reference."""

    def __init__(self, model, device):
        layers = attention_layers(model)
        self.result = None
        self.handle = None
        if not layers:
            return
        self.config = layers[0].config
        self.asked = self.config.attention_impl
        dropout = self.config.attention_dropout
        self.kernel = resolve_impl(
            self.asked, torch.device(device), dropout, self.config.block_size
        )
        if self.kernel == REFERENCE or self.kernel == "dense":
            self.result = {
                "kernel": self.kernel,
                "checked": False,
                "why": "the reference kernel: nothing to check it against",
            }
            return
        self.handle = layers[0].register_forward_pre_hook(self._check)

    def _check(self, layer, args) -> None:
        if not layer.training:  # an evaluation before the first step: not the training path
            return
        self.handle.remove()
        x, key_padding_mask = args
        found = compare_kernels(layer, x, key_padding_mask, self.kernel)
        if found is None:
            self.result = {
                "kernel": self.kernel,
                "checked": False,
                "why": "a dense layout at this length: no kernel runs",
            }
            return
        tolerance = TOLERANCE.get(getattr(torch, found["dtype"]), 0.05)
        worst = max(found["relative_errors"], key=found["relative_errors"].get)
        passed = found["relative_errors"][worst] <= tolerance
        self.result = {
            "kernel": self.kernel,
            "reference": REFERENCE,
            "checked": True,
            "passed": passed,
            "tolerance": tolerance,
            **found,
        }
        if passed:
            log.info(
                "attention kernel %s agrees with %s on the first batch (largest relative "
                "difference %.2g, %s)",
                self.kernel,
                REFERENCE,
                found["relative_errors"][worst],
                worst,
            )
            return
        message = (
            f"the attention kernel {self.kernel} differs from the reference {REFERENCE} "
            f"on this run's first batch: {worst} {found['relative_errors'][worst]:.3g} "
            f"of the reference's largest value, beyond the {found['dtype']} tolerance "
            f"{tolerance:g}"
        )
        if self.asked != "auto":
            raise KernelMismatch(f"{message}; train with attention_impl {REFERENCE}")
        log.warning("%s: training with %s instead", message, REFERENCE)
        self.config.attention_impl = REFERENCE
        self.result["trained_with"] = REFERENCE
