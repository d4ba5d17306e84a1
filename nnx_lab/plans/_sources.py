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

__all__ = ["Source", "callback_source", "data_source", "takes_no_arguments"]


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


# how a binding report describes each: by what it holds and how the plan holds it
_DESCRIBE = {
    ("data", "factory"): "factory {name}, called once per fit",
    ("data", "instance"): "borrowed {type} instance, shared by every fit",
    ("callback", "factory"): "{name} (factory: a fresh one per fit)",
    ("callback", "instance"): "{type} instance (borrowed: shared by every fit)",
}


@dataclass(frozen=True, eq=False)
class Source:
    """A data source or a callback of a plan: a factory or a borrowed instance. Two are
    equal when they hold the same object for the same purpose."""

    obj: Any
    kind: str  # "factory" | "instance"
    code: dict[str, Any]
    via: str
    holds: str  # "data" | "callback"

    @property
    def name(self) -> str:
        return _name(self.obj)

    def make(self) -> Any:
        return self.obj() if self.kind == "factory" else self.obj

    def describe(self) -> str:
        text = _DESCRIBE[self.holds, self.kind]
        return text.format(name=self.name, type=type(self.obj).__qualname__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Source) and other.obj is self.obj and other.holds == self.holds

    def __hash__(self) -> int:
        return id(self.obj)


def data_source(obj: Any, role: str, via: str) -> Source | None:
    """A loader's source: a callable that is not itself iterable is a factory."""
    if obj is None:
        return None
    factory = callable(obj) and not isinstance(obj, Iterable)
    return Source(obj, "factory" if factory else "instance", code_record(obj, role), via, "data")


def callback_source(obj: Any, index: int, via: str) -> Source:
    # NNx's legacy callbacks are functions fn(idps): a function is a factory only when
    # it takes no argument at all.
    factory = inspect.isclass(obj) or (inspect.isfunction(obj) and takes_no_arguments(obj))
    code = code_record(obj, f"callbacks[{index}]")
    return Source(obj, "factory" if factory else "instance", code, via, "callback")
