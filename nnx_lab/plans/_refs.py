"""Code as data: ``module:qualname`` references, what they may name, and code records.

A plan travels to another process (the distributed launcher ships plans to workers) as
JSON, so the functions and classes it holds travel as references to a top-level
function or class of an importable module. ``reference_of`` writes one, and refuses
what another process could not import (a lambda, a function nested in another, one
defined in ``__main__``) or what a reference may not name (below), each with the fix.

A plan read from JSON holds its references as ``Reference``s: text, until the user asks
for the code (``plan.resolve()``, ``fit()``). ``refusal`` is the one rule of what a
reference may name, shared by writing and resolving, so ``to_json`` never writes a
reference that ``resolve`` refuses:

- a top-level public name (``make_loader``, not ``_helper`` nor ``Outer.method``): that
  is what ``to_json`` writes;
- not ``__main__`` (whatever runs now, not the module the plan was written from);
- not the standard library (``builtins:exec``, ``os:abort``, ``subprocess:Popen``,
  ``shutil:rmtree``, ``importlib:import_module``, ...): no plan's factory, loss, metric
  or callback lives there, and everything dangerous does;
- not a private top-level module (``_posixsubprocess``, ``_thread``).

Where the module's file sits is checked by ``_locate`` (a runs root is refused).

A *code record* (``nnx_lab.engine.fingerprint.code_record``) is what a drift report keeps
of a function or class: its module, its qualified name and the SHA-256 of its source,
taken when a plan or a model took hold of it.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
from dataclasses import dataclass
from typing import Any

from ..engine.drift import loaded_object
from ..engine.fingerprint import code_record, code_target
from ..errors import ConfigError

__all__ = [
    "REFUSED_MODULES",
    "Reference",
    "code_name",
    "code_record",
    "held_target",
    "reference_code",
    "reference_of",
    "refusal",
]

# Named so that a reader of the docs sees them; the whole standard library is refused.
REFUSED_MODULES = frozenset(
    {"__main__", "builtins", "os", "subprocess", "sys", "shutil", "importlib", "posix", "nt"}
)
_STDLIB = frozenset(sys.stdlib_module_names) | REFUSED_MODULES
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Reference:
    """A ``"module:qualname"`` read from a plan's JSON and not resolved: text, never
    imported until ``plan.resolve()`` (or ``fit()``) is asked for."""

    text: str

    @property
    def module(self) -> str:
        return self.text.partition(":")[0]

    @property
    def qualname(self) -> str:
        return self.text.partition(":")[2]

    @property
    def name(self) -> str:
        return f"{self.module}.{self.qualname}"

    def to_json(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Reference({self.text!r})"


def refusal(module: str, qualname: str) -> str | None:
    """Why a reference may not name ``module:qualname`` (the fix), or None."""
    parts = module.split(".")
    if not all(_IDENT.fullmatch(p) for p in parts) or not _IDENT.fullmatch(qualname or "-"):
        if "." in qualname and all(_IDENT.fullmatch(p) for p in qualname.split(".")):
            return (
                f"{qualname} is not at the top level of {module}: a reference names a "
                "top-level function or class; move it to the top level of its module"
            )
        return "a reference is 'module:qualname', e.g. 'my_data:make_train_loader'"
    if module == "__main__":
        return (
            "__main__ is whatever runs now (a notebook, a script), not the module the plan "
            "was written from; move the function into a module (e.g. my_experiment.py) "
            "and name it there"
        )
    if parts[0] in _STDLIB:
        return (
            f"{parts[0]!r} is part of Python's standard library, which a plan never names "
            "(no factory, loss, metric or callback of a plan lives there); name a "
            "function of your own module"
        )
    if parts[0].startswith("_"):
        return f"{parts[0]!r} is a private module; name a function of a public module"
    if qualname.startswith("_"):
        return (
            f"{qualname} is a private name; a plan names public functions and classes "
            "(rename it without the leading underscore)"
        )
    return None


def reference_of(obj: Any, field: str) -> str:
    """``"module:qualname"`` for an importable top-level function or class, or a
    ConfigError naming ``field`` and saying how to make it importable."""
    if isinstance(obj, Reference):
        return obj.text
    if isinstance(obj, functools.partial):
        raise ConfigError(
            field,
            obj,
            "a functools.partial has no importable name; write a function at the top "
            "level of a module that makes the call, and pass that function",
        )
    if not (inspect.isfunction(obj) or inspect.isclass(obj)):
        raise ConfigError(
            field,
            obj,
            f"an instance of {type(obj).__qualname__} cannot travel in a plan's JSON; pass "
            "a factory instead: an importable function (or class) that returns a fresh one",
        )
    module, qualname = obj.__module__, obj.__qualname__
    if "<lambda>" in qualname:
        raise ConfigError(
            field,
            obj,
            "a lambda has no importable name; define it with def at the top level of a "
            "module (a .py file next to your notebook), import it, and pass that function",
        )
    if "<locals>" in qualname:
        raise ConfigError(
            field,
            obj,
            f"{qualname} is defined inside another function, so it cannot be imported; "
            "move it to the top level of its module",
        )
    if module in (None, "__main__"):
        raise ConfigError(
            field,
            obj,
            f"{qualname} is defined in __main__ (a notebook or a script), which another "
            f"process cannot import; move it into a module (e.g. my_experiment.py), "
            f"import it from there and pass the imported {qualname}",
        )
    refused = refusal(module, qualname)
    if refused is not None:
        raise ConfigError(field, obj, refused)
    if module not in sys.modules:
        raise ConfigError(
            field,
            obj,
            f"its module {module!r} is not loaded in this process, so its name cannot be "
            "checked; pass a function imported from the module that defines it",
        )
    if loaded_object(module, qualname) is not obj:
        raise ConfigError(
            field,
            obj,
            f"{module}.{qualname} now names another object (it was redefined or reloaded "
            "after this one was taken); pass the current one",
        )
    return f"{module}:{qualname}"


def reference_code(ref: Reference, role: str) -> dict[str, Any]:
    """The code record of a reference not resolved yet: its names, and no digest (no
    code was taken)."""
    return {
        "role": role,
        "module": ref.module,
        "qualname": ref.qualname,
        "kind": "reference",
        "digest": None,
    }


def code_name(record: dict[str, Any]) -> str:
    return f"{record.get('module')}.{record.get('qualname')}"


def held_target(obj: Any) -> Any:
    """The function or class whose code ``obj`` runs (see ``code_target``); None for a
    reference, which holds no code."""
    if isinstance(obj, Reference):
        return None
    return code_target(obj)[0]
