"""The sink contract of the event stream, and its dispatcher.

A sink is any object with one or more of the hook methods below (duck-typed, as
the logger contract of the Julia tutorial). Subclassing ``Callback`` is optional; it
only supplies no-op hooks. The dispatcher binds each hook once, at attach time, so
a step costs one call per sink that actually listens to it and nothing for the rest.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .events import HOOKS, Event, TrainingControl

__all__ = ["Callback", "EventBus"]

_LIFECYCLE = ("on_attach", "on_detach")


class Callback:
    """Optional base class for sinks; every hook is a no-op.

    Hooks (each takes the event of the same name from ``nnx_lab.engine.events``):
    ``on_run_started``, ``on_step_ended``, ``on_step_metrics``, ``on_epoch_ended``,
    ``on_checkpoint_written``, ``on_run_finished``. Lifecycle: ``on_attach(control)``
    before the run starts (keep ``control`` to request a stop), ``on_detach()`` after it
    ended, whatever the outcome. A sink that carries resumable state implements
    ``state_dict()`` / ``load_state_dict(state)`` with JSON-able values and ``reset()``.
    """

    def on_attach(self, control: TrainingControl) -> None:
        pass

    def on_detach(self) -> None:
        pass


class EventBus:
    """Delivers events to sinks in the order the sinks were given."""

    def __init__(self, sinks: Iterable[Any]) -> None:
        self.sinks = list(sinks)
        for sink in self.sinks:
            if not any(callable(getattr(sink, h, None)) for h in (*HOOKS, *_LIFECYCLE)):
                raise TypeError(
                    f"callbacks: {sink!r} is not a sink; it must define at least one of "
                    f"{', '.join(HOOKS)} (or subclass nnx_lab.Callback)"
                )
        self._by_hook: dict[str, list[Any]] = {
            hook: [getattr(s, hook) for s in self.sinks if callable(getattr(s, hook, None))]
            for hook in HOOKS
        }

    def listens(self, hook: str) -> bool:
        return bool(self._by_hook.get(hook))

    def emit(self, event: Event) -> None:
        for fn in self._by_hook[event.hook]:
            fn(event)

    def attach(self, control: TrainingControl) -> None:
        for sink in self.sinks:
            fn = getattr(sink, "on_attach", None)
            if callable(fn):
                fn(control)

    def detach(self) -> None:
        """Call every sink's ``on_detach``; the first error is raised after all ran."""
        first: BaseException | None = None
        for sink in self.sinks:
            fn = getattr(sink, "on_detach", None)
            if callable(fn):
                try:
                    fn()
                except Exception as exc:  # keep detaching the others
                    first = first or exc
        if first is not None:
            raise first
