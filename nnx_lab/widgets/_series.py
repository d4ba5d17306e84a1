"""Bounded, decimated column series: what a widget keeps of a growing history.

A ``BucketSeries`` holds at most ``capacity`` rows. Each row is a *bucket* of
``width`` raw points (``width`` is 1 until the series first fills up). When it is
full, neighbouring buckets merge in pairs and ``width`` doubles, so a run of any
length costs the same memory and keeps an even resolution from start to end.

Every column says how it merges (``Reduce``): the x columns keep the first or last
value, value columns keep the mean of their finite values together with their
minimum and maximum, so a one-step spike survives any amount of merging. Non-finite
values never enter a mean, a minimum or a maximum: a bucket whose values are all
non-finite has NaN there (a gap when drawn), and a ``bad`` column counts them.

The series remembers the lowest row changed since the last ``take_changes()``, so a
transport can send the views exactly the rows they have not seen (see ``_transport``).
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["BucketSeries", "Change", "ColumnSpec", "Reduce"]

_DTYPES = {"int32": np.int32, "float32": np.float32}
_FOLD_AT = 4096  # pending raw points folded in at once


class Reduce(enum.Enum):
    """How a column merges two neighbouring buckets."""

    FIRST = "first"  # e.g. the first step of a bucket
    LAST = "last"  # e.g. the last step, the learning rate in use at the end
    SUM = "sum"  # counts
    MAX = "max"  # flags ("became BEST" in any of the merged epochs)
    MEAN = "mean"  # a value: mean of the finite values, with :min and :max columns


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    dtype: str  # "int32" | "float32" (little-endian on the wire)
    reduce: Reduce


@dataclass(frozen=True)
class Change:
    """The view keeps its first ``at`` rows and appends the ``count`` rows from ``at``.

    Every change of a ``BucketSeries`` is of this form (appends, the open bucket
    growing, a compaction from row 0), so applying one twice does no harm.
    """

    at: int
    count: int


class BucketSeries:
    """A column table of at most ``capacity`` buckets (see the module docstring).

    ``weight`` names the SUM column that counts the raw points of a bucket (``n``);
    ``bad`` the SUM column that counts its non-finite values, if any. A MEAN column
    ``v`` is stored as three columns: ``v`` (mean of the finite values), ``v:min``
    and ``v:max``. Columns can be added later (``add_value``); the rows already
    held get NaN there and the next change covers the whole series.
    """

    def __init__(
        self,
        columns: Sequence[ColumnSpec],
        *,
        capacity: int,
        weight: str = "n",
        bad: str | None = None,
    ) -> None:
        if capacity < 4 or capacity % 2:
            raise ValueError(f"capacity={capacity!r}: pass an even number of rows >= 4")
        self.capacity = int(capacity)
        self.weight = weight
        self.bad = bad
        self.specs: list[ColumnSpec] = []
        self.data: dict[str, np.ndarray] = {}
        self._width = 1  # raw points per full bucket
        self._n = 0  # rows held
        self._done = 0  # raw points folded into the rows
        # Raw points not yet folded in: a few at a time cost one list append each;
        # they are folded in, vectorized, before anything reads the series.
        self._pending: dict[str, list[float]] = {}
        self._pending_n = 0
        self.compactions = 0
        self._dirty_from = 0  # lowest row changed since take_changes()
        self._synced = 0  # rows the views hold (as of the last take_changes())
        for spec in columns:
            self._add_column(spec)
        # the first MEAN column is the one ``bad`` counts the non-finite values of
        self._bad_of = next((s.name for s in self.specs if s.reduce is Reduce.MEAN), None)
        if weight not in self.data:
            raise ValueError(f"weight column {weight!r} is not among the columns")

    # ------------------------------------------------------------------ schema

    def _add_column(self, spec: ColumnSpec) -> None:
        if spec.dtype not in _DTYPES:
            raise ValueError(f"column {spec.name!r}: dtype {spec.dtype!r} is not int32/float32")
        parts = [spec]
        if spec.reduce is Reduce.MEAN:
            parts += [
                ColumnSpec(f"{spec.name}:min", spec.dtype, Reduce.MEAN),
                ColumnSpec(f"{spec.name}:max", spec.dtype, Reduce.MEAN),
            ]
        for part in parts:
            if part.name in self.data:
                raise ValueError(f"column {part.name!r} exists already")
            fill = np.nan if part.dtype == "float32" else 0
            self.data[part.name] = np.full(self.capacity, fill, dtype=_DTYPES[part.dtype])
            self.specs.append(part)
        self._refresh_inputs()

    def _refresh_inputs(self) -> None:
        # the columns extend() takes raw values for (the others are derived)
        self._inputs = [
            (p.name, np.nan if p.dtype == "float32" else 0)
            for p in self.specs
            if p.name not in (self.weight, self.bad) and not p.name.endswith((":min", ":max"))
        ]

    def add_value(self, name: str, reduce: Reduce = Reduce.MEAN) -> None:
        """A new float column (a metric first seen after the first rows): MEAN with its
        :min / :max partners, or LAST (a second optimizer's learning rate)."""
        self._drain()
        self._add_column(ColumnSpec(name, "float32", reduce))
        self._dirty_from = 0  # the views' rows lack the column: resend them all

    def drop_values(self, prefixes: tuple[str, ...]) -> None:
        """Remove the value columns named with one of ``prefixes`` (a new run in the same
        monitor holds none of the last run's loss terms); the views get the new schema."""
        self._drain()
        gone = [s.name for s in self.specs if s.name.startswith(prefixes)]
        if not gone:
            return
        for name in gone:
            del self.data[name]
        self.specs = [s for s in self.specs if s.name not in gone]
        self._refresh_inputs()
        self._dirty_from = 0

    def has(self, name: str) -> bool:
        return name in self.data

    @property
    def fields(self) -> list[str]:
        return [s.name for s in self.specs]

    @property
    def dtypes(self) -> list[str]:
        return [s.dtype for s in self.specs]

    @property
    def values(self) -> list[str]:
        """Names of the MEAN value columns (without their :min / :max partners)."""
        return [
            s.name
            for s in self.specs
            if s.reduce is Reduce.MEAN and not s.name.endswith((":min", ":max"))
        ]

    def nbytes(self) -> int:
        """Bytes of the held columns (allocated once, whatever the run's length)."""
        return sum(a.nbytes for a in self.data.values())

    @property
    def length(self) -> int:
        """Rows held."""
        self._drain()
        return self._n

    @property
    def width(self) -> int:
        """Raw points per full bucket: 1 until the series first filled up."""
        self._drain()
        return self._width

    @property
    def total(self) -> int:
        """Raw points ever added."""
        return self._done + self._pending_n

    def __len__(self) -> int:
        return self.length

    # ------------------------------------------------------------------ adding

    def extend(self, columns: Mapping[str, Sequence[float] | np.ndarray]) -> None:
        """Add raw points. ``columns`` maps column names to equal-length sequences.

        A MEAN column takes its raw values (``v``); its ``:min`` / ``:max`` partners
        are derived. The weight column is 1 per raw point; the bad column counts the
        raw points whose first MEAN value is non-finite. Missing columns are NaN / 0.
        """
        k = len(next(iter(columns.values()))) if columns else 0
        if k == 0:
            return
        pending = self._pending
        for name, fill in self._inputs:
            given = columns.get(name)
            col = pending.setdefault(name, [])
            if given is None:
                col.extend([fill] * k)
            else:
                col.extend(given)
        self._pending_n += k
        if self._pending_n >= _FOLD_AT:
            self._drain()

    def _drain(self) -> None:
        """Fold the pending raw points into the rows."""
        k = self._pending_n
        if k == 0:
            return
        columns, self._pending, self._pending_n = self._pending, {}, 0
        raw = self._raw_buckets(columns, k)
        start = 0
        while start < k:
            if self._n and self.data[self.weight][self._n - 1] < self._width:
                take = min(k - start, int(self._width - self.data[self.weight][self._n - 1]))
                part = {name: col[start : start + take] for name, col in raw.items()}
                self._merge_into_last(self._reduce_groups(part, [0]))
                start += take
                continue
            if self._n == self.capacity:
                self._compact()
                continue
            room = self.capacity - self._n
            take = min(k - start, room * self._width)
            part = {name: col[start : start + take] for name, col in raw.items()}
            groups = list(range(0, take, self._width))
            reduced = self._reduce_groups(part, groups)
            n = len(groups)
            for name, col in reduced.items():
                self.data[name][self._n : self._n + n] = col
            self._dirty_from = min(self._dirty_from, self._n)
            self._n += n
            start += take
        self._done += k

    def _raw_buckets(self, columns: Mapping[str, Sequence[float] | np.ndarray], k: int):
        """One bucket per raw point, every column filled (as float64 / int64)."""
        out: dict[str, np.ndarray] = {}
        first_mean: np.ndarray | None = None
        for spec in self.specs:
            name = spec.name
            if name.endswith((":min", ":max")):
                continue
            if name == self.weight:
                out[name] = np.ones(k, dtype=np.int64)
                continue
            if name == self.bad:
                continue
            given = columns.get(name)
            if given is None:
                col = np.full(k, np.nan if spec.dtype == "float32" else 0)
            else:
                col = np.asarray(given, dtype=np.float64 if spec.dtype == "float32" else np.int64)
            if spec.reduce is Reduce.MEAN:
                col = np.where(np.isfinite(col), col, np.nan)
                out[f"{name}:min"] = col
                out[f"{name}:max"] = col
                if first_mean is None:
                    first_mean = col
            out[name] = col
        if self.bad is not None:
            bad = np.zeros(k, dtype=np.int64) if first_mean is None else np.isnan(first_mean)
            out[self.bad] = bad.astype(np.int64)
        return out

    def _reduce_groups(self, cols: dict[str, np.ndarray], starts: list[int]):
        """Reduce consecutive groups of raw buckets (beginning at ``starts``) to one each."""
        idx = np.asarray(starts, dtype=np.intp)
        weight = cols[self.weight].astype(np.float64)
        counted = weight
        if self.bad is not None:  # the value the bad column counts: finite points only
            counted = weight - cols[self.bad]
        out: dict[str, np.ndarray] = {}
        for spec in self.specs:
            name = spec.name
            col = cols[name]
            if spec.reduce is Reduce.FIRST:
                out[name] = col[idx]
            elif spec.reduce is Reduce.LAST:
                ends = np.append(idx[1:], len(col)) - 1
                out[name] = col[ends]
            elif spec.reduce is Reduce.SUM:
                out[name] = np.add.reduceat(col, idx)
            elif spec.reduce is Reduce.MAX:
                out[name] = np.maximum.reduceat(col, idx)
            elif name.endswith(":min"):
                out[name] = np.fmin.reduceat(col, idx)
            elif name.endswith(":max"):
                out[name] = np.fmax.reduceat(col, idx)
            else:  # a mean of the finite values, weighted by the points each bucket holds
                finite = np.isfinite(col)
                w = np.where(finite, counted if name == self._bad_of else weight, 0.0)
                total = np.add.reduceat(np.where(finite, col, 0.0) * w, idx)
                count = np.add.reduceat(w, idx)
                with np.errstate(invalid="ignore", divide="ignore"):
                    out[name] = np.where(count > 0, total / np.where(count > 0, count, 1), np.nan)
        return out

    def _merge_into_last(self, part: dict[str, np.ndarray]) -> None:
        """Merge one reduced group into the open (last, not yet full) bucket."""
        i = self._n - 1
        cols = {
            name: np.asarray([self.data[name][i], part[name][0]], dtype=np.float64)
            for name in self.data
        }
        merged = self._reduce_groups(cols, [0])
        for name, col in merged.items():
            self.data[name][i] = col[0]
        self._dirty_from = min(self._dirty_from, i)

    def _compact(self) -> None:
        """Merge neighbouring buckets in pairs: half the rows, twice the width."""
        n = self._n - self._n % 2
        cols = {name: arr[:n].astype(np.float64) for name, arr in self.data.items()}
        merged = self._reduce_groups(cols, list(range(0, n, 2)))
        half = n // 2
        tail = self._n - n  # an odd last bucket stays as it is
        for name, arr in self.data.items():
            last = arr[n : self._n].copy()
            arr[:half] = merged[name]
            arr[half : half + tail] = last
            arr[half + tail :] = np.nan if arr.dtype.kind == "f" else 0
        self._n = half + tail
        self._width *= 2
        self.compactions += 1
        self._dirty_from = 0

    # ------------------------------------------------------------------ reading

    def column(self, name: str) -> np.ndarray:
        """A read-only view of the held rows of one column."""
        self._drain()
        view = self.data[name][: self._n]
        view.flags.writeable = False
        return view

    def last(self, name: str) -> float | None:
        self._drain()
        return None if self._n == 0 else self.data[name][self._n - 1].item()

    def buffers(self, start: int, stop: int) -> list[bytes]:
        """Little-endian bytes of each column's rows ``[start, stop)``, in field order."""
        self._drain()
        out = []
        for spec in self.specs:
            part = self.data[spec.name][start:stop]
            if sys.byteorder != "little":  # pragma: no cover - big-endian hosts only
                part = part.byteswap()
            out.append(part.tobytes())
        return out

    def row_bytes(self) -> int:
        return sum(np.dtype(_DTYPES[s.dtype]).itemsize for s in self.specs)

    # ------------------------------------------------------------------ syncing

    def take_changes(self) -> Change | None:
        """What changed since the last call, as one splice; ``None`` when nothing did."""
        self._drain()
        if self._dirty_from >= self._n and self._synced == self._n:
            return None
        at = min(self._dirty_from, self._n, self._synced)
        change = Change(at=at, count=self._n - at)
        self._dirty_from = self._n
        self._synced = self._n
        return change

    def clear(self) -> None:
        self._pending, self._pending_n = {}, 0
        for arr in self.data.values():
            arr[:] = np.nan if arr.dtype.kind == "f" else 0
        self._n = 0
        self._done = 0
        self._width = 1
        self.compactions = 0
        self._dirty_from = 0  # _synced stays: the next change removes what the views hold
