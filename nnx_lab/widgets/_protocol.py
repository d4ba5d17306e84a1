"""The wire protocol between nnx-lab's kernel-side widgets and their front end.

Written down once here and once in ``js/shared/protocol.js``; the two must agree (a
test checks it). A widget talks over two channels:

* **Synced traitlets** carry small state (run id, status, counters, the error text).
  ipywidgets keeps them in the kernel, so a reloaded page gets them back.
* **Custom messages** (``widget.send(content, buffers)``) carry growing column
  series. Every message is a JSON object with a ``kind``; bulk values travel as
  binary buffers, never as JSON lists. Every custom message reaches every view of
  the widget (ipywidgets has no per-view address): a message meant for one view
  names it in ``to``.

Front end -> kernel
-------------------
``{"kind": "hello", "version": 2, "view": <id>, "req": <n>}``
    A view was rendered (first display, page reload, a second view), or it lost
    track (a sequence gap, no answer in time). The kernel answers with a
    ``snapshot`` addressed to that view.
``{"kind": "stop"}``
    The Stop button: ask the training loop to stop after the current step.
``{"kind": "snapshot_png", "view": <id>}`` + one buffer (a PNG)
    A picture of the charts, kept as the fallback output a reopened notebook shows
    when its kernel is gone (see ``TrainingMonitor``).
``{"kind": "fit"}``
    An explorer's Fit button (``CalibrationExplorer``: fit the temperature).
``{"kind": "save"}``
    An explorer's Save button: write to the path in the widget's ``path`` trait.
``{"kind": "figure", "view": <id>, "name": <name>, "epoch": <n>}``
    The monitor's figure panel asks for the figure it shows (``_monitor_figures``).
``{"kind": "report", "view": <id>}``
    The monitor's Report button: write the run's HTML report (``_monitor_report``).

Kernel -> front end
-------------------
``{"kind": "update", "version": 2, "seq": <n>, "ops": [Op, ...]}``
    What changed since the previous update, sent to every view at most every
    ``update_interval`` seconds. ``seq`` grows by one per update; a view that sees
    a jump has missed one and says ``hello`` again.
``{"kind": "figure_data", "to": <view>, "name", "epoch", "figure_kind"}`` + one buffer
    The figure a view asked for (a PNG's bytes, or UTF-8 JSON), or ``"error"`` and no
    buffer when it is not there.
``{"kind": "report_done", "to": <view>, "path"}`` (or ``"error"``)
    Where the report the view asked for was written, or why it was not.
``{"kind": "snapshot", "version": 2, "seq": <n>, "to": <view>, "req": <n>,
"part": <i>, "parts": <k>, "ops": [Op, ...]}``
    Everything, for one view, in ``parts`` messages of at most
    ``MAX_MESSAGE_BYTES`` each. On part 0 the view drops what it holds; after the
    last part it holds the state of update ``seq`` and applies updates from
    ``seq + 1``.

Op
--
``{"series": name, "at": i, "count": k, "fields": [...], "dtypes": [...],
"width": w, "total": t, "buffer": b}``: the view keeps the first ``at`` rows of the
series and appends the ``count`` rows carried by the message's buffers
``b .. b + len(fields) - 1`` (one per field, little-endian). ``width`` is the raw
points per full bucket (1 until the series was decimated), ``total`` the raw points
the series has seen. A view holding fewer than ``at`` rows has missed data: it says
``hello``.

Series of the TrainingMonitor
-----------------------------
``steps``: one row per optimizer step (a bucket of ``width`` steps once decimated):
``first``, ``step`` (int32: first and last step of the bucket), ``loss`` (mean of
the finite losses), ``loss:min``, ``loss:max``, ``lr`` (the last), ``n`` (steps),
``bad`` (steps whose loss was non-finite); when the records name them, ``term.<name>``
and ``aux.<name>`` (each loss term, mean, with ``:min`` / ``:max``) and ``lr.<name>``
(each optimizer's learning rate, the last).

``epochs``: one row per epoch end (or bucket of epochs): ``first``, ``epoch``,
``step``, ``lr``, ``seconds`` (mean), ``improved`` (1 when an epoch of the row
became BEST), ``n``, and per metric ``train.<name>`` / ``val.<name>`` with their
``:min`` / ``:max``.
"""

from __future__ import annotations

from typing import Literal, TypedDict

__all__ = [
    "FIT",
    "FRONTEND_KINDS",
    "HELLO",
    "KERNEL_KINDS",
    "MAX_MESSAGE_BYTES",
    "PROTOCOL_VERSION",
    "SAVE",
    "SNAPSHOT",
    "SNAPSHOT_PNG",
    "STATUSES",
    "STOP",
    "UPDATE",
    "Op",
]

PROTOCOL_VERSION = 2

# front end -> kernel
HELLO = "hello"
STOP = "stop"
SNAPSHOT_PNG = "snapshot_png"
FIT = "fit"
SAVE = "save"
FRONTEND_KINDS = (HELLO, STOP, SNAPSHOT_PNG, FIT, SAVE)

# kernel -> front end
UPDATE = "update"
SNAPSHOT = "snapshot"
KERNEL_KINDS = (UPDATE, SNAPSHOT)

# No custom message carries more than this many bytes of buffers: a long history is
# sent as several messages (the server and the browser stay responsive).
MAX_MESSAGE_BYTES = 512 * 1024

# The lifecycle shown by the monitor's ``status`` trait.
# "interrupted": a run followed from its log whose writer died without a word.
STATUSES = ("created", "running", "stopping", "stopped", "finished", "failed", "interrupted")


class Op(TypedDict):
    series: str
    at: int
    count: int
    fields: list[str]
    dtypes: list[str]
    width: int
    total: int
    buffer: int


class UpdateMessage(TypedDict):
    kind: Literal["update"]
    version: int
    seq: int
    ops: list[Op]


class SnapshotMessage(TypedDict):
    kind: Literal["snapshot"]
    version: int
    seq: int
    to: str
    req: int
    part: int
    parts: int
    ops: list[Op]
