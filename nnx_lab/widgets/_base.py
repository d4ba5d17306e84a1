"""The base of nnx-lab's widgets: bundle loading, custom messages, error display."""

from __future__ import annotations

import contextvars
import functools
import logging
from collections.abc import Callable
from typing import Any, ClassVar

import anywidget
import traitlets as t

from ._bundle import read_asset
from ._jobs import format_exception

__all__ = ["NNxWidget"]

log = logging.getLogger("nnx_lab.widgets")


def never_breaks(work: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Decorate a widget's event hook so a display problem never fails the ``work`` it
    watches (training, a sweep): the error is logged and shown under the widget."""

    def decorate(hook: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(hook)
        def guarded(self: NNxWidget, *args: Any) -> None:
            try:
                hook(self, *args)
            except Exception as exc:
                log.exception("%s.%s failed; %s goes on", type(self).__name__, hook.__name__, work)
                try:
                    self.show_error(exc)
                except Exception:  # the comm itself is broken: the log has it
                    log.debug("could not show the error under the widget", exc_info=True)

        return guarded

    return decorate


class NNxWidget(anywidget.AnyWidget):
    """An ``AnyWidget`` whose front end is ``nnx_lab/static/<_bundle_name>.js``.

    Subclasses name their bundle and handle custom messages from the front end by
    defining ``_on_<kind>(content, buffers)`` methods. An exception in a handler (or
    in work the widget started) is shown under the widget through ``error``.

    Every message the widget sends belongs to the cell that created it, whichever
    thread sends it (see ``_send``).

    The kernel owns every synced trait except those a subclass names in
    ``_page_traits`` (its inputs: a slider's value, a path box): a change of any other
    trait sent by a page is refused and the kernel's value sent back (``set_state``).
    ``kernel_owned()`` lists them.
    """

    _bundle_name: str = "monitor"

    # Filled at construction from the built bundle (see _bundle.read_asset). They are
    # declared as traits so that anywidget does not try to read a missing file when
    # the class is defined.
    _esm = t.Unicode("").tag(sync=True)
    _css = t.Unicode("").tag(sync=True)

    error = t.Unicode("", help="Error text with traceback, shown under the widget.").tag(sync=True)

    # The synced traits a page may set; the kernel owns the others. Deny by default: a
    # trait added later is the kernel's until a widget names it here. ``_view_count`` is
    # ipywidgets' own view counter, which its front end writes once the kernel turns
    # counting on (``widget._view_count = 0``).
    _page_traits: ClassVar[frozenset[str]] = frozenset({"_view_count"})

    @classmethod
    def kernel_owned(cls) -> frozenset[str]:
        """The synced traits only the kernel sets: a page's change to one is refused."""
        return frozenset(cls.class_trait_names(sync=True)) - cls._page_traits

    def __init__(self, **kwargs: Any) -> None:
        esm = read_asset(f"{self._bundle_name}.js")
        try:
            css = read_asset(f"{self._bundle_name}.css")
        except FileNotFoundError:
            css = ""
        # The context of the cell that creates the widget: ipykernel reads a message's
        # parent from context variables (see _send).
        self._home_context = contextvars.copy_context()
        super().__init__(_esm=esm, _css=css, **kwargs)
        self.on_msg(self._dispatch_frontend_msg)

    def _send(self, msg: dict[str, Any], buffers: list[Any] | None = None) -> None:
        """Send one comm message as part of the cell that created the widget.

        ipykernel (7.x) stamps each comm message with the parent request of the
        sending thread's context, and routes the front end's next messages on that
        comm to the subshell of that parent. A thread the kernel did not start (a
        training thread, a log follower, a timer) has no parent of its own and
        borrows the last request any shell handled: often a comm message that
        JupyterLab sent on a subshell it deletes right after a page load. The
        widget's Stop clicks and ``hello``s were then routed to that deleted
        subshell and dropped ("Unknown subshell_id"). Sending from the creating
        cell's context keeps the route on that cell's shell, which lives as long as
        the kernel.
        """
        self._home_context.copy().run(super()._send, msg, buffers)

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

    def set_state(self, sync_data: dict[str, Any]) -> None:
        """Apply trait values sent by a view; refuse what the page may not set, and a
        bad value visibly.

        A trait the kernel owns (``kernel_owned()``: a run's status, a busy flag, a
        counter) is never taken from a page: it is dropped from the message before
        anything applies (no echo to the other views either) and the kernel's value is
        sent back, so a buggy or hostile page cannot make the kernel believe a state
        it is not in. The page's own traits are applied as usual.

        A value that fails validation changes nothing in the kernel (traitlets rolls the
        whole message back); the reason is shown under the widget and the kernel's
        values are sent back, so the view shows the state the kernel kept instead of
        the refused input.
        """
        owned = [key for key in sync_data if key in self.keys and key not in self._page_traits]
        if owned:
            log.warning(
                "%s: refused a page's change to %s: the kernel owns %s",
                type(self).__name__,
                ", ".join(owned),
                "it" if len(owned) == 1 else "them",
            )
            sync_data = {k: v for k, v in sync_data.items() if k not in owned}
        try:
            if sync_data:
                super().set_state(sync_data)
        except Exception as exc:  # a view's input: shown under the widget, never raised
            log.info("%s: refused a value from the view: %s", type(self).__name__, exc)
            self.show_error(exc if not isinstance(exc, t.TraitError) else str(exc))
            self.send_state([key for key in sync_data if key in self.keys])
        finally:
            if owned:  # the page shows the kernel's value again
                self.send_state(owned)

    def show_error(self, error: BaseException | str) -> None:
        """Show an error (an exception with its traceback, or a text) under the widget."""
        self.error = error if isinstance(error, str) else format_exception(error)

    # The text a place with no front end shows (a terminal, a saved notebook on GitHub):
    # the widget's one-line summary, then the first line of any error under it.
    def summary(self) -> str:
        return ""

    def _repr_notes(self) -> list[str]:
        return [self.error.splitlines()[0]] if self.error else []

    def __repr__(self) -> str:
        return "\n".join([f"{type(self).__name__}({self.summary()})", *self._repr_notes()])

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))
