"""One trainer for pretraining and fine-tuning.

AdamW with weight decay (not on biases and LayerNorm), linear warm-up then linear decay,
gradient clipping, accumulation up to an effective batch size, bf16 autocast on CUDA,
checkpoints every N steps with exact resume, DistributedDataParallel under torchrun,
metrics as JSON lines and a progress bar.

Exact resume: the data order is a permutation drawn per epoch from (seed, epoch); a
checkpoint stores the position in it, the optimiser and scheduler, and the torch RNG
states (dropout). A run interrupted and resumed therefore takes the same steps as one
that never stopped; on CPU the final parameters are bitwise equal (tested). A checkpoint
also records the settings that decide the run's result (`run_settings`); one written
under other settings (a changed recipe rerun into the same folder) is refused, not
silently continued.

A step never waits for the device: its metrics stay tensors and whether its loss and
gradient were finite is recorded on the device, read (one synchronisation) only at
log, evaluation and checkpoint steps; a non-finite step stops training there, before
anything is saved.

A task supplies `step_fn(model, batch) -> (loss, {name: tensor or float})` and optionally
`eval_fn(model, loader) -> {name: float}`.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from genobird.device import default_device
from genobird.errors import CheckpointError, ConfigError
from genobird.model.precision import autocast, autocast_dtype
from genobird.training import distributed
from genobird.training.averaging import WeightAverage
from genobird.training.checkpoint import (
    latest_checkpoint,
    load_weights,
    read_training_state,
    save_checkpoint,
)
from genobird.training.config import (
    TrainingConfig,
    TrainingError,
    TrainState,
    changed_settings,
    run_settings,
    saved_run,
)
from genobird.training.kernel_check import KernelCheck
from genobird.training.schedule import EpochSampler, linear_schedule, parameter_groups

log = logging.getLogger(__name__)


class Trainer:
    # the clock of max_minutes and of the logged throughput (a test hands in its own)
    clock: Callable[[], float] = staticmethod(time.perf_counter)

    def __init__(
        self,
        model: nn.Module,
        train_dataset: Dataset,
        config: TrainingConfig,
        output_dir: str | Path,
        step_fn: Callable,
        eval_dataset: Dataset | None = None,
        eval_fn: Callable | None = None,
        device: str | torch.device | None = None,
        collate_fn: Callable | None = None,
        run_identity: dict | None = None,
        monitor: Callable[[dict], dict | None] | None = None,
    ):
        self.config = config
        # handed each logged row; a row it returns is logged after it (e.g. a warning
        # that the run learns nothing: training.collapse)
        self.monitor = monitor
        # what the first batch found of the run's attention kernel (training.kernel_check)
        self.kernel_check = None
        # what, besides the training settings, a checkpoint must share with its resumption
        # (the task's recipe, the starting weights): see run_settings
        self.run = run_settings(config, run_identity)
        self.collate_fn = collate_fn  # None: torch's default stacking
        self.output_dir = Path(output_dir)
        self.rank, self.world = distributed.rank(), distributed.world_size()
        if config.max_minutes and self.world > 1:
            # each process would stop on its own clock, at different steps, and the others
            # would wait for it forever
            raise ConfigError(
                "max_minutes stops one process on its own clock; a distributed "
                "run must stop by max_steps"
            )
        self.device = torch.device(device) if device else default_device()
        self.model = model.to(self.device)
        self.module = model  # unwrapped, for saving
        if self.world > 1:
            self.model = distributed.wrap(self.model, self.device)
        self.step_fn, self.eval_fn = step_fn, eval_fn
        self.train_dataset, self.eval_dataset = train_dataset, eval_dataset
        self.accumulation = config.accumulation_steps(self.world)
        self.sampler = EpochSampler(len(train_dataset), config.seed, self.rank, self.world)
        self.optimizer = torch.optim.AdamW(
            parameter_groups(
                self.module,
                config.weight_decay,
                config.learning_rate,
                config.learning_rate_scales,
            ),
            lr=config.learning_rate,
            # one fused kernel for the whole update instead of a loop of small ones; on the
            # CPU too, where PyTorch's default is one parameter at a time (benchmarks/
            # optimizer.py: the same weights to float rounding, several times faster)
            fused=self.device.type in ("cuda", "cpu"),
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, linear_schedule(config.warmup_steps, config.max_steps)
        )
        self.state = TrainState()
        self.average = WeightAverage(self.module, config.ema_decay) if config.ema_decay else None
        self.autocast_dtype = autocast_dtype(config.mixed_precision, self.device)
        self._first_bad: torch.Tensor | None = None  # see _record_finite
        self._bad_values: torch.Tensor | None = None

    # ------------------------------------------------------------------ set-up

    @property
    def checkpoint_root(self) -> Path:
        return self.output_dir / "checkpoints"

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def resume(self) -> bool:
        """Load the latest complete checkpoint of this run, if any."""
        folder = latest_checkpoint(self.checkpoint_root)
        if folder is None:
            return False
        saved = read_training_state(folder, map_location=self.device)
        self._check_same_run(folder, saved)  # before its weights replace the run's start
        load_weights(folder, self.module, map_location=self.device)
        self.optimizer.load_state_dict(saved["optimizer"])
        self.scheduler.load_state_dict(saved["scheduler"])
        # RNG states are CPU byte tensors, wherever map_location put the rest of the state
        torch.set_rng_state(saved["rng_cpu"].cpu())
        if self.device.type == "cuda" and "rng_cuda" in saved:
            torch.cuda.set_rng_state(saved["rng_cuda"].cpu(), self.device)
        self.state = TrainState(**saved["train_state"])
        if self.average is not None:
            if "weight_average" in saved:
                self.average.load_state_dict(saved["weight_average"])
            else:  # a checkpoint from before weight averaging existed: it starts here
                # (one written with averaging off is refused by _check_same_run)
                log.info(
                    "no weight average in %s: averaging starts at step %d", folder, self.state.step
                )
                self.average = WeightAverage(self.module, self.config.ema_decay)
        self._truncate_metrics()
        log.info("resumed from %s (step %d)", folder, self.state.step)
        return True

    def _check_same_run(self, folder: Path, saved: dict) -> None:
        changes = changed_settings(saved_run(saved), self.run)
        if changes:
            more = f" and {len(changes) - 3} more" if len(changes) > 3 else ""
            shown = ", ".join(changes[:3]) + more
            raise CheckpointError(
                f"{folder} was written by a run with other settings ({shown}); restore them "
                f"to resume it, or delete {self.checkpoint_root} to start afresh"
            )

    def _truncate_metrics(self) -> None:
        """Drop metric lines logged after the checkpoint: those steps will be redone."""
        path = self.output_dir / "metrics.jsonl"
        if self.is_main and path.is_file():
            kept = [
                line
                for line in path.read_text().splitlines()
                if json.loads(line)["step"] <= self.state.step
            ]
            path.write_text("".join(line + "\n" for line in kept))

    def checkpoint_state(self) -> dict:
        """What a checkpoint holds besides the weights: optimiser, scheduler, RNG states,
        the position in the data and the run's settings (`run_settings`)."""
        state = {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng_cpu": torch.get_rng_state(),
            "train_state": asdict(self.state),
            "config": asdict(self.config),
            "run": self.run,
        }
        if self.device.type == "cuda":
            state["rng_cuda"] = torch.cuda.get_rng_state(self.device)
        if self.average is not None:
            state["weight_average"] = self.average.state_dict()
        return state

    def save(self) -> Path | None:
        path = None
        if self.is_main:
            path = save_checkpoint(
                self.checkpoint_root,
                self.state.step,
                self.module,
                self.checkpoint_state(),
                self.config.keep_checkpoints,
            )
        distributed.barrier()
        return path

    # ------------------------------------------------------------------ data
    def _loader(self) -> DataLoader:
        self.sampler.set_position(
            self.state.epoch, self.state.batch_in_epoch * self.config.batch_size
        )
        if hasattr(self.train_dataset, "set_epoch"):
            self.train_dataset.set_epoch(self.state.epoch)
        # Its own generator: a DataLoader iterator otherwise draws a base seed from the
        # global RNG, which would shift the dropout stream of a resumed run.
        generator = torch.Generator().manual_seed(self.config.seed * 7919 + self.state.epoch)
        return DataLoader(
            self.train_dataset,
            batch_size=self.config.batch_size,
            sampler=self.sampler,
            num_workers=self.config.num_workers,
            drop_last=True,
            generator=generator,
            collate_fn=self.collate_fn,
            pin_memory=self.device.type == "cuda",  # non-blocking copies to the GPU
        )

    def micro_batches(self):
        """Endless (micro-batch on the device, its real tokens), tracking (epoch,
        batch_in_epoch) for resume: what `optimizer_step` draws from."""
        while True:
            produced = False
            for batch in self._loader():
                produced = True
                self.state.batch_in_epoch += 1
                # real tokens counted on the host copy: no device round trip per batch
                mask = batch.get("attention_mask")
                tokens = int(mask.sum()) if mask is not None else 0
                yield {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}, tokens
            if not produced and self.state.batch_in_epoch == 0:
                raise ConfigError(
                    f"the training set ({len(self.train_dataset)} examples) is smaller than one "
                    f"batch of {self.config.batch_size} per process"
                )
            self.state.epoch += 1
            self.state.batch_in_epoch = 0

    # ------------------------------------------------------------------ loop
    def train(self) -> TrainState:
        from tqdm import tqdm

        config = self.config
        batches = self.micro_batches()
        bar = tqdm(
            total=config.max_steps,
            initial=self.state.step,
            disable=not (config.progress and self.is_main),
            desc="train",
            unit="step",
        )
        self.model.train()
        if self.state.step == 0 and self.is_main:  # a run from its start logs anew: lines
            # of a run whose checkpoints were deleted would read as this one's
            (self.output_dir / "metrics.jsonl").unlink(missing_ok=True)
        if self.eval_fn and config.eval_at_start and self.state.step == 0:
            metrics = self.evaluate()
            self._log(metrics, prefix="eval_")
            self._select(metrics)
        self.state.stopped_at_time = False
        started, tokens = self.clock(), 0
        deadline = started + config.max_minutes * 60 if config.max_minutes else math.inf
        # the run's attention kernel against the reference on its first batch
        check, checked = KernelCheck(self.module, self.device), False
        try:  # the bar closed on any exit, so that an error prints on a line of its own
            while self.state.step < config.max_steps and not self.state.stopped_early:
                metrics, step_tokens = self.optimizer_step(batches)
                if not checked and check.result is not None:
                    self.kernel_check, checked = check.result, True
                    self._record({"step": self.state.step, "attention_kernel_check": check.result})
                tokens += step_tokens
                self.state.step += 1
                if self.average is not None:
                    self.average.update()
                bar.update()
                if self.state.step % config.log_every == 0 or self.state.step == config.max_steps:
                    self._check_finite()
                    metrics = {name: float(value) for name, value in metrics.items()}
                    elapsed = self.clock() - started
                    metrics["tokens_per_second"] = tokens * self.world / elapsed
                    self._log(metrics)
                    bar.set_postfix(loss=f"{metrics['loss']:.3f}")
                    started, tokens = self.clock(), 0
                stop = False
                if self.clock() >= deadline:
                    log.info(
                        "stopping at step %d: %g minutes of training reached",
                        self.state.step,
                        config.max_minutes,
                    )
                    self.state.stopped_at_time = True
                # the final weights are a candidate too
                last = self.state.step == config.max_steps or self.state.stopped_at_time
                if (
                    self.eval_fn
                    and config.eval_every
                    and (self.state.step % config.eval_every == 0 or last)
                ):
                    self._check_finite()
                    metrics = self.evaluate()
                    self._log(metrics, prefix="eval_")
                    stop = self.state.stopped_early = self._select(metrics)
                if stop or last or self.state.step % config.checkpoint_every == 0:
                    self._check_finite()
                    self.save()
                if self.state.stopped_at_time:
                    break
                if stop:
                    log.info(
                        "early stop at step %d: no better %s in %d evaluations",
                        self.state.step,
                        config.best_metric,
                        config.patience,
                    )
                    break
        finally:
            bar.close()
        if not self.restore_best() and self.average is not None:
            self.average.copy_to_module()
        return self.state

    # ------------------------------------------------------------------ model selection
    @property
    def best_path(self) -> Path:
        return self.output_dir / "best" / "model.safetensors"

    def _select(self, metrics: dict) -> bool:
        """Keep the weights of the best evaluation so far; True when it is time to stop."""
        metric = self.config.best_metric
        if not metric:
            return False
        score = metrics.get(metric)
        if score is None or not math.isfinite(score):
            raise TrainingError(f"evaluation gave no finite {metric!r} (got {metrics})")
        if self.state.best_score is None or score > self.state.best_score:
            self.state.best_score, self.state.best_step = float(score), self.state.step
            self.state.stale_evaluations = 0
            if self.is_main:
                import safetensors.torch

                from genobird.fileio import atomic_path

                self.best_path.parent.mkdir(parents=True, exist_ok=True)
                with atomic_path(self.best_path) as tmp, self._averaged():
                    safetensors.torch.save_model(self.module, str(tmp))
            return False
        self.state.stale_evaluations += 1
        patience = self.config.patience
        return bool(patience) and self.state.stale_evaluations >= patience

    def restore_best(self) -> bool:
        """Load the weights of the best evaluation (when model selection ran); False when
        there were none."""
        if not (self.config.best_metric and self.state.best_score is not None):
            return False
        import safetensors.torch

        distributed.barrier()
        safetensors.torch.load_model(self.module, str(self.best_path), device=str(self.device))
        log.info(
            "restored the weights of step %d (%s %.4f)",
            self.state.best_step,
            self.config.best_metric,
            self.state.best_score,
        )
        return True

    def optimizer_step(self, batches) -> tuple[dict, int]:
        """One update from `micro_batches` (as many as the accumulation needs); returns its
        metrics and real tokens. Its metrics stay on the device (tensors) and its
        finiteness is recorded there, so a step never waits for the device:
        `_check_finite` reads the record at log, evaluation and checkpoint steps only."""
        totals: dict = {}
        tokens = 0
        for micro in range(self.accumulation):
            batch, batch_tokens = next(batches)
            tokens += batch_tokens
            sync = micro == self.accumulation - 1
            with distributed.maybe_no_sync(self.model, sync), self._autocast():
                loss, metrics = self.step_fn(self.model, batch)
            (loss / self.accumulation).backward()
            for name, value in {"loss": loss.detach(), **metrics}.items():
                totals[name] = totals.get(name, 0.0) + value / self.accumulation
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm)
        self._record_finite(torch.isfinite(norm) & torch.isfinite(totals["loss"]), totals, norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        totals["grad_norm"] = norm
        # the base rate (groups with a learning_rate_scale run at a multiple of it)
        factor = self.scheduler.lr_lambdas[0](self.scheduler.last_epoch)
        totals["learning_rate"] = self.config.learning_rate * factor
        return totals, tokens

    def _record_finite(self, finite: torch.Tensor, totals: dict, norm: torch.Tensor) -> None:
        """Remember (on the device) the first step whose loss or gradient was not finite,
        with those values, until `_check_finite` reads them."""
        step = self.state.step + 1
        if self._first_bad is None:
            self._first_bad = torch.full((), -1, dtype=torch.long, device=norm.device)
            self._bad_values = torch.zeros(2, device=norm.device)
        first = (self._first_bad < 0) & ~finite
        self._first_bad = torch.where(first, step, self._first_bad)  # a scalar: no copy
        values = torch.stack([totals["loss"].float().reshape(()), norm.float().reshape(())])
        self._bad_values = torch.where(first, values, self._bad_values)

    def _check_finite(self) -> None:
        """Stop, saving nothing, if a step since the last check was not finite (the weights
        it updated are discarded with the process; checkpoints are written only after a
        check, so the last one on disk is good)."""
        if self._first_bad is None or int(self._first_bad) < 0:
            return
        loss, norm = (float(v) for v in self._bad_values)
        last = latest_checkpoint(self.checkpoint_root)
        raise TrainingError(
            f"loss or gradient became {loss} / {norm} at step {int(self._first_bad)}; "
            f"stopped without saving. Last good checkpoint: {last or 'none'}; lower the "
            "learning rate or check the data, then resume"
        )

    def _autocast(self):
        return autocast(self.device, self.autocast_dtype)

    @torch.no_grad()
    def evaluate(self) -> dict:
        if self.eval_fn is None or self.eval_dataset is None:
            return {}
        self.model.eval()
        loader = DataLoader(
            self.eval_dataset, batch_size=self.config.batch_size, collate_fn=self.collate_fn
        )
        with self._autocast(), self._averaged():
            metrics = self.eval_fn(self.module, loader, self.device)
        self.model.train()
        return metrics

    def _averaged(self):
        """The module with its averaged weights inside the block (when averaging)."""
        return self.average.applied() if self.average else nullcontext()

    def _log(self, metrics: dict, prefix: str = "") -> None:
        record = {"step": self.state.step, **{prefix + k: v for k, v in metrics.items()}}
        self._record(record)
        if self.monitor is not None and (note := self.monitor(record)):
            self._record({"step": self.state.step, **note})

    def _record(self, record: dict) -> None:
        self.state.history.append(record)
        if self.is_main:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            with open(self.output_dir / "metrics.jsonl", "a") as handle:
                handle.write(json.dumps(record) + "\n")
            log.info("%s", record)
