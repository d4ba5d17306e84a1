"""Small column tables that a widget replaces as a whole, sent by the shared transport.

A ``BucketSeries`` (``_series``) is a history that grows. The explorers hold other
data: a reliability diagram that the temperature replaces, a risk-coverage curve
computed once. ``Table`` has the part of the series interface that ``SeriesTransport``
reads (``fields``, ``dtypes``, ``width``, ``total``, ``row_bytes``, ``buffers``,
``take_changes``, ``len``), so the same transport numbers, throttles and chunks its
updates, and a reloaded view gets it in its snapshot. Every change is "keep no row,
here are all of them" (``at`` = 0), which the views apply like any other op.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._series import Change

__all__ = ["Table"]

_DTYPES = {"int32": np.int32, "float32": np.float32, "float64": np.float64}


class Table:
    """Named columns of equal length, replaced as a whole by ``set``."""

    def __init__(self, columns: Sequence[tuple[str, str]]) -> None:
        for name, dtype in columns:
            if dtype not in _DTYPES:
                raise ValueError(f"column {name!r}: dtype {dtype!r} is not one of {list(_DTYPES)}")
        self._specs = list(columns)
        self.data: dict[str, np.ndarray] = {
            name: np.zeros(0, dtype=_DTYPES[dtype]) for name, dtype in self._specs
        }
        self._n = 0
        self._changed = False
        self.revision = 0  # how many times the table was set

    @property
    def fields(self) -> list[str]:
        return [name for name, _ in self._specs]

    @property
    def dtypes(self) -> list[str]:
        return [dtype for _, dtype in self._specs]

    @property
    def width(self) -> int:
        return 1  # a table is never decimated

    @property
    def total(self) -> int:
        return self._n

    def __len__(self) -> int:
        return self._n

    def set(self, columns: Mapping[str, Any]) -> None:
        """Replace every row. ``columns`` names every column; lengths must agree."""
        missing = set(self.data) - set(columns)
        extra = set(columns) - set(self.data)
        if missing or extra:
            raise ValueError(f"table columns: missing {sorted(missing)}, unknown {sorted(extra)}")
        arrays = {
            name: np.ascontiguousarray(columns[name], dtype=_DTYPES[dtype])
            for name, dtype in self._specs
        }
        lengths = {a.shape for a in arrays.values()}
        if len(lengths) != 1 or len(next(iter(lengths))) != 1:
            raise ValueError(f"table columns must be 1-d and of one length, got {lengths}")
        self.data = arrays
        self._n = int(next(iter(arrays.values())).shape[0])
        self._changed = True
        self.revision += 1

    def column(self, name: str) -> np.ndarray:
        view = self.data[name][:]
        view.flags.writeable = False
        return view

    def row_bytes(self) -> int:
        return sum(np.dtype(_DTYPES[d]).itemsize for _, d in self._specs)

    def buffers(self, start: int, stop: int) -> list[bytes]:
        out = []
        for name, _ in self._specs:
            part = self.data[name][start:stop]
            if sys.byteorder != "little":  # pragma: no cover - big-endian hosts only
                part = part.byteswap()
            out.append(part.tobytes())
        return out

    def take_changes(self) -> Change | None:
        if not self._changed:
            return None
        self._changed = False
        return Change(at=0, count=self._n)
