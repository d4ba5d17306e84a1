"""The shapes of a run's two YAML records: ``run.yaml`` (the hashed configuration) and
``metadata.yaml`` (environment, status, writer, progress).

Each field the engine writes is typed here as it writes it: counts are whole numbers
(``n_epochs: 1.5`` is refused), times are plausible Unix times (``started_at:
yesterday`` and ``1e300`` are refused), the status is one a writer records, ids are
run ids. Fields this version does not know are let through unchecked (the size, nesting
and alias limits still hold them): a run written by a newer nnx_lab still lists, and a
record is never rewritten from its checked value, so nothing is lost. The readers keep
the plain mapping once it has passed (``nnx_lab.runs.read_record``).

The nested configuration sections of ``run.yaml`` (``net``, ``model``, ``data``) are
mappings here; what is inside is checked by the engine's parameter classes when a run
is rebuilt from them (``NNParams.from_json``), and the run id, a hash of the whole file,
proves it was not edited.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from .._schema import Finite, NonNegativeInt, PositiveInt

__all__ = [
    "RUN_NAME_MAX",
    "RUN_STATUSES",
    "Metadata",
    "RunConfig",
    "RunId",
    "RunName",
    "RunStatus",
    "Timestamp",
]

RunId = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{32}$")]
# Seconds since 1970 up to 2200-01-01: a clock that is wrong by years passes, a date
# written as text or a number no clock gives (1e300) does not.
Timestamp = Annotated[float, msgspec.Meta(ge=0.0, le=7_258_118_400.0)]
RunStatus = Literal["created", "running", "stopped", "finished", "failed"]
RUN_STATUSES = ("created", "running", "stopped", "finished", "failed")
# A run's name (``nnx_lab.runs.check_run_name`` says the same in words): one line of
# text, a label rather than notes, without a control or a direction character.
RUN_NAME_MAX = 100
RunName = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=RUN_NAME_MAX,
        pattern="^[^\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]+$",
    ),
]


# -- run.yaml ---------------------------------------------------------------------------------
class ResumeConfig(msgspec.Struct):
    from_run_id: RunId
    checkpoint: str
    mode: str


class TrainConfig(msgspec.Struct):
    n_epochs: PositiveInt
    seed: int
    resume: ResumeConfig | None = None


class RunConfig(msgspec.Struct):
    """``run.yaml``."""

    format: PositiveInt
    net: dict[str, Any]
    model: dict[str, Any]
    train: TrainConfig
    data: dict[str, Any] | None = None
    initial_weights: str | None = None


# -- metadata.yaml ----------------------------------------------------------------------------
class Writer(msgspec.Struct):
    pid: PositiveInt | None = None
    host: str | None = None
    boot_id: str | None = None
    proc_start: NonNegativeInt | None = None


class Best(msgspec.Struct):
    value: Finite | None = None  # the selection signal: None when no epoch had a finite one
    source: str | None = None
    epoch: NonNegativeInt | None = None
    mode: Literal["min", "max"] | None = None  # lower or higher is better; None: older runs


class Precision(msgspec.Struct):
    requested: str
    effective: str
    fallback_reason: str | None = None
    device: str | None = None
    tf32: dict[str, Any] | None = None
    covers: list[str] | None = None
    not_covered: list[str] | None = None


class ResumeStatus(msgspec.Struct):
    from_run_id: RunId
    checkpoint: str
    mode: str
    restored: list[str] = []
    from_epoch: NonNegativeInt = 0
    from_step: NonNegativeInt = 0
    epoch_complete: bool = True
    n_epochs: NonNegativeInt | None = None
    planned_epochs: NonNegativeInt | None = None


class Metadata(msgspec.Struct):
    """``metadata.yaml``. Every field may be absent: a run from an older version, or
    one whose writer died before it wrote them, records fewer."""

    status: RunStatus = "created"
    name: RunName | None = None  # never part of the run id; renamed in place (runs._naming)
    started_at: Timestamp | None = None
    heartbeat: Timestamp | None = None
    finished_at: Timestamp | None = None
    writer: Writer | None = None
    parent_run_id: RunId | None = None
    planned_epochs: NonNegativeInt | None = None
    epochs_completed: NonNegativeInt | None = None
    steps: NonNegativeInt | None = None
    best: Best | None = None
    error: str | None = None
    stop_reason: str | None = None
    precision: Precision | None = None
    resume_status: ResumeStatus | None = None
    seed: int | None = None
    device: str | None = None
    nnx_lab: str | None = None
    torch: str | None = None
    numpy: str | None = None
    safetensors: str | None = None
    python: str | None = None
    platform: str | None = None
