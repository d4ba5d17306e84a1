"""What a plan holds besides values: its data sources and its callbacks.

Each is either a *factory* (called once per fit, so every fit gets a fresh object), a
borrowed *instance* (the same object for every fit, as §2.20 says) or, in a plan read
from JSON and not resolved yet, a *reference*: the factory's name as text. A code record is
taken when the object enters the plan, so a drift report can later tell whether the
name it came from now means other code.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ._refs import Reference, code_record, reference_code

__all__ = ["Source", "callback_source", "data_source", "reference_source", "takes_no_arguments"]


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
    if isinstance(obj, Reference):
        return obj.name
    target = obj if inspect.isfunction(obj) or inspect.isclass(obj) else type(obj)
    return f"{target.__module__}.{target.__qualname__}"


# how a binding report describes each: by what it holds and how the plan holds it
_DESCRIBE = {
    ("data", "factory"): "factory {name}, called once per fit",
    ("data", "instance"): "borrowed {type} instance, shared by every fit",
    ("callback", "factory"): "{name} (factory: a fresh one per fit)",
    ("callback", "instance"): "{type} instance (borrowed: shared by every fit)",
    ("data", "reference"): "factory {name}, named in the plan's JSON (not imported yet)",
    ("callback", "reference"): "{name}, named in the plan's JSON (not imported yet)",
}


@dataclass(frozen=True, eq=False)
class Source:
    """A data source or a callback of a plan: a factory or a borrowed instance. Two are
    equal when they hold the same object for the same purpose."""

    obj: Any
    kind: str  # "factory" | "instance" | "reference"
    code: dict[str, Any]
    via: str
    holds: str  # "data" | "callback"

    @property
    def name(self) -> str:
        return _name(self.obj)

    def make(self) -> Any:
        if self.kind == "reference":
            raise ConfigError(
                self.code["role"], self.obj.text, "the plan holds a reference: plan.resolve() first"
            )
        return self.obj() if self.kind == "factory" else self.obj

    def describe(self) -> str:
        text = _DESCRIBE[self.holds, self.kind]
        return text.format(name=self.name, type=type(self.obj).__qualname__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Source) or other.holds != self.holds:
            return False
        if isinstance(self.obj, Reference):
            return self.obj == other.obj
        return other.obj is self.obj

    def __hash__(self) -> int:
        return hash(self.obj) if isinstance(self.obj, Reference) else id(self.obj)


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


def reference_source(ref: Reference, role: str, via: str, holds: str) -> Source:
    """A data source or callback read from a plan's JSON: its name, no code."""
    return Source(ref, "reference", reference_code(ref, role), via, holds)
