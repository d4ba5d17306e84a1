"""The sink contract of the event stream, and its dispatcher.

A sink is any object with one or more of the hook methods below (duck-typed, as the
logger contract of the Julia tutorial). The dispatcher binds each hook once, so a step
costs one call per sink that actually listens to it and nothing for the rest.

NNx's own callback hooks (``on_train_begin(ctx)``, ``on_epoch_begin(ctx)``,
``on_epoch_end(ctx)`` with ``ctx.should_stop``, ``on_train_end(ctx)``) and NNx's legacy
plain callables (``fn(idps)`` after each epoch) are accepted too: ``NNModel.train``
adapts them onto this stream (``handlers.nnx_callbacks``).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

from .events import HOOKS, Event, TrainingControl

__all__ = ["LIFECYCLE", "NNX_HOOKS", "Callback", "EventBus", "check_callback"]

LIFECYCLE = ("on_attach", "on_detach")
NNX_HOOKS = ("on_train_begin", "on_epoch_begin", "on_epoch_end", "on_train_end")


class Callback:
    """Optional base class for sinks; it documents the hooks and adds none.

    Event hooks (each takes the event of the same name from ``nnx_lab.engine.events``):
    ``on_run_started``, ``on_step_ended``, ``on_step_metrics``, ``on_epoch_ended``,
    ``on_checkpoint_written``, ``on_run_ending``, ``on_run_finished``. Lifecycle:
    ``on_attach(control)`` before the run starts (keep ``control`` to request a stop),
    ``on_detach()`` after it ended, whatever the outcome. A sink that carries resumable
    state implements ``state_dict()`` / ``load_state_dict(state)`` with JSON-able values
    and ``reset()``, which ``train()`` calls before a run starts.

    NNx's hooks are here too, as no-ops to override (NNx's ``Callback`` has them):
    ``on_train_begin(ctx)``, ``on_epoch_begin(ctx)``, ``on_epoch_end(ctx)`` and
    ``on_train_end(ctx)``; a subclass that overrides any of them is driven through
    NNx's protocol (``nnx_lab.engine.handlers.nnx_callbacks``).
    """

    distributed: Any = None  # NNx's class attribute; nnx-lab runs every callback on rank 0

    def on_train_begin(self, ctx: Any) -> None:
        """Called once before the first epoch."""

    def on_epoch_begin(self, ctx: Any) -> None:
        """Called before each epoch."""

    def on_epoch_end(self, ctx: Any) -> None:
        """Called after each epoch; set ``ctx.should_stop = True`` to end the run there."""

    def on_train_end(self, ctx: Any) -> None:
        """Called once the loop stopped, before the LAST checkpoint is written."""

    def checkpoint_transforms(self) -> tuple[Any, ...]:
        """NNx's checkpoint transforms: none in nnx-lab."""
        return ()


def _has(obj: Any, names: Iterable[str]) -> bool:
    return any(callable(getattr(obj, n, None)) for n in names)


def overrides(obj: Any, name: str) -> bool:
    """Whether ``obj`` has hook ``name`` of its own: a ``Callback`` subclass that leaves
    a hook as the base's no-op does not listen to it."""
    fn = getattr(obj, name, None)
    if not callable(fn):
        return False
    base = getattr(Callback, name, None)
    return base is None or getattr(type(obj), name, None) is not base


def check_callback(obj: Any) -> None:
    """Refuse an object that no hook of the stream (or of NNx) would ever call."""
    if _has(obj, (*HOOKS, *LIFECYCLE, *NNX_HOOKS)) or isinstance(obj, Callback):
        return
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        return  # NNx's legacy callable, fn(idps) after each epoch
    raise TypeError(
        f"callbacks: {obj!r} implements no known hook, so it would never be called; define "
        f"one of {', '.join(HOOKS)} (nnx_lab's events), or NNx's "
        f"{', '.join(NNX_HOOKS)}(ctx), or pass a function fn(idps) called after each epoch"
    )


class EventBus:
    """Delivers events to sinks in the order the sinks were given."""

    def __init__(self, sinks: Iterable[Any] = ()) -> None:
        self.sinks: list[Any] = []
        self._by_hook: dict[str, list[Any]] = {hook: [] for hook in HOOKS}
        for sink in sinks:
            self.add(sink)

    def add(self, sink: Any) -> None:
        if not _has(sink, (*HOOKS, *LIFECYCLE)):
            raise TypeError(
                f"{sink!r} is not a sink; it must define at least one of {', '.join(HOOKS)}"
            )
        self.sinks.append(sink)
        for hook in HOOKS:
            fn = getattr(sink, hook, None)
            if callable(fn):
                self._by_hook[hook].append(fn)

    def listens(self, hook: str) -> bool:
        return bool(self._by_hook.get(hook))

    def emit(self, event: Event) -> None:
        for fn in self._by_hook[event.hook]:
            fn(event)

    def attach(self, control: TrainingControl) -> None:
        control.bind(self.emit)  # a sink's control.show_figure(...) comes back here
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
