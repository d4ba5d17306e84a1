"""The runs of a race (or of a comparison) drawn on top of each other in one monitor.

A ``RaceLane`` is one run: a sink of that run's events with its own bounded step and
epoch series (the same columns as the monitor's own, ``_monitor_series``) and its own
status. The monitor registers a lane's series with its transport under the names
``<key>.steps`` and ``<key>.epochs`` (``key`` is ``lane<n>``, never reused by the same
monitor, so a view can never mistake an old lane's rows for a new one's), and lists
the lanes in its synced ``runs`` trait, which says what each view draws.

A lane knows its monitor only through a ``LaneHost``: the lock its series change
under, and the two calls that send them (``flush`` soon, ``changed`` now, for a status).
While a race trains, each lane also passes its run's events on to a sink (``forward``:
the monitor itself), so the header, the counters and the Stop button follow the run
that is training now.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from ..engine.events import EpochEnded, RunFinished, RunStarted, StepEnded, StepMetrics
from ._jobs import format_exception
from ._monitor_series import add_epoch, add_steps, epoch_series, step_series

__all__ = ["LANE_STATUSES", "MAX_LANES", "LaneHost", "RaceLane"]

log = logging.getLogger("nnx_lab.widgets")

# A run of a race is "queued" before it starts and "skipped" when the race was
# stopped before its turn; the others are the monitor's own statuses.
LANE_STATUSES = (
    "queued",
    "running",
    "stopping",
    "stopped",
    "finished",
    "failed",
    "interrupted",
    "skipped",
)
TERMINAL = ("stopped", "finished", "failed", "interrupted", "skipped")
# One colour per run, told apart at a glance (js/monitor/race.js RACE_COLORS has as
# many): more runs would repeat colours. 12: the sweep is one race.
MAX_LANES = 12
# Per run of a race: enough to draw an overlay (uPlot draws at most a few points per
# pixel column); past it, rows merge in pairs as in the monitor's own series.
LANE_POINTS = 20_000
LANE_EPOCHS = 5_000


@dataclass(frozen=True)
class LaneHost:
    """What a lane needs of the widget that draws it, and nothing more."""

    lock: AbstractContextManager[Any]  # the series and the lanes change under it
    changed: Callable[[], None]  # a lane's status changed: send its last rows, then it
    flush: Callable[[], None]  # rows were added: send them with the next update
    show_error: Callable[[BaseException | str], None]  # under the widget


def _guarded(hook: Callable[..., None]) -> Callable[..., None]:
    """A lane's display problem must not fail the run it follows."""

    @functools.wraps(hook)
    def guarded(self: RaceLane, *args: Any) -> None:
        try:
            hook(self, *args)
        except Exception as exc:
            log.exception("race lane %s: %s failed; training goes on", self.name, hook.__name__)
            try:
                self.host.show_error(exc)
            except Exception:
                log.debug("could not show the error under the widget", exc_info=True)

    return guarded


class RaceLane:
    """One run of a race: its series, its status, and a sink of its events."""

    def __init__(
        self,
        host: LaneHost,
        key: str,
        name: str,
        *,
        points: int,
        epochs: int,
        forward: Any = None,
    ) -> None:
        self.host = host
        self.key = key
        self.name = name
        self.forward = forward  # a sink the events go on to (the monitor, in a race)
        self.steps = step_series(points)
        self.epochs = epoch_series(epochs)
        self.run_id = ""
        self.status = "queued"
        self.stop_reason = ""
        self.error = ""
        self.epoch = 0
        self.n_epochs = 0
        self.step = 0
        self.last_loss: float | None = None
        self.nonfinite_since: int | None = None
        self.result: Any = None  # the FitResult once the run has ended

    @property
    def series_names(self) -> tuple[str, str]:
        return f"{self.key}.steps", f"{self.key}.epochs"

    def info(self) -> dict[str, Any]:
        """What the ``runs`` trait says about this run (small; synced at every flush)."""
        loss = self.last_loss
        return {
            "key": self.key,
            "name": self.name,
            "run_id": self.run_id,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "error": self.error.splitlines()[0] if self.error else "",
            "epoch": self.epoch,
            "n_epochs": self.n_epochs,
            "step": self.step,
            "last_loss": loss if loss is not None and math.isfinite(loss) else None,
            "loss_nonfinite_since": self.nonfinite_since,
        }

    # ------------------------------------------------------------------ lifecycle

    def fail(self, exc: BaseException | str) -> None:
        """The run failed (before it started, or the loop raised)."""
        with self.host.lock:
            self.status = "failed"
            self.error = exc if isinstance(exc, str) else format_exception(exc)
        self.host.changed()

    def skip(self, reason: str) -> None:
        with self.host.lock:
            self.status = "skipped"
            self.stop_reason = reason
        self.host.changed()

    # ------------------------------------------------------------------ sink hooks

    def on_attach(self, control: Any) -> None:
        if self.forward is not None:
            self.forward.on_attach(control)

    def on_detach(self) -> None:
        if self.forward is not None:
            self.forward.on_detach()

    @_guarded
    def on_run_started(self, event: RunStarted) -> None:
        with self.host.lock:
            self.run_id = event.run_id
            self.status = "running"
            self.epoch = int(event.start_epoch)
            self.step = int(event.start_step)
            self.n_epochs = int(event.start_epoch) + int(event.n_epochs) - 1
        if self.forward is not None:
            self.forward.on_run_started(event)
        self.host.changed()

    @_guarded
    def on_step_ended(self, event: StepEnded) -> None:
        self.step = max(self.step, int(event.step))
        self.epoch = max(self.epoch, int(event.epoch))
        if self.forward is not None:
            self.forward.on_step_ended(event)
        else:
            self.host.flush()

    @_guarded
    def on_step_metrics(self, event: StepMetrics) -> None:
        records = event.records
        if records:
            with self.host.lock:
                losses = add_steps(self.steps, records)
                for record, loss in zip(records, losses, strict=True):
                    if math.isfinite(loss):
                        self.nonfinite_since = None
                    elif self.nonfinite_since is None:
                        self.nonfinite_since = int(record.step)
                self.last_loss = losses[-1]
                self.step = max(self.step, int(records[-1].step))
        if self.forward is not None:
            self.forward.on_step_metrics(event)
        else:
            self.host.flush()

    @_guarded
    def on_epoch_ended(self, event: EpochEnded) -> None:
        with self.host.lock:
            add_epoch(self.epochs, event)
            self.epoch = max(self.epoch, int(event.epoch))
            self.step = max(self.step, int(event.step))
        if self.forward is not None:
            self.forward.on_epoch_ended(event)
        else:
            self.host.flush()

    @_guarded
    def on_run_finished(self, event: RunFinished) -> None:
        with self.host.lock:
            self.step = max(self.step, int(event.steps))
            self.status = event.status if event.status in TERMINAL else "finished"
            self.stop_reason = event.stop_reason or ""
            if event.status == "failed":
                text = event.error or "training failed"
                if event.traceback:
                    text = f"{text}\n\n{event.traceback.rstrip()}"
                self.error = text
        if self.forward is not None:
            self.forward.on_run_finished(event)
        self.host.changed()
