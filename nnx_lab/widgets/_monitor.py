"""TrainingMonitor: a live view of a training run, and a sink of its event stream."""

from __future__ import annotations

import collections
import functools
import logging
import math
import os
import pathlib
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import traitlets as t

from ..engine.events import (
    EpochEnded,
    Event,
    RunFinished,
    RunStarted,
    StepEnded,
    StepMetrics,
    TrainingControl,
    event_from_json,
)
from ._base import NNxWidget
from ._follow import JsonlTail
from ._jobs import BackgroundJob, format_exception
from ._protocol import APPEND, MAX_POINTS_PER_MESSAGE, RESET, STATUSES, EpochRow
from ._serialization import StepSeries, epoch_row, series_payload

__all__ = ["TrainingMonitor"]

log = logging.getLogger("nnx_lab.widgets")

_TERMINAL = ("stopped", "finished", "failed")
_RATE_WINDOW_S = 10.0


def _never_breaks_training(hook: Callable[..., None]) -> Callable[..., None]:
    """A display problem must not fail a training run: show it under the widget instead."""

    @functools.wraps(hook)
    def guarded(self: TrainingMonitor, *args: Any) -> None:
        try:
            hook(self, *args)
        except Exception as exc:
            log.exception("TrainingMonitor.%s failed; training goes on", hook.__name__)
            try:
                self.show_error(exc)
            except Exception:  # the comm itself is broken: the log has it
                log.debug("could not show the error under the widget", exc_info=True)

    return guarded


class TrainingMonitor(NNxWidget):
    """Live charts and counters of a training run, in JupyterLab or a notebook.

    Three ways in:

    * ``model.train(params=params, callbacks=[monitor])``: the monitor is a sink of
      the run's events; the cell blocks and the monitor updates while it runs (the
      Stop button only reaches the kernel once the cell ends: use ``fit`` for it).
    * ``monitor.fit(model, params)``: trains in a background thread and returns at
      once; the Stop button (or ``monitor.stop()``) ends the run after the current
      step; ``monitor.wait()`` returns the ``NNRun`` or re-raises the training error.
    * ``TrainingMonitor.from_run(run_id)``: replays ``runs/<id>/metrics.jsonl``, and
      follows it while another process is still writing it.

    The whole history stays in the kernel, so a reloaded page shows everything again.
    Updates to the front end are coalesced: at most one batch every
    ``update_interval`` seconds, whatever the step rate.
    """

    _bundle_name = "monitor"

    run_id = t.Unicode("", help="Id of the run shown.").tag(sync=True)
    status = t.Enum(STATUSES, default_value="created", help="Run lifecycle.").tag(sync=True)
    stop_reason = t.Unicode("", help="Why the run stopped, when it did.").tag(sync=True)
    epoch = t.Int(0, help="Current epoch (1-based; 0 before the first step).").tag(sync=True)
    n_epochs = t.Int(0, help="Last epoch this run trains; 0 when unknown.").tag(sync=True)
    step = t.Int(0, help="Global optimizer step reached.").tag(sync=True)
    total_steps = t.Int(None, allow_none=True, help="Global step at the end.").tag(sync=True)
    samples = t.Int(0, help="Training samples seen by this run.").tag(sync=True)
    samples_per_sec = t.Float(None, allow_none=True).tag(sync=True)
    elapsed = t.Float(0.0, help="Seconds since the run started.").tag(sync=True)
    eta = t.Float(None, allow_none=True, help="Seconds left, estimated.").tag(sync=True)
    can_stop = t.Bool(False, help="Whether Stop can reach the training loop.").tag(sync=True)
    smoothing = t.Float(0.9, min=0.0, max=0.999, help="EMA factor of the smoothed loss.").tag(
        sync=True
    )

    def __init__(self, *, update_interval: float = 0.1, smoothing: float = 0.9) -> None:
        if not 0.01 <= update_interval <= 10:
            raise ValueError(
                f"update_interval={update_interval!r} is out of range: pass seconds between "
                f"0.01 and 10 (0.1 sends about 10 updates a second)"
            )
        super().__init__(smoothing=smoothing)
        self.update_interval = float(update_interval)
        self._clock = time.monotonic  # replaceable in tests
        self._lock = threading.RLock()
        self._series = StepSeries()
        self._epochs: list[EpochRow] = []
        self._control: TrainingControl | None = None
        self._job: BackgroundJob | None = None
        self._log_path: pathlib.Path | None = None
        self._follow_thread: threading.Thread | None = None
        self._follow_stop = threading.Event()
        self._stop_pending: str | None = None
        self._ui_can_stop = False
        self._reset_run_state(send=False)  # no view exists yet

    # ------------------------------------------------------------------ state

    def _reset_run_state(self, *, send: bool = True) -> None:
        with self._lock:
            self._series.clear()
            self._epochs = []
            self._sent = 0
            self._epochs_sent = 0
            self._last_flush = -math.inf
            self._replaying = False
            self._finished = False
            self._start_step = 0
            self._steps_per_epoch: int | None = None
            self._t0_mono: float | None = None
            self._started_wall: float | None = None
            self._finished_wall: float | None = None
            self._samples_stepped = 0  # from StepEnded
            self._samples_recorded = 0  # from StepMetrics records
            self._step_seen = 0
            self._epoch_seen = 0
            self._n_epochs_run = 0
            self._rate_window: collections.deque[tuple[float, int, int]] = collections.deque()
            with self.hold_sync():
                self.run_id = ""
                self.status = "created"
                self.stop_reason = ""
                self.error = ""
                self.epoch = self.n_epochs = self.step = self.samples = 0
                self.total_steps = None
                self.samples_per_sec = None
                self.elapsed = 0.0
                self.eta = None
            if send:  # views drop what they hold
                self._send_series(RESET, 0, 0, 0)

    @property
    def loss_points(self) -> int:
        """Number of per-step loss points the monitor holds."""
        return len(self._series)

    @property
    def epoch_rows(self) -> list[EpochRow]:
        """The per-epoch rows (train summary and validation metrics), oldest first."""
        with self._lock:
            return list(self._epochs)

    def series(self) -> dict[str, list[float]]:
        """A copy of the per-step series: ``{"step": [...], "loss": [...], "lr": [...]}``."""
        with self._lock:
            return {name: col.tolist() for name, col in self._series.columns.items()}

    # ------------------------------------------------------------------ sink hooks

    @_never_breaks_training
    def on_attach(self, control: TrainingControl) -> None:
        with self._lock:
            self._control = control
            # A click reaches the kernel only while the main thread is free, i.e. when the
            # loop runs in another thread (fit). stop() from Python works either way.
            self._ui_can_stop = threading.current_thread() is not threading.main_thread()
            self.can_stop = self._ui_can_stop
            if self._stop_pending is not None:  # stop() came before the loop attached
                control.request_stop(self._stop_pending)
                self._stop_pending = None
                self.status = "stopping"

    @_never_breaks_training
    def on_detach(self) -> None:
        with self._lock:
            self._control = None
            self.can_stop = False
            self._flush()

    @_never_breaks_training
    def on_run_started(self, event: RunStarted) -> None:
        with self._lock:
            control, replaying = self._control, self._replaying
            self._reset_run_state(send=not replaying)
            self._control, self._replaying = control, replaying
            self._start_step = int(event.start_step)
            self._steps_per_epoch = event.steps_per_epoch
            self._t0_mono = self._clock()
            self._started_wall = float(event.time)
            self._step_seen = self._start_step
            self._epoch_seen = int(event.start_epoch)
            with self.hold_sync():
                self.run_id = event.run_id
                stopping = control is not None and control.stop_requested
                self.status = "stopping" if stopping else "running"
                self.can_stop = control is not None and self._ui_can_stop
                self.step = self._start_step
                self.epoch = self._epoch_seen
                self.n_epochs = int(event.start_epoch) + int(event.n_epochs) - 1
                self.total_steps = self._expected_total_steps(int(event.n_epochs))
            self._n_epochs_run = int(event.n_epochs)

    @_never_breaks_training
    def on_step_ended(self, event: StepEnded) -> None:
        self._samples_stepped += event.samples
        self._step_seen = event.step
        self._epoch_seen = event.epoch
        if self._clock() - self._last_flush >= self.update_interval:
            self._flush()

    @_never_breaks_training
    def on_step_metrics(self, event: StepMetrics) -> None:
        with self._lock:
            self._series.extend(event.records)
            self._samples_recorded += sum(int(r.samples) for r in event.records)
            if event.records:
                last = event.records[-1]
                if last.step > self._step_seen:
                    self._step_seen, self._epoch_seen = last.step, last.epoch
        if self._clock() - self._last_flush >= self.update_interval:
            self._flush()

    @_never_breaks_training
    def on_epoch_ended(self, event: EpochEnded) -> None:
        with self._lock:
            self._epochs.append(epoch_row(event))
            self._step_seen = max(self._step_seen, int(event.step))
            self._epoch_seen = max(self._epoch_seen, int(event.epoch))
            if self._steps_per_epoch is None and len(self._epochs) == 1:
                self._steps_per_epoch = int(event.step) - self._start_step
                self.total_steps = self._expected_total_steps(self._n_epochs_run)
            self._flush()

    @_never_breaks_training
    def on_run_finished(self, event: RunFinished) -> None:
        with self._lock:
            self._finished = True
            self._finished_wall = float(event.time)
            self._step_seen = max(self._step_seen, int(event.steps))
            with self.hold_sync():
                self.status = event.status if event.status in _TERMINAL else "finished"
                self.stop_reason = event.stop_reason or ""
                if event.status == "failed":
                    text = event.error or "training failed"
                    if event.traceback:
                        text = f"{text}\n\n{event.traceback.rstrip()}"
                    self.error = text
                self.can_stop = False
            self._flush()

    # ------------------------------------------------------------------ sending

    def _expected_total_steps(self, n_epochs: int) -> int | None:
        if self._steps_per_epoch is None:
            return None
        return self._start_step + self._steps_per_epoch * n_epochs

    def _send_series(self, kind: str, start: int, stop: int, epochs_start: int) -> None:
        """Send points ``[start, stop)`` and epoch rows from ``epochs_start``, chunked."""
        epochs = self._epochs[epochs_start:]
        first = True
        lo = start
        while first or lo < stop:
            hi = min(stop, lo + MAX_POINTS_PER_MESSAGE)
            content, buffers = series_payload(
                kind if first else APPEND,
                self._series,
                lo,
                hi,
                epochs if first else [],
                epochs_start if first else len(self._epochs),
            )
            self.send(content, buffers=buffers)
            first, lo = False, hi

    def _flush(self) -> None:
        """Send what is new since the last message, and refresh the counters."""
        with self._lock:
            if self._replaying:  # from_run sends once, after reading the whole log
                return
            now = self._clock()
            self._last_flush = now
            n, e = len(self._series), len(self._epochs)
            if n > self._sent or e > self._epochs_sent:
                self._send_series(APPEND, self._sent, n, self._epochs_sent)
                self._sent, self._epochs_sent = n, e
            self._update_counters(now)

    def _update_counters(self, now: float) -> None:
        samples = max(self._samples_stepped, self._samples_recorded)
        step = self._step_seen
        elapsed = self._elapsed(now)
        if not self._replaying and not self._finished:
            self._rate_window.append((now, step, samples))
            while len(self._rate_window) > 2 and now - self._rate_window[0][0] > _RATE_WINDOW_S:
                self._rate_window.popleft()
        sps, steps_ps = self._rates(step, samples, elapsed)
        eta = None
        if not self._finished and self.total_steps is not None and steps_ps:
            eta = max(0.0, (self.total_steps - step) / steps_ps)
        with self.hold_sync():
            self.step = step
            self.epoch = self._epoch_seen
            self.samples = samples
            self.elapsed = round(elapsed, 3)
            self.samples_per_sec = None if sps is None else round(sps, 3)
            self.eta = None if eta is None else round(eta, 3)

    def _elapsed(self, now_mono: float) -> float:
        if self._started_wall is None:
            return 0.0
        if self._finished_wall is not None:
            return max(0.0, self._finished_wall - self._started_wall)
        if self._log_path is None and self._t0_mono is not None:
            return max(0.0, now_mono - self._t0_mono)
        return max(0.0, time.time() - self._started_wall)

    def _rates(self, step: int, samples: int, elapsed: float) -> tuple[float | None, float | None]:
        """(samples/s, steps/s): over the last seconds while live, else overall."""
        w = self._rate_window
        if not self._finished and len(w) >= 2 and w[-1][0] - w[0][0] >= 0.5:
            dt = w[-1][0] - w[0][0]
            return (w[-1][2] - w[0][2]) / dt, (w[-1][1] - w[0][1]) / dt
        if elapsed > 0 and samples > 0:
            return samples / elapsed, (step - self._start_step) / elapsed
        return None, None

    # ------------------------------------------------------------------ front end

    def _on_hello(self, content: dict[str, Any], buffers: list[Any]) -> None:
        """A view was (re)rendered: send it the whole history."""
        with self._lock:
            n, e = len(self._series), len(self._epochs)
            self._send_series(RESET, 0, n, 0)
            self._sent, self._epochs_sent = n, e

    def _on_stop(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self.stop()

    def stop(self, reason: str = "stop requested from the monitor") -> None:
        """Ask the run to stop after its current step (the Stop button does this).

        The run writes its LAST checkpoint and records status "stopped"; the monitor
        shows "stopping" until then. A run followed from a log cannot be stopped here.
        """
        with self._lock:
            if self._control is None:
                if self._job is not None and self._job.is_alive():
                    self._stop_pending = reason  # fit() started; the loop attaches soon
                    return
                if self._log_path is not None and self.status == "running":
                    raise RuntimeError(
                        "this monitor follows a run written by another process; stop it "
                        "there (interrupt that kernel or process)"
                    )
                return
            if self.status not in ("created", "running"):
                return
            self._control.request_stop(reason)
            self.status = "stopping"

    # ------------------------------------------------------------------ fit

    def fit(
        self, model: Any, params: Any, *, callbacks: Iterable[Any] = (), **train_kwargs: Any
    ) -> TrainingMonitor:
        """Train ``model`` in a background thread and return at once (returns ``self``).

        Runs ``model.train(params=params, callbacks=[self, *callbacks], **train_kwargs)``.
        ``stop()`` or the Stop button ends it after the current step; ``wait()`` gives
        the ``NNRun`` (or re-raises the training error); ``run`` is the ``NNRun`` once
        done.
        """
        with self._lock:
            if self._job is not None and self._job.is_alive():
                raise RuntimeError(
                    f"this monitor is already training (run {self.run_id or 'starting'}); "
                    f"call stop() or wait() first, or use another TrainingMonitor"
                )
            if self._log_path is not None:
                raise RuntimeError(
                    "this monitor shows a run from its log (from_run); create a new "
                    "TrainingMonitor() to train"
                )
            self._reset_run_state()
            self._stop_pending = None
            sinks = [self, *callbacks]

            def target() -> Any:
                return model.train(params=params, callbacks=sinks, **train_kwargs)

            self._job = BackgroundJob(
                target, name="nnx-monitor-fit", on_error=self._on_training_error
            )
            self._job.start()
        return self

    def _on_training_error(self, exc: BaseException) -> None:
        with self._lock:
            with self.hold_sync():
                if not self.error:  # RunFinished may already have brought it
                    self.error = format_exception(exc)
                self.status = "failed"
                self.can_stop = False
            self._finished = True
            self._flush()

    @property
    def run(self) -> Any:
        """The ``NNRun`` of the last ``fit``, once it has ended; else ``None``."""
        job = self._job
        if job is None or job.is_alive():
            return None
        return job.result

    def wait(self, timeout: float | None = None) -> Any:
        """Wait for the ``fit`` run; return its ``NNRun`` or re-raise its exception.

        Raises ``TimeoutError`` when it is still running after ``timeout`` seconds.
        Without a ``fit`` (a blocking ``train`` or ``from_run``) it returns ``None``
        at once, unless it follows a log: then it waits for the run to finish.
        """
        job = self._job
        if job is None:
            thread = self._follow_thread
            if thread is not None:
                thread.join(timeout)
                if thread.is_alive():
                    raise TimeoutError(f"run {self.run_id} still being written after {timeout}s")
            return None
        if not job.join(timeout):
            raise TimeoutError(
                f"training still running after {timeout}s; call wait() again or stop()"
            )
        if job.exception is not None:
            raise job.exception
        return job.result

    # ------------------------------------------------------------------ from a log

    @classmethod
    def from_run(
        cls,
        run_id: str,
        runs_root: str | os.PathLike[str] = "runs",
        follow: bool = True,
        *,
        poll_interval: float = 0.25,
        update_interval: float = 0.1,
        smoothing: float = 0.9,
    ) -> TrainingMonitor:
        """Show a run from ``<runs_root>/<run_id>/metrics.jsonl``.

        With ``follow=True`` and a run that has not finished (another process still
        writes it), a thread polls the file every ``poll_interval`` seconds until the
        run finishes or ``close()`` is called.
        """
        run_dir = pathlib.Path(runs_root) / str(run_id)
        if not run_dir.is_dir():
            raise FileNotFoundError(
                f"no run {run_id!r} under {pathlib.Path(runs_root).resolve()}: the folder "
                f"{run_dir} does not exist; check the id, or pass runs_root="
            )
        if poll_interval <= 0:
            raise ValueError(f"poll_interval={poll_interval!r}: pass a positive number of seconds")
        monitor = cls(update_interval=update_interval, smoothing=smoothing)
        monitor._log_path = run_dir / "metrics.jsonl"
        monitor.run_id = str(run_id)
        tail = JsonlTail(monitor._log_path)
        monitor._replaying = True
        try:
            monitor._consume(tail.read(), tail)
        finally:
            monitor._replaying = False
        monitor._flush()
        if not monitor._finished:
            if follow:
                monitor._follow_thread = threading.Thread(
                    target=monitor._follow_loop,
                    args=(tail, float(poll_interval)),
                    name=f"nnx-monitor-follow-{run_id}",
                    daemon=True,
                )
                monitor._follow_thread.start()
            else:
                monitor._apply_metadata_status(run_dir)
        return monitor

    def _consume(self, lines: list[dict[str, Any]], tail: JsonlTail) -> None:
        if tail.restarted:
            self._reset_run_state()
        for obj in lines:
            try:
                event: Event = event_from_json(obj)
            except (ValueError, TypeError, KeyError) as exc:
                log.warning("%s: skipping a log line: %s", tail.path, exc)
                continue
            hook = getattr(self, event.hook, None)
            if hook is not None:
                hook(event)

    def _follow_loop(self, tail: JsonlTail, poll_interval: float) -> None:
        last_tick = time.monotonic()
        while not self._follow_stop.wait(poll_interval):
            try:
                lines = tail.read()
                self._consume(lines, tail)
                if self._finished:
                    return
                now = time.monotonic()
                if now - last_tick >= 1.0 or lines:  # keep elapsed/ETA moving
                    self._flush()
                    last_tick = now
            except Exception as exc:  # shown under the widget, never lost
                log.exception("following %s failed", tail.path)
                self.show_error(exc)
                return

    def _apply_metadata_status(self, run_dir: pathlib.Path) -> None:
        """Without a run_finished line, take the status recorded in metadata.yaml."""
        try:
            import yaml

            data = yaml.safe_load((run_dir / "metadata.yaml").read_text(encoding="utf-8"))
        except (OSError, ValueError, ImportError) as exc:
            log.debug("no status from %s: %s", run_dir, exc)
            return
        status = data.get("status") if isinstance(data, dict) else None
        if status in _TERMINAL:
            self.status = status

    def close(self) -> None:
        """Stop following a log (if it does) and close the widget's front end."""
        stop = getattr(self, "_follow_stop", None)  # absent if __init__ failed
        if stop is not None:
            stop.set()
        thread = getattr(self, "_follow_thread", None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        super().close()

    # ------------------------------------------------------------------ text

    def summary(self) -> str:
        """One line: run, status, epoch, step and the last loss."""
        parts = [f"run={self.run_id or '-'}", f"status={self.status}"]
        if self.n_epochs:
            parts.append(f"epoch {self.epoch}/{self.n_epochs}")
        elif self.epoch:
            parts.append(f"epoch {self.epoch}")
        if self.total_steps:
            parts.append(f"step {self.step}/{self.total_steps}")
        else:
            parts.append(f"step {self.step}")
        with self._lock:
            loss = self._series.last("loss")
        if loss is not None and math.isfinite(loss):
            parts.append(f"loss {loss:.4g}")
        return ", ".join(parts)

    def __repr__(self) -> str:
        text = f"TrainingMonitor({self.summary()})"
        if self.error:
            text += "\n" + self.error.splitlines()[0]
        return text

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))
