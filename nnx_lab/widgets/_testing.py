"""Helpers for tests and benchmarks with no browser.

``FakeFrontend(widget)`` captures everything the widget sends over its comm (state
updates and custom messages), counts messages and bytes, and sends front-end
messages (``hello()``, ``click_stop()``, ``set_traits(...)``) the way the browser does. It does not
pretend to be a view: what a view holds after these messages is tested on the real
JavaScript modules (``tests/js``, and ``tests/python/widgets/test_widget_contract.py``,
which replays captured messages through them with Node).

``scripted_run`` makes the events of a training run without torch; ``feed`` sends
them through the engine's own ``EventBus``, and ``write_jsonl`` writes them with the
engine's own ``JsonlLogger``.
"""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ._protocol import HELLO, PROTOCOL_VERSION, SNAPSHOT, STOP, UPDATE

__all__ = ["FakeFrontend", "feed", "scripted_run", "write_jsonl"]

_DTYPES = {"int32": np.int32, "float32": np.float32, "float64": np.float64}
_views = itertools.count(1)


class FakeFrontend:
    """Captures a widget's outgoing messages; sends front-end messages to it."""

    def __init__(self, widget: Any) -> None:
        self.widget = widget
        self.view = f"fake-{next(_views)}"
        self.messages: list[tuple[dict[str, Any], list[bytes]]] = []
        self.bytes_sent = 0
        self.state: dict[str, Any] = {}
        self._req = 0
        self._lock = threading.Lock()
        widget._send = self._capture  # every comm message goes through _send

    def _capture(self, msg: dict[str, Any], buffers: list[Any] | None = None) -> None:
        raw = [bytes(b) for b in buffers or []]
        size = len(json.dumps(msg, allow_nan=False)) + sum(len(b) for b in raw)
        with self._lock:
            self.messages.append((msg, raw))
            self.bytes_sent += size
            if msg.get("method") == "update":
                self.state.update(msg.get("state", {}))

    # ------------------------------------------------------------------ what was sent

    @property
    def custom(self) -> list[dict[str, Any]]:
        return [m["content"] for m, _ in self.messages if m.get("method") == "custom"]

    def custom_with_buffers(self) -> list[tuple[dict[str, Any], list[bytes]]]:
        return [(m["content"], b) for m, b in self.messages if m.get("method") == "custom"]

    @property
    def updates(self) -> list[dict[str, Any]]:
        return [m["state"] for m, _ in self.messages if m.get("method") == "update"]

    def series_messages(self) -> list[dict[str, Any]]:
        """The update and snapshot messages, in order."""
        return [c for c in self.custom if c.get("kind") in (UPDATE, SNAPSHOT)]

    def rows_sent(self, series: str, kinds: tuple[str, ...] = (UPDATE,)) -> int:
        """Rows of ``series`` carried by the messages of the given kinds."""
        return sum(
            op["count"]
            for c in self.custom
            if c.get("kind") in kinds
            for op in c["ops"]
            if op["series"] == series
        )

    def length_after(self, series: str) -> int:
        """The row count of ``series`` that this view's snapshot and the later updates add
        up to (by the ops' ``at`` and ``count`` alone: what the rows hold is the real
        JavaScript's business, see tests/js)."""
        length = 0
        synced = False
        for c in self.custom:
            if c.get("kind") == SNAPSHOT and c.get("to") == self.view:
                if c["part"] == 0:
                    length, synced = 0, True
            elif c.get("kind") != UPDATE or not synced:
                continue
            for op in c["ops"]:
                if op["series"] == series:
                    length = op["at"] + op["count"]
        return length

    @staticmethod
    def decode(content: dict[str, Any], buffers: list[bytes]) -> dict[str, dict[str, Any]]:
        """The columns each op of one message carries: {series: {field: ndarray}}."""
        out: dict[str, dict[str, Any]] = {}
        for op in content["ops"]:
            cols = {}
            for i, (name, dtype) in enumerate(zip(op["fields"], op["dtypes"], strict=True)):
                arr = np.frombuffer(buffers[op["buffer"] + i], dtype=_DTYPES[dtype])
                assert len(arr) == op["count"], (name, len(arr), op["count"])
                cols[name] = arr
            out.setdefault(op["series"], cols)
        return out

    def clear(self) -> None:
        """Forget the captured messages."""
        with self._lock:
            self.messages.clear()
            self.bytes_sent = 0

    # ------------------------------------------------------------------ front end -> kernel

    def hello(self) -> None:
        """What a rendered view sends; the kernel answers with a snapshot for it."""
        self._req += 1
        self.widget._dispatch_frontend_msg(
            self.widget,
            {"kind": HELLO, "version": PROTOCOL_VERSION, "view": self.view, "req": self._req},
            [],
        )

    def click_stop(self) -> None:
        self.widget._dispatch_frontend_msg(self.widget, {"kind": STOP}, [])

    def set_traits(self, **state: Any) -> None:
        """What a page's ``model.set(name, value); model.save_changes()`` sends: an
        ``update`` comm message, through ipywidgets' own handler (so a test meets the
        widget exactly where a page's message does)."""
        data = {"method": "update", "state": state, "buffer_paths": []}
        self.widget._handle_msg({"content": {"data": data}, "buffers": []})


def scripted_run(
    *,
    run_id: str = "0" * 32,
    n_epochs: int = 3,
    steps_per_epoch: int = 10,
    batch_size: int = 32,
    log_every: int = 4,
    with_val: bool = True,
    status: str = "finished",
    stop_after: int | None = None,
    nonfinite_from: int | None = None,
) -> list[Any]:
    """The events a training loop emits, in order (like the engine's), no torch needed.

    Loss of step ``s`` is ``1 / s`` (NaN from step ``nonfinite_from`` on); lr is 0.01
    halved each epoch (for the first 20 epochs, then constant). ``stop_after`` ends
    the run after that many steps with ``status`` (e.g. "stopped").
    """
    from ..engine.events import (
        CheckpointWritten,
        EpochEnded,
        RunFinished,
        RunStarted,
        StepEnded,
        StepMetrics,
        StepRecord,
    )

    events: list[Any] = [
        RunStarted(
            run_id=run_id,
            run_dir=f"runs/{run_id}",
            n_epochs=n_epochs,
            start_epoch=1,
            start_step=0,
            steps_per_epoch=steps_per_epoch,
            time=1000.0,
        )
    ]
    step = 0
    buffer: list[Any] = []
    epochs_done = 0
    for epoch in range(1, n_epochs + 1):
        lr = 0.01 / 2 ** min(epoch - 1, 19)
        for batch in range(steps_per_epoch):
            step += 1
            events.append(StepEnded(step=step, epoch=epoch, batch=batch, samples=batch_size))
            bad = nonfinite_from is not None and step >= nonfinite_from
            buffer.append(
                StepRecord(
                    step=step,
                    epoch=epoch,
                    batch=batch,
                    lr=lr,
                    samples=batch_size,
                    loss=float("nan") if bad else 1.0 / step,
                    accuracy=0.5,
                )
            )
            stopping = stop_after is not None and step >= stop_after
            if len(buffer) >= log_every or batch == steps_per_epoch - 1 or stopping:
                events.append(StepMetrics(records=tuple(buffer)))
                buffer = []
            if stopping:
                break
        else:
            bad = nonfinite_from is not None and step >= nonfinite_from
            val_loss = float("nan") if bad else 1.0 / (epoch + 1)
            val = {"loss": val_loss, "accuracy": 0.5 + 0.1 * epoch} if with_val else None
            events.append(
                EpochEnded(
                    epoch=epoch,
                    step=step,
                    lr=lr,
                    train={"loss": float("nan") if bad else 1.0 / step, "accuracy": 0.5},
                    val=val,
                    signal=None if val is None or bad else val["loss"],
                    signal_source=None if val is None else "val_edp.loss",
                    improved=not bad,
                    seconds=0.5,
                )
            )
            events.append(
                CheckpointWritten(type="last", epoch=epoch, step=step, path=f"runs/{run_id}/LAST")
            )
            epochs_done = epoch
            continue
        break
    events.append(
        RunFinished(
            run_id=run_id,
            status=status,
            epochs_completed=epochs_done,
            steps=step,
            stop_reason="stop requested" if status == "stopped" else None,
            error="RuntimeError: boom" if status == "failed" else None,
            traceback="Traceback (most recent call last):\n  boom" if status == "failed" else None,
            time=1000.0 + step * 0.01,
        )
    )
    return events


def feed(sink: Any, events: list[Any]) -> None:
    """Deliver events to a sink through the engine's ``EventBus``."""
    from ..engine.sinks import EventBus

    bus = EventBus([sink])
    for event in events:
        bus.emit(event)


def write_jsonl(path: Any, events: list[Any]) -> None:
    """Append events to a ``metrics.jsonl`` with the engine's ``JsonlLogger``."""
    from ..engine.handlers import JsonlLogger
    from ..engine.sinks import EventBus

    logger = JsonlLogger(Path(path))
    bus = EventBus([logger])
    try:
        for event in events:
            bus.emit(event)
    finally:
        logger.on_detach()
