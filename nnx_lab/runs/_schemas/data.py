"""The shapes of the data files: a split manifest and a standardizer.

A split manifest is membership by id, so every split is present (a missing one is not
read as empty), each is a list (``"train": "abc"`` is not the ids a, b, c) and no id is
in two splits. A standardizer has one finite mean and one positive finite spread per
column, and its columns are a list of distinct names (``"ab"`` is not two columns).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

import msgspec

from ...errors import SplitError, StandardizerError
from .._schema import Finite, NonNegativeInt
from .reading import INT64, Label, Problem, Refusal, Text, found, plain_problem, repeated

__all__ = [
    "SPLIT_NAMES",
    "SplitFileError",
    "SplitManifestFile",
    "StandardizerFile",
    "StandardizerFileError",
]

SPLIT_NAMES = ("train", "val", "test", "excluded")
_MAX = 1.7976931348623157e308

Ids = list[INT64 | Label]


class SplitFileError(Refusal, SplitError):
    """A split manifest that is not one nnx_lab wrote (a ``SchemaError`` and a
    ``SplitError``)."""


class StandardizerFileError(Refusal, StandardizerError):
    """A standardizer file that is not one nnx_lab wrote (a ``SchemaError`` and a
    ``StandardizerError``)."""


class SplitManifestFile(msgspec.Struct, forbid_unknown_fields=True):
    """``SplitManifest.state()``."""

    kind: Literal["nnx_lab.SplitManifest"]
    version: Literal[1]
    strategy: Text
    params: dict[str, Any]
    train: Ids
    val: Ids
    test: Ids
    excluded: Ids
    source: Text | None = None  # NNx's records, written only when given
    seed: NonNegativeInt | None = None

    def rules(self) -> Iterator[Problem]:
        yield from found([plain_problem(self.params, "params")])
        seen: dict[tuple[type, Any], str] = {}
        for name in SPLIT_NAMES:
            for i, v in enumerate(getattr(self, name)):
                key = (type(v), v)
                if key in seen:
                    where = "earlier in this split" if seen[key] == name else f"in {seen[key]}"
                    yield Problem(
                        f"{name}[{i}]",
                        f"is also {where}; every id belongs to exactly one split, once",
                        v,
                        "plan the split again (plan_split) and save it",
                    )
                    return
                seen[key] = name


class StandardizerFit(msgspec.Struct, forbid_unknown_fields=True):
    rows: NonNegativeInt
    membership: Text | None


class StandardizerFile(msgspec.Struct, forbid_unknown_fields=True):
    """``Standardizer.state()``."""

    kind: Literal["nnx_lab.Standardizer"]
    version: Literal[1]
    columns: Annotated[list[INT64 | Label], msgspec.Meta(min_length=1)]  # each label as it is
    mean: list[Finite]
    std: list[Annotated[float, msgspec.Meta(gt=0.0, le=_MAX)]]
    dtype: Literal["float32", "float64"] = "float32"  # NNx's records, when written
    fit: StandardizerFit | None = None

    def rules(self) -> Iterator[Problem]:
        n = len(self.columns)
        return found(
            [
                repeated(self.columns, "columns", "column"),
                Problem("mean", f"{len(self.mean)} means for {n} columns; one per column")
                if len(self.mean) != n
                else None,
                Problem("std", f"{len(self.std)} spreads for {n} columns; one per column")
                if len(self.std) != n
                else None,
            ]
        )
