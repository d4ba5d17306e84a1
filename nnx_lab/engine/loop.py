"""The training loop: run the steps, fire events, nothing else.

The loop needs no run directory. Whatever records a run (its directory and metadata,
the JSONL log, the checkpoints and the BEST/LAST policy) is a handler on the event
stream that ``NNModel.train`` attaches; a loop with none of them trains with no file
written (an LR sweep, a plan probe, a non-zero distributed rank).

The hot path keeps per-step values on the device (``StepBuffer``) and reads them back
in bulk every ``log_every`` steps and at each epoch end, into the epoch's running sums
(``EpochSums``). Each epoch ends with the validation pass (``Validation``) and one
selection decision (``Selector``); ``loop_state`` captures and restores the loop for a
resume, also in the middle of an epoch.
"""

from __future__ import annotations

import functools
import math
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..data.metrics import MetricSpec
from ..errors import NonFiniteLossError
from .collective import rank_failure
from .edp import EDP
from .enums import RunStatus
from .epoch_sums import EpochSums
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
from .fast_batches import batches
from .loop_state import ResumeCursor, capture_state, load_state
from .optim import optimizer_topology
from .params import NNTrainParams
from .scoring import Scorer, gather_rows, scorer_specs
from .selection import MonitorRecord, Selector
from .sinks import EventBus
from .staging import device_hook, staged
from .step_batches import StepBatch
from .step_buffer import StepBuffer
from .train_step import TrainStep
from .training_state import RngState, TrainingState
from .validation import Validation

__all__ = ["LoopOutcome", "RunInfo", "TrainingLoop"]

# The fields of the epoch's last step record that EpochEnded.train_last carries.
_TRAIN_LAST = ("loss", "error", "accuracy", "precision", "recall", "f1")


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
        self._setup_metrics(step, params, evaluator)
        self.buffer = StepBuffer(
            step.record_task,
            step.loss,
            self.reduce,
            scorer=self._step_scorer,
            extra=params.extra_metrics,
            collective=self.collective,
        )
        self.selector = Selector(params.monitor)
        self.last_monitor: MonitorRecord | None = None
        self.step = 0  # optimizer steps completed
        self.epoch = 0  # epochs completed
        self.last_selection: str | None = None  # "improved" | "baseline" | None, this epoch
        self.resume_cursor: ResumeCursor | None = None  # set by a mid-epoch resume
        self.epoch_start_rng: RngState | None = None
        self._last_epoch = 0
        self.outcome: LoopOutcome | None = None  # set when the run ends (see _end)
        # the sums exist before the first epoch: a stop can flush into them
        self.sums = EpochSums(step.record_task, self._epoch_scorer)

    def _setup_metrics(
        self, step: TrainStep, params: NNTrainParams, evaluator: Callable[..., EDP] | None
    ) -> None:
        """Scorers for a declared task's per-step metrics and for the whole-epoch
        summary (task metrics and ``params.metrics``), and the validation pass with what
        its evaluator is given."""
        task, device = step.record_task, step.device
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
        self.validation = Validation(evaluator, offered, reduce=self.reduce, diagnose=self.diagnose)

    @property
    def loaders(self) -> list[Any]:
        return [self.params.train_loader, self.params.val_loader]

    # -- state ---------------------------------------------------------------------------
    def capture_state(self, complete: bool) -> TrainingState:
        """Everything a stateful resume restores; see ``loop_state`` and docs/resume.md."""
        return capture_state(self, complete)

    def load_state(self, state: TrainingState) -> list[str]:
        """Continue from ``state`` (validated by the resume plan); returns what was restored."""
        return load_state(self, state)

    # -- lifecycle -----------------------------------------------------------------------
    def run(self) -> LoopOutcome:
        control, bus = self.control, self.bus
        bus.attach(control)
        self._attach_to_collective(control)
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
            # Under a collective every rank decides on the same, agreed, flag: a stop
            # that one rank saw alone (another thread sets it at any time) would send it
            # out of the loop while the others train on, waiting for it.
            while self.epoch < self._last_epoch and not self._stop_agreed():
                self._train_epoch(self.epoch + 1)
            if control.failure is not None:
                raise control.failure
            stopped_early = self.epoch < self._last_epoch  # a stop after the last epoch finishes
            if control.stop_requested and not control.complete and stopped_early:
                outcome.status = RunStatus.STOPPED
        except KeyboardInterrupt as exc:
            control.request_stop("interrupted (KeyboardInterrupt)")
            outcome = LoopOutcome(RunStatus.STOPPED, raised=exc)
        except BaseException as exc:
            tb = traceback.format_exc()
            if self.collective is not None:  # the others learn it; or it was another's
                exc, tb = rank_failure(self.collective, exc, tb)
            outcome = LoopOutcome(RunStatus.FAILED, _describe(exc), exc)
        self._end(outcome, tb)
        return outcome

    def _end(self, outcome: LoopOutcome, tb: str | None) -> None:
        """Flush, let the writers save (``RunEnding``), then ``RunFinished``, always.

        ``self.outcome`` is the end as the writers see it at ``RunEnding``; a writer
        that cannot save there (a full disk) turns the run "failed" before
        ``RunFinished`` tells anyone how it ended."""
        self.outcome = outcome
        # A failed rank of a collective run does no further collective: the others are
        # gone, or wait in another one (a flush reduces across ranks). The steps since
        # the last flush are not logged.
        broken = self.collective is not None and outcome.status is RunStatus.FAILED
        try:
            try:
                if not broken:
                    self._flush_steps()
            except Exception:
                if outcome.status is not RunStatus.FAILED:
                    raise  # the failure itself may lie in what was buffered: keep it
            if (
                self.collective is not None
                and self.sums.batches > 0
                and outcome.status is RunStatus.STOPPED
            ):
                # rank 0 saves the interrupted epoch's sums: the union's, on every rank
                self.sums.union(self.reduce, self.gather)
            self.bus.emit(
                RunEnding(
                    status=outcome.status.value,
                    epoch=self.epoch,
                    step=self.step,
                    mid_epoch=self.sums.batches > 0,
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
            self._attach_to_collective(None)
            self.bus.detach()

    def _attach_to_collective(self, control: TrainingControl | None) -> None:
        """The collective may end the run through its control (torchrun's SIGTERM)."""
        attach = getattr(self.collective, "attach_control", None)
        if attach is not None:
            attach(control)

    def _steps_per_epoch(self) -> int | None:
        try:
            n = len(self.params.train_loader)
        except TypeError:
            return None
        return math.ceil(n / self.params.accumulation_steps)

    def _train_epoch(self, epoch: int) -> None:
        params, step = self.params, self.train_step
        t0 = time.perf_counter()
        self.epoch_start_rng = RngState.capture(self.loaders, host=False)
        sums = self.sums = EpochSums(step.record_task, self._epoch_scorer)
        step.epoch = epoch
        cursor, self.resume_cursor = self.resume_cursor, None
        if cursor is not None and cursor.partial is not None:
            # in a data-parallel run the saved statistics are the union's (see _end):
            # rank 0 carries them on, the other ranks start from zero
            rank = 0 if self.collective is None else int(self.collective.rank)
            sums.restore(cursor.partial, step.device, statistics=rank == 0)
        self.bus.emit(EpochStarted(epoch, self.step))
        step.net.train()
        device, buffer, control, bus = step.device, self.buffer, self.control, self.bus
        accum = params.accumulation_steps
        emit_steps = bus.listens("on_step_ended")
        log_every = params.log_every
        skip = 0 if cursor is None else cursor.skip
        rng_after_skip = None if cursor is None else cursor.rng
        param_groups = self.optimizer.param_groups
        window: list[tuple[torch.Tensor, torch.Tensor]] = []
        raw: list[Any] = []  # the window's batches as the loader gave them (diagnosis only)
        batch_index = -1
        # the fast path for tensor data, and on CUDA the next batch staged ahead
        loader_batches = staged(batches(params.train_loader), device_hook(device))
        for batch_index, batch in enumerate(loader_batches):
            if batch_index < skip:
                if batch_index == skip - 1 and rng_after_skip is not None:
                    rng_after_skip.restore()
                continue
            if self.collective is not None:  # a stop asked here travels with this step
                step.stop_flag = 1.0 if control.stop_requested else 0.0
            step.batch_index = batch_index  # a train_step_fn's ctx.batch_idx
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
            except NonFiniteLossError as exc:
                rows = sum(int(b[1].shape[0]) for b in window) if window else int(y.shape[0])
                self._log_diverged(exc, epoch, batch_index // accum, rows)
                raise self._diverged(exc, epoch, batch_index // accum) from None
            except Exception as exc:
                self._explain(exc, raw or [(batch_index, batch)], epoch)
                raise
            if out is None:  # an objective's nonfinite="skip": no update was applied
                sums.skipped += 1
                continue
            self.step += out.updates
            if self.collective is not None and step.stop_agreed and not control.stop_requested:
                control.request_stop("stop requested on another rank")
            sums.add_outputs(out)
            buffer.add(out, self.step, epoch, batch_index // accum, param_groups[0]["lr"])
            sums.batches = batch_index + 1
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
            except NonFiniteLossError as exc:
                rows = sum(int(b[1].shape[0]) for b in window)
                self._log_diverged(exc, epoch, batch_index // accum, rows)
                raise self._diverged(exc, epoch, batch_index // accum) from None
            except Exception as exc:
                self._explain(exc, raw, epoch)
                raise
            if out is None:
                sums.skipped += 1
                window = []
        if window:
            self.step += out.updates
            sums.add_outputs(out)
            buffer.add(out, self.step, epoch, batch_index // accum, param_groups[0]["lr"])
            if emit_steps:
                bus.emit(StepEnded(self.step, epoch, batch_index // accum, out.rows))
        if batch_index < 0:
            raise RuntimeError("NNTrainParams.train_loader yielded no batch this epoch")
        self._end_epoch(epoch, t0)

    def _stop_agreed(self) -> bool:
        """Whether to stop before the next epoch. Under a collective, any rank's stop
        (asked before the first epoch, during validation or at an epoch's end) reaches
        every rank here, and every rank answers alike."""
        if self.collective is None:
            return self.control.stop_requested
        device = self.train_step.device
        flag = torch.tensor([1.0 if self.control.stop_requested else 0.0], device=device)
        agreed = float(self.collective.sum(flag)[0]) > 0
        if agreed and not self.control.stop_requested:
            self.control.request_stop("stop requested on another rank")
        return agreed

    def _log_diverged(self, exc: NonFiniteLossError, epoch: int, batch: int, rows: int) -> None:
        """The steps before, then the step whose loss was not finite, as records: the
        log and the monitor show where the run went wrong (its update was not applied)."""
        self._flush_steps()
        lr, lrs = _rates(self.train_step, self.optimizer)
        record = StepRecord(self.step + 1, epoch, batch, lr, rows, exc.loss, lrs=lrs)
        self.bus.emit(StepMetrics(records=(record,)))

    def _diverged(self, exc: NonFiniteLossError, epoch: int, batch: int) -> NonFiniteLossError:
        return NonFiniteLossError(
            f"non-finite training loss at step {self.step + 1} (epoch {epoch}, batch {batch}):"
            f" loss={exc.loss} — training diverged, and this update was not applied. Look "
            "for NaN/inf in that batch's features or targets, lower max_lr, set "
            "NNOptimParams.grad_clip_norm or normalize the inputs; "
            "NNTrainParams(stop_on_nonfinite=False) lets the run go on",
            exc.loss,
        )

    def _explain(self, exc: Exception, batches: list[tuple[int, Any]], epoch: int) -> None:
        """Raise a DataError naming the batch that broke a step, when a check finds one."""
        if self.diagnose is None or isinstance(exc, FloatingPointError):
            return
        for index, batch in batches:
            if type(batch[0]) is StepBatch:  # the step's own batch: no (X, y) check applies
                continue
            problem = self.diagnose(
                batch, "NNTrainParams.train_loader", f"batch {index} of epoch {epoch}"
            )
            if problem is not None:
                raise problem from exc

    def _flush_steps(self) -> None:
        records, counts, weights = self.buffer.drain()
        if not records:
            return
        first_bad = self.sums.add_records(records, counts, weights)
        self.bus.emit(StepMetrics(records=tuple(records)))
        if first_bad is not None and self.params.stop_on_nonfinite:
            raise FloatingPointError(
                f"non-finite training loss at step {first_bad.step} (epoch {first_bad.epoch}, "
                f"batch {first_bad.batch}): loss={first_bad.loss}. Look for NaN/inf in that "
                "batch's features or targets, lower max_lr or set grad_clip_norm; "
                "NNTrainParams(stop_on_nonfinite=False) lets the run go on"
            )

    def _end_epoch(self, epoch: int, t0: float) -> None:
        self._flush_steps()
        loader = self.params.val_loader
        val = None
        if loader is not None:
            val = self.validation(self.train_step, loader, epoch, self.loaders)
        train = self.sums.summary(self.reduce, self.gather)
        last = self.sums.last_record
        # One decision (§2.6): BEST, the plateau scheduler and EarlyStopping(monitor=)
        # follow it.
        chosen = self.selector.decide(val, train, last)
        if self.scheduler is not None and chosen.plateau is not None:
            self.scheduler.step(chosen.plateau)
        plateau = getattr(self.train_step, "plateau_step", None)
        if plateau is not None and chosen.plateau is not None:
            plateau(chosen.plateau)  # a Trainer's named schedulers, on the same signal
        self.last_monitor = chosen.record
        self.last_selection = chosen.best
        self.epoch = epoch
        self.sums.batches = 0
        self.bus.emit(
            EpochEnded(
                epoch=epoch,
                step=self.step,
                lr=_rates(self.train_step, self.optimizer)[0],
                train=train,
                val=None if val is None else val.to_json(),
                signal=chosen.signal,
                signal_source=chosen.source,
                improved=chosen.improved,
                seconds=time.perf_counter() - t0,
                train_last=None
                if last is None
                else {k: v for k, v in last.__dict__.items() if k in _TRAIN_LAST},
                selection=None if chosen.record is None else chosen.record.to_json(),
            )
        )

    @property
    def final_epoch(self) -> bool:
        """Whether the epoch that just ended is the last this run trains."""
        return self.epoch >= self._last_epoch or self.control.stop_requested


def _rates(step: TrainStep, optimizer: Any) -> tuple[float | None, dict[str, float] | None]:
    """The rate a record carries: each named optimizer's (``lrs``, and no single ``lr``)
    for a step that reports them (the Trainer's), else the optimizer's."""
    named = getattr(step, "current_lrs", None)
    lrs = named() if callable(named) else None
    return (None, lrs) if lrs else (float(optimizer.param_groups[0]["lr"]), None)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
