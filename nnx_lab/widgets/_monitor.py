"""TrainingMonitor: a live view of a training run, and a sink of its event stream."""

from __future__ import annotations

import base64
import collections
import html
import itertools
import logging
import math
import os
import pathlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
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
from ..runs import (
    INTERRUPTED,
    JsonlReader,
    RunRecordError,
    effective_status,
    read_record,
    request_stop,
)
from ._base import NNxWidget, never_breaks
from ._jobs import BackgroundJob, format_exception
from ._monitor_series import MONITOR_KEY, add_epoch, add_steps, epoch_series, step_series
from ._protocol import STATUSES
from ._race import LANE_EPOCHS, LANE_POINTS, LANE_STATUSES, MAX_LANES, RaceLane
from ._runs import find_run_dir
from ._transport import SeriesTransport

__all__ = ["TrainingMonitor"]

log = logging.getLogger("nnx_lab.widgets")

_TERMINAL = ("stopped", "finished", "failed")
_RATE_WINDOW_S = 10.0
_LIVENESS_S = 1.0  # how often a follower checks that the run it follows can still write
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_MAX_PNG_BYTES = 4 * 1024 * 1024


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


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


def _check_plan(plan: Any, where: str) -> None:
    from ..plans import ExperimentPlan  # no torch

    if not isinstance(plan, ExperimentPlan):
        raise TypeError(f"{where}: {plan!r} is not an ExperimentPlan; pass one")


def _named_plans(plans: Mapping[str, Any] | Iterable[Any]) -> list[tuple[str, Any]]:
    """``(name, plan)`` pairs, every plan checked before anything starts."""
    if isinstance(plans, Mapping):
        items = [(str(name), plan) for name, plan in plans.items()]
    else:
        items = [(f"run {i}", plan) for i, plan in enumerate(plans, start=1)]
    if not items:
        raise ValueError("race() needs at least one plan")
    if len(items) > MAX_LANES:
        raise ValueError(
            f"race() got {len(items)} plans; at most {MAX_LANES} are drawn at once (one "
            "colour each): race fewer"
        )
    from ..plans import PlanError, Problem

    problems = []
    for name, plan in items:
        _check_plan(plan, f"race(): {name!r}")
        problems += [Problem(f"{name}: {p.field}", p.value, p.fix) for p in plan.validate()]
    if problems:
        raise PlanError(problems)
    return items


class TrainingMonitor(NNxWidget):
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
        self._job: BackgroundJob | None = None
        self._log_path: pathlib.Path | None = None
        self._stoppable = False  # a followed run this monitor may ask to stop (launch)
        self._run_dir: pathlib.Path | None = None
        self._follow_thread: threading.Thread | None = None
        self._follow_stop = threading.Event()
        self._stop_pending: str | None = None
        self._ui_can_stop = False
        self._snapshot_png: bytes | None = None
        self._fallback: Any = None  # the DisplayHandle of the fallback output
        # a race or a comparison: one lane per run (see _race)
        self._lanes: list[RaceLane] = []
        self._lane_ids = itertools.count()
        self._comparing = False
        self._race_halt: str | None = None
        self._results: dict[str, Any] = {}
        self._race_errors: dict[str, BaseException] = {}
        self._reset_run_state()

    # ------------------------------------------------------------------ state

    def _reset_run_state(self) -> None:
        with self._lock:
            self._steps.clear()
            self._epochs.clear()
            self._finished = False
            self._start_step = 0
            self._start_epoch = 1
            self._steps_per_epoch: int | None = None
            self._t0_mono: float | None = None
            self._started_wall: float | None = None
            self._finished_wall: float | None = None
            self._samples_stepped = 0  # from StepEnded
            self._samples_recorded = 0  # from StepMetrics records
            self._step_seen = 0
            self._epoch_seen = 0
            self._n_epochs_run = 0
            self._last_loss: float | None = None
            self._last_finite: tuple[int, float] | None = None
            self._nonfinite_since: int | None = None
            self._nonfinite_steps = 0
            self._snapshot_png = None
            self.snapshot_of = ""
            self._rate_window: collections.deque[tuple[float, int, int]] = collections.deque()
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
            cols = {name: self._epochs.column(name).tolist() for name in self._epochs.fields}
            metrics = self._epochs.values
        rows = []
        for i in range(len(cols["epoch"])):
            train = {m[6:]: _finite(cols[m][i]) for m in metrics if m.startswith("train.")}
            val = {m[4:]: _finite(cols[m][i]) for m in metrics if m.startswith("val.")}
            row = {
                "epoch": cols["epoch"][i],
                "step": cols["step"][i],
                "lr": _finite(cols["lr"][i]),
                "seconds": _finite(cols["seconds"][i]),
                "improved": bool(cols["improved"][i]),
                "train": {k: v for k, v in train.items() if v is not None},
                "val": {k: v for k, v in val.items() if v is not None} or None,
            }
            if MONITOR_KEY in cols:  # a declared monitor: its value (None: unavailable)
                row["monitor"] = _finite(cols[MONITOR_KEY][i])
            rows.append(row)
        return rows

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
            self._start_step = int(event.start_step)
            self._start_epoch = int(event.start_epoch)
            self._steps_per_epoch = event.steps_per_epoch
            self._t0_mono = self._clock()
            self._started_wall = float(event.time)
            self._run_dir = pathlib.Path(event.run_dir) if event.run_dir else None
            self._step_seen = self._start_step
            self._epoch_seen = int(event.start_epoch)
            with self.hold_sync():
                self.run_id = event.run_id
                self.runs_root = _parent_of(event.run_dir)
                stopping = control is not None and control.stop_requested
                self.status = "stopping" if stopping else "running"
                self.can_stop = control is not None and self._ui_can_stop
                self.step = self._start_step
                self.epoch = self._epoch_seen
                self.n_epochs = int(event.start_epoch) + int(event.n_epochs) - 1
                self.total_steps = self._expected_total_steps(int(event.n_epochs))
                self.task_kind, self.monitor_metric, self.monitor_mode = _run_labels(event.config)
            self._n_epochs_run = int(event.n_epochs)
            self._transport.flush()  # the views drop the previous run at once
            self._update_fallback()

    @never_breaks("training")
    def on_step_ended(self, event: StepEnded) -> None:
        self._samples_stepped += event.samples
        self._step_seen = event.step
        self._epoch_seen = event.epoch
        self._transport.request_flush()

    @never_breaks("training")
    def on_step_metrics(self, event: StepMetrics) -> None:
        records = event.records
        if not records:
            return
        with self._lock:
            losses = add_steps(self._steps, records)
            steps = [int(r.step) for r in records]
            for step, loss in zip(steps, losses, strict=True):
                if math.isfinite(loss):
                    self._last_finite = (step, loss)
                    self._nonfinite_since = None
                else:
                    if self._nonfinite_since is None:
                        self._nonfinite_since = step
                    self._nonfinite_steps += 1
            self._last_loss = losses[-1]
            self._samples_recorded += sum(int(r.samples) for r in records)
            last = records[-1]
            if last.step > self._step_seen:
                self._step_seen, self._epoch_seen = last.step, last.epoch
        self._transport.request_flush()

    @never_breaks("training")
    def on_epoch_ended(self, event: EpochEnded) -> None:
        with self._lock:
            add_epoch(self._epochs, event)
            self._step_seen = max(self._step_seen, int(event.step))
            self._epoch_seen = max(self._epoch_seen, int(event.epoch))
            if self._steps_per_epoch is None and len(self._epochs) == 1:
                self._steps_per_epoch = int(event.step) - self._start_step
                self.total_steps = self._expected_total_steps(self._n_epochs_run)
        self._transport.request_flush()

    @never_breaks("training")
    def on_run_finished(self, event: RunFinished) -> None:
        with self._lock:
            self._finished = True
            self._finished_wall = float(event.time)
            self._step_seen = max(self._step_seen, int(event.steps))
            # the last rows first: a view that sees the final status has every row
            self._transport.flush()
            with self.hold_sync():
                self.status = event.status if event.status in _TERMINAL else "finished"
                self.stop_reason = event.stop_reason or ""
                if event.status == "failed":
                    text = event.error or "training failed"
                    if event.traceback:
                        text = f"{text}\n\n{event.traceback.rstrip()}"
                    self.error = text
                self.can_stop = False
            self._update_fallback()

    # ------------------------------------------------------------------ counters

    def _expected_total_steps(self, n_epochs: int) -> int | None:
        spe = self._steps_per_epoch
        if spe is None:
            return None
        # A run resumed mid-epoch has done part of its first epoch already.
        done = self._start_step - (self._start_epoch - 1) * spe
        return self._start_step + spe * n_epochs - (done if 0 < done < spe else 0)

    def _update_counters(self, now: float) -> None:
        """Refresh the synced counters (the transport calls this at every flush)."""
        samples = max(self._samples_stepped, self._samples_recorded)
        step = self._step_seen
        elapsed = self._elapsed(now)
        if not self._finished and not self._transport.paused:
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
            self.last_loss = _finite(self._last_loss)
            if self._last_finite is not None:
                self.last_finite_step, self.last_finite_loss = self._last_finite
            self.loss_nonfinite_since = self._nonfinite_since
            self.loss_nonfinite_steps = self._nonfinite_steps
            if self._lanes:
                self._publish_lanes()

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
        """A view was (re)rendered or lost track: send it everything, in chunks."""
        view = content.get("view")
        req = content.get("req", 0)
        if not isinstance(view, str) or not view or not isinstance(req, int):
            raise ValueError(f"a hello without a view id: {content!r}; reload the page")
        self._transport.snapshot(view, req)

    def _on_stop(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self.stop()

    def _on_snapshot_png(self, content: dict[str, Any], buffers: list[Any]) -> None:
        """A picture of the charts from a view, for the notebook's fallback output."""
        if len(buffers) != 1:
            raise ValueError(f"snapshot_png carries {len(buffers)} buffers, expected 1")
        png = bytes(buffers[0])
        if not png.startswith(_PNG_MAGIC) or len(png) > _MAX_PNG_BYTES:
            raise ValueError(
                f"snapshot_png: not a PNG of at most {_MAX_PNG_BYTES} bytes "
                f"({len(png)} bytes); the view sends the charts' picture here"
            )
        with self._lock:
            if content.get("run_id") != self.run_id:
                return  # a picture of a run this monitor no longer shows
            self._snapshot_png = png
            self.snapshot_of = f"{self.run_id}:{content.get('status', '')}"
        self._update_fallback()

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

    # ------------------------------------------------------------------ fallback output

    def _ipython_display_(self, **kwargs: Any) -> None:
        """Display the live view, and under it the output a reopened notebook falls back on.

        A saved notebook keeps the widget's output, but the widget's model lives in
        the kernel: after a kernel restart JupyterLab shows "model not found" there.
        The second output (hidden while the live view is shown) holds the last
        picture of the charts and the ``from_run`` call that brings the monitor back.
        """
        from IPython.display import display

        bundle = self._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, None)
        display(data, raw=True, metadata=metadata)
        handle = display(
            self._fallback_bundle(), raw=True, display_id=f"nnx-monitor-{self.model_id}"
        )
        if handle is not None:
            self._fallback = handle

    def _fallback_bundle(self) -> dict[str, str]:
        run_id = self.run_id
        summary = self.summary()
        if run_id:
            hint = (
                f"This is a static picture saved with the notebook. To bring the live "
                f'monitor back, run <code>TrainingMonitor.from_run("{html.escape(run_id)}")'
                f"</code> (from <code>nnx_lab.widgets</code>)."
            )
            text_hint = f'TrainingMonitor.from_run("{run_id}") brings the live monitor back.'
        else:
            hint = "The live monitor needs its kernel: run this cell again."
            text_hint = hint
        image = ""
        if self._snapshot_png is not None:
            data = base64.b64encode(self._snapshot_png).decode("ascii")
            image = (
                f'<img src="data:image/png;base64,{data}" alt="TrainingMonitor: '
                f'{html.escape(summary)}" style="max-width: 100%; display: block">'
            )
        body = (
            f'<div class="nnx-monitor-snapshot">{image}'
            f"<p><b>TrainingMonitor</b> ({html.escape(summary)}). {hint}</p></div>"
        )
        return {"text/html": body, "text/plain": f"TrainingMonitor({summary}). {text_hint}"}

    def _update_fallback(self) -> None:
        handle = self._fallback
        if handle is None:
            return
        try:
            handle.update(self._fallback_bundle(), raw=True)
        except Exception:  # no kernel to publish to (a script, a test)
            log.debug("could not update the fallback output", exc_info=True)

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
        sinks = [self, *callbacks]

        def target() -> Any:
            return model.train(params=params, callbacks=sinks, **train_kwargs)

        self._start(target, "nnx-monitor-fit")
        return self

    def _start(
        self, target: Callable[[], Any], name: str, lanes: Iterable[str] = ()
    ) -> list[RaceLane]:
        """Start ``target`` in the background thread; ``lanes`` names a race's runs."""
        with self._lock:
            if self._job is not None and self._job.is_alive():
                raise RuntimeError(
                    f"this monitor is already training (run {self.run_id or 'starting'}); "
                    f"call stop() or wait() first, or use another TrainingMonitor"
                )
            if self._log_path is not None or self._comparing:
                raise RuntimeError(
                    "this monitor shows runs from their logs (from_run / compare); create "
                    "a new TrainingMonitor() to train"
                )
            self._reset_run_state()
            self._clear_lanes()
            made = [self._new_lane(lane, forward=True) for lane in lanes]
            self._transport.flush()
            self._stop_pending = None
            self._race_halt = None
            self._results, self._race_errors = {}, {}
            self._job = BackgroundJob(target, name=name, on_error=self._on_training_error)
            self._job.start()
        return made

    def _on_training_error(self, exc: BaseException) -> None:
        with self._lock:
            with self.hold_sync():
                if not self.error:  # RunFinished may already have brought it
                    self.error = format_exception(exc)
                self.status = "failed"
                self.can_stop = False
            self._finished = True
            self._transport.flush()
            self._update_fallback()

    @property
    def run(self) -> Any:
        """The ``NNRun`` of the last ``fit`` or ``fit_plan``, once it has ended; else
        ``None`` (also after a ``race``: see ``results``)."""
        job = self._job
        if job is None or job.is_alive() or self._lanes:
            return None
        result = job.result
        return getattr(result, "run", result)  # fit_plan's FitResult holds it

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

    # ------------------------------------------------------------------ plans and races

    def fit_plan(
        self, plan: Any, *, callbacks: Iterable[Any] = (), **fit_kwargs: Any
    ) -> TrainingMonitor:
        """Fit an ``ExperimentPlan`` in a background thread and return at once.

        Runs ``plan.fit(callbacks=[self, *callbacks], report=False, **fit_kwargs)``
        (``report=True`` prints the binding report as a plain fit does). Stop and
        ``wait()`` work as for ``fit``; ``wait()`` returns the ``FitResult``.
        """
        _check_plan(plan, "fit_plan(plan)")
        fit_kwargs.setdefault("report", False)
        sinks = [self, *callbacks]

        def target() -> Any:
            return plan.fit(callbacks=sinks, **fit_kwargs)

        self._start(target, "nnx-monitor-fit")
        return self

    def race(
        self,
        plans: Mapping[str, Any] | Iterable[Any],
        *,
        callbacks: Iterable[Any] = (),
        **fit_kwargs: Any,
    ) -> TrainingMonitor:
        """Fit several ``ExperimentPlan``s one after another, drawn on top of each other.

        ``plans`` maps names to plans (or is a list of plans, named "run 1", ...). Each
        run gets a colour and a legend entry: its loss per step and its per-epoch
        metric, and its own status (queued, running, finished, stopped, failed,
        skipped). The header and Stop follow the run that trains; Stop ends it and
        skips the runs still queued. Every plan is validated before the first fit: a
        refused plan starts nothing. A run that fails is shown under the widget and
        the race goes on. ``wait()`` returns ``{name: FitResult}`` of the runs that
        ended (``results`` holds them too). The runs are fitted one after another,
        never in parallel threads: ``fit()`` seeds the process-wide random streams, so
        parallel fits would change each other's randomness (and on a 2-core machine
        they were not faster: see ``benchmarks/race.py``).
        """
        items = _named_plans(plans)
        fit_kwargs.setdefault("report", False)
        extra = list(callbacks)

        def target() -> dict[str, Any]:
            with self._lock:
                lanes = list(self._lanes)  # made by _start before this thread began
            for lane, (name, plan) in zip(lanes, items, strict=True):
                with self._lock:
                    halt = self._race_halt
                if halt is not None:
                    lane.skip(f"not started: {halt}")
                    continue
                try:
                    result = plan.fit(callbacks=[lane, *extra], **fit_kwargs)
                except Exception as exc:  # shown under the widget; the race goes on
                    log.info("race run %r failed: %s", name, exc)
                    with self._lock:
                        self._race_errors[name] = exc
                    if lane.status not in ("failed", "stopped"):
                        lane.fail(exc)
                    else:
                        self._lane_changed()
                    continue
                lane.result = result
                with self._lock:
                    self._results[name] = result
            with self._lock:
                self._stop_pending = None
                return dict(self._results)

        self._start(target, "nnx-monitor-race", [name for name, _ in items])
        return self

    @property
    def results(self) -> dict[str, Any]:
        """``{name: FitResult}`` of the race's runs that have ended (finished or stopped)."""
        with self._lock:
            return dict(self._results)

    @property
    def race_errors(self) -> dict[str, BaseException]:
        """``{name: exception}`` of the race's runs that failed."""
        with self._lock:
            return dict(self._race_errors)

    def _new_lane(self, name: str, *, forward: bool) -> RaceLane:
        lane = RaceLane(
            self,
            f"lane{next(self._lane_ids)}",
            name,
            points=min(LANE_POINTS, self._steps.capacity),
            epochs=min(LANE_EPOCHS, self._epochs.capacity),
            forward=forward,
        )
        steps, epochs = lane.series_names
        self._transport.series[steps] = lane.steps
        self._transport.series[epochs] = lane.epochs
        self._lanes.append(lane)
        return lane

    def _clear_lanes(self) -> None:
        with self._lock:
            for lane in self._lanes:
                for name in lane.series_names:
                    self._transport.series.pop(name, None)
            self._lanes = []
            self.runs = []

    def _publish_lanes(self) -> None:
        """The ``runs`` trait, and the failed runs' errors under the widget."""
        self.runs = [lane.info() for lane in self._lanes]
        errors = [f"[{lane.name}] {lane.error}" for lane in self._lanes if lane.error]
        if errors:
            self.error = "\n\n".join(errors)

    def _lane_changed(self) -> None:
        """A run of the race changed status: its last rows first, then the status."""
        with self._lock:
            if self._transport.paused:
                return
            self._transport.flush()  # publishes the lanes (on_flush)

    @classmethod
    def compare(
        cls,
        run_ids: Iterable[str] | Mapping[str, str],
        runs_root: str | os.PathLike[str] | None = None,
        *,
        update_interval: float = 0.1,
        smoothing: float = 0.9,
    ) -> TrainingMonitor:
        """Finished runs drawn on top of each other, as a race shows them.

        ``run_ids`` lists run ids (or unambiguous prefixes), or maps names to them.
        Each run's ``metrics.jsonl`` is read once (a run still being written is shown
        as far as its log goes, with the status its ``metadata.yaml`` records). Every
        id is checked before any log is read.
        """
        if isinstance(run_ids, str):
            raise TypeError(
                f"compare() takes several run ids: pass a list, e.g. [{run_ids!r}, ...]"
            )
        named = list(run_ids.items()) if isinstance(run_ids, Mapping) else None
        ids = [rid for _, rid in named] if named is not None else list(run_ids)
        if not ids:
            raise ValueError("compare() needs at least one run id")
        if len(ids) > MAX_LANES:
            raise ValueError(
                f"compare() got {len(ids)} runs; at most {MAX_LANES} are drawn at once "
                f"(one colour each): pass fewer"
            )
        dirs = [find_run_dir(rid, runs_root) for rid in ids]
        names = [n for n, _ in named] if named is not None else [d.name[:8] for d in dirs]
        monitor = cls(update_interval=update_interval, smoothing=smoothing)
        monitor._comparing = True
        monitor.from_log = True
        monitor._transport.paused = True  # one update once every log is read
        try:
            for name, run_dir in zip(names, dirs, strict=True):
                lane = monitor._new_lane(str(name), forward=False)
                lane.run_id = run_dir.name
                monitor._read_lane(lane, run_dir)
        finally:
            monitor._transport.paused = False
        with monitor._lock, monitor.hold_sync():
            monitor.status = "finished"
            monitor.run_id = ""
            monitor._transport.flush()
        return monitor

    def _read_lane(self, lane: RaceLane, run_dir: pathlib.Path) -> None:
        tail = JsonlReader(run_dir / "metrics.jsonl", strict=False)
        for obj in tail.read():
            try:
                event: Event = event_from_json(obj)
            except (ValueError, TypeError, KeyError) as exc:
                log.warning("%s: skipping a log line: %s", tail.path, exc)
                continue
            hook = getattr(lane, event.hook, None)
            if hook is not None:
                hook(event)
        if lane.status in ("queued", "running"):  # no run_finished line
            status = self._recorded_status(run_dir)
            # "running": another process still writes it (compare reads it once)
            lane.status = status if status in LANE_STATUSES else "interrupted"
            if lane.status == "interrupted" and not lane.stop_reason:
                lane.stop_reason = "its log ends without a run_finished line"

    # ------------------------------------------------------------------ from a log

    @classmethod
    def from_run(
        cls,
        run_id: str,
        runs_root: str | os.PathLike[str] | None = None,
        follow: bool = True,
        *,
        poll_interval: float = 0.25,
        update_interval: float = 0.1,
        smoothing: float = 0.9,
        max_points: int = 100_000,
        max_epochs: int = 20_000,
    ) -> TrainingMonitor:
        """Show a run from ``<runs_root>/<run_id>/metrics.jsonl``.

        ``run_id`` may be an unambiguous prefix of the id. ``runs_root=None`` means
        ``$NNX_RUNS_ROOT``, else ``./runs`` (as for training). With ``follow=True``
        and a run that has not finished (another process still writes it), a thread
        polls the file every ``poll_interval`` seconds until the run finishes or
        ``close()`` is called.
        """
        if not (isinstance(poll_interval, int | float) and poll_interval > 0):
            raise ValueError(f"poll_interval={poll_interval!r}: pass a positive number of seconds")
        run_dir = find_run_dir(run_id, runs_root)
        monitor = cls(
            update_interval=update_interval,
            smoothing=smoothing,
            max_points=max_points,
            max_epochs=max_epochs,
        )
        return monitor.follow_run(run_dir, follow=follow, poll_interval=poll_interval)

    def follow_run(
        self,
        run_dir: str | os.PathLike[str],
        *,
        follow: bool = True,
        poll_interval: float = 0.25,
        stoppable: bool = False,
    ) -> TrainingMonitor:
        """Show the run in ``run_dir`` from its log, and follow it (see ``from_run``).

        ``stoppable=True`` (``nnx_lab.launch`` passes it for the runs it started) lets
        Stop and ``stop()`` ask the writing processes to stop, through the run folder
        (``nnx_lab.request_stop``). Returns the monitor.
        """
        if not (isinstance(poll_interval, int | float) and poll_interval > 0):
            raise ValueError(f"poll_interval={poll_interval!r}: pass a positive number of seconds")
        run_dir = pathlib.Path(run_dir)
        if self._log_path is not None or self._job is not None or self._control is not None:
            raise RuntimeError("this monitor already shows a run; make a new TrainingMonitor")
        self._log_path = run_dir / "metrics.jsonl"
        self._stoppable = bool(stoppable)
        self.run_id = run_dir.name
        self._run_dir = run_dir
        self.from_log = True
        tail = JsonlReader(self._log_path, strict=False)
        self._transport.paused = True  # one update once the whole log is read
        try:
            self._consume(tail.read(), tail)
        finally:
            self._transport.paused = False
        self._transport.flush()
        self.runs_root = str(run_dir.resolve().parent)  # where it is read here
        if not self._finished:
            if follow:
                self._follow_thread = threading.Thread(
                    target=self._follow_loop,
                    args=(tail, float(poll_interval)),
                    name=f"nnx-monitor-follow-{run_dir.name}",
                    daemon=True,
                )
                self._follow_thread.start()
            else:
                self._apply_metadata_status(run_dir)
        return self

    def report_failure(self, text: str) -> None:
        """Show that the run's processes failed, with ``text`` (a traceback) under the
        charts; ``nnx_lab.launch`` calls it with the failing rank's traceback."""
        with self._lock:
            with self.hold_sync():
                self.error = str(text)
                self.status = "failed"
                self.can_stop = False
            self._finished = True
            self._transport.flush()
            self._update_fallback()

    def _consume(self, lines: list[dict[str, Any]], tail: JsonlReader) -> None:
        if tail.restarted:
            run_id = self.run_id
            self._reset_run_state()
            self.run_id = run_id
        for obj in lines:
            try:
                event: Event = event_from_json(obj)
            except (ValueError, TypeError, KeyError) as exc:
                log.warning("%s: skipping a log line: %s", tail.path, exc)
                continue
            hook = getattr(self, event.hook, None)
            if hook is not None:
                hook(event)
        # a run read from its log is stopped where it runs, or through its folder (launch)
        self.can_stop = self._stoppable and not self._finished and self.status == "running"

    def _follow_loop(self, tail: JsonlReader, poll_interval: float) -> None:
        last_tick = last_check = time.monotonic()
        run_dir = tail.path.parent
        while not self._follow_stop.wait(poll_interval):
            try:
                lines = tail.read()
                self._consume(lines, tail)
                if self._finished:
                    return
                now = time.monotonic()
                if now - last_tick >= 1.0 or lines:  # keep elapsed/ETA moving
                    self._transport.flush()
                    last_tick = now
                if now - last_check >= _LIVENESS_S and not lines:
                    last_check = now
                    if self._writer_gone(run_dir):
                        return
            except Exception as exc:  # shown under the widget, never lost
                log.exception("following %s failed", tail.path)
                self.show_error(exc)
                return

    def _writer_gone(self, run_dir: pathlib.Path) -> bool:
        """Whether the followed run can still write: its folder exists and, if it is
        recorded as running, its writer lives. Ends the follow (with why) when not."""
        if not run_dir.is_dir():
            with self.hold_sync():
                self.status = "failed" if self.status in ("running", "stopping") else self.status
                self.can_stop = False
            self.show_error(
                f"the run directory {run_dir} was deleted while it was followed; the "
                "monitor shows what the log held"
            )
            self._transport.flush()
            return True
        status = self._recorded_status(run_dir)
        if status == INTERRUPTED:
            with self.hold_sync():
                self.status = INTERRUPTED
                self.stop_reason = "its writer ended without a word (killed, crashed)"
                self.can_stop = False
            self._transport.flush()
            return True
        return False

    @staticmethod
    def _recorded_status(run_dir: pathlib.Path) -> str | None:
        try:
            return effective_status(read_record(run_dir / "metadata.yaml"))
        except (OSError, RunRecordError) as exc:
            log.debug("no status from %s: %s", run_dir, exc)
            return None

    def _apply_metadata_status(self, run_dir: pathlib.Path) -> None:
        """Without a run_finished line, take the status recorded in metadata.yaml
        ("interrupted" for a run whose writer is gone)."""
        status = self._recorded_status(run_dir)
        if status in (*_TERMINAL, INTERRUPTED):
            self.status = status

    def close(self) -> None:
        """Stop following a log (if it does) and close the widget's front end."""
        stop = getattr(self, "_follow_stop", None)  # absent if __init__ failed
        if stop is not None:
            stop.set()
        thread = getattr(self, "_follow_thread", None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        transport = getattr(self, "_transport", None)
        if transport is not None:
            transport.close()
        super().close()

    # ------------------------------------------------------------------ text

    def summary(self) -> str:
        """One line: run, status, epoch, step, the last loss (and non-finite losses);
        for a race or a comparison, each run's name, status and last loss."""
        with self._lock:
            lanes = [lane.info() for lane in self._lanes]
        if lanes:
            kind = "compare" if self._comparing else "race"
            runs = []
            for lane in lanes:
                text = f"{lane['name']} {lane['status']}"
                if lane["loss_nonfinite_since"] is not None:
                    text += f" loss non-finite since step {lane['loss_nonfinite_since']}"
                elif lane["last_loss"] is not None:
                    text += f" loss {lane['last_loss']:.4g}"
                runs.append(text)
            return f"{kind} of {len(lanes)} runs: " + "; ".join(runs)
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
            last, since = self._last_loss, self._nonfinite_since
        if since is not None:
            parts.append(f"loss non-finite since step {since}")
        elif last is not None and math.isfinite(last):
            parts.append(f"loss {last:.4g}")
        return ", ".join(parts)
