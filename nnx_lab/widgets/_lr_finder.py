"""LRFinderWidget: the LR sweep drawn live, a learning rate picked on its curve and
handed to a plan (and to a linked PlanBuilder).

The widget runs ``plan.lr_finder``, or ``nnx_lab.lr_finder`` on a model's network, in a
background thread and is one more sink of the sweep's events: the points go into a
bounded series sent to the views through the shared transport (throttled updates, a
chunked snapshot on each ``hello``), so a reloaded page gets the whole curve back. The
sweep itself guarantees that a stopped or failed sweep leaves the model as it was.

``chosen_lr`` is a traitlet synced both ways: a click on the curve sets it from the
view, Python sets it with ``widget.chosen_lr = ...``. Every value is checked here (a
positive learning rate inside the swept range); a value from the view that is refused
is shown in ``input_error`` and the view gets the last valid value back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import traitlets as t

from ..plans import ExperimentPlan, PlanError
from ._base import NNxWidget, never_breaks
from ._jobs import BackgroundJob, format_exception
from ._lr_finder_inputs import (
    check_chosen_lr,
    check_display,
    check_sweep_kwargs,
    check_sweep_plan,
    classify,
    sweep_defaults,
    sweep_series,
)
from ._lr_finder_link import LR_PATH, PlanLink
from ._page_messages import RunMessages
from ._plan_builder import PlanBuilder
from ._protocol import STATUSES
from ._transport import SeriesTransport

__all__ = ["LR_PATH", "LRFinderWidget"]

log = logging.getLogger("nnx_lab.widgets")

SERIES = "sweep"


def _lr_text(value: float | None) -> str:
    return "none" if value is None else f"{value:.3g}"


class LRFinderWidget(PlanLink, RunMessages, NNxWidget):
    """An LR sweep drawn live; pick a learning rate on the curve and use it.

    ``LRFinderWidget(plan)`` sweeps the model an ``ExperimentPlan`` would fit
    (``plan.lr_finder``); ``LRFinderWidget(model, train_loader)`` an ``NNModel``
    (``nnx_lab.lr_finder`` on its network, loss and precision);
    ``LRFinderWidget(builder)`` the current plan of a ``PlanBuilder``, which it is then
    linked to. Other keyword arguments go to the sweep
    (``start_lr``, ``end_lr``, ``num_iter``, ``mode``, ``rule``, ``callbacks``, ...; see
    ``nnx_lab.lr_finder``) and are checked here, before anything starts.

    The sweep starts at once in a background thread (``autostart=False``: call
    ``start()``); Stop (or ``stop()``) ends it after the current step, and the model is
    as it was. ``wait()`` returns the ``LRFinderResult``.

    ``chosen_lr`` is the picked learning rate (the suggestion once the sweep ends, until
    something else is picked). ``use_lr()`` ("Use this LR") returns the plan with that
    rate (to three significant digits) as its ``max_lr`` and keeps it in
    ``widget.plan``; with a linked builder (``link(builder)``) it sets the builder's
    learning-rate field as typing would.
    """

    _bundle_name = "lr_finder"
    # What the page may set: the rate picked on the curve. The kernel owns the rest.
    _page_traits = NNxWidget._page_traits | {"chosen_lr"}

    status = t.Enum(STATUSES, default_value="created", help="Sweep lifecycle.").tag(sync=True)
    source = t.Unicode("", help="What is swept: 'plan', 'model' or 'builder'.").tag(sync=True)
    num_iter = t.Int(0, help="Steps the sweep is asked for.").tag(sync=True)
    start_lr = t.Float(0.0, help="First learning rate of the sweep.").tag(sync=True)
    end_lr = t.Float(0.0, help="Last learning rate of the sweep.").tag(sync=True)
    mode = t.Unicode("exp", help="'exp' or 'linear' schedule.").tag(sync=True)
    points = t.Int(0, help="Points the sweep has reported.").tag(sync=True)
    suggested_lr = t.Float(None, allow_none=True, help="The suggestion.").tag(sync=True)
    rule = t.Unicode("", help="The rule that made the suggestion.").tag(sync=True)
    suggestions = t.Dict(help="Every rule's pick ({rule: lr or None}).").tag(sync=True)
    stopped_early = t.Bool(False).tag(sync=True)
    reason = t.Unicode("", help="Why the sweep ended before num_iter.").tag(sync=True)
    chosen_lr = t.Float(
        None, allow_none=True, help="The picked learning rate (synced both ways)."
    ).tag(sync=True)
    input_error = t.Unicode("", help="Why the view's last input was refused.").tag(sync=True)
    can_stop = t.Bool(False, help="A sweep runs that Stop can end.").tag(sync=True)
    can_use = t.Bool(False, help="A rate is chosen and there is a plan to give it to.").tag(
        sync=True
    )
    linked = t.Bool(False, help="A PlanBuilder is linked.").tag(sync=True)
    plan_lr = t.Float(
        None, allow_none=True, help="The learning rate of the plan Use would change."
    ).tag(sync=True)
    applied_lr = t.Float(None, allow_none=True, help="The rate Use last applied.").tag(sync=True)
    applied_note = t.Unicode("", help="What Use last changed.").tag(sync=True)
    plan = t.Instance(
        ExperimentPlan, allow_none=True, help="The plan with the used rate (or the source plan)."
    )

    def __init__(
        self,
        source: Any,
        train_loader: Any = None,
        *,
        autostart: bool = True,
        update_interval: float = 0.1,
        max_points: int = 4096,
        **sweep_kwargs: Any,
    ) -> None:
        kind, plan, builder, model = classify(source, train_loader)
        kwargs = check_sweep_kwargs(sweep_kwargs)
        if kind in ("plan", "builder"):
            check_sweep_plan(plan)
        check_display(update_interval, max_points)
        self._ready = False
        self._kind = kind
        self._model, self._loader = model, train_loader
        self._source_plan = plan if kind == "plan" else None
        self._kwargs = kwargs
        self._user_callbacks = list(kwargs.pop("callbacks", ()) or ())
        self._builder: PlanBuilder | None = None
        self._lock = threading.RLock()
        self._series = sweep_series(max_points + max_points % 2)
        self._lrs: list[float] = []  # the swept rates, full precision (the wire is float32)
        self._job: BackgroundJob | None = None
        self._control: Any = None
        self._started_at: float | None = None
        defaults = sweep_defaults()
        super().__init__(
            source=kind,
            plan=plan,
            start_lr=float(kwargs.get("start_lr", defaults["start_lr"])),
            end_lr=float(kwargs.get("end_lr", defaults["end_lr"])),
            num_iter=int(kwargs.get("num_iter", defaults["num_iter"])),
            mode=str(kwargs.get("mode", defaults["mode"])),
        )
        self._transport = SeriesTransport(
            self.send,
            {SERIES: self._series},
            self._lock,
            interval=float(update_interval),
            on_flush=self._on_flush,
        )
        self._ready = True
        if builder is not None:
            self.link(builder)
        self._refresh_use()
        if autostart:
            self.start()

    # ------------------------------------------------------------------ chosen_lr

    @t.validate("chosen_lr")
    def _valid_lr(self, proposal: dict[str, Any]) -> float | None:
        with self._lock:
            lrs = list(self._lrs)
        return check_chosen_lr(
            proposal["value"],
            start_lr=self.start_lr,
            end_lr=self.end_lr,
            suggestions=self.suggestions,
            lrs=lrs,
        )

    @t.observe("chosen_lr")
    def _on_chosen(self, change: dict[str, Any]) -> None:
        if self._ready:
            self._refresh_use()

    def set_state(self, sync_data: dict[str, Any]) -> None:
        """State from the view: a refused ``chosen_lr`` is shown (``input_error``) and the
        view gets the last valid value back; the kernel keeps it. Other refusals go
        through NNxWidget.set_state (shown under the widget)."""
        if "chosen_lr" not in sync_data:
            super().set_state(sync_data)
            return
        try:
            # skip NNxWidget's catch-all: a refused pick is an input message beside the
            # chart, not an error under the widget
            super(NNxWidget, self).set_state(sync_data)
        except t.TraitError as exc:
            self.input_error = str(exc)
            self.send_state("chosen_lr")  # the view shows the kept value again
            return
        if "chosen_lr" in sync_data:
            self.input_error = ""

    def choose(self, lr: float | None) -> float | None:
        """Pick a learning rate (as a click on the curve does); refused values raise
        ``traitlets.TraitError`` and change nothing. Returns the kept value."""
        self.chosen_lr = lr
        return self.chosen_lr

    def _on_choose(self, content: dict[str, Any], buffers: list[Any]) -> None:
        """A rate typed into the view: ``{text}``."""
        text = str(content.get("text", "")).strip()
        try:
            value = float(text) if text else None
        except ValueError:
            self.input_error = f"chosen_lr={text!r}: type a learning rate as a number, e.g. 3e-3"
            self.send_state("chosen_lr")
            return
        try:
            self.chosen_lr = value
        except t.TraitError as exc:
            self.input_error = str(exc)
            self.send_state("chosen_lr")
            return
        self.input_error = ""

    # ------------------------------------------------------------------ the plan

    # ------------------------------------------------------------------ the sweep

    def start(self) -> LRFinderWidget:
        """Start (or run again) the sweep in a background thread; returns the widget.
        A builder's current plan is swept as it is now."""
        from ..engine.events import TrainingControl

        with self._lock:
            if self._job is not None and self._job.is_alive():
                raise RuntimeError(
                    "a sweep is running: stop() it or wait() for it before starting another"
                )
            if self._kind == "builder":
                assert self._builder is not None
                plan = self._builder.plan
                check_sweep_plan(plan)
                self.plan = plan
            self._control = TrainingControl()
            self._lrs = []
            self._series.clear()
            with self.hold_sync():
                self.error = ""
                self.status = "running"
                self.points = 0
                self.suggested_lr = None
                self.rule = ""
                self.suggestions = {}
                self.stopped_early = False
                self.reason = ""
                self.can_stop = True
            self._transport.flush()
            self._started_at = time.monotonic()
            self._job = BackgroundJob(
                self._sweep_target(self._control), name="nnx-lr-finder", on_error=self._on_error
            )
            self._job.start()
        return self

    def _sweep_target(self, control: Any) -> Callable[[], Any]:
        kwargs = {**self._kwargs, "callbacks": [self, *self._user_callbacks], "control": control}
        if self._kind == "model":
            from ..lr_sweep import lr_finder  # the tool, on the model's network and loss

            model, loader = self._model, self._loader
            kwargs.setdefault("precision", model.precision)
            loss = model.loss_fn.kind or model.loss_fn.custom
            return lambda: lr_finder(model.net, loader, loss, **kwargs)
        plan = self._source_plan if self._kind == "plan" else self.plan
        assert plan is not None
        return lambda: plan.lr_finder(**kwargs)

    def stop(self, reason: str = "stopped from the LR finder") -> None:
        """End the sweep after its current step; the model is restored as always."""
        with self._lock:
            if self._control is None or self._job is None or not self._job.is_alive():
                return
            self._control.request_stop(reason)
            if self.status == "running":
                self.status = "stopping"
            self.can_stop = False

    def wait(self, timeout: float | None = None) -> Any:
        """Wait for the sweep; its ``LRFinderResult``, or its exception re-raised."""
        job = self._job
        if job is None:
            return None
        if not job.join(timeout):
            raise TimeoutError(f"the sweep still runs after {timeout}s; wait() again or stop()")
        if job.exception is not None:
            raise job.exception
        return job.result

    @property
    def result(self) -> Any:
        """The last sweep's ``LRFinderResult`` once it has ended (else None)."""
        job = self._job
        if job is None or job.is_alive():
            return None
        return job.result

    def _on_error(self, exc: BaseException) -> None:
        with self._lock:
            with self.hold_sync():
                self.error = format_exception(exc)
                self.status = "failed"
                self.can_stop = False
            self._transport.flush()

    # ------------------------------------------------------------------ sink hooks

    def on_attach(self, control: Any) -> None:
        pass  # the widget made the control it passed to the sweep

    @never_breaks("the sweep")
    def on_sweep_started(self, event: Any) -> None:
        with self._lock:
            self._lrs = []
            self._series.clear()
            with self.hold_sync():
                self.num_iter = int(event.num_iter)
                self.start_lr = float(event.start_lr)
                self.end_lr = float(event.end_lr)
                self.mode = str(event.mode)
                if self.status not in ("stopping",):
                    self.status = "running"
            self._transport.flush()  # the views drop an earlier curve at once

    @never_breaks("the sweep")
    def on_sweep_points(self, event: Any) -> None:
        points = event.points
        if not points:
            return
        with self._lock:
            self._lrs.extend(float(p[1]) for p in points)
            self._series.extend(
                {
                    "step": [int(p[0]) + 1 for p in points],
                    "lr": [p[1] for p in points],
                    "loss": [p[2] for p in points],
                    "smoothed": [p[3] for p in points],
                }
            )
        self._transport.request_flush()

    @never_breaks("the sweep")
    def on_sweep_finished(self, event: Any) -> None:
        with self._lock:
            self._transport.flush()  # the last points before the final status
            with self.hold_sync():
                self.status = event.status if event.status in STATUSES else "finished"
                self.suggested_lr = event.suggested_lr
                self.rule = event.rule or ""
                self.suggestions = dict(event.suggestions)
                self.stopped_early = bool(event.stopped_early)
                self.reason = event.reason or ""
                self.can_stop = False
                if event.error:
                    self.error = event.error
                if self.chosen_lr is None and event.suggested_lr is not None:
                    self.chosen_lr = event.suggested_lr
            self._on_flush(0.0)

    def _on_flush(self, now: float) -> None:
        self.points = self._series.total

    # ------------------------------------------------------------------ front end
    # hello and stop: RunMessages (_page_messages.py)

    def _action(self, action: Callable[[], Any]) -> None:
        """A button: a refusal is a one-line message under the widget."""
        self.error = ""
        try:
            action()
        except (PlanError, ValueError, RuntimeError, t.TraitError) as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def _on_use(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self._action(self.use_lr)

    def _on_restart(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self._action(self.start)

    # ------------------------------------------------------------------ reading

    @property
    def transport_stats(self) -> Any:
        return self._transport.stats

    def series(self) -> dict[str, list[float]]:
        """A copy of the held points: ``step``, ``lr``, ``loss``, ``smoothed`` (and the
        bucket columns once decimated)."""
        with self._lock:
            return {name: self._series.column(name).tolist() for name in self._series.fields}

    def summary(self) -> str:
        parts = [f"status={self.status}", f"{self.points} of {self.num_iter} steps"]
        if self.suggested_lr is not None:
            parts.append(f"suggested {_lr_text(self.suggested_lr)} by {self.rule}")
        if self.reason:
            parts.append(self.reason)
        parts.append(f"chosen {_lr_text(self.chosen_lr)}")
        if self.applied_lr is not None:
            parts.append(f"used {_lr_text(self.applied_lr)}")
        return ", ".join(parts)

    def _repr_notes(self) -> list[str]:
        return super()._repr_notes() + ([self.input_error] if self.input_error else [])

    def close(self) -> None:
        """Close the view (a sweep still running goes on and ends as usual)."""
        if getattr(self, "_builder", None) is not None:
            self.unlink()
        transport = getattr(self, "_transport", None)
        if transport is not None:
            transport.close()
        super().close()
