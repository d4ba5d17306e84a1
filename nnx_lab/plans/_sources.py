"""What a plan holds besides values: its data sources and its callbacks.

Each is either a *factory* (called once per fit, so every fit gets a fresh object) or a
borrowed *instance* (the same object for every fit, as §2.20 says). A code record is
taken when the object enters the plan, so a drift report can later tell whether the
name it came from now means other code.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ._refs import code_record

__all__ = ["CallbackSource", "DataSource", "callback_source", "data_source", "takes_no_arguments"]


def takes_no_arguments(fn: Any) -> bool | None:
    """Whether ``fn()`` binds (None when its signature cannot be read)."""
    try:
        inspect.signature(fn).bind()
    except TypeError:
        return False
    except ValueError:
        return None
    return True


def _name(obj: Any) -> str:
    target = obj if inspect.isfunction(obj) or inspect.isclass(obj) else type(obj)
    return f"{target.__module__}.{target.__qualname__}"


@dataclass(frozen=True, eq=False)
class DataSource:
    """A training or validation data source: a factory or a borrowed loader."""

    obj: Any
    kind: str  # "factory" | "instance"
    code: dict[str, Any]
    via: str

    @property
    def name(self) -> str:
        return _name(self.obj)

    def make(self) -> Any:
        return self.obj() if self.kind == "factory" else self.obj

    def describe(self) -> str:
        if self.kind == "factory":
            return f"factory {self.name}, called once per fit"
        return f"borrowed {type(self.obj).__qualname__} instance, shared by every fit"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DataSource) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def data_source(obj: Any, role: str, via: str) -> DataSource | None:
    if obj is None:
        return None
    factory = callable(obj) and not isinstance(obj, Iterable)
    return DataSource(obj, "factory" if factory else "instance", code_record(obj, role), via)


@dataclass(frozen=True, eq=False)
class CallbackSource:
    """A callback: a factory (a class, or a function taking no argument) or an instance."""

    obj: Any
    kind: str  # "factory" | "instance"
    code: dict[str, Any]
    via: str

    @property
    def name(self) -> str:
        return _name(self.obj)

    def make(self) -> Any:
        return self.obj() if self.kind == "factory" else self.obj

    def describe(self) -> str:
        if self.kind == "factory":
            return f"{self.name} (factory: a fresh one per fit)"
        return f"{type(self.obj).__qualname__} instance (borrowed: shared by every fit)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CallbackSource) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def callback_source(obj: Any, index: int, via: str) -> CallbackSource:
    # NNx's legacy callbacks are functions fn(idps): a function is a factory only when
    # it takes no argument at all.
    factory = inspect.isclass(obj) or (inspect.isfunction(obj) and takes_no_arguments(obj))
    return CallbackSource(
        obj, "factory" if factory else "instance", code_record(obj, f"callbacks[{index}]"), via
    )
