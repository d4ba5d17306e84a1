"""Long work started from a widget runs here, in a background thread.

ipykernel does not deliver a widget's messages (a Stop click) while a cell runs in
the main thread; work started by a widget therefore runs in a thread, and the kernel
stays free to serve the Stop button.
"""

from __future__ import annotations

import contextvars
import threading
import traceback
from collections.abc import Callable
from typing import Any

__all__ = ["BackgroundJob", "format_exception"]


def format_exception(exc: BaseException) -> str:
    """``TypeName: message`` followed by the traceback, for display under a widget."""
    head = f"{type(exc).__name__}: {exc}"
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return f"{head}\n\n{tb}".rstrip()


class BackgroundJob:
    """Runs ``target()`` once in a daemon thread and keeps its result or exception.

    The thread runs in a copy of the context of the code that created the job (the
    cell that called ``fit``), so what it prints or displays belongs to that cell.
    """

    def __init__(
        self,
        target: Callable[[], Any],
        *,
        name: str,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._target = target
        self._on_error = on_error
        self.result: Any = None
        self.exception: BaseException | None = None
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._run,), name=name, daemon=True
        )

    def _run(self) -> None:
        try:
            self.result = self._target()
        except BaseException as exc:  # kept for wait(); a thread has nobody to raise to
            self.exception = exc
            if self._on_error is not None:
                self._on_error(exc)

    def start(self) -> None:
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the job; ``True`` when it has ended."""
        self._thread.join(timeout)
        return not self._thread.is_alive()
