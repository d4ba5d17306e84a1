"""The run's event log, ``metrics.jsonl``: one JSON object per line, flushed per event.

Per-step records arrive in bulk (``StepMetrics``) and are written one line per step
(``"event": "step"``), so the file reads as NNx's history and tails cheaply.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

from ..events import Event, StepMetrics, StepRecord

__all__ = ["JsonlLogger"]


class JsonlLogger:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fh: Any = None

    def _write(self, text: str) -> None:
        if self._fh is None:
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self._fh.write(text)
        self._fh.flush()

    def _event(self, event: Event) -> None:
        self._write(json.dumps(event.to_json(), allow_nan=True) + "\n")

    on_run_started = _event
    on_epoch_ended = _event
    on_checkpoint_written = _event
    on_run_finished = _event

    def on_step_metrics(self, event: StepMetrics) -> None:
        self._write("".join(map(_step_line, event.records)))

    def on_detach(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


# Written only when set (a declared task's or extra_metrics' records), so a line without
# them is byte for byte what older versions wrote.
_OPTIONAL = ("valid", "metrics", "extra")
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
    body = ",".join(f'"{n}":{_json_number(getattr(record, n))}' for n in _STEP_FIELDS)
    if record.valid is not None or record.metrics is not None or record.extra is not None:
        more = {n: getattr(record, n) for n in _OPTIONAL if getattr(record, n) is not None}
        body += "," + json.dumps(more, allow_nan=True)[1:-1]
    return f'{{"event":"step",{body}}}\n'
