"""A stand-in for a widget's front end, for tests and benchmarks with no browser.

``FakeFrontend(widget)`` captures everything the widget would send over its comm
(state updates and custom messages), counts messages and bytes, and keeps a copy of
the series exactly as ``js/series.js`` would (same overlap and reset rules), so a
test can check what a real view would hold. It also sends front-end messages
(``hello()``, ``click_stop()``) the way the browser does.
"""

from __future__ import annotations

import json
import threading
from array import array
from typing import Any

from ._protocol import HELLO, PROTOCOL_VERSION, RESET, STOP

__all__ = ["FakeFrontend", "feed", "scripted_run", "write_jsonl"]

_TYPECODES = {"int32": "i", "float32": "f"}


class FakeFrontend:
    def __init__(self, widget: Any) -> None:
        self.widget = widget
        self.messages: list[tuple[dict[str, Any], list[bytes]]] = []
        self.bytes_sent = 0
        self.state: dict[str, Any] = {}
        self.columns: dict[str, list[float]] = {"step": [], "loss": [], "lr": []}
        self.end = 0
        self.epochs: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        widget._send = self._capture  # every comm message goes through _send

    # ------------------------------------------------------------------ capture

    def _capture(self, msg: dict[str, Any], buffers: list[Any] | None = None) -> None:
        raw = [bytes(b) for b in buffers or []]
        size = len(json.dumps(msg, allow_nan=False)) + sum(len(b) for b in raw)
        with self._lock:
            self.messages.append((msg, raw))
            self.bytes_sent += size
            if msg.get("method") == "update":
                self.state.update(msg.get("state", {}))
            elif msg.get("method") == "custom":
                self._apply(msg["content"], raw)

    def _apply(self, content: dict[str, Any], buffers: list[bytes]) -> None:
        assert content["version"] == PROTOCOL_VERSION
        cols = {}
        for name, dtype, buf in zip(content["fields"], content["dtypes"], buffers, strict=True):
            arr = array(_TYPECODES[dtype])
            arr.frombytes(buf)
            assert len(arr) == content["count"], (name, len(arr), content["count"])
            cols[name] = arr.tolist()
        if content["kind"] == RESET:
            self.columns = {name: [] for name in self.columns}
            self.end = 0
            self.epochs = []
        start, count = content["start"], content["count"]
        skip = max(0, self.end - start)
        if count > skip:
            for name in self.columns:
                self.columns[name].extend(cols[name][skip:])
        self.end = max(self.end, start + count)
        already = max(0, len(self.epochs) - content["epochs_start"])
        self.epochs.extend(content["epochs"][already:])

    # ------------------------------------------------------------------ views

    @property
    def custom(self) -> list[dict[str, Any]]:
        return [m["content"] for m, _ in self.messages if m.get("method") == "custom"]

    @property
    def updates(self) -> list[dict[str, Any]]:
        return [m["state"] for m, _ in self.messages if m.get("method") == "update"]

    @property
    def points(self) -> int:
        """Loss points a view would hold (the ``data-points`` of the loss chart)."""
        return len(self.columns["step"])

    def clear(self) -> None:
        """Forget counted messages (not the series copy)."""
        with self._lock:
            self.messages.clear()
            self.bytes_sent = 0

    # ------------------------------------------------------------------ front end -> kernel

    def hello(self) -> None:
        """What a newly rendered view sends; the kernel answers with the whole history."""
        self.widget._dispatch_frontend_msg(
            self.widget, {"kind": HELLO, "version": PROTOCOL_VERSION}, []
        )

    def click_stop(self) -> None:
        self.widget._dispatch_frontend_msg(self.widget, {"kind": STOP}, [])


def scripted_run(
    *,
    run_id: str = "run0",
    n_epochs: int = 3,
    steps_per_epoch: int = 10,
    batch_size: int = 32,
    log_every: int = 4,
    with_val: bool = True,
    status: str = "finished",
    stop_after: int | None = None,
) -> list[Any]:
    """The events a training loop emits, in order (like the engine's), no torch needed.

    Loss of step ``s`` is ``1 / s``; lr is 0.01 halved each epoch. ``stop_after``
    ends the run after that many steps with ``status`` (e.g. "stopped").
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
        lr = 0.01 / 2 ** (epoch - 1)
        for batch in range(steps_per_epoch):
            step += 1
            events.append(StepEnded(step=step, epoch=epoch, batch=batch, samples=batch_size))
            buffer.append(
                StepRecord(
                    step=step,
                    epoch=epoch,
                    batch=batch,
                    lr=lr,
                    samples=batch_size,
                    loss=1.0 / step,
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
            val = {"loss": 1.0 / (epoch + 1), "accuracy": 0.5 + 0.1 * epoch} if with_val else None
            events.append(
                EpochEnded(
                    epoch=epoch,
                    step=step,
                    lr=lr,
                    train={"loss": 1.0 / step, "accuracy": 0.5},
                    val=val,
                    signal=None if val is None else val["loss"],
                    signal_source=None if val is None else "val_edp.loss",
                    improved=True,
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
    """Deliver events to a sink the way the engine's bus does."""
    for event in events:
        hook = getattr(sink, event.hook, None)
        if hook is not None:
            hook(event)


def write_jsonl(path: Any, events: list[Any]) -> None:
    """Append events to a metrics.jsonl as the engine's logger writes it."""
    from dataclasses import asdict

    from ..engine.events import StepMetrics

    with open(path, "a", encoding="utf-8") as fh:
        for event in events:
            if isinstance(event, StepMetrics):
                for record in event.records:
                    fh.write(json.dumps({"event": "step", **asdict(record)}) + "\n")
            else:
                fh.write(json.dumps(event.to_json()) + "\n")
