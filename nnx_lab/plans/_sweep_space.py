"""A sweep's search space: plan paths mapped to choices (a list) or a distribution
(``uniform``, ``loguniform``), checked as a whole before any trial is built, and the
trials a grid or a seeded random search draws from it.

Pure Python (no torch): the space and its trials are data, so a sweep can be planned,
listed and checked without loading the engine.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ._updates import field_at

__all__ = ["Distribution", "SweepSpace", "loguniform", "uniform"]


@dataclass(frozen=True)
class Distribution:
    """A continuous range to sample: ``kind`` is ``"uniform"`` or ``"loguniform"``."""

    kind: str
    low: float
    high: float

    def sample(self, rng: random.Random) -> float:
        if self.kind == "loguniform":
            return math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        return rng.uniform(self.low, self.high)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "low": self.low, "high": self.high}

    def __repr__(self) -> str:
        return f"{self.kind}({self.low!r}, {self.high!r})"


def _bounds(kind: str, low: Any, high: Any) -> tuple[float, float]:
    for name, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConfigError(f"{kind}.{name}", v, "pass a finite number")
    if kind == "loguniform" and low <= 0:
        raise ConfigError(f"{kind}.low", low, "pass a bound > 0 (a log scale has no 0)")
    if high <= low:
        raise ConfigError(f"{kind}.high", high, f"pass a bound above low={low!r}")
    return float(low), float(high)


def uniform(low: float, high: float) -> Distribution:
    """Values drawn evenly from ``[low, high]`` (random search only)."""
    return Distribution("uniform", *_bounds("uniform", low, high))


def loguniform(low: float, high: float) -> Distribution:
    """Values drawn evenly on a log scale from ``[low, high]``, ``0 < low < high``: what
    learning rates and weight decays want (random search only)."""
    return Distribution("loguniform", *_bounds("loguniform", low, high))


def _choices(path: str, value: Any) -> tuple[Any, ...]:
    if isinstance(value, Distribution):
        return ()
    if not isinstance(value, (list, tuple)):
        raise ConfigError(
            f"space[{path!r}]",
            value,
            "pass a list of choices (e.g. [[32], [64, 32]]) or "
            "uniform(lo, hi) / loguniform(lo, hi)",
        )
    if not value:
        raise ConfigError(f"space[{path!r}]", value, "pass at least one choice")
    # a choice that is itself a list (hidden_dims) is stored as a list, as a form sends it
    return tuple(list(c) if isinstance(c, tuple) else c for c in value)


@dataclass(frozen=True)
class SweepSpace:
    """The checked space: ``paths`` in the order given, and for each either its
    ``choices`` or its ``Distribution``."""

    paths: tuple[str, ...]
    entries: Mapping[str, tuple[Any, ...] | Distribution]

    @classmethod
    def of(cls, space: Any) -> SweepSpace:
        if not isinstance(space, Mapping) or not space:
            raise ConfigError(
                "space",
                space,
                'pass a non-empty mapping of plan paths, e.g. {"train.optim.max_lr": '
                "loguniform(1e-4, 1e-1)}",
            )
        entries: dict[str, tuple[Any, ...] | Distribution] = {}
        for path, value in space.items():
            if not isinstance(path, str):
                raise ConfigError("space", path, "use plan paths (str) as keys")
            field_at(path, "space")  # unknown paths named with the closest spellings
            entries[path] = value if isinstance(value, Distribution) else _choices(path, value)
        return cls(tuple(entries), entries)

    def is_grid(self) -> bool:
        return not any(isinstance(e, Distribution) for e in self.entries.values())

    def grid(self, n_trials: int | None) -> list[dict[str, Any]]:
        """Every combination, the first path varying slowest; ``n_trials`` keeps the
        first ones."""
        for path, e in self.entries.items():
            if isinstance(e, Distribution):
                raise ConfigError(
                    f"space[{path!r}]",
                    e,
                    "a grid needs a list of choices for every field: pass a list, "
                    "or search='random'",
                )
        lists = [self.entries[p] for p in self.paths]
        combos = [dict(zip(self.paths, c, strict=True)) for c in itertools.product(*lists)]
        if n_trials is not None:
            if n_trials > len(combos):
                raise ConfigError(
                    "n_trials",
                    n_trials,
                    f"the grid has {len(combos)} combinations: pass n_trials <= "
                    f"{len(combos)}, or None for all of them",
                )
            combos = combos[:n_trials]
        return combos

    def random(self, n_trials: int | None, seed: int) -> list[dict[str, Any]]:
        """``n_trials`` draws, each path in turn, from ``random.Random(seed)``: the same
        seed gives the same trials in any process."""
        if n_trials is None:
            raise ConfigError("n_trials", None, "a random search needs n_trials, e.g. 12")
        rng = random.Random(seed)
        out = []
        for _ in range(n_trials):
            trial = {}
            for p in self.paths:
                e = self.entries[p]
                trial[p] = e.sample(rng) if isinstance(e, Distribution) else rng.choice(e)
            out.append(trial)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            p: e.to_json() if isinstance(e, Distribution) else {"choices": list(e)}
            for p, e in self.entries.items()
        }


def check_count(n_trials: Any) -> int | None:
    if n_trials is None:
        return None
    if isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 1:
        raise ConfigError("n_trials", n_trials, "pass an integer >= 1, or None")
    return n_trials
