"""Code as data: ``module:qualname`` references, and code records for drift reports.

A plan travels to another process (the distributed launcher ships plans to workers) as
JSON, so the functions and classes it holds travel as importable references. A lambda,
a function nested in another, or one defined in ``__main__`` (a notebook, a script) has
no name another process can import; those are refused with the fix.

A *code record* (``nnx_lab.engine.fingerprint.code_record``) is what a drift report keeps
of a function or class: its module, its qualified name and the SHA-256 of its source,
taken when a plan or a model took hold of it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from typing import Any

from ..engine.fingerprint import code_record, code_target
from ..errors import ConfigError

__all__ = [
    "code_name",
    "code_record",
    "held_target",
    "lookup",
    "reference_of",
    "resolve_reference",
]


def reference_of(obj: Any, field: str) -> str:
    """``"module:qualname"`` for an importable top-level function or class, or a
    ConfigError naming ``field`` and saying how to make it importable."""
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
    if module in (None, "__main__", "builtins"):
        raise ConfigError(
            field,
            obj,
            f"{qualname} is defined in __main__ (a notebook or a script), which another "
            f"process cannot import; move it into a module (e.g. my_experiment.py), "
            f"import it from there and pass the imported {qualname}",
        )
    ref = f"{module}:{qualname}"
    found = lookup(module, qualname, allow_import=True)
    if found is not obj:
        raise ConfigError(
            field,
            obj,
            f"{module}.{qualname} now names another object (it was redefined or reloaded "
            "after this one was taken); pass the current one",
        )
    return ref


def lookup(module: str, qualname: str, *, allow_import: bool) -> Any:
    """The object bound at ``module.qualname`` now, or None. Imports ``module`` only when
    ``allow_import`` (never ``__main__``, which is whatever runs now)."""
    mod = sys.modules.get(module)
    if mod is None and allow_import and module != "__main__":
        try:
            mod = importlib.import_module(module)
        except Exception:
            return None
    if mod is None:
        return None
    obj: Any = mod
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def resolve_reference(ref: Any, field: str) -> Any:
    """The object a ``"module:qualname"`` reference names (importing its module)."""
    if not isinstance(ref, str) or ref.count(":") != 1 or not all(ref.split(":")):
        raise ConfigError(
            field, ref, "a reference is 'module:qualname', e.g. 'my_data:make_train_loader'"
        )
    module, qualname = ref.split(":")
    try:
        mod = importlib.import_module(module)
    except Exception as exc:
        raise ConfigError(
            field,
            ref,
            f"module {module!r} cannot be imported ({type(exc).__name__}: {exc}); make it "
            "importable in this process (install it, or put its folder on sys.path)",
        ) from None
    obj: Any = mod
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise ConfigError(field, ref, f"module {module!r} has no {qualname!r}; check the name")
        obj = getattr(obj, part)
    return obj


def code_name(record: dict[str, Any]) -> str:
    return f"{record.get('module')}.{record.get('qualname')}"


def held_target(obj: Any) -> Any:
    """The function or class whose code ``obj`` runs (see ``code_target``)."""
    return code_target(obj)[0]
