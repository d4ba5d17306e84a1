"""Train-only feature standardization (§2.17), saved as JSON and never refitted on load."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StandardizerError
from ..runs import (
    StandardizerFile,
    StandardizerFileError,
    atomic_write_json,
    canonical_json,
    check_header,
    check_shape,
    read_json_file,
)

__all__ = ["Standardizer", "StandardizerError"]

_VERSION = 1
_HEADER = ("kind", "nnx_lab.Standardizer", _VERSION)
_FIX = "this is not a standardizer nnx_lab saved, or it was altered; fit it again and save it"
_REDO = "fit the standardizer again and save it with this nnx_lab"


class Standardizer:
    """Per-column ``(x - mean) / std`` with statistics fitted on training rows only.

    The statistics are float64; a column with zero spread keeps its mean subtracted and
    is divided by 1 (recorded in ``constant``). ``transform`` refuses missing, extra or
    reordered columns, a width mismatch and non-finite values before anything reaches a
    model, and returns float32 rows ready for ``model.predict``.

    ``columns`` is a tuple of the frame's own labels, as NNx keeps them: integers stay
    integers (``(0, "b")``), and the JSON state holds each as it is. Rows fitted from an
    array are named by position as strings (``("0", "1")``).
    """

    def __init__(
        self,
        columns: Sequence[Any],
        mean: Sequence[float],
        std: Sequence[float],
        *,
        dtype: str = "float32",
        fit_rows: int = 0,
        membership: str | None = None,
    ) -> None:
        """``dtype``: what ``transform`` returns (NNx's: "float32" or "float64");
        ``fit_rows``: how many training rows the statistics came from (0: not recorded);
        ``membership``: which rows those were (a digest or a declared id)."""
        if dtype not in _DTYPES:
            raise StandardizerError(
                f"Standardizer: dtype {dtype!r} is not one of {', '.join(_DTYPES)}; pass "
                "'float32' (the default) or 'float64'"
            )
        if isinstance(fit_rows, bool) or not isinstance(fit_rows, int) or fit_rows < 0:
            raise StandardizerError(f"Standardizer: fit_rows {fit_rows!r} is not a count >= 0")
        if membership is not None and (not isinstance(membership, str) or not membership):
            raise StandardizerError(
                f"Standardizer: membership {membership!r} is not a non-empty string; pass "
                "a digest or a declared id of the training rows"
            )
        self.dtype, self.fit_rows, self.membership = dtype, fit_rows, membership
        columns = tuple(_label(c) for c in columns)
        if len(set(columns)) != len(columns):
            raise StandardizerError(
                f"Standardizer: columns {list(columns)} repeat a label; name each column once"
            )
        mean_a = np.asarray(mean, dtype=np.float64)
        std_a = np.asarray(std, dtype=np.float64)
        if not (len(columns) == mean_a.shape[0] == std_a.shape[0]) or mean_a.ndim != 1:
            raise StandardizerError(
                f"Standardizer: {len(columns)} columns but {mean_a.shape} means and "
                f"{std_a.shape} standard deviations; give one of each per column"
            )
        if not (np.isfinite(mean_a).all() and np.isfinite(std_a).all()) or (std_a <= 0).any():
            raise StandardizerError(
                "Standardizer: means must be finite and standard deviations finite and > 0"
            )
        self.columns = columns
        self.mean = mean_a
        self.std = std_a

    @classmethod
    def fit(
        cls,
        data: Any,
        columns: Sequence[Any] | None = None,
        *,
        rows: Any = None,
        dtype: Any = "float32",
        membership: Any = None,
    ) -> Standardizer:
        """Fit on ``data`` (the training rows: an array, or a DataFrame with ``columns``).

        NNx's form, ``Standardizer.fit(source, rows=train_positions, columns=None)``, is
        read too: ``rows`` are the integer positions of the training rows in ``data``
        (unique, in range; read in sorted order), and ``columns`` selects the frame's
        columns (None: all of them). ``dtype`` is what ``transform`` returns ("float32",
        "float64" or the torch dtype); ``membership`` names the training rows (a
        ``SplitManifest``, its digest or a declared id; default: a digest of ``rows``)."""
        dtype = _dtype_name(dtype)
        membership = _membership(membership, rows)
        if rows is not None:
            data = _pick_rows(data, rows)
            if columns is not None and hasattr(data, "columns"):
                data = data[list(columns)]
        if columns is None:
            columns = list(data.columns) if hasattr(data, "columns") else None
        if columns is None:
            width = np.asarray(data).shape[-1] if np.asarray(data).ndim == 2 else 0
            columns = [str(i) for i in range(width)]
        columns = tuple(_label(c) for c in columns)
        X = _as_matrix(data, columns, "fit")
        if X.shape[0] == 0:
            raise StandardizerError("Standardizer.fit: no rows to fit on")
        mean = X.mean(axis=0)
        std = X.std(axis=0)
        std = np.where(std > 0, std, 1.0)
        return cls(columns, mean, std, dtype=dtype, fit_rows=int(X.shape[0]), membership=membership)

    @property
    def scale(self) -> np.ndarray:
        """NNx's name for ``std`` (the divisor; 1 for a constant column)."""
        return self.std

    @property
    def constant(self) -> list[Any]:
        """Columns whose training values did not vary (their std was set to 1)."""
        return [c for c, s in zip(self.columns, self.std, strict=True) if s == 1.0]

    def transform(self, rows: Any) -> np.ndarray:
        """Standardized float32 rows; refuses rows that do not match the fitted schema."""
        X = _as_matrix(rows, self.columns, "transform")
        return ((X - self.mean) / self.std).astype(self.dtype)

    def inverse_transform(self, rows: Any) -> np.ndarray:
        X = _as_matrix(rows, self.columns, "inverse_transform")
        return X * self.std + self.mean

    # -- persistence -----------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {
            "kind": "nnx_lab.Standardizer",
            "version": _VERSION,
            "columns": list(self.columns),
            # repr round-trips a float64 exactly through JSON
            "mean": [float(v) for v in self.mean],
            "std": [float(v) for v in self.std],
            # NNx's records, written only when they say something: older states keep
            # their bytes and their digest
            **({"dtype": self.dtype} if self.dtype != "float32" else {}),
            **(
                {"fit": {"rows": self.fit_rows, "membership": self.membership}}
                if self.fit_rows or self.membership is not None
                else {}
            ),
        }

    def digest(self) -> str:
        """``sha256:<hex>`` of the canonical state: the standardizer's identity."""
        return "sha256:" + hashlib.sha256(canonical_json(self.state()).encode()).hexdigest()

    def save(self, path: str | os.PathLike[str]) -> Path:
        path = Path(path)
        atomic_write_json(path, self.state())
        return path

    @classmethod
    def from_state(
        cls, state: Any, source: str | os.PathLike[str] = "standardizer state"
    ) -> Standardizer:
        """The standardizer of ``state()`` output, checked as strictly as a file
        (``StandardizerFile``); ``source`` names it in a refusal."""
        check_header(state, source, StandardizerFileError, _HEADER, fix=_FIX, redo=_REDO)
        doc = check_shape(state, StandardizerFile, source, StandardizerFileError, fix=_FIX)
        return _from_doc(cls, doc)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Standardizer:
        """Read a saved standardizer; it is never refitted. Its columns must be a list of
        distinct names, with one finite mean and one positive finite spread each;
        anything else is one ``StandardizerFileError`` (a ``StandardizerError``)."""
        doc = read_json_file(
            path,
            StandardizerFile,
            StandardizerFileError,
            fix=_FIX,
            header=_HEADER,
            redo=_REDO,
            missing_fix="pass the path save() wrote",
        )
        return _from_doc(cls, doc)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Standardizer)
            and self.columns == other.columns
            and np.array_equal(self.mean, other.mean)
            and np.array_equal(self.std, other.std)
            and (self.dtype, self.fit_rows, self.membership)
            == (other.dtype, other.fit_rows, other.membership)
        )

    def __repr__(self) -> str:
        return f"Standardizer(columns={self.columns})"


_DTYPES = ("float32", "float64")


def _from_doc(cls: type[Standardizer], doc: Any) -> Standardizer:
    fit = doc.fit
    return cls(
        doc.columns,
        doc.mean,
        doc.std,
        dtype=doc.dtype,
        fit_rows=0 if fit is None else fit.rows,
        membership=None if fit is None else fit.membership,
    )


def _dtype_name(dtype: Any) -> str:
    name = str(dtype).removeprefix("torch.")
    if name not in _DTYPES:
        raise StandardizerError(
            f"Standardizer.fit: dtype {dtype!r} is not float32 or float64; pass one of them"
        )
    return name


def _membership(membership: Any, rows: Any) -> str | None:
    """Which rows were fitted: a declared id, a split manifest's digest, or a digest of
    the positions (None when the whole source was fitted and nothing was declared)."""
    if membership is None:
        if rows is None:
            return None
        try:
            picked = np.sort(np.asarray(rows, dtype=np.int64).reshape(-1))
        except (TypeError, ValueError):
            return None  # refused by _pick_rows, naming the problem
        return "sha256:" + hashlib.sha256(picked.astype("<i8").tobytes()).hexdigest()
    digest = getattr(membership, "digest", None)
    if callable(digest):  # a SplitManifest
        membership = digest()
    if not isinstance(membership, str) or not membership:
        raise StandardizerError(
            f"Standardizer.fit: membership {membership!r} is not a SplitManifest, a digest "
            "or a non-empty declared id"
        )
    return membership


def _pick_rows(data: Any, rows: Any) -> Any:
    """The rows of ``data`` at the integer positions ``rows``, in sorted order."""
    picked = np.asarray(rows)
    if picked.ndim != 1 or (picked.size and not np.issubdtype(picked.dtype, np.integer)):
        raise StandardizerError(
            "Standardizer.fit: rows must be a 1-D sequence of integer positions (the "
            "training rows of the source)"
        )
    if picked.size == 0:
        raise StandardizerError("Standardizer.fit: rows is empty: pass the training positions")
    n = len(data)
    if len(np.unique(picked)) != picked.size:
        raise StandardizerError("Standardizer.fit: rows repeats a position; pass each once")
    if picked.min() < 0 or picked.max() >= n:
        raise StandardizerError(
            f"Standardizer.fit: rows holds positions outside [0, {n}) for a source of {n} rows"
        )
    order = np.sort(picked)
    if hasattr(data, "iloc"):
        return data.iloc[order]
    if hasattr(data, "detach"):  # a tensor
        data = data.detach().cpu().numpy()
    return np.asarray(data)[order]


def _label(label: Any) -> str | int:
    """A column label as the state keeps it: a string, or an integer (NumPy's too)."""
    if isinstance(label, str):
        return label
    if isinstance(label, int | np.integer) and not isinstance(label, bool | np.bool_):
        return int(label)
    raise StandardizerError(
        f"Standardizer: the column label {label!r} ({type(label).__name__}) cannot be "
        "saved as it is; name the columns with strings or integers (df.columns = [...])"
    )


def _frame_labels(rows: Any, columns: tuple[str | int, ...]) -> list[Any]:
    """The frame's labels, compared as the fitted ones are. A standardizer whose labels
    are all strings (as every one saved before labels were kept) reads a frame's labels
    as strings, so those states keep working on the frames they were fitted on."""
    got = list(rows.columns)
    if got != list(columns) and all(isinstance(c, str) for c in columns):
        return [str(c) for c in got]
    return got


def _as_matrix(rows: Any, columns: tuple[str | int, ...], what: str) -> np.ndarray:
    """Rows as a float64 matrix in the fitted column order, with every check."""
    import pandas as pd

    if isinstance(rows, pd.DataFrame):
        got = _frame_labels(rows, columns)
        columns = list(columns)  # type: ignore[assignment]
        if got != columns:
            missing = [c for c in columns if c not in got]
            extra = [c for c in got if c not in columns]
            if missing or extra:
                problem = f"missing {missing}" if missing else ""
                problem += ("; " if missing and extra else "") + (
                    f"unexpected {extra}" if extra else ""
                )
            else:
                problem = f"columns in another order: {got}"
            raise StandardizerError(
                f"Standardizer.{what}: the rows do not match the fitted columns {columns} "
                f"({problem}); select them in order, e.g. rows[{columns!r}]"
            )
        try:
            X = rows.to_numpy(dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise StandardizerError(
                f"Standardizer.{what}: columns must be numeric ({exc})"
            ) from None
    else:
        try:
            X = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise StandardizerError(f"Standardizer.{what}: rows must be numeric ({exc})") from None
        if X.ndim == 1 and len(columns) and X.shape[0] == len(columns):
            X = X[None, :]
        if X.ndim != 2 or X.shape[1] != len(columns):
            raise StandardizerError(
                f"Standardizer.{what}: rows of shape {X.shape}, the fitted schema has "
                f"{len(columns)} columns {list(columns)}"
            )
    finite = np.isfinite(X)
    if not finite.all():
        bad = [columns[j] for j in sorted(set(np.nonzero(~finite)[1].tolist()))]
        raise StandardizerError(
            f"Standardizer.{what}: non-finite values (NaN/inf) in {bad}; clean or impute "
            "them before inference"
        )
    return X
