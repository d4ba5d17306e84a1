"""Fingerprints of code: what a function or class is, as text a run id can hold.

A function or class is named by its qualified name and the SHA-256 of its source (or,
where there is no source, of its bytecode and constants). Code that cannot be read
either way (a builtin, a C extension) gives ``None``: the caller decides whether to warn.

A function object's digest is remembered from the first time it is taken: its source
file can be edited afterwards (the object keeps running the code it was compiled from),
and a later ``inspect.getsource`` would read the edited lines instead. ``fresh=True``
reads the file as it is now (what a drift report uses to say "edited, not reloaded").
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import threading
import weakref
from typing import Any

__all__ = ["callable_identity", "code_digest", "code_record", "code_target"]


# target -> (its __code__ when taken, digest); weak: a redefined function's old object
# can go away with its entry.
_TAKEN: weakref.WeakKeyDictionary[Any, tuple[Any, str | None]] = weakref.WeakKeyDictionary()
_TAKEN_LOCK = threading.Lock()


def code_digest(obj: Any, *, fresh: bool = False) -> str | None:
    """SHA-256 of the source of ``obj`` (a function, a class, or an instance's class), as
    it was the first time it was taken (``fresh=True``: as its file reads now)."""
    if isinstance(obj, functools.partial):
        inner = code_digest(obj.func, fresh=fresh)
        if inner is None:
            return None
        text = f"{inner}{obj.args!r}{sorted(obj.keywords.items())!r}".encode()
        return hashlib.sha256(text).hexdigest()
    target = (
        obj
        if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj)
        else type(obj)
    )
    if inspect.ismethod(target):
        target = target.__func__
    code = getattr(target, "__code__", None)
    if not fresh:
        with _TAKEN_LOCK:
            try:
                taken = _TAKEN.get(target)
            except TypeError:  # not weakly referenceable: nothing is remembered
                taken = None
        if taken is not None and taken[0] is code:
            return taken[1]
    digest = _source_digest(target, code)
    with _TAKEN_LOCK:
        try:
            if fresh:
                _TAKEN.setdefault(target, (code, digest))
            else:
                _TAKEN[target] = (code, digest)
        except TypeError:
            pass
    return digest


def _source_digest(target: Any, code: Any) -> str | None:
    try:
        text = inspect.getsource(target).encode()
    except (OSError, TypeError):
        if code is None:
            return None
        text = code.co_code + repr(code.co_consts).encode()
    return hashlib.sha256(text).hexdigest()


def _qualname(obj: Any) -> str:
    target = obj if inspect.isfunction(obj) or inspect.isclass(obj) else type(obj)
    if isinstance(obj, functools.partial):
        target = obj.func
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}"


def callable_identity(fn: Any) -> dict[str, Any]:
    """``{"name": module.qualname, "code": digest or None}``."""
    return {"name": _qualname(fn), "code": code_digest(fn)}


def code_target(obj: Any) -> tuple[Any, str]:
    """(the function or class whose code counts for ``obj``, what ``obj`` is): a
    partial counts by its function, a method by its function, an instance by its class."""
    if isinstance(obj, functools.partial):
        return obj.func, "partial"
    if inspect.ismethod(obj):
        return obj.__func__, "method"
    if inspect.isfunction(obj) or inspect.isclass(obj):
        return obj, "class" if inspect.isclass(obj) else "function"
    return type(obj), "instance"


def code_record(obj: Any, role: str) -> dict[str, Any]:
    """What a drift report keeps of ``obj``: ``role``, ``module``, ``qualname``, ``kind``
    and ``digest`` (the SHA-256 of its source, or of its bytecode; None when neither can
    be read), taken when a plan or a model takes hold of it."""
    target, kind = code_target(obj)
    return {
        "role": role,
        "module": getattr(target, "__module__", None),
        "qualname": getattr(target, "__qualname__", None),
        "kind": kind,
        "digest": code_digest(target),
    }
