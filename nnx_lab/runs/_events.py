"""The events of the training loop's one stream, and their JSON form (the lines of a
run's ``metrics.jsonl``). Torch-free: the server and the log follower read them.

The training loop's one event stream.

Everything that reports (the run directory's records, the JSONL log, the checkpoints,
the progress bar, EarlyStopping, the live widgets) is a *sink* of this stream. Events
are plain frozen dataclasses with a JSON form, so a log written by one process can be
replayed as the same events in another (``event_from_json``): a widget cannot tell a
live run from a replayed one.

Per-step values are never read from the device on every step. The loop emits a cheap
``StepEnded`` per optimizer step (counters only) and, every ``log_every`` steps and at
each epoch end, one ``StepMetrics`` holding the per-step records read back in bulk.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import msgspec
from msgspec import UNSET
from msgspec.structs import astuple

from ._jsonl import LogLineError, parse_line
from ._schema import LIMITS, SchemaError, check
from ._schemas.log import (
    LOG_LINE_KINDS,
    CheckpointLine,
    EpochLine,
    HealthLine,
    LogLine,
    RunFinishedLine,
    RunStartedLine,
    StepLine,
    StepMetricsLine,
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
    "event_from_json",
    "event_from_line",
    "quick_event",
]


@dataclass(frozen=True)
class Event:
    """Base of every event. ``kind`` is the wire name; ``hook`` the sink method."""

    kind: ClassVar[str] = "event"
    hook: ClassVar[str] = "on_event"

    def to_json(self) -> dict[str, Any]:
        # A shallow copy: nested values are already plain dicts and lists, and
        # dataclasses.asdict's deep copy costs more than the rest of an epoch's reporting.
        return {**self.__dict__, "event": self.kind}


@dataclass(frozen=True)
class RunStarted(Event):
    kind: ClassVar[str] = "run_started"
    hook: ClassVar[str] = "on_run_started"

    run_id: str | None  # None: a loop that records no run (a sweep, a probe)
    run_dir: str | None  # None: no run directory
    n_epochs: int  # epochs this run trains (for a resumed run: the additional ones)
    start_epoch: int  # first epoch number this run trains (1-based)
    start_step: int  # global optimizer steps completed before this run
    steps_per_epoch: int | None  # None when the loader has no len()
    config: dict[str, Any] = field(default_factory=dict)
    parent_run_id: str | None = None
    time: float = field(default_factory=time.time)


@dataclass(frozen=True)
class EpochStarted(Event):
    """Before an epoch's first step. Not written to the log."""

    kind: ClassVar[str] = "epoch_started"
    hook: ClassVar[str] = "on_epoch_started"

    epoch: int
    step: int  # optimizer steps completed before it


@dataclass(frozen=True)
class StepEnded(Event):
    """Emitted after every optimizer step. Counters only: no device value."""

    kind: ClassVar[str] = "step_ended"
    hook: ClassVar[str] = "on_step_ended"

    step: int  # global optimizer step, 1-based
    epoch: int
    batch: int  # batch index within the epoch, 0-based
    samples: int  # samples in this step


@dataclass(frozen=True)
class StepRecord:
    """One optimizer step's training record (NNx's ``idp`` minus validation)."""

    step: int
    epoch: int
    batch: int
    lr: float | None  # None: several optimizers (the Trainer's), each rate in ``lrs``
    samples: int
    loss: float | None  # None: every target of the step was ignore_index
    error: float | None = None
    accuracy: float | None = None
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None
    # A declared task's records (and extra_metrics); None, and absent from the log, else.
    valid: int | None = None  # targets scored
    metrics: dict[str, float | None] | None = None  # registry metrics (mse, mae, ...)
    extra: dict[str, Any] | None = None  # extra_metrics values, called on this step's batch
    # A network's auxiliary terms, unweighted (a MoE's "load_balance"); None, and absent, else.
    aux: dict[str, float | None] | None = None
    # An objective's loss terms by name (a VAE's "recon" and "kl"); None, and absent, else.
    terms: dict[str, float | None] | None = None
    # Each optimizer's learning rate by name (the Trainer's "G" and "D"); None, and absent, else.
    lrs: dict[str, float] | None = None


@dataclass(frozen=True)
class StepMetrics(Event):
    """A batch of per-step records, read back from the device in one sync."""

    kind: ClassVar[str] = "step_metrics"
    hook: ClassVar[str] = "on_step_metrics"

    records: tuple[StepRecord, ...]

    def to_json(self) -> dict[str, Any]:
        return {"event": self.kind, "records": [dict(r.__dict__) for r in self.records]}


@dataclass(frozen=True)
class EpochEnded(Event):
    kind: ClassVar[str] = "epoch_ended"
    hook: ClassVar[str] = "on_epoch_ended"

    epoch: int
    step: int  # global step at the end of this epoch
    # learning rate after the plateau scheduler stepped; None: several optimizers (the
    # Trainer's), whose rates are the step records' ``lrs``
    lr: float | None
    train: dict[str, float | None]  # whole-epoch training summary (sample-weighted)
    val: dict[str, float | None] | None  # whole-split validation metrics, None without a val split
    signal: float | None  # the §2.11 selection value (None: no finite signal this epoch)
    signal_source: str | None  # e.g. "val_edp.error"
    improved: bool  # this epoch became BEST
    seconds: float  # wall time of the epoch (training + validation)
    train_last: dict[str, float | None] | None = None  # the epoch's last step record (§2.11)
    selection: dict[str, Any] | None = None  # MonitorRecord of a declared monitor (§2.6)

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        if data["selection"] is None:
            del data["selection"]  # without a monitor, the line older versions wrote
        return data


@dataclass(frozen=True)
class CheckpointWritten(Event):
    kind: ClassVar[str] = "checkpoint_written"
    hook: ClassVar[str] = "on_checkpoint_written"

    type: str  # "last" | "best" | a phase: "first" | "q1" | "q2" | "q3"
    epoch: int
    step: int
    path: str


@dataclass(frozen=True)
class RunEnding(Event):
    """The loop has stopped stepping; what must be saved is saved now, before
    ``RunFinished``. Not written to the log (it is the writers' own cue)."""

    kind: ClassVar[str] = "run_ending"
    hook: ClassVar[str] = "on_run_ending"

    status: str  # what the run will end as: "finished" | "stopped" | "failed"
    epoch: int  # epochs completed
    step: int
    mid_epoch: bool  # stopped inside an epoch (batches of it were trained)


@dataclass(frozen=True)
class RunFinished(Event):
    kind: ClassVar[str] = "run_finished"
    hook: ClassVar[str] = "on_run_finished"

    run_id: str | None
    status: str  # "finished" | "stopped" | "failed"
    epochs_completed: int
    steps: int
    error: str | None = None  # "TypeName: message" for a failed run
    traceback: str | None = None
    stop_reason: str | None = None
    time: float = field(default_factory=time.time)


@dataclass(frozen=True)
class SweepStarted(Event):
    """An LR sweep (``nnx_lab.lr_finder``) began. Sweep events are never logged."""

    kind: ClassVar[str] = "sweep_started"
    hook: ClassVar[str] = "on_sweep_started"

    num_iter: int
    start_lr: float
    end_lr: float
    mode: str  # "exp" | "linear"


@dataclass(frozen=True)
class SweepPoints(Event):
    """Points of the sweep since the last such event: ``(index, lr, loss, smoothed)``."""

    kind: ClassVar[str] = "sweep_points"
    hook: ClassVar[str] = "on_sweep_points"

    points: tuple[tuple[int, float, float, float], ...]


@dataclass(frozen=True)
class SweepFinished(Event):
    kind: ClassVar[str] = "sweep_finished"
    hook: ClassVar[str] = "on_sweep_finished"

    status: str  # "finished" | "stopped" | "failed"
    suggested_lr: float | None
    rule: str | None
    suggestions: dict[str, float | None]
    stopped_early: bool
    reason: str | None
    error: str | None = None


@dataclass(frozen=True)
class FigureReady(Event):
    """A callback handed the monitor a figure for an epoch (``control.show_figure``).

    ``kind`` is "png" (``data``: the PNG's bytes), "plotly" (``data``: a plotly figure's
    JSON, UTF-8) or "scatter" (``data``: ``{"x": [...], "y": [...], "group": [...]?}`` as
    UTF-8 JSON). Never written to ``metrics.jsonl``: the run folder keeps each figure as a
    file of its own (``nnx_lab.runs._figures``), read back as data.
    """

    kind: ClassVar[str] = "figure_ready"
    hook: ClassVar[str] = "on_figure_ready"

    name: str
    epoch: int
    figure_kind: str  # "png" | "plotly" | "scatter"
    data: bytes


@dataclass(frozen=True)
class HealthRecord(Event):
    """Gradient health at one optimizer step (``HealthProbe``): per parameter tensor,
    in the network's order, its gradient norm (None: no gradient reached it), weight
    norm and update-to-weight ratio (None: no update measured); ``dead`` is each
    hooked activation's fraction of units that no row of the batch switched on;
    ``alerts`` the problems first seen at this step (kind, layer, step, value)."""

    kind: ClassVar[str] = "health"
    hook: ClassVar[str] = "on_health"

    step: int
    epoch: int
    names: list[str]
    modules: list[str]
    grad_norm: list[float | None]
    weight_norm: list[float | None]
    update_ratio: list[float | None]
    optimizers: list[str | None] | None = None  # the Trainer's optimizer of each tensor
    dead: dict[str, float | None] | None = None
    alerts: list[dict[str, Any]] | None = None


_KINDS: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        RunStarted,
        StepEnded,
        StepMetrics,
        EpochEnded,
        CheckpointWritten,
        RunFinished,
        HealthRecord,
    )
}

# Hooks of the events a log never holds (they only exist while a loop runs).
_LIVE_ONLY = (EpochStarted, RunEnding, SweepStarted, SweepPoints, SweepFinished, FigureReady)
HOOKS: tuple[str, ...] = (*(cls.hook for cls in _KINDS.values()), *(c.hook for c in _LIVE_ONLY))


def event_from_json(
    data: Any, path: str | os.PathLike[str] = "metrics.jsonl", line: int | None = None
) -> Event:
    """Rebuild an event from its JSON form (one line of ``metrics.jsonl``, parsed).

    The line is checked against its shape (``_schemas.log``: types, whole numbers,
    finite values where the engine writes finite ones, plausible times), so a damaged or
    edited line is one ``LogLineError`` (a ``ValueError``, a ``SchemaError`` and a
    ``LogDamagedError``) naming ``path``, ``line`` and the field here, not a confusing
    error later.
    """
    if not isinstance(data, dict):
        raise LogLineError(
            path, "", f"an event is a JSON object, not a {type(data).__name__}", line=line
        )
    kind = data.get("event")
    if kind not in LOG_LINE_KINDS:
        raise LogLineError(
            path,
            "event",
            f"unknown event kind {_shown(kind)}; expected one of {sorted(_KINDS)}",
            line=line,
        )
    try:
        shape = check(data, LogLine, path, line=line)  # type: ignore[arg-type]
    except SchemaError as exc:
        raise LogLineError.of(exc) from None
    return _from_shape(shape)


def event_from_line(
    raw: bytes, path: str | os.PathLike[str] = "metrics.jsonl", line: int | None = None
) -> Event:
    """The event of one line of ``metrics.jsonl`` (its bytes, without the newline), or
    a ``LogLineError``: ``quick_event``'s one pass, else ``parse_line`` and
    ``event_from_json``, which say what is wrong."""
    event = quick_event(raw)
    if event is not None:
        return event
    return event_from_json(parse_line(raw, path, line), path, line)


_LINE_DECODER = msgspec.json.Decoder(LogLine)


def quick_event(raw: bytes) -> Event | None:
    """The event of a well-formed log line, decoded and checked in one pass in C, or
    None when this pass cannot say: a NaN or an infinity (JSON has no word for them;
    the engine writes them as Python's json does), brackets enough to pass the nesting
    cap, or any damage. The slow path (``event_from_line``) then decides, with the
    same shapes, so the two never disagree on what passes."""
    if b"NaN" in raw or b"Infinity" in raw or raw.count(b"[") + raw.count(b"{") > LIMITS.nesting:
        return None
    try:
        shape = _LINE_DECODER.decode(raw)
    except msgspec.DecodeError:  # a ValidationError too: the slow path names the field
        return None
    return _from_shape(shape)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_LINE_EVENTS: dict[type, type[Event]] = {
    RunStartedLine: RunStarted,
    EpochLine: EpochEnded,
    CheckpointLine: CheckpointWritten,
    RunFinishedLine: RunFinished,
    HealthLine: HealthRecord,
}
_FIELDS: dict[type, tuple[str, ...]] = {}


def _from_shape(shape: Any) -> Event:
    if type(shape) is StepLine:  # the log writes one line per step record
        # StepShape holds StepRecord's fields in its order, with its defaults
        return StepMetrics(records=(StepRecord(*astuple(shape)),))
    if type(shape) is StepMetricsLine:
        return StepMetrics(records=tuple(StepRecord(*astuple(r)) for r in shape.records))
    cls = _LINE_EVENTS[type(shape)]
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls))
    values = {n: v for n in names if (v := getattr(shape, n)) is not UNSET}
    return cls(**values)  # a field left out takes the event's default
