"""The wire protocol between the kernel-side widgets and their front end.

Written down once here and once in ``js/protocol.js``; the two must agree. A widget
talks over two channels:

* **Synced traitlets** carry small state (run id, status, counters, rates, the error
  text). ipywidgets keeps them in the kernel, so a reloaded page gets them back.
* **Custom messages** (``widget.send(content, buffers)``) carry the growing series.
  Every message is a JSON object with a ``kind``; bulk values travel as binary
  buffers, never as JSON lists.

Front end -> kernel
-------------------
``{"kind": "hello", "version": 1}``
    A view was rendered (first display, page reload, second view). The kernel
    answers with ``reset`` (followed by ``append`` chunks when the history is long).
``{"kind": "stop"}``
    The Stop button: ask the training loop to stop after the current step.

Kernel -> front end
-------------------
``{"kind": "reset", ...SeriesPayload}``
    Replace everything the view holds with this payload (an empty one when a new
    run starts).
``{"kind": "append", ...SeriesPayload}``
    Points and epoch rows added since the previous message. Sent at most every
    ``update_interval`` seconds (0.1 s by default), never once per step.

SeriesPayload
-------------
``version``       protocol version (``PROTOCOL_VERSION``)
``start``         kernel index of the first step point in the buffers
``count``         number of step points in each buffer
``fields``        buffer names, in buffer order (``STEP_FIELDS``)
``dtypes``        buffer element types, in buffer order (little-endian)
``epochs_start``  kernel index of the first epoch row in ``epochs``
``epochs``        per-epoch rows (``EpochRow``), JSON; non-finite numbers are null

The buffers are the step series, one buffer per field: ``step`` (int32, the global
optimizer step), ``loss`` (float32, the raw training loss of that step; NaN when
non-finite) and ``lr`` (float32, the learning rate used by that step).

A view appends what lies beyond what it holds: a message whose ``start`` is below
the view's count only adds its tail, so a reply to ``hello`` that overlaps a
broadcast ``append`` never duplicates points.
"""

from __future__ import annotations

from typing import Literal, TypedDict

__all__ = [
    "APPEND",
    "FRONTEND_KINDS",
    "HELLO",
    "KERNEL_KINDS",
    "MAX_POINTS_PER_MESSAGE",
    "PROTOCOL_VERSION",
    "RESET",
    "STATUSES",
    "STEP_FIELDS",
    "STOP",
    "EpochRow",
    "SeriesPayload",
]

PROTOCOL_VERSION = 1

# front end -> kernel
HELLO = "hello"
STOP = "stop"
FRONTEND_KINDS = (HELLO, STOP)

# kernel -> front end
RESET = "reset"
APPEND = "append"
KERNEL_KINDS = (RESET, APPEND)

# The step series: (field name, dtype). Order = buffer order. Little-endian.
STEP_FIELDS: tuple[tuple[str, str], ...] = (
    ("step", "int32"),
    ("loss", "float32"),
    ("lr", "float32"),
)

# A long history is sent as one reset and then appends of at most this many points,
# so no single message grows past a few MB.
MAX_POINTS_PER_MESSAGE = 250_000

# The lifecycle shown by the monitor's ``status`` trait.
STATUSES = ("created", "running", "stopping", "stopped", "finished", "failed")


class EpochRow(TypedDict):
    epoch: int
    step: int  # global step at the end of the epoch (x position of the epoch mark)
    lr: float | None
    seconds: float | None
    improved: bool
    train: dict[str, float | None]
    val: dict[str, float | None] | None


class SeriesPayload(TypedDict):
    kind: Literal["reset", "append"]
    version: int
    start: int
    count: int
    fields: list[str]
    dtypes: list[str]
    epochs_start: int
    epochs: list[EpochRow]
