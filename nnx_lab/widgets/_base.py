"""The base of nnx-lab's widgets: bundle loading, custom messages, error display."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anywidget
import traitlets as t

from ._bundle import read_asset
from ._jobs import format_exception

__all__ = ["NNxWidget"]

log = logging.getLogger("nnx_lab.widgets")


class NNxWidget(anywidget.AnyWidget):
    """An ``AnyWidget`` whose front end is ``nnx_lab/static/<_bundle_name>.js``.

    Subclasses name their bundle and handle custom messages from the front end by
    defining ``_on_<kind>(content, buffers)`` methods. An exception in a handler (or
    in work the widget started) is shown under the widget through ``error``.
    """

    _bundle_name: str = "monitor"

    # Filled at construction from the built bundle (see _bundle.read_asset). They are
    # declared as traits so that anywidget does not try to read a missing file when
    # the class is defined.
    _esm = t.Unicode("").tag(sync=True)
    _css = t.Unicode("").tag(sync=True)

    error = t.Unicode("", help="Error text with traceback, shown under the widget.").tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        esm = read_asset(f"{self._bundle_name}.js")
        try:
            css = read_asset(f"{self._bundle_name}.css")
        except FileNotFoundError:
            css = ""
        super().__init__(_esm=esm, _css=css, **kwargs)
        self.on_msg(self._dispatch_frontend_msg)

    def _dispatch_frontend_msg(self, _widget: Any, content: Any, buffers: list[Any]) -> None:
        kind = content.get("kind") if isinstance(content, dict) else None
        handler: Callable[[dict[str, Any], list[Any]], None] | None = getattr(
            self, f"_on_{kind}", None
        )
        if kind is None or handler is None:
            log.warning("%s: ignoring a front-end message of unknown kind %r", self, kind)
            return
        try:
            handler(content, buffers)
        except Exception as exc:  # shown under the widget, never lost
            log.exception("%s: handling the front-end message %r failed", self, kind)
            self.show_error(exc)

    def show_error(self, error: BaseException | str) -> None:
        """Show an error (an exception with its traceback, or a text) under the widget."""
        self.error = error if isinstance(error, str) else format_exception(error)
