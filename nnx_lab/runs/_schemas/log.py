"""The shape of one line of a run's ``metrics.jsonl``: one of the events the loop logs,
told apart by its ``event`` field (``"step"`` is one step record, the line the log
writes per optimizer step).

Which fields may hold NaN or an infinity: the values a model computes (a loss, the
metrics of a step or an epoch, ``train`` / ``val`` summaries), since a diverging run
logs them as they were. Counters are whole numbers >= 0, times are plausible Unix times,
the learning rate, the selection signal and an epoch's seconds are finite. A run with
several optimizers (the Trainer's) writes ``lr`` as null and each optimizer's rate in a
step line's ``lrs``: a step line with a null ``lr`` and no ``lrs`` is refused. Fields this
version does not know are ignored, so a log written by a newer nnx_lab still replays.

A field left out of a line takes the event's own default (``UNSET`` here; a step
record's defaults are written out, as they are ``None``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from .._schema import Finite, NonNegativeInt
from .records import RunId, Timestamp

__all__ = [
    "LOG_LINE_KINDS",
    "CheckpointLine",
    "EpochLine",
    "HealthLine",
    "LogLine",
    "RunFinishedLine",
    "RunStartedLine",
    "StepLine",
    "StepMetricsLine",
    "StepShape",
]

# A value a model computed: NaN and the infinities are what a diverging run logs.
Measured = float | None
Summary = dict[str, float | dict[str, Any] | None]  # an epoch summary (EDP.to_json)
Seconds = Annotated[float, msgspec.Meta(ge=0.0, le=1.7976931348623157e308)]


class StepShape(msgspec.Struct):
    """One optimizer step's record: ``StepRecord``'s fields, in its order and with its
    defaults (a record is built from this one's values as they stand)."""

    step: NonNegativeInt
    epoch: NonNegativeInt
    batch: NonNegativeInt
    lr: Finite | None  # None only beside ``lrs``: several optimizers, no one rate
    samples: NonNegativeInt
    loss: Measured
    error: Measured = None
    accuracy: Measured = None
    precision: Measured = None
    recall: Measured = None
    f1: Measured = None
    valid: NonNegativeInt | None = None
    metrics: dict[str, Measured] | None = None
    extra: dict[str, Any] | None = None
    aux: dict[str, Measured] | None = None
    terms: dict[str, Measured] | None = None
    lrs: dict[str, Finite] | None = None

    def __post_init__(self) -> None:
        if self.lr is None and not self.lrs:
            raise ValueError(
                "lr is null without lrs: a step line names its one learning rate, or "
                "each optimizer's in lrs"
            )


class StepLine(StepShape, tag_field="event", tag="step"):
    pass


class StepMetricsLine(msgspec.Struct, tag_field="event", tag="step_metrics"):
    records: list[StepShape]


class RunStartedLine(msgspec.Struct, tag_field="event", tag="run_started"):
    run_id: RunId | None
    run_dir: str | None
    n_epochs: NonNegativeInt
    start_epoch: NonNegativeInt
    start_step: NonNegativeInt
    steps_per_epoch: NonNegativeInt | None
    config: dict[str, Any] | UnsetType = UNSET
    parent_run_id: RunId | UnsetType | None = UNSET
    time: Timestamp | UnsetType = UNSET


class EpochLine(msgspec.Struct, tag_field="event", tag="epoch_ended"):
    epoch: NonNegativeInt
    step: NonNegativeInt
    lr: Finite | None  # None: several optimizers (the step lines' lrs hold their rates)
    train: Summary
    val: Summary | None
    signal: Finite | None
    signal_source: str | None
    improved: bool
    seconds: Seconds
    train_last: Summary | UnsetType | None = UNSET
    selection: dict[str, Any] | UnsetType | None = UNSET


class CheckpointLine(msgspec.Struct, tag_field="event", tag="checkpoint_written"):
    type: Literal["last", "best", "first", "q1", "q2", "q3"]
    epoch: NonNegativeInt
    step: NonNegativeInt
    path: str


class RunFinishedLine(msgspec.Struct, tag_field="event", tag="run_finished"):
    run_id: RunId | None
    status: Literal["finished", "stopped", "failed"]
    epochs_completed: NonNegativeInt
    steps: NonNegativeInt
    error: str | UnsetType | None = UNSET
    traceback: str | UnsetType | None = UNSET
    stop_reason: str | UnsetType | None = UNSET
    time: Timestamp | UnsetType = UNSET


class HealthLine(msgspec.Struct, tag_field="event", tag="health"):
    """A ``HealthRecord``: norms are measured values (a diverging run logs NaN)."""

    step: NonNegativeInt
    epoch: NonNegativeInt
    names: list[str]
    modules: list[str]
    grad_norm: list[Measured]
    weight_norm: list[Measured]
    update_ratio: list[Measured]
    optimizers: list[str | None] | UnsetType | None = UNSET
    dead: dict[str, Measured] | UnsetType | None = UNSET
    alerts: list[dict[str, Any]] | UnsetType | None = UNSET


LogLine = (
    StepLine
    | StepMetricsLine
    | RunStartedLine
    | EpochLine
    | CheckpointLine
    | RunFinishedLine
    | HealthLine
)
LOG_LINE_KINDS = (
    "health",
    "step",
    "step_metrics",
    "run_started",
    "epoch_ended",
    "checkpoint_written",
    "run_finished",
)
