"""What every parameter dataclass shares: value checks that name the field, the value
and the fix (``ConfigError``), and the canonical JSON over the dataclass fields.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import fields, replace
from enum import Enum
from typing import Any

from ..errors import ConfigError

__all__ = [
    "FLOAT32_MAX",
    "SEED_LIMIT",
    "FrozenList",
    "Params",
    "finite",
    "is_int",
    "is_real",
    "json_value",
    "positive_int",
    "set_field",
]


def is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _typed_text(value: object) -> bool:
    """Text where a number goes (a form's field, a plan file's string)."""
    return isinstance(value, str)


def positive_int(value: object, name: str, minimum: int = 1) -> int:
    if _typed_text(value):
        raise ConfigError(name, value, f"not a number; type a whole number >= {minimum}")
    if not is_int(value) or int(value) < minimum:  # type: ignore[arg-type]
        raise ConfigError(name, value, f"pass an integer >= {minimum}")
    return int(value)  # type: ignore[arg-type]


def _range_words(low: float, high: float, low_open: bool, high_open: bool) -> str:
    """The accepted range as a person types it: "> 0", ">= 0", "in [0, 1)"; the float32
    ceiling of the params is left out (no one types 3.4e38)."""
    if math.isfinite(high) and high < FLOAT32_MAX:
        return f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    return f"{'>' if low_open else '>='} {low:g}"


def _finite_fix(fix: str, low: float, high: float, low_open: bool, high_open: bool) -> str:
    """The fix for text that is not a number: say so, the range, and the fix's example."""
    example = re.search(r"e\.g\. ([^\s,;()]+)", fix)  # the first example the fix gives
    tail = f", e.g. {example.group(1)}" if example else ""
    return f"not a number; type a number {_range_words(low, high, low_open, high_open)}{tail}"


def finite(
    value: object,
    name: str,
    *,
    low: float,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
    fix: str,
) -> float:
    if _typed_text(value):
        raise ConfigError(name, value, _finite_fix(fix, low, high, low_open, high_open))
    if not is_real(value) or not math.isfinite(float(value)):  # type: ignore[arg-type]
        raise ConfigError(name, value, fix)
    v = float(value)  # type: ignore[arg-type]
    if v < low or (low_open and v == low) or v > high or (high_open and v == high):
        raise ConfigError(name, value, fix)
    return v


def set_dropout(obj: Any, name: str) -> None:
    """Check and set ``obj.dropout_prob``, a probability in [0, 1); ``name`` is the field
    as the refusal names it (``"NNConvParams.dropout_prob"``)."""
    value = finite(
        obj.dropout_prob,
        name,
        low=0.0,
        high=1.0,
        high_open=True,
        fix="pass a probability in [0, 1), e.g. 0.1",
    )
    set_field(obj, "dropout_prob", value)


# The largest float32: optimizer arithmetic runs in float32, where a larger value is inf.
FLOAT32_MAX = 3.4028234663852886e38
SEED_LIMIT = 2**63  # torch.manual_seed takes a signed 64-bit integer


def _immutable(*_: Any, **__: Any) -> None:
    raise TypeError("NNParams list fields are immutable; build new params with .replace(...)")


class FrozenList(list):
    """A list that cannot change: NNx's type for list fields (``hidden_dims == [8, 4]``).
    It also equals the tuple it was before, and hashes as that tuple, so frozen params
    stay hashable."""

    __slots__ = ()
    append = extend = insert = remove = pop = clear = sort = reverse = _immutable
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _immutable

    def __eq__(self, other: object) -> bool:
        if isinstance(other, tuple):
            return tuple(self) == other
        return list.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList:
        return self


def set_field(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)


def json_value(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [json_value(v) for v in value]
    return value


class Params:
    """The canonical JSON over the dataclass fields (less ``_not_in_json``), and
    ``replace``."""

    _not_in_json: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            f.name: json_value(getattr(self, f.name))
            for f in fields(self)  # type: ignore[arg-type]
            if f.name not in self._not_in_json
        }

    def replace(self, **changes: Any):
        """A copy with ``changes`` applied and validated again."""
        return replace(self, **changes)  # type: ignore[type-var]

    def state(self) -> dict[str, Any]:
        """NNx's name for the plain form: ``to_json()``, the form ``run.yaml`` holds;
        ``type(p).from_state(p.state()) == p``."""
        return self.to_json()

    @classmethod
    def from_state(cls, state: Any):
        """The params ``state()`` gave (``from_json``), validated again."""
        if not isinstance(state, dict):
            raise ConfigError(f"{cls.__name__}.from_state", state, "pass the dict state() gave")
        return cls.from_json(dict(state))  # type: ignore[attr-defined]
