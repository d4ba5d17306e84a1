"""TrainingMonitor: a live view of a training run, and a sink of its event stream.

This module holds the widget's traits, its state and its event hooks. What it does
besides is in its own modules, mixed into the one class: training in a background
thread and races (``_monitor_jobs``), runs read from their logs, followed or compared
(``_monitor_replay``), and the text and picture shown where no live view is
(``_monitor_text``). The counters come from ``_monitor_progress``, the series from
``_monitor_series``, a race's lanes from ``_race``.
"""

from __future__ import annotations

import itertools
import logging
import pathlib
import threading
import time
from typing import Any

import traitlets as t

from ..engine.events import (
    EpochEnded,
    RunFinished,
    RunStarted,
    StepEnded,
    StepMetrics,
    TrainingControl,
)
from ..runs import request_stop
from ._base import NNxWidget, never_breaks
from ._monitor_figures import MonitorFigures
from ._monitor_health import MonitorHealth
from ._monitor_jobs import MonitorJobs
from ._monitor_lanes import MonitorLanes
from ._monitor_progress import RunProgress
from ._monitor_replay import MonitorReplay
from ._monitor_report import MonitorReport
from ._monitor_series import (
    STEP_PREFIXES,
    add_epoch,
    add_steps,
    epoch_rows,
    epoch_series,
    finite,
    step_series,
)
from ._monitor_text import MonitorText
from ._page_messages import RunMessages
from ._protocol import STATUSES
from ._race import LaneHost, RaceLane
from ._transport import SeriesTransport

__all__ = ["TrainingMonitor"]

log = logging.getLogger("nnx_lab.widgets")

TERMINAL = ("stopped", "finished", "failed")


def _parent_of(run_dir: str | None) -> str:
    """The real path of the folder that holds a run's folder ("" when unknown)."""
    if not run_dir:
        return ""
    try:
        return str(pathlib.Path(run_dir).resolve().parent)
    except (OSError, RuntimeError):
        return ""


def _run_labels(config: dict[str, Any] | None) -> tuple[str, str, str]:
    """(task kind, monitored series key, monitor mode) from a run's configuration."""
    config = config or {}
    task = (config.get("model") or {}).get("task") or {}
    monitor = (config.get("train") or {}).get("monitor") or {}
    key = f"{monitor.get('split', 'val')}.{monitor['metric']}" if monitor.get("metric") else ""
    return str(task.get("kind") or ""), key, str(monitor.get("mode") or "")


def _positive_int(value: Any, name: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name}={value!r} is out of range: pass an integer >= {least}")
    return value


class TrainingMonitor(
    MonitorJobs,
    MonitorReplay,
    MonitorText,
    MonitorFigures,
    MonitorReport,
    MonitorHealth,
    MonitorLanes,
    RunMessages,
    NNxWidget,
):
    """Live charts and counters of a training run, in JupyterLab or a notebook.

    Three ways in:

    * ``model.train(params=params, callbacks=[monitor])``: the monitor is a sink of
      the run's events; the cell blocks and the monitor updates while it runs (the
      Stop button only reaches the kernel once the cell ends: use ``fit`` for it).
    * ``monitor.fit(model, params)``: trains in a background thread and returns at
      once; the Stop button (or ``monitor.stop()``) ends the run after the current
      step; ``monitor.wait()`` returns the ``NNRun`` or re-raises the training error.
    * ``TrainingMonitor.from_run(run_id)``: replays ``<runs_root>/<id>/metrics.jsonl``,
      and follows it while another process is still writing it.

    Memory is bounded whatever the length of the run: the monitor keeps at most
    ``max_points`` rows of the step series and ``max_epochs`` rows of the epoch
    series. Past that, neighbouring rows merge in pairs (mean, minimum and maximum
    of each value, so spikes survive); the run's log on disk keeps every step. The
    kept history lives in the kernel, so a reloaded page shows it again. Updates
    to the browser are coalesced: at most one every ``update_interval`` seconds.
    """

    _bundle_name = "monitor"
    # What the page may set: the smoothing slider. The kernel owns the rest.
    _page_traits = NNxWidget._page_traits | {"smoothing"}

    run_id = t.Unicode("", help="Id of the run shown.").tag(sync=True)
    status = t.Enum(STATUSES, default_value="created", help="Run lifecycle.").tag(sync=True)
    stop_reason = t.Unicode("", help="Why the run stopped or ended early.").tag(sync=True)
    epoch = t.Int(0, help="Current epoch (1-based; 0 before the first step).").tag(sync=True)
    n_epochs = t.Int(0, help="Last epoch this run trains; 0 when unknown.").tag(sync=True)
    step = t.Int(0, help="Global optimizer step reached.").tag(sync=True)
    total_steps = t.Int(None, allow_none=True, help="Global step at the end.").tag(sync=True)
    samples = t.Int(0, help="Training samples seen by this run.").tag(sync=True)
    samples_per_sec = t.Float(None, allow_none=True).tag(sync=True)
    elapsed = t.Float(0.0, help="Seconds since the run started.").tag(sync=True)
    eta = t.Float(None, allow_none=True, help="Seconds left, estimated.").tag(sync=True)
    can_stop = t.Bool(False, help="Whether Stop can reach the training loop.").tag(sync=True)
    from_log = t.Bool(False, help="The run is read from its log (from_run).").tag(sync=True)
    smoothing = t.Float(0.9, min=0.0, max=0.999, help="EMA factor of the smoothed loss.").tag(
        sync=True
    )
    last_loss = t.Float(
        None, allow_none=True, help="The latest step's loss; None when it is non-finite."
    ).tag(sync=True)
    last_finite_loss = t.Float(None, allow_none=True).tag(sync=True)
    last_finite_step = t.Int(None, allow_none=True).tag(sync=True)
    loss_nonfinite_since = t.Int(
        None,
        allow_none=True,
        help="First step of the current run of non-finite losses; None when the latest "
        "loss is finite.",
    ).tag(sync=True)
    loss_nonfinite_steps = t.Int(0, help="Steps whose loss was non-finite.").tag(sync=True)
    snapshot_of = t.Unicode(
        "", help="'<run id>:<status>' of the picture the fallback output holds."
    ).tag(sync=True)
    task_kind = t.Unicode(
        "", help="The run's declared task: categorical, regression, multilabel; '' for none."
    ).tag(sync=True)
    monitor_metric = t.Unicode(
        "", help="The epoch series key the run's MonitorSpec selects on, e.g. 'val.nll'."
    ).tag(sync=True)
    monitor_mode = t.Unicode("", help="'min' or 'max': the monitor's better direction.").tag(
        sync=True
    )
    runs = t.List(
        t.Dict(),
        help="The runs of a race or a comparison, in colour order (key, name, run_id, "
        "status, stop_reason, error, epoch, n_epochs, step, last_loss, "
        "loss_nonfinite_since); empty while the monitor shows one run.",
    ).tag(sync=True)
    figures = t.List(
        t.Dict(),
        help="The figures callbacks handed the run (show_figure): name, epoch, kind, bytes; "
        "by name, then epoch. A view asks for the one it shows.",
    ).tag(sync=True)
    runs_root = t.Unicode(
        "",
        help="The real path of the folder holding the run's folder: the view's 'Open in "
        "panel' link names the run to JupyterLab's runs panel by it.",
    ).tag(sync=True)

    def __init__(
        self,
        *,
        update_interval: float = 0.1,
        smoothing: float = 0.9,
        max_points: int = 100_000,
        max_epochs: int = 20_000,
        health: Any = False,
    ) -> None:
        if not 0.01 <= update_interval <= 10:
            raise ValueError(
                f"update_interval={update_interval!r} is out of range: pass seconds between "
                f"0.01 and 10 (0.1 sends about 10 updates a second)"
            )
        _positive_int(max_points, "max_points", 1000)
        _positive_int(max_epochs, "max_epochs", 100)
        super().__init__(smoothing=smoothing)
        self.update_interval = float(update_interval)
        self._clock = time.monotonic  # replaceable in tests
        self._lock = threading.RLock()
        self._steps = step_series(max_points)
        self._epochs = epoch_series(max_epochs)
        self._transport = SeriesTransport(
            self.send,
            {"steps": self._steps, "epochs": self._epochs},
            self._lock,
            interval=self.update_interval,
            clock=lambda: self._clock(),
            on_flush=self._update_counters,
        )
        self._control: TrainingControl | None = None
        self._stop_pending: str | None = None
        self._ui_can_stop = False
        self._init_jobs()
        self._init_replay()
        self._init_text()
        self._init_figures()
        self._init_health(health)  # health=True: the run attaches its HealthProbe
        # a race or a comparison: one lane per run (see _race)
        self._lanes: list[RaceLane] = []
        self._lane_ids = itertools.count()
        self._lane_host = LaneHost(
            lock=self._lock,
            changed=self._lane_changed,
            flush=self._transport.request_flush,
            show_error=self.show_error,
        )
        self._reset_run_state()

    # ------------------------------------------------------------------ state

    def _reset_run_state(self) -> None:
        with self._lock:
            self._steps.clear()
            self._steps.drop_values(STEP_PREFIXES)  # the last run's terms and optimizers
            self._epochs.clear()
            self._finished = False
            self._progress = RunProgress()
            self._snapshot_png = None
            self.snapshot_of = ""
            self._clear_figures()
            self._clear_health()
            with self.hold_sync():
                self.run_id = ""
                self.runs_root = ""
                self.status = "created"
                self.stop_reason = ""
                self.error = ""
                self.epoch = self.n_epochs = self.step = self.samples = 0
                self.total_steps = None
                self.samples_per_sec = None
                self.elapsed = 0.0
                self.eta = None
                self.last_loss = self.last_finite_loss = None
                self.last_finite_step = self.loss_nonfinite_since = None
                self.loss_nonfinite_steps = 0
                self.task_kind = self.monitor_metric = self.monitor_mode = ""

    @property
    def loss_points(self) -> int:
        """Rows of the step series the monitor holds (steps, or buckets of steps)."""
        return len(self._steps)

    @property
    def steps_seen(self) -> int:
        """Per-step records the monitor has received (rows merge past ``max_points``)."""
        return self._steps.total

    def series(self) -> dict[str, list[float]]:
        """A copy of the held step series, one list per column.

        ``step`` (the last step of each row), ``loss`` (mean of the finite losses),
        ``lr``; and, for rows that are buckets of several steps once the series was
        decimated, ``first``, ``loss:min``, ``loss:max``, ``n`` and ``bad``.
        """
        with self._lock:
            return {name: self._steps.column(name).tolist() for name in self._steps.fields}

    @property
    def epoch_rows(self) -> list[dict[str, Any]]:
        """The held epoch rows, oldest first: ``epoch``, ``step``, ``lr``, ``seconds``,
        ``improved``, ``train`` {metric: value} and ``val`` {metric: value} or None.
        Non-finite values are None."""
        with self._lock:
            return epoch_rows(self._epochs)

    @property
    def run_dir(self) -> pathlib.Path | None:
        """The directory of the run shown (None before a run started)."""
        return self._run_dir

    @property
    def transport_stats(self) -> Any:
        """Messages and bytes sent to the views so far (``TransportStats``)."""
        return self._transport.stats

    # ------------------------------------------------------------------ sink hooks

    @never_breaks("training")
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

    @never_breaks("training")
    def on_detach(self) -> None:
        with self._lock:
            self._control = None
            self.can_stop = False
            self._transport.flush()

    @never_breaks("training")
    def on_run_started(self, event: RunStarted) -> None:
        with self._lock:
            control = self._control
            self._reset_run_state()
            self._control = control
            progress = self._progress = RunProgress.of_run(event, self._clock())
            self._run_dir = pathlib.Path(event.run_dir) if event.run_dir else None
            with self.hold_sync():
                self.run_id = event.run_id
                self.runs_root = _parent_of(event.run_dir)
                stopping = control is not None and control.stop_requested
                self.status = "stopping" if stopping else "running"
                self.can_stop = control is not None and self._ui_can_stop
                self.step = progress.start_step
                self.epoch = progress.epoch
                self.n_epochs = progress.last_epoch
                self.total_steps = progress.total_steps()
                self.task_kind, self.monitor_metric, self.monitor_mode = _run_labels(event.config)
            self._transport.flush()  # the views drop the previous run at once
            self._update_fallback()

    @never_breaks("training")
    def on_step_ended(self, event: StepEnded) -> None:
        progress = self._progress
        progress.samples_stepped += event.samples
        progress.step, progress.epoch = event.step, event.epoch
        self._transport.request_flush()

    @never_breaks("training")
    def on_step_metrics(self, event: StepMetrics) -> None:
        records = event.records
        if not records:
            return
        with self._lock:
            progress = self._progress
            losses = add_steps(self._steps, records)
            progress.add_losses([int(r.step) for r in records], losses)
            progress.samples_recorded += sum(int(r.samples) for r in records)
            progress.reached(records[-1].step, records[-1].epoch)
        self._transport.request_flush()

    @never_breaks("training")
    def on_epoch_ended(self, event: EpochEnded) -> None:
        with self._lock:
            progress = self._progress
            add_epoch(self._epochs, event)
            progress.step = max(progress.step, int(event.step))
            progress.epoch = max(progress.epoch, int(event.epoch))
            if progress.steps_per_epoch is None and len(self._epochs) == 1:
                progress.first_epoch_ended(int(event.step))
                self.total_steps = progress.total_steps()
        self._transport.request_flush()

    @never_breaks("training")
    def on_run_finished(self, event: RunFinished) -> None:
        with self._lock:
            self._finished = True
            self._progress.finished_wall = float(event.time)
            self._progress.step = max(self._progress.step, int(event.steps))
            # the last rows first: a view that sees the final status has every row
            self._transport.flush()
            with self.hold_sync():
                self.status = event.status if event.status in TERMINAL else "finished"
                self.stop_reason = event.stop_reason or ""
                if event.status == "failed":
                    text = event.error or "training failed"
                    if event.traceback:
                        text = f"{text}\n\n{event.traceback.rstrip()}"
                    self.error = text
                self.can_stop = False
            self._update_fallback()

    # ------------------------------------------------------------------ counters

    def _update_counters(self, now: float) -> None:
        """Refresh the synced counters (the transport calls this at every flush)."""
        progress = self._progress
        live = not self._finished
        elapsed = progress.elapsed(now, from_log=self._log_path is not None)
        if live and not self._transport.paused:
            progress.observe(now)
        sps, steps_ps = progress.rates(elapsed, live=live)
        eta = progress.eta(self.total_steps, steps_ps) if live else None
        with self.hold_sync():
            self.step = progress.step
            self.epoch = progress.epoch
            self.samples = progress.samples
            self.elapsed = round(elapsed, 3)
            self.samples_per_sec = None if sps is None else round(sps, 3)
            self.eta = None if eta is None else round(eta, 3)
            self.last_loss = finite(progress.last_loss)
            if progress.last_finite is not None:
                self.last_finite_step, self.last_finite_loss = progress.last_finite
            self.loss_nonfinite_since = progress.nonfinite_since
            self.loss_nonfinite_steps = progress.nonfinite_steps
            if self._lanes:
                self._publish_lanes()

    # ------------------------------------------------------------------ front end

    def stop(self, reason: str = "stop requested from the monitor") -> None:
        """Ask the run to stop after its current step (the Stop button does this).

        The run writes its LAST checkpoint and records status "stopped"; the monitor
        shows "stopping" until then. A run followed from a log is stopped through its
        folder when this monitor follows it for ``nnx_lab.launch``; otherwise not here.
        """
        with self._lock:
            if self._lanes and self._job is not None and self._job.is_alive():
                self._race_halt = reason  # the runs still queued do not start
            if self._control is None:
                if self._job is not None and self._job.is_alive():
                    self._stop_pending = reason  # fit() started; the loop attaches soon
                    return
                stop_launch = getattr(self, "_stop_launch", None)  # for_launch: any state
                if stop_launch is not None and not self._finished:
                    stop_launch(reason)
                    self.status, self.can_stop = "stopping", False
                    return
                if self._log_path is not None and self.status == "running":
                    if not self._stoppable:
                        raise RuntimeError(
                            "this monitor follows a run written by another process; stop "
                            "it there, or with nnx_lab.request_stop(run_id, runs_root)"
                        )
                    run_dir = self._log_path.parent
                    request_stop(run_dir.name, run_dir.parent, reason=reason, by="monitor")
                    self.status = "stopping"
                    self.can_stop = False
                return
            if self.status not in ("created", "running"):
                return
            self._control.request_stop(reason)
            self.status = "stopping"

    def close(self) -> None:
        """Stop following a log (if it does) and close the widget's front end."""
        follower = getattr(self, "_follower", None)  # absent if __init__ failed
        if follower is not None:
            follower.close()
        transport = getattr(self, "_transport", None)
        if transport is not None:
            transport.close()
        super().close()
