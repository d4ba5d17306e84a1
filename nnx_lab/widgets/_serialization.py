"""All conversion between engine events and the wire format lives here."""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Iterable, Mapping
from typing import Any

from ._protocol import PROTOCOL_VERSION, STEP_FIELDS, EpochRow, SeriesPayload

__all__ = ["StepSeries", "epoch_row", "finite_or_none", "series_payload"]

_TYPECODES = {"int32": "i", "float32": "f"}


def finite_or_none(value: Any) -> float | None:
    """A JSON-safe number: ``None`` for missing, NaN or infinite values."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _clean_metrics(values: Mapping[str, Any] | None) -> dict[str, float | None] | None:
    if values is None:
        return None
    return {str(k): finite_or_none(v) for k, v in values.items()}


def epoch_row(event: Any) -> EpochRow:
    """The wire row of one ``EpochEnded`` event."""
    return {
        "epoch": int(event.epoch),
        "step": int(event.step),
        "lr": finite_or_none(event.lr),
        "seconds": finite_or_none(event.seconds),
        "improved": bool(event.improved),
        "train": _clean_metrics(event.train) or {},
        "val": _clean_metrics(event.val),
    }


class StepSeries:
    """The per-step series the kernel keeps (the whole history), column by column.

    Columns are compact ``array.array`` objects, so 100,000 steps take 1.2 MB and a
    slice turns into a wire buffer without a copy through Python floats.
    """

    def __init__(self) -> None:
        self.columns: dict[str, array] = {
            name: array(_TYPECODES[dtype]) for name, dtype in STEP_FIELDS
        }
        for name, col in self.columns.items():
            if col.itemsize != 4:  # pragma: no cover - exotic platforms only
                raise RuntimeError(f"array typecode for {name!r} is not 4 bytes here")

    def __len__(self) -> int:
        return len(self.columns["step"])

    def clear(self) -> None:
        for name, col in self.columns.items():
            self.columns[name] = array(col.typecode)

    def extend(self, records: Iterable[Any]) -> int:
        """Append ``StepRecord``-like objects; returns how many were added."""
        steps, losses, lrs = self.columns["step"], self.columns["loss"], self.columns["lr"]
        added = 0
        for r in records:
            loss = r.loss
            lr = r.lr
            steps.append(int(r.step))
            losses.append(float("nan") if loss is None else float(loss))
            lrs.append(float("nan") if lr is None else float(lr))
            added += 1
        return added

    def last(self, name: str) -> float | None:
        col = self.columns[name]
        return col[-1] if col else None

    def buffers(self, start: int, stop: int) -> list[bytes]:
        """Little-endian bytes of each column's ``[start, stop)`` slice, in field order."""
        out = []
        for name, _dtype in STEP_FIELDS:
            part = self.columns[name][start:stop]
            if sys.byteorder != "little":  # pragma: no cover - big-endian hosts only
                part.byteswap()
            out.append(part.tobytes())
        return out


def series_payload(
    kind: str,
    series: StepSeries,
    start: int,
    stop: int,
    epochs: list[EpochRow],
    epochs_start: int,
) -> tuple[SeriesPayload, list[bytes]]:
    """One ``reset``/``append`` message: its JSON content and its buffers."""
    content: SeriesPayload = {
        "kind": kind,  # type: ignore[typeddict-item]
        "version": PROTOCOL_VERSION,
        "start": start,
        "count": stop - start,
        "fields": [name for name, _ in STEP_FIELDS],
        "dtypes": [dtype for _, dtype in STEP_FIELDS],
        "epochs_start": epochs_start,
        "epochs": epochs,
    }
    return content, series.buffers(start, stop)
