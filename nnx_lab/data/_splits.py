"""Split manifests (§2.16): which sample ids go to train, validation and test.

``plan_split`` plans membership by sample id (random, by group, stratified by label, or
chronological with cutoffs and an embargo gap) and returns a ``SplitManifest``: plain
JSON whose ``digest()`` is the split's identity. ``NNTabularDataset(split=..., id_col=...)``
replays it by id, so a reordered frame gives the same splits.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SplitError
from ..runs import (
    SplitFileError,
    SplitManifestFile,
    atomic_write_json,
    check_header,
    check_shape,
    read_json_file,
)

__all__ = ["SPLITS", "STRATEGIES", "SplitError", "SplitManifest", "plan_split"]

SPLITS = ("train", "val", "test")
STRATEGIES = ("random", "group", "stratified", "chronological")
_VERSION = 1
_HEADER = ("kind", "nnx_lab.SplitManifest", _VERSION)
_FIX = "this is not a split manifest nnx_lab saved, or it was altered; plan the split again"
_REDO = "plan the split again and save it with this nnx_lab"


def _plain(value: Any, what: str) -> Any:
    """A JSON-safe id: an int or a string."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise SplitError(
            f"{what}={value!r} ({type(value).__name__}) is not a usable id; ids must be "
            "integers or strings"
        )
    return value


@dataclass(frozen=True)
class SplitManifest:
    """Membership by id: ``train``, ``val``, ``test``, and ids left out (an embargo)."""

    train: tuple[Any, ...]
    val: tuple[Any, ...]
    test: tuple[Any, ...]
    excluded: tuple[Any, ...] = ()
    strategy: str = "explicit"
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        seen: dict[Any, str] = {}
        for name in (*SPLITS, "excluded"):
            ids = tuple(_plain(v, f"SplitManifest.{name} id") for v in getattr(self, name))
            object.__setattr__(self, name, ids)
            for v in ids:
                if v in seen:
                    raise SplitError(
                        f"SplitManifest: id {v!r} is in both {seen[v]} and {name}; every id "
                        "belongs to exactly one split"
                    )
                seen[v] = name

    def split_of(self) -> dict[Any, str]:
        """id -> "train" | "val" | "test" | "excluded"."""
        return {v: name for name in (*SPLITS, "excluded") for v in getattr(self, name)}

    @property
    def validation(self) -> tuple[Any, ...]:
        """NNx's name for ``val``."""
        return self.val

    @property
    def parameters(self) -> dict[str, Any]:
        """NNx's name for ``params``."""
        return self.params

    @property
    def ids(self) -> str:
        """What the ids name, NNx's field: ``"sample"`` (row ids, the default) or
        ``"position"``."""
        return self.__dict__.get("_ids", "sample")

    @property
    def source(self) -> str | None:
        """NNx's record of the data the split was planned on (a digest or a declared
        id), or None."""
        return self.__dict__.get("_source")

    @property
    def seed(self) -> int | None:
        """NNx's record of the seed the split was drawn with, or None."""
        return self.__dict__.get("_seed")

    def sizes(self) -> dict[str, int]:
        return {name: len(getattr(self, name)) for name in (*SPLITS, "excluded")}

    def state(self) -> dict[str, Any]:
        return {
            "kind": "nnx_lab.SplitManifest",
            "version": _VERSION,
            "strategy": self.strategy,
            "params": self.params,
            **{name: list(getattr(self, name)) for name in (*SPLITS, "excluded")},
            # NNx's records, written only when given: older states keep their bytes
            **({"source": self.source} if self.source is not None else {}),
            **({"seed": self.seed} if self.seed is not None else {}),
        }

    def digest(self) -> str:
        """SHA-256 of the membership (order-free): the split's identity."""
        body = {name: sorted(map(repr, getattr(self, name))) for name in (*SPLITS, "excluded")}
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def save(self, path: str | os.PathLike[str]) -> Path:
        path = Path(path)
        atomic_write_json(path, self.state())
        return path

    @classmethod
    def from_state(
        cls, state: Any, source: str | os.PathLike[str] = "split manifest state"
    ) -> SplitManifest:
        """The manifest of ``state()`` output, checked as strictly as a file
        (``SplitManifestFile``); ``source`` names it in a refusal."""
        check_header(state, source, SplitFileError, _HEADER, fix=_FIX, redo=_REDO)
        doc = check_shape(state, SplitManifestFile, source, SplitFileError, fix=_FIX)
        return cls._from_file(doc)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SplitManifest:
        """Read a saved manifest. Every split must be there, as a list of ids, each id in
        one split only; anything else is one ``SplitFileError`` (a ``SplitError``)
        naming the file and the field."""
        doc = read_json_file(
            path,
            SplitManifestFile,
            SplitFileError,
            fix=_FIX,
            header=_HEADER,
            redo=_REDO,
            missing_fix="pass the path save() wrote",
        )
        return cls._from_file(doc)

    @classmethod
    def _from_file(cls, doc: SplitManifestFile) -> SplitManifest:
        return cls(
            train=tuple(doc.train),
            val=tuple(doc.val),
            test=tuple(doc.test),
            excluded=tuple(doc.excluded),
            strategy=doc.strategy,
            params=doc.params,
            source=doc.source,
            seed=doc.seed,
        )


def _proportions(proportions: Any) -> tuple[float, float, float]:
    ok = (
        isinstance(proportions, Sequence)
        and not isinstance(proportions, str)
        and len(proportions) == 3
        and all(isinstance(p, numbers.Real) and not isinstance(p, bool) for p in proportions)
    )
    if not ok or any(not math.isfinite(p) or p < 0 for p in proportions) or proportions[0] <= 0:
        raise SplitError(
            f"proportions={proportions!r} is invalid: pass (train, val, test) fractions >= 0 "
            "with train > 0, e.g. (0.7, 0.15, 0.15)"
        )
    total = float(sum(proportions))
    return tuple(float(p) / total for p in proportions)  # type: ignore[return-value]


def _counts(n: int, props: tuple[float, float, float]) -> tuple[int, int, int]:
    """Split ``n`` items by proportion; val and test round down, train takes the rest."""
    n_val = int(n * props[1])
    n_test = int(n * props[2])
    return n - n_val - n_test, n_val, n_test


def _column(values: Any, n: int, name: str) -> list[Any]:
    if values is None:
        raise SplitError(f"plan_split: strategy needs {name}=..., one value per id")
    out = list(values.tolist() if hasattr(values, "tolist") else values)
    if len(out) != n:
        raise SplitError(f"plan_split: {name} has {len(out)} values for {n} ids")
    return out


_ID_KINDS = ("sample", "position")
_UNSET: Any = object()
_dataclass_init = SplitManifest.__init__


def _init_with_nnx_names(
    self: SplitManifest,
    *args: Any,
    validation: Any = _UNSET,
    ids: str | None = None,
    parameters: Any = _UNSET,
    source: Any = None,
    seed: Any = None,
    **kwargs: Any,
) -> None:
    # NNx 0.4.1 spells it SplitManifest(strategy, train, validation, test, excluded=(),
    # ids="sample", parameters={}): read that form too, into the same manifest (its state
    # and digest are nnx-lab's, so a manifest built either way replays alike).
    if args and isinstance(args[0], str):
        kwargs.update(zip(("strategy", "train", "val", "test", "excluded"), args, strict=False))
        args = ()
    for nnx, ours, value in (
        ("validation", "val", validation),
        ("parameters", "params", parameters),
    ):
        if value is _UNSET:
            continue
        if ours in kwargs:
            raise SplitError(f"SplitManifest: pass {ours}= or {nnx}= (NNx's name), not both")
        kwargs[ours] = value
    if ids is not None and ids not in _ID_KINDS:
        raise SplitError(f"SplitManifest: ids={ids!r} is invalid: pass 'sample' or 'position'")
    object.__setattr__(self, "_ids", ids or "sample")
    if source is not None:
        if hasattr(source, "hexdigest"):  # a provenance Digest: "sha256:<hex>"
            source = str(source)
        if not isinstance(source, str) or not source.strip():
            raise SplitError(
                f"SplitManifest: source={source!r} is invalid: pass the data's digest "
                "(hash_file(path)) or a non-empty declared id"
            )
        object.__setattr__(self, "_source", source)
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise SplitError(f"SplitManifest: seed={seed!r} is invalid: pass an integer >= 0")
        object.__setattr__(self, "_seed", int(seed))
    _dataclass_init(self, *args, **kwargs)


SplitManifest.__init__ = _init_with_nnx_names  # type: ignore[method-assign]


def plan_split(
    ids: Any,
    strategy: str = "random",
    *,
    proportions: Sequence[float] = (0.7, 0.15, 0.15),
    seed: int = 0,
    groups: Any = None,
    labels: Any = None,
    times: Any = None,
    cutoffs: Sequence[Any] | None = None,
    gap: float = 0,
) -> SplitManifest:
    """Plan a split of ``ids`` (one per row).

    - ``"random"``: a seeded permutation cut by ``proportions``.
    - ``"group"``: whole groups (``groups=``, one per id) go to one split each, assigned
      in a seeded order until each split holds its share of rows.
    - ``"stratified"``: each class of ``labels=`` is cut by ``proportions``, so every
      class with enough rows is in every non-empty split.
    - ``"chronological"``: ``times=`` and ``cutoffs=(val_start, test_start)``: train is
      before the first cutoff, val between them, test from the second; ``gap`` leaves out
      the ids within ``gap`` after each cutoff (an embargo against leakage across time).
    """
    raw = list(ids.tolist() if hasattr(ids, "tolist") else ids)
    ids_ = [_plain(v, "ids") for v in raw]
    if not ids_:
        raise SplitError("plan_split: no ids")
    if len(set(ids_)) != len(ids_):
        dupes = sorted({repr(v) for v in ids_ if ids_.count(v) > 1})[:5]
        raise SplitError(f"plan_split: duplicate ids {', '.join(dupes)}; ids must be unique")
    if strategy not in STRATEGIES:
        raise SplitError(f"plan_split: strategy={strategy!r}; use one of {', '.join(STRATEGIES)}")
    rng = np.random.default_rng(seed)
    n = len(ids_)
    params: dict[str, Any] = {"seed": seed}
    if strategy == "chronological":
        t = _column(times, n, "times")
        if cutoffs is None or len(cutoffs) != 2 or not cutoffs[0] <= cutoffs[1]:
            raise SplitError(
                f"plan_split: cutoffs={cutoffs!r}; pass (val_start, test_start) with "
                "val_start <= test_start"
            )
        if not isinstance(gap, numbers.Real) or gap < 0:
            raise SplitError(f"plan_split: gap={gap!r}; pass a non-negative distance in time")
        c0, c1 = cutoffs
        parts: dict[str, list[Any]] = {name: [] for name in (*SPLITS, "excluded")}
        for v, when in zip(ids_, t, strict=True):
            if when < c0:
                parts["train"].append(v)
            elif when < c0 + gap:
                parts["excluded"].append(v)
            elif when < c1:
                parts["val"].append(v)
            elif when < c1 + gap:
                parts["excluded"].append(v)
            else:
                parts["test"].append(v)
        params.update(cutoffs=list(cutoffs), gap=gap)
        return SplitManifest(
            **{k: tuple(v) for k, v in parts.items()}, strategy=strategy, params=params
        )
    props = _proportions(proportions)
    params["proportions"] = list(props)
    if strategy == "random":
        order = [ids_[i] for i in rng.permutation(n)]
        a, b, _ = _counts(n, props)
        return SplitManifest(
            tuple(order[:a]),
            tuple(order[a : a + b]),
            tuple(order[a + b :]),
            strategy=strategy,
            params=params,
        )
    if strategy == "stratified":
        lab = _column(labels, n, "labels")
        by_class: dict[Any, list[Any]] = {}
        for v, c in zip(ids_, lab, strict=True):
            by_class.setdefault(c, []).append(v)
        parts = {name: [] for name in SPLITS}
        needed = sum(1 for p in props if p > 0)
        for c, members in sorted(by_class.items(), key=lambda kv: repr(kv[0])):
            if len(members) < needed:
                raise SplitError(
                    f"plan_split: class {c!r} has {len(members)} rows; stratified needs at "
                    f"least {needed} to put it in every split"
                )
            members = [members[i] for i in rng.permutation(len(members))]
            a, b, t_ = _counts(len(members), props)
            # every non-empty split gets at least one row of every class
            if props[1] > 0 and b == 0:
                a, b = a - 1, 1
            if props[2] > 0 and t_ == 0:
                a, t_ = a - 1, 1
            parts["train"] += members[:a]
            parts["val"] += members[a : a + b]
            parts["test"] += members[a + b :]
        return SplitManifest(
            **{k: tuple(v) for k, v in parts.items()}, strategy=strategy, params=params
        )
    # group
    grp = _column(groups, n, "groups")
    members_of: dict[Any, list[Any]] = {}
    for v, g in zip(ids_, grp, strict=True):
        members_of.setdefault(g, []).append(v)
    names = sorted(members_of, key=repr)
    names = [names[i] for i in rng.permutation(len(names))]
    target = [p * n for p in props]
    filled = [0.0, 0.0, 0.0]
    parts = {name: [] for name in SPLITS}
    for g in names:
        # the split furthest below its share takes the next group
        k = max(
            range(3),
            key=lambda i: (
                (target[i] - filled[i]) / max(target[i], 1e-12) if target[i] > 0 else -math.inf
            ),
        )
        parts[SPLITS[k]] += members_of[g]
        filled[k] += len(members_of[g])
    return SplitManifest(
        **{k: tuple(v) for k, v in parts.items()}, strategy=strategy, params=params
    )
