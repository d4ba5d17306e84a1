"""The run's event log, ``metrics.jsonl``: one JSON object per line, flushed per event.

Per-step records arrive in bulk (``StepMetrics``) and are written one line per step
(``"event": "step"``), so the file reads as NNx's history and tails cheaply.

Each event is one ``write`` of whole lines. A write the disk refuses (full, over quota,
read-only, I/O errors) is cut back to the last whole line, so the log never holds a
torn line in its middle, and raises ``RunDirectoryError``: the run ends "failed". The
final ``run_finished`` line is written if the disk still takes it, and never raises.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from dataclasses import fields
from pathlib import Path

from ...errors import RunDirectoryError
from ..events import Event, RunFinished, StepMetrics, StepRecord
from ..write_faults import cannot_write, is_write_fault

__all__ = ["JsonlLogger"]


class JsonlLogger:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._size = 0  # bytes of whole lines in the file

    def _write(self, text: str) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._size = os.fstat(self._fd).st_size
        data = memoryview(text.encode())
        done = 0
        try:
            while done < len(data):
                done += os.write(self._fd, data[done:])
        except OSError as exc:
            if done:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, self._size)  # no torn line is left behind
            if is_write_fault(exc):
                raise cannot_write("the log", self.path, exc) from exc
            raise
        self._size += len(data)

    def _event(self, event: Event) -> None:
        self._write(json.dumps(event.to_json(), allow_nan=True) + "\n")

    on_run_started = _event
    on_epoch_ended = _event
    on_checkpoint_written = _event
    on_health = _event

    def on_run_finished(self, event: RunFinished) -> None:
        """The last line, if the disk takes it: the run's record holds its end anyway."""
        with contextlib.suppress(RunDirectoryError):
            self._event(event)

    def on_step_metrics(self, event: StepMetrics) -> None:
        self._write("".join(map(_step_line, event.records)))

    def on_detach(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


# Written only when set (a declared task's, extra_metrics', a network's auxiliary terms',
# an objective's loss terms' or several optimizers' records), so a line without them is
# byte for byte what older versions wrote.
_OPTIONAL = ("valid", "metrics", "extra", "aux", "terms", "lrs")
_STEP_FIELDS = tuple(f.name for f in fields(StepRecord) if f.name not in _OPTIONAL)


def _json_number(x: float | int | None) -> str:
    """A number as json.dumps(allow_nan=True) writes it, without its per-call overhead."""
    if x is None:
        return "null"
    if isinstance(x, int):
        return str(x)
    if x != x:
        return "NaN"
    if x in (math.inf, -math.inf):
        return "Infinity" if x > 0 else "-Infinity"
    return repr(x)


def _step_line(record: StepRecord) -> str:
    values = record.__dict__  # a frozen dataclass's fields, read without getattr per name
    body = ",".join(f'"{n}":{_json_number(values[n])}' for n in _STEP_FIELDS)
    more = {n: values[n] for n in _OPTIONAL if values[n] is not None}
    if more:
        body += "," + json.dumps(more, allow_nan=True)[1:-1]
    return f'{{"event":"step",{body}}}\n'
