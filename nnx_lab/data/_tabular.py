"""``NNTabularDataset`` (§2.5): a pandas DataFrame as train / validation / test loaders.

Every admission check runs on the selected columns before anything is split or built:
missing columns, non-numeric columns, NaN anywhere, ±inf in a feature (in source
precision, before a cast could absorb it), integers a narrower integer dtype would wrap,
and values that overflow a narrower float dtype (after conversion). The caller's frame
and the global random streams are never touched: the split has its own seeded
generator, and the frame is only read.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from ..errors import ConfigError, DataError
from ._splits import SplitManifest
from ._standardizer import Standardizer

__all__ = ["NNTabularDataset", "resolve_batch_sizes"]

_SLOTS = ("train", "val", "test")
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_INTS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def resolve_batch_sizes(batch_sizes: Any, owner: str) -> tuple[int | None, int | None, int | None]:
    """§2.5: a 3-tuple of positive ints or None (one full batch); NumPy ints normalized.

    Zero, False, negatives, fractions, strings and anything but a 3-tuple are refused,
    naming the slot, before any data is read.
    """
    if not isinstance(batch_sizes, tuple) or len(batch_sizes) != 3:
        raise ConfigError(
            f"{owner}.batch_sizes",
            batch_sizes,
            "pass a 3-tuple (train, val, test) of positive integers or None, e.g. (64, None, None)",
        )
    out: list[int | None] = []
    for i, (value, slot) in enumerate(zip(batch_sizes, _SLOTS, strict=True)):
        if value is None:
            out.append(None)
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
            raise ConfigError(
                f"{owner}.batch_sizes[{i}] ({slot})",
                value,
                "pass a positive integer, or None for one batch holding the whole split",
            )
        out.append(int(value))
    return out[0], out[1], out[2]


def _proportion(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < 1:
        raise ConfigError(f"NNTabularDataset.{name}", value, "pass a fraction in [0, 1), e.g. 0.15")
    return float(value)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "torch.")


class NNTabularDataset:
    """Feature columns and a target column of a DataFrame, split and batched.

    ``target_dtype=None`` (classification): targets are class indices (torch.long),
    ``output_dim`` is the number of classes, and ``classes`` holds the label values in
    index order (labels that are not already 0..K-1 are encoded in sorted order). A
    floating ``target_dtype`` (regression) keeps the values, ``output_dim`` 1.

    ``batch_sizes=(train, val, test)``: ``None`` is one batch holding the whole split.
    ``val_proportion`` / ``test_proportion`` split the rows at random under ``seed``;
    ``split=`` (a ``SplitManifest``) with ``id_col=`` replays a planned split by id
    instead. ``standardize=True`` fits a ``Standardizer`` on the training rows only and
    applies it to every split (``dataset.standardizer``). An empty validation or test
    split gives a ``None`` loader.
    """

    def __init__(
        self,
        df: Any,
        feature_cols: Sequence[str],
        target_col: str,
        target_dtype: torch.dtype | None = None,
        feature_dtype: torch.dtype = torch.float32,
        batch_sizes: tuple[Any, Any, Any] = (None, None, None),
        val_proportion: float = 0.15,
        test_proportion: float = 0.15,
        seed: int = 0,
        split: SplitManifest | None = None,
        id_col: str | None = None,
        standardize: bool = False,
        name: str | None = None,
    ) -> None:
        import pandas as pd

        requested = resolve_batch_sizes(batch_sizes, "NNTabularDataset")
        if split is None:
            val_p = _proportion(val_proportion, "val_proportion")
            test_p = _proportion(test_proportion, "test_proportion")
            if val_p + test_p >= 1:
                raise ConfigError(
                    "NNTabularDataset.val_proportion + test_proportion",
                    val_p + test_p,
                    "leave rows for training: the two must sum to less than 1",
                )
        elif not isinstance(split, SplitManifest):
            raise ConfigError("NNTabularDataset.split", split, "pass a SplitManifest or None")
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise ConfigError("NNTabularDataset.seed", seed, "pass an integer seed")
        if not isinstance(df, pd.DataFrame):
            raise ConfigError("NNTabularDataset.df", type(df).__name__, "pass a pandas DataFrame")
        if not isinstance(standardize, bool):
            raise ConfigError("NNTabularDataset.standardize", standardize, "pass True or False")
        features = self._columns(df, feature_cols, target_col, split, id_col)
        if feature_dtype not in (*_FLOATS, *_INTS, torch.bool):
            raise ConfigError(
                "NNTabularDataset.feature_dtype", feature_dtype, "pass a torch float or int dtype"
            )
        if target_dtype is not None and target_dtype not in _FLOATS:
            raise ConfigError(
                "NNTabularDataset.target_dtype",
                target_dtype,
                "pass a floating dtype for regression (torch.float32), or None for class labels",
            )
        if standardize and feature_dtype not in _FLOATS:
            raise ConfigError(
                "NNTabularDataset.standardize",
                True,
                f"standardized features are fractions: use a floating feature_dtype, not "
                f"{feature_dtype}",
            )
        if len(df) == 0:
            raise DataError("NNTabularDataset.df", "has no rows", "pass a frame with rows")

        # -- admission: every check on the selected columns, before the split ---------------
        X_src = self._numeric(df, features, "feature", feature_dtype)
        self._admit_features(X_src, features, feature_dtype)
        self.classes: list[Any] | None = None
        y = self._targets(df, target_col, target_dtype)

        # -- the split ------------------------------------------------------------------------
        n = len(df)
        if split is not None:
            index = self._replay(df, split, id_col)  # type: ignore[arg-type]
        else:
            gen = torch.Generator().manual_seed(int(seed))
            order = torch.randperm(n, generator=gen).tolist()
            n_val, n_test = int(n * val_p), int(n * test_p)
            n_train = n - n_val - n_test
            index = {
                "train": sorted(order[:n_train]),
                "val": sorted(order[n_train : n_train + n_val]),
                "test": sorted(order[n_train + n_val :]),
            }
        if not index["train"]:
            raise DataError(
                "NNTabularDataset", "the training split is empty", "give the training split rows"
            )

        # -- tensors ------------------------------------------------------------------------
        self.standardizer: Standardizer | None = None
        if standardize:
            self.standardizer = Standardizer.fit(X_src[index["train"]], features)
            X_src = (X_src - self.standardizer.mean) / self.standardizer.std
        X = self._convert(X_src, features, feature_dtype)
        resolved: list[int] = []
        loaders: dict[str, DataLoader | None] = {}
        for slot, size in zip(_SLOTS, requested, strict=True):
            rows = index[slot]
            bs = size if size is not None else max(1, len(rows))
            resolved.append(bs)
            if not rows:
                loaders[slot] = None
                continue
            gen = torch.Generator().manual_seed(int(seed)) if slot == "train" else None
            # Each split is its own tensors, in the split's order: a frame with its rows
            # reordered replays into the same tensors, so the same run id.
            picked = torch.tensor(rows, dtype=torch.long)
            loaders[slot] = DataLoader(
                TensorDataset(X[picked], y[picked]),
                batch_size=bs,
                shuffle=slot == "train",
                generator=gen,
            )
            if split is not None:
                loaders[slot].nnx_identity = {"split": split.digest(), "slot": slot}
        self.name = name or "NNTabularDataset"
        self.df_columns = list(df.columns)
        self.feature_cols = features
        self.target_col = target_col
        self.feature_dtype, self.target_dtype = feature_dtype, target_dtype
        self.batch_sizes: tuple[int, int, int] = tuple(resolved)  # type: ignore[assignment]
        self.requested_batch_sizes = requested
        self.split = split
        self.seed = int(seed)
        self.rows = {slot: list(index[slot]) for slot in _SLOTS}
        self.train_loader = loaders["train"]
        self.val_loader = loaders["val"]
        self.test_loader = loaders["test"]
        self.input_dim = len(features)
        self.output_dim = len(self.classes) if self.classes is not None else 1
        self.checks = [
            "columns present and numeric",
            "no NaN in the selected columns",
            "no ±inf in the features (source precision)",
            f"features fit {_dtype_name(feature_dtype)}",
            "class labels are whole values" if target_dtype is None else "targets finite",
        ]

    # -- checks ---------------------------------------------------------------------------
    @staticmethod
    def _columns(df: Any, feature_cols: Any, target_col: Any, split: Any, id_col: Any) -> list[str]:
        if isinstance(feature_cols, str) or not isinstance(feature_cols, Sequence):
            raise ConfigError(
                "NNTabularDataset.feature_cols", feature_cols, "pass a list of column names"
            )
        features = list(feature_cols)
        if not features:
            raise ConfigError("NNTabularDataset.feature_cols", features, "name at least one")
        if len(set(features)) != len(features):
            raise ConfigError("NNTabularDataset.feature_cols", features, "name each column once")
        named = [*features, target_col]
        repeated = sorted({str(c) for c in named if (df.columns == c).sum() > 1})
        if repeated:
            raise DataError(
                "NNTabularDataset",
                f"the frame has more than one column named {repeated}",
                "rename the repeated columns (df.columns must be unique among the columns "
                "you select); NNx 0.4.1 takes every column of that name, see "
                "docs/nnx_differences.md",
            )
        missing = [c for c in named if c not in df.columns]
        if missing:
            raise DataError(
                "NNTabularDataset",
                f"the frame has no column(s) {missing}",
                f"pick from {list(df.columns)}",
            )
        if target_col in features:
            raise ConfigError(
                "NNTabularDataset.target_col",
                target_col,
                "the target cannot also be a feature; drop it from feature_cols",
            )
        if split is not None and (id_col is None or id_col not in df.columns):
            raise ConfigError(
                "NNTabularDataset.id_col",
                id_col,
                "a split= is replayed by id: name the frame's id column",
            )
        return features

    @staticmethod
    def _numeric(
        df: Any, cols: list[str], role: str, requested: torch.dtype | None = None
    ) -> np.ndarray:
        import pandas as pd

        bad = [c for c in cols if not pd.api.types.is_numeric_dtype(df[c])]
        if bad:
            kinds = {c: str(df[c].dtype) for c in bad}
            raise DataError(
                "NNTabularDataset",
                f"{role} column(s) {kinds} are not numeric",
                "encode them as numbers first (one-hot, ordinal codes)",
            )
        values = df[cols].to_numpy(dtype=np.float64, copy=True)
        nan_cols = [c for j, c in enumerate(cols) if np.isnan(values[:, j]).any()]
        if nan_cols:
            kinds = {c: str(df[c].dtype) for c in nan_cols}
            raise DataError(
                "NNTabularDataset",
                f"NaN in {role} column(s) {kinds}"
                + ("" if requested is None else f" (requested {requested})"),
                "drop or impute the missing values before building the dataset",
            )
        return values

    @staticmethod
    def _admit_features(X: np.ndarray, cols: list[str], dtype: torch.dtype) -> None:
        inf_cols = [c for j, c in enumerate(cols) if np.isinf(X[:, j]).any()]
        if inf_cols:
            raise DataError(
                "NNTabularDataset",
                f"±inf in feature column(s) {inf_cols} (checked before the cast to {dtype})",
                "replace the infinite values; they are never admitted",
            )
        if dtype in _INTS or dtype is torch.bool:
            lo, hi = (
                (0, 1) if dtype is torch.bool else (torch.iinfo(dtype).min, torch.iinfo(dtype).max)
            )
            # The cast truncates toward zero: 127.9 becomes 127 and is admitted (NNx's
            # rule); only a value whose truncation is out of range would wrap.
            whole = np.trunc(X)
            out = [c for j, c in enumerate(cols) if ((whole[:, j] < lo) | (whole[:, j] > hi)).any()]
            if out:
                raise DataError(
                    "NNTabularDataset",
                    f"feature column(s) {out} hold values outside [{lo}, {hi}] after "
                    f"truncation toward zero, which the cast to {dtype} would wrap",
                    "use a wider feature_dtype, or rescale the columns",
                )

    @staticmethod
    def _convert(X: np.ndarray, cols: list[str], dtype: torch.dtype) -> torch.Tensor:
        out = torch.from_numpy(X).to(dtype)
        if dtype in _FLOATS:
            overflow = [c for j, c in enumerate(cols) if torch.isinf(out[:, j]).any()]
            if overflow:
                raise DataError(
                    "NNTabularDataset",
                    f"feature column(s) {overflow} overflow {dtype} after conversion",
                    "use a wider feature_dtype (torch.float32), or rescale the columns",
                )
        return out

    def _targets(self, df: Any, col: str, dtype: torch.dtype | None) -> torch.Tensor:
        import pandas as pd

        series = df[col]
        if series.isna().any():
            raise DataError(
                "NNTabularDataset",
                f"NaN in target column {col!r} ({series.dtype}, requested "
                f"{dtype or 'class labels'})",
                "drop the rows without a target, or impute it",
            )
        series = _numeric_strings(series)
        if dtype is None:  # class labels
            if pd.api.types.is_float_dtype(series):
                values = series.to_numpy(dtype=np.float64)
                if not np.isfinite(values).all() or (values != np.round(values)).any():
                    raise DataError(
                        "NNTabularDataset",
                        f"target column {col!r} ({series.dtype}) holds non-integral or "
                        "infinite values, but target_dtype=None means class labels",
                        "pass target_dtype=torch.float32 for regression, or whole-number labels",
                    )
            uniques = sorted(series.unique().tolist(), key=lambda v: (str(type(v)), v))
            if pd.api.types.is_numeric_dtype(series) and uniques != list(range(len(uniques))):
                # Integer labels are class indices: remapping {0, 5} to {0, 1} would make
                # predict() answer 1 for the class the data calls 5 (NNx refuses too).
                raise DataError(
                    "NNTabularDataset",
                    f"target_col {col!r} labels must be contiguous integers 0..K-1; got "
                    f"min={uniques[0]}, max={uniques[-1]}, n_unique={len(uniques)}",
                    "remap the labels first (e.g. df[col] = pd.factorize(df[col], "
                    "sort=True)[0]), or give them as strings, which are encoded in sorted order",
                )
            self.classes = uniques
            if uniques == list(range(len(uniques))):
                codes = series.to_numpy().astype(np.int64)
            else:
                lookup = {v: i for i, v in enumerate(uniques)}
                codes = series.map(lookup).to_numpy().astype(np.int64)
            return torch.from_numpy(codes)
        values = self._numeric(pd.DataFrame({col: series}), [col], "target")[:, 0]
        if np.isinf(values).any():
            raise DataError(
                "NNTabularDataset",
                f"±inf in target column {col!r}",
                "replace the infinite targets",
            )
        out = torch.from_numpy(values).to(dtype)
        if torch.isinf(out).any():
            raise DataError(
                "NNTabularDataset",
                f"target column {col!r} overflows {dtype} after conversion",
                "use target_dtype=torch.float32, or rescale the target",
            )
        return out

    @staticmethod
    def _replay(df: Any, split: SplitManifest, id_col: str) -> dict[str, list[int]]:
        ids = df[id_col].tolist()
        seen: dict[Any, int] = {}
        dupes = []
        for pos, v in enumerate(ids):
            v = v.item() if isinstance(v, np.generic) else v
            if v in seen:
                dupes.append(v)
            seen[v] = pos
        if dupes:
            raise DataError(
                "NNTabularDataset",
                f"duplicate ids in {id_col!r}: {sorted(map(repr, set(dupes)))[:5]}",
                "give every row its own id",
            )
        owner = split.split_of()
        unexpected = [v for v in seen if v not in owner]
        missing = [v for v in owner if v not in seen and owner[v] != "excluded"]
        if unexpected or missing:
            parts = []
            if missing:
                parts.append(
                    f"{len(missing)} id(s) of the split are missing from the frame "
                    f"(e.g. {missing[:3]!r})"
                )
            if unexpected:
                parts.append(
                    f"{len(unexpected)} id(s) of the frame are not in the split "
                    f"(e.g. {unexpected[:3]!r})"
                )
            raise DataError(
                "NNTabularDataset.split",
                "; ".join(parts),
                "replay a split planned for this frame (plan_split on its ids), or plan anew",
            )
        # rows in the manifest's order, whatever the frame's order
        return {slot: [seen[v] for v in getattr(split, slot)] for slot in _SLOTS}

    # -- description ------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """What the dataset is, as data (names, sizes, dtypes, the split's digest)."""
        return {
            "name": self.name,
            "input_dim": self.input_dim,
            "output_dim": self.output_dim,
            "feature_cols": list(self.feature_cols),
            "target_col": self.target_col,
            "feature_dtype": str(self.feature_dtype),
            "target_dtype": None if self.target_dtype is None else str(self.target_dtype),
            "classes": None if self.classes is None else list(self.classes),
            "batch_sizes": list(self.batch_sizes),
            "sizes": {slot: len(rows) for slot, rows in self.rows.items()},
            "split": None if self.split is None else self.split.digest(),
            "seed": self.seed,
            "standardized": self.standardizer is not None,
        }

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={len(v)}" for k, v in self.rows.items())
        return (
            f"NNTabularDataset({self.name}: {self.input_dim} features -> {self.output_dim} "
            f"outputs; {sizes})"
        )


def _numeric_strings(series: Any) -> Any:
    """A column of numbers written as text (``"0"``, ``"-0.38"``) as those numbers, as
    NNx reads it; any other column as it is."""
    import pandas as pd

    if pd.api.types.is_numeric_dtype(series) or not len(series):
        return series
    if not all(isinstance(v, str) for v in series.tolist()):
        return series
    try:
        converted = pd.to_numeric(series.str.strip(), errors="raise")
    except (ValueError, TypeError):
        return series
    return converted
