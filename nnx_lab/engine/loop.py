"""The training loop: run the step, fire events, nothing else.

Reporting, checkpoint notices and early stopping are sinks of the event stream. The
hot path keeps per-step values on the device (loss, decoded predictions) and reads
them back in bulk every ``log_every`` steps and at each epoch end.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .callbacks import JsonlLogger, ProgressBar, tqdm_disabled
from .checkpoint import write_checkpoint
from .enums import Losses, Optims, RunStatus
from .events import (
    CheckpointWritten,
    EpochEnded,
    RunFinished,
    RunStarted,
    StepEnded,
    StepMetrics,
    StepRecord,
    TrainingControl,
)
from .metrics import EDP, decode, finalize, n_classes
from .params import NNTrainParams
from .runs import IDP, NNRun, write_metadata
from .sinks import EventBus

if TYPE_CHECKING:
    from .model import NNModel

__all__ = ["build_optimizer", "build_scheduler", "selection_signal"]


def build_optimizer(net: torch.nn.Module, optim: Any) -> torch.optim.Optimizer:
    params = [p for p in net.parameters() if p.requires_grad]
    kw: dict[str, Any] = {"lr": optim.max_lr, "weight_decay": optim.weight_decay}
    if optim.name is Optims.ADAM:
        return torch.optim.Adam(params, betas=optim.momentum, **kw)
    if optim.name is Optims.ADAMW:
        return torch.optim.AdamW(params, betas=optim.momentum, **kw)
    if optim.name is Optims.SGD:
        return torch.optim.SGD(params, momentum=optim.momentum, **kw)
    return torch.optim.RMSprop(params, momentum=optim.momentum, **kw)


def build_scheduler(optimizer: torch.optim.Optimizer, sched: Any) -> Any:
    if sched is None:
        return None
    return torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer,
        mode="min",
        factor=sched.factor,
        patience=sched.patience,
        threshold=sched.threshold,
        threshold_mode="rel",
        cooldown=sched.cooldown,
        min_lr=sched.min_lr,
    )


def selection_signal(
    val: EDP | None, last_train: StepRecord | None
) -> tuple[float | None, str | None]:
    """§2.11: the first finite of val error, val loss, train error, train loss.

    An unavailable validation record (no samples, or neither error nor loss) ends the
    walk: that epoch has no signal and the training values do not stand in.
    """
    candidates: list[tuple[str, float | None]] = []
    if val is not None:
        if val.samples == 0 or (val.error is None and val.loss is None):
            return None, None
        candidates += [("val_edp.error", val.error), ("val_edp.loss", val.loss)]
    if last_train is not None:
        candidates += [("train_edp.error", last_train.error), ("train_edp.loss", last_train.loss)]
    for source, value in candidates:
        if value is not None and math.isfinite(value):
            return float(value), source
    return None, None


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def capture_rng(loaders: Sequence[Any], *, host: bool = True) -> dict[str, Any]:
    """torch CPU/CUDA(/MPS) RNG and each loader's generators, plus, with ``host``, Python's
    and NumPy's (lossless).

    ``host=False`` is the cheap capture taken at every epoch start: only torch's streams
    decide a loader's order, and a mid-epoch resume restores the host streams from the
    moment of the stop anyway.
    """
    state: dict[str, Any] = {
        "torch_cpu": torch.get_rng_state(),
        "torch_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "loader_generators": [
            g.get_state()
            if isinstance((g := getattr(ld, "generator", None)), torch.Generator)
            else None
            for ld in loaders
        ],
        # A sampler built with its own generator (RandomSampler(ds, generator=g)).
        "sampler_generators": [
            g.get_state() if (g := _own_sampler_generator(ld)) is not None else None
            for ld in loaders
        ],
    }
    if host:
        version, internal, gauss = random.getstate()
        # Python's Mersenne state as a tensor: 625 JSON ints would dominate a small sidecar.
        state["python"] = {
            "version": version,
            "state": torch.from_numpy(np.array(internal, dtype=np.int64)),
            "gauss": gauss,
        }
        state["numpy"] = np.random.get_state()
    mps = getattr(torch, "mps", None)
    if mps is not None and torch.backends.mps.is_available():  # pragma: no cover - no MPS in CI
        state["torch_mps"] = mps.get_rng_state()
    return state


def _own_sampler_generator(loader: Any) -> torch.Generator | None:
    """The sampler's generator when it is not the loader's own (that one is saved apart)."""
    gen = getattr(getattr(loader, "sampler", None), "generator", None)
    if isinstance(gen, torch.Generator) and gen is not getattr(loader, "generator", None):
        return gen
    return None


class _StepBuffer:
    """Per-step values held on the device until the next bulk read-back."""

    def __init__(self, loss: Losses, output_dim: int) -> None:
        self.loss_kind = loss
        self.k = n_classes(loss, output_dim)
        self.clear()

    def clear(self) -> None:
        self.losses: list[torch.Tensor] = []
        self.preds: list[torch.Tensor] = []
        self.targets: list[torch.Tensor] = []
        self.meta: list[tuple[int, int, int, float, int]] = []  # step, epoch, batch, lr, n

    def __len__(self) -> int:
        return len(self.meta)

    def drain(self) -> tuple[list[StepRecord], np.ndarray | None, list[float]]:
        """Records for the buffered steps, their summed confusion, and their losses.

        One ``bincount`` builds every step's confusion matrix at once; the losses and the
        matrices then cross to the host together and the ratios are finished in NumPy.
        """
        if not self.meta:
            return [], None, []
        k = self.k
        loss_host = torch.stack(self.losses).tolist()
        if k is None:
            records = [
                StepRecord(step, epoch, batch, lr, n, loss)
                for (step, epoch, batch, lr, n), loss in zip(self.meta, loss_host, strict=True)
            ]
            self.clear()
            return records, None, loss_host
        # Predictions and targets cross to the host once; the per-step confusion matrices
        # are one NumPy bincount over (step, truth, prediction).
        preds = torch.cat([p.reshape(-1) for p in self.preds]).cpu().numpy()
        truth = torch.cat([y.reshape(-1) for y in self.targets]).cpu().numpy().astype(np.int64)
        counts = [p.numel() for p in self.preds]
        steps = np.repeat(np.arange(len(counts)), counts)
        conf_host = np.bincount(
            (steps * k + truth) * k + preds, minlength=len(counts) * k * k
        ).reshape(len(counts), k, k)
        values = finalize(conf_host, self.loss_kind)
        columns = zip(
            *(values[n].tolist() for n in ("error", "accuracy", "precision", "recall", "f1")),
            strict=True,
        )
        records = [
            StepRecord(step, epoch, batch, lr, n, loss, *row)
            for (step, epoch, batch, lr, n), loss, row in zip(
                self.meta, loss_host, columns, strict=True
            )
        ]
        self.clear()
        return records, conf_host.sum(0), loss_host


class TrainingLoop:
    """One call of ``NNModel.train``: everything after the run directory is reserved."""

    def __init__(
        self,
        model: NNModel,
        params: NNTrainParams,
        run: NNRun,
        sinks: list[Any],
        control: TrainingControl,
        components: Sequence[Any],
        *,
        start: dict[str, Any],
    ) -> None:
        self.model, self.params, self.run = model, params, run
        self.control = control
        self.components = list(components)
        self.net = model.net
        self.device = model.device
        self.precision = run.precision
        self.loss_fn = model.loss_fn
        self.loss_kind = model.params.loss
        self.output_dim = model.net_params.output_dim if model.net_params else None
        self.start = start  # epoch/step offsets and restored objects from a resume
        self.optimizer: torch.optim.Optimizer = start["optimizer"]
        self.scheduler = start["scheduler"]
        self.scaler = start["scaler"]
        builtin: list[Any] = [JsonlLogger(run.run_dir / "metrics.jsonl")]
        if params.progress and not tqdm_disabled():
            builtin.append(ProgressBar())
        self.bus = EventBus([*builtin, *sinks])
        self.sink_objects = list(sinks)
        self.buffer = _StepBuffer(self.loss_kind, self.output_dim or 1)
        self.step = start["step"]
        self.epoch = start["epoch"]  # last completed epoch
        self.best_value: float | None = start.get("best_value")
        self.has_best = bool(start.get("has_best"))
        # BEST snapshots wait in memory until LAST is next due (NNTrainParams.checkpoint_every_s)
        self._pending_best: dict[str, Any] | None = None
        self._last_commit = time.perf_counter()
        self._committed_step = -1
        self._last_epoch = 0
        self._epoch_start_rng: dict[str, Any] | None = None
        # Epoch accumulators exist before the first epoch, so a stop at any point can flush.
        self._reset_epoch()

    # -- lifecycle -----------------------------------------------------------------------
    def run_loop(self) -> NNRun:
        run, params = self.run, self.params
        self.bus.attach(self.control)
        status, error, tb, raised = RunStatus.FINISHED, None, None, None
        try:
            try:
                steps_per_epoch = len(params.train_loader)
            except TypeError:
                steps_per_epoch = None
            if params.accumulation_steps > 1 and steps_per_epoch is not None:
                steps_per_epoch = math.ceil(steps_per_epoch / params.accumulation_steps)
            self.steps_per_epoch = steps_per_epoch
            self.bus.emit(
                RunStarted(
                    run_id=run.id,
                    run_dir=str(run.run_dir),
                    n_epochs=self.start["n_epochs"],
                    start_epoch=self.epoch + 1,
                    start_step=self.step,
                    steps_per_epoch=steps_per_epoch,
                    config=run.config,
                    parent_run_id=run.parent_run_id,
                )
            )
            self.start["on_started"]()
            last_epoch = self.epoch + self.start["n_epochs"]
            self._last_epoch = last_epoch
            while self.epoch < last_epoch and not self.control.stop_requested:
                self._train_epoch(self.epoch + 1)
            stopped_early = self.epoch < last_epoch  # a stop after the last epoch is a finish
            if self.control.stop_requested and not self.control.complete and stopped_early:
                status = RunStatus.STOPPED
        except KeyboardInterrupt as exc:
            self.control.request_stop("interrupted (KeyboardInterrupt)")
            status, raised = RunStatus.STOPPED, exc
        except BaseException as exc:
            status, raised = RunStatus.FAILED, exc
            error = f"{type(exc).__name__}: {exc}"
            tb = traceback.format_exc()
        finally:
            self._finish(status, error, tb)
        if raised is not None:
            raise raised
        return run

    def _finish(self, status: RunStatus, error: str | None, tb: str | None) -> None:
        run = self.run
        try:
            if status is RunStatus.FAILED:
                self._commit_pending_best()  # the last good BEST is worth keeping
            elif status is RunStatus.STOPPED:
                self._flush_steps()
                self._commit_pending_best()
                if self._mid_epoch_batches:
                    self._write(["last"], complete=False)
                elif self._committed_step != self.step:
                    self._write(["last"], complete=True)
        finally:
            run.status = status
            run.error = error
            run.metadata.update(
                status=status.value,
                error=error,
                stop_reason=self.control.stop_reason,
                finished_at=time.time(),
                steps=self.step,
                epochs_completed=self.epoch,
            )
            write_metadata(run)
            try:
                self.bus.emit(
                    RunFinished(
                        run_id=run.id,
                        status=status.value,
                        epochs_completed=self.epoch,
                        steps=self.step,
                        error=error,
                        traceback=tb,
                        stop_reason=self.control.stop_reason,
                    )
                )
            finally:
                self.bus.detach()

    # -- one epoch -----------------------------------------------------------------------
    def _reset_epoch(self) -> None:
        self._epoch_conf: np.ndarray | None = None
        self._epoch_loss_sum = 0.0
        self._epoch_samples = 0
        self._last_record: StepRecord | None = None
        self._mid_epoch_batches = 0  # loader batches trained in the current epoch

    def _train_epoch(self, epoch: int) -> None:
        params, net, opt = self.params, self.net, self.optimizer
        t0 = time.perf_counter()
        self._epoch_start_rng = capture_rng([params.train_loader, params.val_loader], host=False)
        self._reset_epoch()
        net.train()
        device, loss_fn, buffer = self.device, self.loss_fn, self.buffer
        # fp32 skips the generator-based context manager on every step
        autocast = self.precision.autocast if self.precision.reduced else contextlib.nullcontext
        clip = params.optim.grad_clip_norm
        accum = params.accumulation_steps
        trainable = [p for p in net.parameters() if p.requires_grad]
        emit_steps = self.bus.listens("on_step_ended")
        log_every = params.log_every
        skip = self.start.pop("skip_batches", 0)  # a mid-epoch resume replays the order
        rng_after_skip = self.start.pop("rng_after_skip", None)
        control = self.control
        decode_preds = buffer.k is not None
        loss_kind = self.loss_kind
        window: list[tuple[torch.Tensor, torch.Tensor]] = []
        batch_index = -1
        for batch_index, (X, y) in enumerate(params.train_loader):
            if batch_index < skip:
                if batch_index == skip - 1 and rng_after_skip is not None:
                    from .resume import restore_rng

                    restore_rng(rng_after_skip, [])
                continue
            X = X.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            if accum > 1:
                window.append((X, y))
                if len(window) < accum:
                    continue
                loss, out_preds, y_all, n = self._accumulated_step(window, trainable, clip)
                window = []
            else:
                opt.zero_grad(set_to_none=True)
                with autocast():
                    out = net(X)
                    loss = loss_fn(out, y)
                self._backward_and_step(loss, trainable, clip, normalize=None)
                out_preds = decode(out.detach(), loss_kind) if decode_preds else None
                y_all, n = y, int(y.shape[0])
            self._record(loss, out_preds, y_all, n, epoch, batch_index // accum)
            self._mid_epoch_batches = batch_index + 1
            if emit_steps:
                self.bus.emit(StepEnded(self.step, epoch, batch_index // accum, n))
            if len(buffer) >= log_every:
                self._flush_steps()
            if control.stop_requested:
                return
        if window:  # a short final window still updates, weighted by its real size
            loss, out_preds, y_all, n = self._accumulated_step(window, trainable, clip)
            self._record(loss, out_preds, y_all, n, epoch, batch_index // accum)
            if emit_steps:
                self.bus.emit(StepEnded(self.step, epoch, batch_index // accum, n))
        if batch_index < 0:
            raise RuntimeError("NNTrainParams.train_loader yielded no batch this epoch")
        self._end_epoch(epoch, t0)

    def _record(
        self,
        loss: torch.Tensor,
        preds: torch.Tensor | None,
        y: torch.Tensor,
        n: int,
        epoch: int,
        batch: int,
    ) -> None:
        self.step += 1
        buf = self.buffer
        buf.losses.append(loss.detach())
        if preds is not None:
            buf.preds.append(preds)
            buf.targets.append(y)
        buf.meta.append((self.step, epoch, batch, self.optimizer.param_groups[0]["lr"], n))

    def _accumulated_step(
        self,
        window: list[tuple[torch.Tensor, torch.Tensor]],
        trainable: list[torch.Tensor],
        clip: float | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, int]:
        """One update over several micro-batches, each weighted by its sample count."""
        net, loss_fn = self.net, self.loss_fn
        self.optimizer.zero_grad(set_to_none=True)
        total = sum(int(y.shape[0]) for _, y in window)
        loss_sum = torch.zeros((), device=self.device, dtype=torch.float32)
        preds = []
        for X, y in window:
            with self.precision.autocast():
                out = net(X)
                loss = loss_fn(out, y) * y.shape[0]  # the micro-batch's sum of losses
            self._backward(loss)
            loss_sum = loss_sum + loss.detach().float()
            if self.buffer.k is not None:
                preds.append(decode(out.detach(), self.loss_kind))
        self._update(trainable, clip, normalize=total)
        y_all = torch.cat([y for _, y in window])
        return loss_sum / total, (torch.cat(preds) if preds else None), y_all, total

    def _backward(self, loss: torch.Tensor) -> None:
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()

    def _backward_and_step(
        self,
        loss: torch.Tensor,
        trainable: list[torch.Tensor],
        clip: float | None,
        normalize: int | None,
    ) -> None:
        self._backward(loss)
        self._update(trainable, clip, normalize)

    def _update(
        self, trainable: list[torch.Tensor], clip: float | None, normalize: int | None
    ) -> None:
        """unscale -> normalize (accumulation) -> finite check -> clip -> step (§2.2)."""
        opt, scaler = self.optimizer, self.scaler
        if scaler is not None:
            scaler.unscale_(opt)
        grads = [p.grad for p in trainable if p.grad is not None]
        if normalize is not None and grads:
            torch._foreach_div_(grads, float(normalize))
        if scaler is None and self.precision.reduced:
            norm = torch.nn.utils.clip_grad_norm_(trainable, clip if clip else math.inf)
            if not bool(torch.isfinite(norm)):
                raise FloatingPointError(
                    f"non-finite gradients at step {self.step + 1} under "
                    f"{self.precision.effective}; the update was not applied. Lower max_lr, "
                    "set grad_clip_norm, or train in fp32"
                )
        elif clip:
            torch.nn.utils.clip_grad_norm_(trainable, clip)
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()

    def _flush_steps(self) -> None:
        records, conf, losses = self.buffer.drain()
        if not records:
            return
        for rec, loss in zip(records, losses, strict=True):
            self._epoch_loss_sum += loss * rec.samples
            self._epoch_samples += rec.samples
        if conf is not None:
            self._epoch_conf = conf if self._epoch_conf is None else self._epoch_conf + conf
        self._last_record = records[-1]
        self.run.idps.extend(IDP.from_record(r) for r in records)
        self.bus.emit(StepMetrics(records=tuple(records)))

    def _train_summary(self) -> dict[str, float | None]:
        summary: dict[str, float | None] = {
            "loss": self._epoch_loss_sum / max(self._epoch_samples, 1),
            "samples": self._epoch_samples,
        }
        if self._epoch_conf is not None:
            summary.update(
                {k: float(v) for k, v in finalize(self._epoch_conf, self.loss_kind).items()}
            )
        return summary

    def _end_epoch(self, epoch: int, t0: float) -> None:
        self._flush_steps()
        val = None
        if self.params.val_loader is not None:
            val = self.model._evaluate(self.params.val_loader)
        signal, source = selection_signal(val, self._last_record)
        if self.scheduler is not None and signal is not None:
            self.scheduler.step(signal)
        self.epoch = epoch
        self._mid_epoch_batches = 0
        improved = signal is not None and (self.best_value is None or signal < self.best_value)
        # An epoch with no finite signal still leaves a BEST, as a baseline the next
        # finite epoch replaces (§2.11).
        baseline = signal is None and not self.has_best
        if improved:
            self.best_value = signal
        if val is not None and self.run.idps:
            self.run.idps[-1].val_edp = val
        last = self._last_record
        event = EpochEnded(
            epoch=epoch,
            step=self.step,
            lr=self.optimizer.param_groups[0]["lr"],
            train=self._train_summary(),
            val=None if val is None else val.to_json(),
            signal=signal,
            signal_source=source,
            improved=improved,
            seconds=time.perf_counter() - t0,
            train_last=None
            if last is None
            else {
                k: v
                for k, v in last.__dict__.items()
                if k in ("loss", "error", "accuracy", "precision", "recall", "f1")
            },
        )
        self.run.epochs.append(event.to_json())
        self.bus.emit(event)  # EarlyStopping updates here, before its state is saved
        final = self.epoch >= self._last_epoch or self.control.stop_requested
        every = self.params.checkpoint_every_s
        due = final or every == 0 or time.perf_counter() - self._last_commit >= every
        if due:
            if improved or baseline:
                self._pending_best = None  # superseded: this epoch is BEST
                self._write(["last", "best"], complete=True, unavailable=baseline)
            else:
                self._commit_pending_best()
                self._write(["last"], complete=True)
        elif improved or baseline:
            self.has_best = True
            self._pending_best = self._snapshot(complete=True, unavailable=baseline)

    # -- checkpoints -----------------------------------------------------------------------
    def _snapshot(self, *, complete: bool, unavailable: bool = False) -> dict[str, Any]:
        """The checkpoint's content now, detached from the live tensors."""
        return {
            "model_state": _clone_tree(self.net.state_dict()),
            "training_state": _clone_tree(self.training_state(complete)),
            "meta": self._snapshot_meta(complete, unavailable),
        }

    def _commit(self, types: list[str], snapshot: dict[str, Any]) -> None:
        paths = write_checkpoint(self.run.run_dir, types, **snapshot)
        meta = snapshot["meta"]
        for type_, path in zip(types, paths, strict=True):
            self.bus.emit(
                CheckpointWritten(
                    type=type_, epoch=meta["epoch"], step=meta["step"], path=str(path)
                )
            )

    def _write(self, types: list[str], *, complete: bool, unavailable: bool = False) -> None:
        """Write the current state now (no copy needed: nothing trains meanwhile)."""
        if "best" in types:
            self.has_best = True
        snapshot = {
            "model_state": self.net.state_dict(),
            "training_state": self.training_state(complete),
            "meta": self._snapshot_meta(complete, unavailable),
        }
        self._commit(types, snapshot)
        self._last_commit = time.perf_counter()
        self._committed_step = self.step

    def _snapshot_meta(self, complete: bool, unavailable: bool) -> dict[str, Any]:
        return {
            "run_id": self.run.id,
            "epoch": self.epoch,
            "step": self.step,
            "epoch_complete": complete,
            "signal_unavailable": unavailable,
            "net_params": self.model.net_params.to_json(),
            "model_params": self.model.params.to_json(),
        }

    def _commit_pending_best(self) -> None:
        if self._pending_best is not None:
            snapshot, self._pending_best = self._pending_best, None
            self._commit(["best"], snapshot)

    def training_state(self, complete: bool) -> dict[str, Any]:
        """Everything a stateful resume restores; see docs/resume.md."""
        sinks = {}
        for i, obj in enumerate([*self.sink_objects, *self.components]):
            if callable(getattr(obj, "state_dict", None)) and callable(
                getattr(obj, "load_state_dict", None)
            ):
                sinks[f"{i}:{type(obj).__qualname__}"] = obj.state_dict()
        return {
            "generation": 1,
            "epoch": self.epoch,
            "step": self.step,
            "epoch_complete": complete,
            "batches_done": 0 if complete else self._mid_epoch_batches,
            "optimizer": self.optimizer.state_dict(),
            "optimizer_topology": optimizer_topology(self.optimizer),
            "optimizer_name": self.params.optim.name.value,
            "optim_params": self.params.optim.to_json(),
            "accumulation_steps": self.params.accumulation_steps,
            "scheduler": None if self.scheduler is None else self.scheduler.state_dict(),
            "scheduler_params": (
                None if self.params.scheduler is None else self.params.scheduler.to_json()
            ),
            "scaler": None if self.scaler is None else self.scaler.state_dict(),
            "precision": self.precision.record(),
            "rng": capture_rng([self.params.train_loader, self.params.val_loader]),
            "epoch_start_rng": None if complete else self._epoch_start_rng,
            "best_value": self.best_value,
            "has_best": self.has_best,
            "callbacks": sinks,
            "planned_epochs": self.start["planned_epochs"],
        }


def _clone_tree(tree: Any) -> Any:
    """A copy of nested state whose tensors no longer share memory with the model."""
    if isinstance(tree, torch.Tensor):
        return tree.detach().clone()
    if isinstance(tree, dict):
        return {k: _clone_tree(v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(_clone_tree(v) for v in tree)
    return tree


def optimizer_topology(optimizer: torch.optim.Optimizer) -> list[list[list[int]]]:
    """Per param group, the shapes of its parameters: what a resumed optimizer must match."""
    return [[list(p.shape) for p in group["params"]] for group in optimizer.param_groups]
