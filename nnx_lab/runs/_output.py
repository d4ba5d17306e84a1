"""The one switch for the texts a fit prints: the binding report and the drift banner.

They are printed (not logged) because they are written for the person at the notebook,
like the tutorial's "values fixed at construction" banner. A scripted driver silences
them with ``set_config_report(False)`` or ``NNX_CONFIG_REPORT=0``; the binding report is
still written into the run directory.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
from collections.abc import Iterator

__all__ = ["config_report_enabled", "emit", "reporting", "set_config_report"]

_lock = threading.Lock()
_enabled: bool | None = None  # None: follow NNX_CONFIG_REPORT
# One call's own setting (``fit(report=False)``), for this thread or task only.
_scoped: contextvars.ContextVar[bool | None] = contextvars.ContextVar("nnx_report", default=None)


def set_config_report(enabled: bool | None) -> bool:
    """Print the binding report and the drift banner (True), silence them (False), or
    follow ``NNX_CONFIG_REPORT`` again (None). Returns whether they were printed before."""
    global _enabled
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(f"set_config_report({enabled!r}): pass True, False or None")
    with _lock:
        before = config_report_enabled()
        _enabled = enabled
    return before


def config_report_enabled() -> bool:
    scoped = _scoped.get()
    if scoped is not None:
        return scoped
    if _enabled is not None:
        return _enabled
    value = os.environ.get("NNX_CONFIG_REPORT", "").strip().lower()
    return value not in ("0", "false", "no", "off")


def emit(text: str, enabled: bool | None = None) -> None:
    """Print ``text`` when ``enabled`` (None: as ``set_config_report`` says)."""
    if config_report_enabled() if enabled is None else enabled:
        print(text, file=sys.stdout, flush=True)


@contextlib.contextmanager
def reporting(enabled: bool | None) -> Iterator[None]:
    """Within the block (this thread or task only), print as ``enabled`` says; None
    leaves the global switch in charge."""
    token = _scoped.set(enabled)
    try:
        yield
    finally:
        _scoped.reset(token)
