"""The training loop: run the steps, fire events, nothing else.

The loop needs no run directory. Whatever records a run (its directory and metadata,
the JSONL log, the checkpoints and the BEST/LAST policy) is a handler on the event
stream that ``NNModel.train`` attaches; a loop with none of them trains with no file
written (an LR sweep, a plan probe, a non-zero distributed rank).

The hot path keeps per-step values on the device (loss, decoded predictions) and reads
them back in bulk every ``log_every`` steps and at each epoch end.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..data.metrics import MetricSpec
from .edp import EDP, finalize
from .enums import RunStatus
from .evaluate import evaluate
from .events import (
    EpochEnded,
    EpochStarted,
    RunEnding,
    RunFinished,
    RunStarted,
    StepEnded,
    StepMetrics,
    StepRecord,
    TrainingControl,
)
from .losses import LossFn
from .optim import optimizer_topology
from .params import NNTrainParams
from .precision import ResolvedPrecision
from .scoring import Accumulation, Scorer, call_extra, gather_rows, scored_pairs, scorer_specs
from .selection import MonitorRecord, MonitorState
from .sinks import EventBus
from .tasks import Task
from .training_state import RngState, TrainingState, capture_objects, preserved_rng
from .update import Updater

__all__ = ["LoopOutcome", "RunInfo", "TrainStep", "TrainingLoop", "selection_signal"]


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


@dataclass
class StepOutput:
    """One update's detached results, still on the device."""

    loss: torch.Tensor
    preds: torch.Tensor | None  # decoded predictions (None: a task with no confusion)
    targets: torch.Tensor
    rows: int
    outputs: torch.Tensor | None = None  # raw outputs, detached (only when metrics need them)


class TrainStep:
    """One optimizer update from one batch, or from a window of accumulation
    micro-batches weighted so that the update equals the union batch's (§2.3).

    The same step serves the training loop, the LR finder and plan probes.
    """

    def __init__(
        self,
        net: torch.nn.Module,
        loss: LossFn,
        task: Task,
        device: torch.device,
        precision: ResolvedPrecision,
        updater: Updater,
    ) -> None:
        self.net, self.loss, self.task = net, loss, task
        self.device, self.precision, self.updater = device, precision, updater
        # fp32 skips the generator-based context manager on every step
        self._autocast = precision.autocast if precision.reduced else contextlib.nullcontext
        self._decode = task.k is not None
        self.keep_outputs = False  # set by a loop whose metrics read the raw outputs

    def needs(self, outputs: bool, preds: bool) -> None:
        """Return raw outputs (declared or task metrics) and decoded predictions
        (extra_metrics) with every step, besides what the task's records need."""
        self.keep_outputs = self.keep_outputs or outputs
        self._decode = self._decode or preds

    def __call__(self, X: torch.Tensor, y: torch.Tensor, step_number: int = 0) -> StepOutput:
        self.updater.zero_grad()
        with self._autocast():
            out = self.net(X)
            loss = self.loss(out, y)
        self.updater.backward(loss)
        self.updater.step(step_number=step_number)
        preds = self.task.decode(out.detach()) if self._decode else None
        if self.keep_outputs:
            return StepOutput(loss.detach(), preds, y, int(y.shape[0]), out.detach().float())
        return StepOutput(loss.detach(), preds, y, int(y.shape[0]))

    def accumulated(
        self, window: list[tuple[torch.Tensor, torch.Tensor]], step_number: int = 0
    ) -> StepOutput:
        """Micro-batch losses are summed and the gradients divided by the window's
        weight: valid targets for a built-in classification loss, rows otherwise."""
        net, loss_fn = self.net, self.loss
        self.updater.zero_grad()
        by_target = loss_fn.per == "target"
        total: Any = sum(int(y.shape[0]) for _, y in window)
        if by_target:
            valid = sum(loss_fn.valid_targets(y) for _, y in window)
            total = valid.clamp_min(1).to(torch.float32)  # type: ignore[union-attr]
        loss_sum = torch.zeros((), device=self.device, dtype=torch.float32)
        preds, outs = [], []
        for X, y in window:
            with self.precision.autocast():
                out = net(X)
                part = loss_fn.total(out, y) if by_target else loss_fn(out, y) * y.shape[0]
            self.updater.backward(part)
            loss_sum = loss_sum + part.detach().float()
            if self._decode:
                preds.append(self.task.decode(out.detach()))
            if self.keep_outputs:
                outs.append(out.detach().float())
        self.updater.step(total, step_number=step_number)
        y_all = torch.cat([y for _, y in window])
        return StepOutput(
            loss_sum / total,
            torch.cat(preds) if preds else None,
            y_all,
            int(y_all.shape[0]),
            torch.cat(outs) if outs else None,
        )


class _StepBuffer:
    """Per-step values held on the device until the next bulk read-back."""

    def __init__(
        self,
        task: Task,
        loss: LossFn,
        reduce: Callable[[torch.Tensor], Any] | None = None,
        *,
        scorer: Scorer | None = None,
        extra: dict[str, Callable[[Any, Any], Any]] | None = None,
        collective: Any = None,
    ) -> None:
        """``reduce`` sums a tensor across ranks (a data-parallel run): the records are
        then the union's. ``scorer`` computes a declared task's record metrics per
        step; ``extra`` are the ``extra_metrics`` callables, called per step at read-back
        (on the union's rows under ``collective``)."""
        self.task = task
        self.by_target = loss.per == "target"
        self.reduce = reduce
        self.scorer = scorer
        self.extra = extra or None
        self.collective = collective
        self.rich = scorer is not None or self.extra is not None or task.declared
        self.clear()

    def clear(self) -> None:
        self.losses: list[torch.Tensor] = []
        self.preds: list[torch.Tensor] = []
        self.targets: list[torch.Tensor] = []
        self.packs: list[torch.Tensor] = []
        self.meta: list[tuple[int, int, int, float, int]] = []  # step, epoch, batch, lr, n

    def __len__(self) -> int:
        return len(self.meta)

    def add(self, out: StepOutput, step: int, epoch: int, batch: int, lr: float) -> None:
        self.losses.append(out.loss)
        if out.preds is not None:
            self.preds.append(out.preds)
            self.targets.append(out.targets)
        if self.scorer is not None:
            assert out.outputs is not None
            self.packs.append(self.scorer.pack(out.outputs, out.targets)[0])
        self.meta.append((step, epoch, batch, lr, out.rows))

    def drain(self) -> tuple[list[StepRecord], np.ndarray | None, list[float]]:
        """Records for the buffered steps, their summed confusion, and each step's weight
        in the epoch's mean loss.

        One ``bincount`` builds every step's confusion matrix at once; the losses and the
        matrices then cross to the host together and the ratios are finished in NumPy.
        A step whose targets were all ``ignore_index`` has no metrics (NNx): its record
        holds ``None`` and it weighs nothing.
        """
        if not self.meta:
            return [], None, []
        if self.rich:
            return self._drain_rich()
        loss_host = torch.stack(self.losses).tolist()
        task = self.task
        conf = None
        if task.k is not None:
            preds = torch.cat([p.reshape(-1) for p in self.preds]).cpu().numpy()
            truth = torch.cat([y.reshape(-1) for y in self.targets]).cpu().numpy()
            counts = [p.numel() for p in self.preds]
            steps = np.repeat(np.arange(len(counts)), counts)
            conf = task.confusion_host(steps, truth.astype(np.int64), preds, len(counts))
        if self.reduce is not None:
            self._union(conf)
        if conf is None:
            records = [
                StepRecord(step, epoch, batch, lr, n, loss)
                for (step, epoch, batch, lr, n), loss in zip(self.meta, loss_host, strict=True)
            ]
            weights = [float(r.samples) for r in records]
            self.clear()
            return records, None, weights
        values = finalize(conf, task.kind)
        valid = conf.sum((1, 2))
        columns = zip(
            *(values[n].tolist() for n in ("error", "accuracy", "precision", "recall", "f1")),
            strict=True,
        )
        records, weights = [], []
        for (step, epoch, batch, lr, n), loss, row, count in zip(
            self.meta, loss_host, columns, valid.tolist(), strict=True
        ):
            if count == 0:  # every target ignored
                records.append(StepRecord(step, epoch, batch, lr, n, None))  # type: ignore[arg-type]
                weights.append(0.0)
                continue
            records.append(StepRecord(step, epoch, batch, lr, n, loss, *row))
            weights.append(float(count) if self.by_target else float(n))
        self.clear()
        return records, conf.sum(0), weights

    def _drain_rich(self) -> tuple[list[StepRecord], np.ndarray | None, list[float]]:
        """``drain`` for a declared task, task metrics or extra_metrics: the per-step
        statistics are finalized on the device and read back with the losses at once."""
        task, n = self.task, len(self.meta)
        losses = torch.stack(self.losses)
        scored: list[tuple[int, dict[str, float | None]]] | None = None
        if self.scorer is not None:
            packs = torch.stack(self.packs)
            if self.reduce is not None:
                packs = self.reduce(packs)  # each step's statistics over the union
            finals = torch.stack([self.scorer.finalize(row) for row in packs])
            host = torch.cat([losses.to(finals.dtype).reshape(-1), finals.reshape(-1)]).tolist()
            loss_host, rest, width = host[:n], host[n:], finals.shape[1]
            scored = [
                self.scorer.read(rest[i * width : (i + 1) * width], "NNTrainParams.train_loader")
                for i in range(n)
            ]
        else:
            loss_host = losses.tolist()
        conf = None
        if task.k is not None:
            preds = torch.cat([p.reshape(-1) for p in self.preds]).cpu().numpy()
            truth = torch.cat([y.reshape(-1) for y in self.targets]).cpu().numpy()
            counts = [p.numel() for p in self.preds]
            steps = np.repeat(np.arange(len(counts)), counts)
            conf = task.confusion_host(steps, truth.astype(np.int64), preds, len(counts))
        if self.reduce is not None:
            self._union(conf)
        pairs = self._pairs() if self.extra is not None else None
        columns: list[tuple[float, ...]] = [()] * n
        valid: list[int | None] = [None] * n
        if conf is not None:
            values = finalize(conf, task.kind)
            names = ("error", "accuracy", "precision", "recall", "f1")
            columns = list(zip(*(values[k].tolist() for k in names), strict=True))
            valid = [int(v) for v in conf.sum((1, 2)).tolist()]
        elif scored is not None:
            valid = [v for v, _ in scored]
        records, weights = [], []
        for i, ((step, epoch, batch, lr, rows), loss) in enumerate(
            zip(self.meta, loss_host, strict=True)
        ):
            count = valid[i]
            if count == 0:  # every target ignored or missing: no loss, no metric at all
                records.append(
                    StepRecord(
                        step, epoch, batch, lr, rows, None, valid=0 if task.declared else None
                    )
                )
                weights.append(0.0)
                continue
            extra = None if pairs is None else call_extra(self.extra, *pairs[i])  # type: ignore[arg-type]
            records.append(
                StepRecord(
                    step,
                    epoch,
                    batch,
                    lr,
                    rows,
                    loss,
                    *columns[i],
                    valid=count if task.declared else None,
                    metrics=None if scored is None else scored[i][1],
                    extra=extra,
                )
            )
            by_count = self.by_target and count is not None
            weights.append(float(count) if by_count else float(rows))  # type: ignore[arg-type]
        self.clear()
        return records, None if conf is None else conf.sum(0), weights

    def _pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each step's (y_true, y_pred) on the host, over every rank's rows."""
        task = self.task
        if self.collective is None:
            return [scored_pairs(task, y, p) for y, p in zip(self.targets, self.preds, strict=True)]
        device = self.losses[0].device
        mine = torch.tensor([float(p.shape[0]) for p in self.preds], device=device)
        counts = gather_rows(mine.reshape(1, -1), self.collective).long().tolist()
        ys = gather_rows(torch.cat(self.targets), self.collective)
        ps = gather_rows(torch.cat(self.preds), self.collective)
        out, start = [], [sum(sum(c) for c in counts[:r]) for r in range(len(counts))]
        for i in range(len(self.preds)):
            y_parts, p_parts = [], []
            for r, c in enumerate(counts):
                a = start[r] + sum(c[:i])
                y_parts.append(ys[a : a + c[i]])
                p_parts.append(ps[a : a + c[i]])
            out.append(scored_pairs(task, torch.cat(y_parts), torch.cat(p_parts)))
        return out

    def _union(self, conf: np.ndarray | None) -> None:
        """Sum the steps' rows (and confusion matrices, in place) across the ranks."""
        rows = np.array([m[4] for m in self.meta], dtype=np.float64)
        packed = rows if conf is None else np.concatenate([rows, conf.reshape(-1)])
        device = self.losses[0].device
        total = self.reduce(torch.from_numpy(packed).to(device)).cpu().numpy()  # type: ignore[misc]
        n = len(rows)
        self.meta = [(*m[:4], int(r)) for m, r in zip(self.meta, total[:n], strict=True)]
        if conf is not None:
            conf[...] = total[n:].reshape(conf.shape).astype(conf.dtype)


@dataclass(frozen=True)
class RunInfo:
    """What ``RunStarted`` says about the run (all empty for a loop that records none)."""

    run_id: str | None = None
    run_dir: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    parent_run_id: str | None = None


@dataclass
class LoopOutcome:
    status: RunStatus
    error: str | None = None
    raised: BaseException | None = None


class TrainingLoop:
    """Epochs of ``TrainStep`` over ``params.train_loader``, validation, the plateau
    scheduler and the §2.11 selection; everything else listens to ``bus``."""

    def __init__(
        self,
        step: TrainStep,
        params: NNTrainParams,
        *,
        scheduler: Any,
        bus: EventBus,
        control: TrainingControl,
        stateful: Sequence[Any] = (),
        info: RunInfo = RunInfo(),
        n_epochs: int | None = None,
        planned_epochs: int | None = None,
        diagnose: Callable[[Any, str, str], Exception | None] | None = None,
        evaluator: Callable[..., EDP] | None = None,
    ) -> None:
        """``diagnose(batch, field, where)`` explains, after a step failed, why a batch
        cannot train this model (a DataError naming it), or returns None. With a
        ``DistributedTrainStep`` the loop is one rank of a data-parallel run: records and
        validation are the union's, and the ranks stop together.

        ``evaluator(net, loader, loss, task, *, device, precision) -> EDP`` is the
        validation pass (NNx's ``eval_step_fn``); default: ``evaluate``."""
        self.train_step = step
        self.params = params
        self.optimizer = step.updater.optimizer
        self.scheduler = scheduler
        self.scaler = step.updater.scaler
        self.bus, self.control, self.info = bus, control, info
        self.stateful = list(stateful)
        self.diagnose = diagnose
        self.evaluator = evaluate if evaluator is None else evaluator
        self.n_epochs = params.n_epochs if n_epochs is None else n_epochs
        self.planned_epochs = self.n_epochs if planned_epochs is None else planned_epochs
        self.topology = optimizer_topology([g["params"] for g in self.optimizer.param_groups])
        self.collective = getattr(step, "collective", None)
        self.reduce = None if self.collective is None else self.collective.sum
        self.gather = (
            None
            if self.collective is None
            else functools.partial(gather_rows, collective=self.collective)
        )
        self._setup_metrics(step, params)
        self.buffer = _StepBuffer(
            step.task,
            step.loss,
            self.reduce,
            scorer=self._step_scorer,
            extra=params.extra_metrics,
            collective=self.collective,
        )
        self.monitor = params.monitor
        self.monitor_state = None if self.monitor is None else MonitorState(self.monitor)
        self.last_monitor: MonitorRecord | None = None
        self.step = 0  # optimizer steps completed
        self.epoch = 0  # epochs completed
        self.best_value: float | None = None
        self.has_best = False
        self.last_selection: str | None = None  # "improved" | "baseline" | None, this epoch
        self._skip_batches = 0  # a mid-epoch resume replays the order and skips these
        self._rng_after_skip: RngState | None = None
        self._resume_partial: dict[str, Any] | None = None  # a mid-epoch resume's sums
        self._epoch_start_rng: RngState | None = None
        self._last_epoch = 0
        self._reset_epoch()  # accumulators exist before the first epoch: a stop can flush

    def _setup_metrics(self, step: TrainStep, params: NNTrainParams) -> None:
        """Scorers for a declared task's per-step metrics and for the whole-epoch
        summary (task metrics and ``params.metrics``), and what the evaluator is given."""
        task, device = step.task, step.device
        record = [MetricSpec(n) for n in task.record_metrics]
        self._step_scorer = Scorer(task, record, device) if record else None
        epoch_specs = scorer_specs(task, params.metrics)
        self._epoch_scorer = Scorer(task, epoch_specs, device) if epoch_specs else None
        step.needs(outputs=bool(epoch_specs), preds=bool(params.extra_metrics))
        offered: dict[str, Any] = {}
        if params.metrics:
            offered["metrics"] = params.metrics
        if params.extra_metrics:
            offered["extra_metrics"] = params.extra_metrics
        if self.gather is not None and (epoch_specs or params.extra_metrics):
            offered["gather"] = self.gather
        self._eval_kwargs = _accepted(self.evaluator, offered)

    @property
    def loaders(self) -> list[Any]:
        return [self.params.train_loader, self.params.val_loader]

    # -- state ---------------------------------------------------------------------------
    def capture_state(self, complete: bool) -> TrainingState:
        """Everything a stateful resume restores; see docs/resume.md."""
        p = self.params
        return TrainingState(
            epoch=self.epoch,
            step=self.step,
            epoch_complete=complete,
            batches_done=0 if complete else self._mid_epoch_batches,
            optimizer=self.optimizer.state_dict(),
            optimizer_topology=self.topology,
            optimizer_name=p.optim.name.value,
            optim_params=p.optim.to_json(),
            accumulation_steps=p.accumulation_steps,
            scheduler=None if self.scheduler is None else self.scheduler.state_dict(),
            scheduler_params=None if p.scheduler is None else p.scheduler.to_json(),
            scaler=None if self.scaler is None else self.scaler.state_dict(),
            precision=self.train_step.precision.record(),
            rng=RngState.capture(self.loaders),
            epoch_start_rng=None if complete else self._epoch_start_rng,
            best_value=self.best_value,
            has_best=self.has_best,
            callbacks=capture_objects(self.stateful),
            planned_epochs=self.planned_epochs,
            monitor=None if self.monitor_state is None else self.monitor_state.state_dict(),
            partial_epoch=None if complete else self._partial_epoch(),
        )

    def load_state(self, state: TrainingState) -> list[str]:
        """Continue from ``state`` (validated by the resume plan); returns what was restored."""
        restored = ["optimizer"]
        self.optimizer.load_state_dict(state.optimizer)
        if self.scheduler is not None and state.scheduler is not None:
            self.scheduler.load_state_dict(state.scheduler)
            restored.append("scheduler")
        if self.scaler is not None and state.scaler is not None:
            self.scaler.load_state_dict(state.scaler)
            restored.append("scaler")
        self.epoch, self.step = int(state.epoch), int(state.step)
        self.best_value, self.has_best = state.best_value, bool(state.has_best)
        if self.monitor_state is not None and state.monitor is not None:
            self.monitor_state.load_state_dict(state.monitor)  # resume checked the spec
        if state.epoch_complete:
            state.rng.restore(self.loaders)
        else:
            # Replay the interrupted epoch's order, skip the loader batches it already
            # trained, then continue from the RNG as it was at the stop.
            assert state.epoch_start_rng is not None  # TrainingState.from_tree checks it
            state.epoch_start_rng.restore(self.loaders)
            self._skip_batches = int(state.batches_done)
            self._rng_after_skip = state.rng
            self._resume_partial = state.partial_epoch
        return [*restored, "epoch", "best", "rng"]

    # -- lifecycle -----------------------------------------------------------------------
    def run(self) -> LoopOutcome:
        control, bus = self.control, self.bus
        bus.attach(control)
        outcome = LoopOutcome(RunStatus.FINISHED)
        tb = None
        try:
            steps_per_epoch = self._steps_per_epoch()
            bus.emit(
                RunStarted(
                    run_id=self.info.run_id,
                    run_dir=self.info.run_dir,
                    n_epochs=self.n_epochs,
                    start_epoch=self.epoch + 1,
                    start_step=self.step,
                    steps_per_epoch=steps_per_epoch,
                    config=self.info.config,
                    parent_run_id=self.info.parent_run_id,
                )
            )
            self._last_epoch = self.epoch + self.n_epochs
            while self.epoch < self._last_epoch and not control.stop_requested:
                self._train_epoch(self.epoch + 1)
                if self.collective is not None:
                    self._agree_at_epoch_end()
            if control.failure is not None:
                raise control.failure
            stopped_early = self.epoch < self._last_epoch  # a stop after the last epoch finishes
            if control.stop_requested and not control.complete and stopped_early:
                outcome.status = RunStatus.STOPPED
        except KeyboardInterrupt as exc:
            control.request_stop("interrupted (KeyboardInterrupt)")
            outcome = LoopOutcome(RunStatus.STOPPED, raised=exc)
        except BaseException as exc:
            outcome = LoopOutcome(RunStatus.FAILED, _describe(exc), exc)
            tb = traceback.format_exc()
        self._end(outcome, tb)
        return outcome

    def _end(self, outcome: LoopOutcome, tb: str | None) -> None:
        """Flush, let the writers save (``RunEnding``), then ``RunFinished``, always."""
        try:
            try:
                self._flush_steps()
            except Exception:
                if outcome.status is not RunStatus.FAILED:
                    raise  # the failure itself may lie in what was buffered: keep it
            acc = self._epoch_acc
            if (
                self.collective is not None
                and acc is not None
                and self._mid_epoch_batches > 0
                and outcome.status is RunStatus.STOPPED
            ):
                # rank 0 saves the interrupted epoch's sums: the union's, on every rank
                acc.union(self.reduce, self.gather)
            self.bus.emit(
                RunEnding(
                    status=outcome.status.value,
                    epoch=self.epoch,
                    step=self.step,
                    mid_epoch=self._mid_epoch_batches > 0,
                )
            )
        except BaseException as exc:
            if outcome.status is not RunStatus.FAILED:
                outcome.status, outcome.error = RunStatus.FAILED, _describe(exc)
                tb = traceback.format_exc()
            outcome.raised = outcome.raised or exc
        try:
            self.bus.emit(
                RunFinished(
                    run_id=self.info.run_id,  # type: ignore[arg-type]
                    status=outcome.status.value,
                    epochs_completed=self.epoch,
                    steps=self.step,
                    error=outcome.error,
                    traceback=tb,
                    stop_reason=self.control.stop_reason,
                )
            )
        finally:
            self.bus.detach()

    def _steps_per_epoch(self) -> int | None:
        try:
            n = len(self.params.train_loader)
        except TypeError:
            return None
        return math.ceil(n / self.params.accumulation_steps)

    # -- one epoch -----------------------------------------------------------------------
    def _reset_epoch(self) -> None:
        scorer = self._epoch_scorer
        self._epoch_acc = None if scorer is None else Accumulation(scorer)
        self._epoch_conf: np.ndarray | None = None
        self._epoch_loss_sum = 0.0
        self._epoch_weight = 0.0
        self._epoch_samples = 0
        self._last_record: StepRecord | None = None
        self._mid_epoch_batches = 0  # loader batches trained in the current epoch

    def _partial_epoch(self) -> dict[str, Any] | None:
        """The interrupted epoch's running sums (loss, confusion, declared metrics): a
        mid-epoch resume continues them, so the epoch's summary and the decision taken
        on it are the uninterrupted run's."""
        if self._mid_epoch_batches == 0:
            return None
        acc = self._epoch_acc
        cats: dict[str, torch.Tensor] = {}
        if acc is not None:
            for i, key in enumerate(acc.scorer.cat_keys):
                for name, chunks in acc.cats.get(key, {}).items():
                    cats[f"{i}.{name}"] = torch.cat(chunks).detach().cpu()
        conf = self._epoch_conf
        return {
            "loss_sum": self._epoch_loss_sum,
            "weight": self._epoch_weight,
            "samples": self._epoch_samples,
            "confusion": None if conf is None else torch.from_numpy(conf.copy()),
            "sums": None if acc is None or acc.sums is None else acc.sums.detach().cpu().clone(),
            "cats": cats,
        }

    def _restore_partial(self, saved: dict[str, Any]) -> None:
        self._epoch_loss_sum = float(saved["loss_sum"])
        self._epoch_weight = float(saved["weight"])
        self._epoch_samples = int(saved["samples"])
        conf = saved.get("confusion")
        self._epoch_conf = None if conf is None else conf.numpy().copy()
        acc = self._epoch_acc
        if acc is None or saved.get("sums") is None:
            return
        if self.collective is not None and int(self.collective.rank) != 0:
            # the saved sums are the union's (see _end): rank 0 carries them on, the
            # other ranks start from zero, so the epoch's union counts them once
            return
        device = self.train_step.device
        acc.sums = saved["sums"].to(device)
        keys = acc.scorer.cat_keys
        for label, t in (saved.get("cats") or {}).items():
            index, _, name = label.partition(".")
            acc.cats.setdefault(keys[int(index)], {})[name] = [t.to(device)]

    def _train_epoch(self, epoch: int) -> None:
        params, step = self.params, self.train_step
        t0 = time.perf_counter()
        self._epoch_start_rng = RngState.capture(self.loaders, host=False)
        self._reset_epoch()
        if self._resume_partial is not None:
            self._restore_partial(self._resume_partial)
            self._resume_partial = None
        self.bus.emit(EpochStarted(epoch, self.step))
        step.net.train()
        device, buffer, control, bus = step.device, self.buffer, self.control, self.bus
        accum = params.accumulation_steps
        emit_steps = bus.listens("on_step_ended")
        log_every = params.log_every
        skip, self._skip_batches = self._skip_batches, 0
        rng_after_skip, self._rng_after_skip = self._rng_after_skip, None
        param_groups = self.optimizer.param_groups
        epoch_acc = self._epoch_acc
        window: list[tuple[torch.Tensor, torch.Tensor]] = []
        raw: list[Any] = []  # the window's batches as the loader gave them (diagnosis only)
        batch_index = -1
        for batch_index, batch in enumerate(params.train_loader):
            if batch_index < skip:
                if batch_index == skip - 1 and rng_after_skip is not None:
                    rng_after_skip.restore()
                continue
            if self.collective is not None:  # a stop asked here travels with this step
                step.stop_flag = 1.0 if control.stop_requested else 0.0
            try:
                X, y = batch
                X = X.to(device, non_blocking=True)
                y = y.to(device, non_blocking=True)
                if accum > 1:
                    window.append((X, y))
                    raw.append((batch_index, batch))
                    if len(window) < accum:
                        continue
                    out = step.accumulated(window, self.step + 1)
                    window, raw = [], []
                else:
                    out = step(X, y, self.step + 1)
            except Exception as exc:
                self._explain(exc, raw or [(batch_index, batch)], epoch)
                raise
            self.step += 1
            if self.collective is not None and step.stop_agreed and not control.stop_requested:
                control.request_stop("stop requested on another rank")
            if epoch_acc is not None:
                epoch_acc.add(out.outputs, out.targets)  # type: ignore[arg-type]
            buffer.add(out, self.step, epoch, batch_index // accum, param_groups[0]["lr"])
            self._mid_epoch_batches = batch_index + 1
            if emit_steps:
                bus.emit(StepEnded(self.step, epoch, batch_index // accum, out.rows))
            if len(buffer) >= log_every:
                self._flush_steps()
            if control.stop_requested and (self.collective is None or step.stop_agreed):
                if control.failure is not None:
                    raise control.failure
                return
        if window:  # a short final window still updates, weighted by its real size
            try:
                out = step.accumulated(window, self.step + 1)
            except Exception as exc:
                self._explain(exc, raw, epoch)
                raise
            self.step += 1
            if epoch_acc is not None:
                epoch_acc.add(out.outputs, out.targets)  # type: ignore[arg-type]
            buffer.add(out, self.step, epoch, batch_index // accum, param_groups[0]["lr"])
            if emit_steps:
                bus.emit(StepEnded(self.step, epoch, batch_index // accum, out.rows))
        if batch_index < 0:
            raise RuntimeError("NNTrainParams.train_loader yielded no batch this epoch")
        self._end_epoch(epoch, t0)

    def _agree_at_epoch_end(self) -> None:
        """A stop asked during validation or an epoch's end reaches every rank here."""
        device = self.train_step.device
        flag = torch.tensor([1.0 if self.control.stop_requested else 0.0], device=device)
        if float(self.collective.sum(flag)[0]) > 0 and not self.control.stop_requested:
            self.control.request_stop("stop requested on another rank")

    def _explain(self, exc: Exception, batches: list[tuple[int, Any]], epoch: int) -> None:
        """Raise a DataError naming the batch that broke a step, when a check finds one."""
        if self.diagnose is None or isinstance(exc, FloatingPointError):
            return
        for index, batch in batches:
            problem = self.diagnose(
                batch, "NNTrainParams.train_loader", f"batch {index} of epoch {epoch}"
            )
            if problem is not None:
                raise problem from exc

    def _flush_steps(self) -> None:
        records, conf, weights = self.buffer.drain()
        if not records:
            return
        first_bad: StepRecord | None = None
        for rec, weight in zip(records, weights, strict=True):
            if weight:
                self._epoch_loss_sum += rec.loss * weight
                self._epoch_weight += weight
                if first_bad is None and not math.isfinite(rec.loss):
                    first_bad = rec
            self._epoch_samples += rec.samples
        if conf is not None:
            self._epoch_conf = conf if self._epoch_conf is None else self._epoch_conf + conf
        self._last_record = records[-1]
        self.bus.emit(StepMetrics(records=tuple(records)))
        if first_bad is not None and self.params.stop_on_nonfinite:
            raise FloatingPointError(
                f"non-finite training loss at step {first_bad.step} (epoch {first_bad.epoch}, "
                f"batch {first_bad.batch}): loss={first_bad.loss}. Look for NaN/inf in that "
                "batch's features or targets, lower max_lr or set grad_clip_norm; "
                "NNTrainParams(stop_on_nonfinite=False) lets the run go on"
            )

    def _train_summary(self) -> dict[str, float | None]:
        summary: dict[str, float | None] = {
            "loss": self._epoch_loss_sum / self._epoch_weight if self._epoch_weight else None,
            "samples": self._epoch_samples,
        }
        if self._epoch_conf is not None:
            kind = self.train_step.task.kind
            summary.update({k: float(v) for k, v in finalize(self._epoch_conf, kind).items()})
        task = self.train_step.task
        valid = int(self._epoch_conf.sum()) if self._epoch_conf is not None else None
        acc = self._epoch_acc
        if acc is not None:
            acc.union(self.reduce, self.gather)
            finals = acc.finalize()
            if finals is not None:
                counted, summary["metrics"] = acc.scorer.read(  # type: ignore[assignment]
                    finals.tolist(), "NNTrainParams.train_loader"
                )
                valid = counted if valid is None else valid
        if task.declared:
            summary["valid"] = valid
        return summary

    def _end_epoch(self, epoch: int, t0: float) -> None:
        self._flush_steps()
        step = self.train_step
        val = None
        if self.params.val_loader is not None:
            try:
                val = self.evaluator(
                    step.net,
                    self.params.val_loader,
                    step.loss,
                    step.task,
                    device=step.device,
                    precision=step.precision,
                    # a data-parallel run sums the shards' statistics across the ranks
                    **({} if self.reduce is None else {"reduce": self.reduce}),
                    **self._eval_kwargs,
                )
            except Exception as exc:
                self._explain_validation(exc, epoch)
                raise
            if not isinstance(val, EDP):
                name = getattr(self.evaluator, "__qualname__", type(self.evaluator).__name__)
                raise TypeError(
                    f"eval_step_fn {name} returned {type(val).__name__}; it must return an "
                    "EDP (nnx_lab.EDP(loss=..., error=..., samples=...))"
                )
        train = self._train_summary()
        val_json = None if val is None else val.to_json()
        record = None
        if self.monitor_state is not None:
            # One decision (§2.6): BEST, the plateau scheduler and EarlyStopping(monitor=)
            # follow it. The scheduler is fed the count of improvements, so it sees an
            # improvement exactly when the monitor does (optim.build_scheduler).
            monitor = self.monitor_state.spec
            record = self.monitor_state.observe(
                monitor.read(val_json if monitor.split == "val" else train)
            )
            available = record.status != "unavailable"
            signal = record.value if available else None
            source = monitor.source if available else None
            if self.scheduler is not None and available:
                self.scheduler.step(-float(self.monitor_state.improvements))
            improved = record.improved
        else:
            signal, source = selection_signal(val, self._last_record)
            if self.scheduler is not None and signal is not None:
                self.scheduler.step(signal)
            improved = signal is not None and (self.best_value is None or signal < self.best_value)
        self.last_monitor = record
        self.epoch = epoch
        self._mid_epoch_batches = 0
        # An epoch with no finite signal still leaves a BEST, as a baseline the next
        # finite epoch replaces (§2.11).
        baseline = signal is None and not self.has_best
        self.last_selection = "improved" if improved else "baseline" if baseline else None
        if improved:
            self.best_value = signal
        if improved or baseline:
            self.has_best = True
        last = self._last_record
        self.bus.emit(
            EpochEnded(
                epoch=epoch,
                step=self.step,
                lr=self.optimizer.param_groups[0]["lr"],
                train=train,
                val=val_json,
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
                selection=None if record is None else record.to_json(),
            )
        )

    def _explain_validation(self, exc: Exception, epoch: int) -> None:
        if self.diagnose is None:
            return
        with preserved_rng(self.loaders):  # a second pass must not move any generator
            for index, batch in enumerate(self.params.val_loader):
                where = f"validation batch {index} after epoch {epoch}"
                problem = self.diagnose(batch, "NNTrainParams.val_loader", where)
                if problem is not None:
                    raise problem from exc

    @property
    def final_epoch(self) -> bool:
        """Whether the epoch that just ended is the last this run trains."""
        return self.epoch >= self._last_epoch or self.control.stop_requested


def _accepted(fn: Callable[..., Any], offered: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``offered`` that ``fn`` takes (a custom ``eval_step_fn``
    decides whether and how to compute declared and extra metrics)."""
    if not offered:
        return {}
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return offered
    return {k: v for k, v in offered.items() if k in params}


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
