"""The training loop's one event stream (``nnx_lab.events``).

The event types and their JSON form live on the torch-free floor (``nnx_lab.runs``),
so a log written by one process is replayed as the same events in another without the
engine; this module adds the loop's live control object.
"""

from __future__ import annotations

import threading
from typing import Any

from ..runs import (
    HOOKS,
    CheckpointWritten,
    EpochEnded,
    EpochStarted,
    Event,
    FigureReady,
    HealthRecord,
    RunEnding,
    RunFinished,
    RunStarted,
    StepEnded,
    StepMetrics,
    StepRecord,
    SweepFinished,
    SweepPoints,
    SweepStarted,
    event_from_json,
    figure_event,
)

__all__ = [
    "HOOKS",
    "CheckpointWritten",
    "EpochEnded",
    "EpochStarted",
    "Event",
    "FigureReady",
    "HealthRecord",
    "RunEnding",
    "RunFinished",
    "RunStarted",
    "StepEnded",
    "StepMetrics",
    "StepRecord",
    "SweepFinished",
    "SweepPoints",
    "SweepStarted",
    "TrainingControl",
    "event_from_json",
]


class TrainingControl:
    """Shared between the loop and its sinks: a thread-safe stop request.

    The loop checks ``stop_requested`` between optimizer steps; a widget's Stop
    button (another thread) or EarlyStopping sets it.
    """

    def __init__(self) -> None:
        self._stop = threading.Event()
        self.stop_reason: str | None = None
        self.complete = False  # True: the run ends as "finished" (early stopping)
        self.failure: BaseException | None = None  # set: the run ends as "failed" with it

    def request_stop(self, reason: str = "stop requested") -> None:
        """Stop after the current step; the run's status becomes "stopped"."""
        if not self._stop.is_set():
            self.stop_reason = reason
        self._stop.set()

    def finish_early(self, reason: str) -> None:
        """End at this epoch's end as a complete run (status "finished"), e.g. early stopping."""
        if not self._stop.is_set():
            self.stop_reason = reason
            self.complete = True
        self._stop.set()

    def fail(self, error: BaseException) -> None:
        """End the run after the current step as "failed" with ``error`` (from any thread,
        e.g. a watchdog that finds the run directory gone)."""
        if self.failure is None:
            self.failure = error
        self._stop.set()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def bind(self, emit: Any) -> None:
        """The event stream's ``emit`` (the loop's bus binds it when it attaches)."""
        self._emit = emit

    def show_figure(self, name: str, epoch: int, kind: str, data: Any) -> FigureReady:
        """Hand the monitor (and the run folder) a figure for ``epoch``: ``kind`` "png"
        (``data``: PNG bytes), "plotly" (a plotly Figure, its JSON or dict) or "scatter"
        (``{"x": [...], "y": [...], "group": [...]}`` or an (n, 2) array). Checked first:
        a bad one is a ``ValueError`` and nothing is shown or written. Returns the event."""
        event = figure_event(name, epoch, kind, data)
        emit = getattr(self, "_emit", None)
        if emit is None:
            raise RuntimeError(
                "show_figure needs a running loop: call it from a callback's hook while "
                "the run trains"
            )
        emit(event)
        return event
