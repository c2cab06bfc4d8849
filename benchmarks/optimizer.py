"""The optimiser step on the CPU: PyTorch's default AdamW (one parameter at a time on CPU
tensors), its foreach form and the fused kernel the trainer uses, on a model's
parameters, in one process.

    python benchmarks/optimizer.py                    # the demo's 2 x 128 model
    python benchmarks/optimizer.py --hidden 256 --layers 4 --vocab 16000

Prints milliseconds per step, each form's ratio to the default, and how far the fused
form's weights are from the default's after the same steps with the same gradients.
"""

from __future__ import annotations

import argparse
import time

import torch

from genobird.model import BigBirdConfig, BigBirdForPretraining

FORMS = {
    "default (one tensor at a time)": {"foreach": False},
    "foreach": {"foreach": True},
    "fused (the trainer's)": {"fused": True},
}


def model_parameters(args) -> list[torch.Tensor]:
    torch.manual_seed(0)
    config = BigBirdConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        num_layers=args.layers,
        num_heads=max(1, args.hidden // 32),
        intermediate_size=4 * args.hidden,
        max_position=1024,
    )
    return [p.detach().clone() for p in BigBirdForPretraining(config).parameters()]


def run(form: dict, start: list[torch.Tensor], gradients: list[list[torch.Tensor]]):
    """(seconds per step, the weights after every step)."""
    weights = [torch.nn.Parameter(p.clone()) for p in start]
    optimizer = torch.optim.AdamW(weights, lr=1e-3, weight_decay=0.01, **form)
    times = []
    for step in gradients:
        for weight, gradient in zip(weights, step, strict=True):
            weight.grad = gradient
        started = time.perf_counter()
        optimizer.step()
        times.append(time.perf_counter() - started)
    return sorted(times)[len(times) // 2], weights


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=4000)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args(argv)
    start = model_parameters(args)
    generator = torch.Generator().manual_seed(1)
    gradients = [
        [torch.randn(p.shape, generator=generator) for p in start] for _ in range(args.steps)
    ]
    count = sum(p.numel() for p in start)
    print(f"{count:,} parameters, {torch.get_num_threads()} threads, median of {args.steps} steps")
    results = {name: run(form, start, gradients) for name, form in FORMS.items()}
    default_seconds, default_weights = next(iter(results.values()))
    for name, (seconds, weights) in results.items():
        apart = max(
            float((a - b).detach().abs().max())
            for a, b in zip(weights, default_weights, strict=True)
        )
        print(
            f"  {name:32s} {seconds * 1e3:8.2f} ms/step  {default_seconds / seconds:5.1f}x  "
            f"max |weight - default's| {apart:.1e}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
