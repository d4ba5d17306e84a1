"""NNx's callback protocol on nnx-lab's event stream.

NNx calls ``on_train_begin(ctx)``, ``on_epoch_begin(ctx)``, ``on_epoch_end(ctx)`` and
``on_train_end(ctx)``; a callback stops training by setting ``ctx.should_stop = True``
(the run then ends at that epoch as "finished", as early stopping does). NNx's legacy
plain callable is called as ``fn(idps)`` after each epoch. Both are adapted here, so
callbacks written for NNx run unchanged; an object with no hook at all is refused by
``train()`` before anything exists.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from ..edp import EDP
from ..events import (
    HOOKS,
    EpochEnded,
    EpochStarted,
    RunEnding,
    RunStarted,
    TrainingControl,
)
from ..sinks import LIFECYCLE, NNX_HOOKS, check_callback, overrides
from .early_stopping import EarlyStopping

__all__ = ["TrainingContext", "adapt_callbacks"]


class TrainingContext:
    """What an NNx-style callback receives.

    ``model`` (the NNModel), ``run`` (the NNRun being written), ``epoch`` (the epoch
    about to start or just ended, 1-based), ``step`` (optimizer steps so far), ``idps``
    (the history so far), ``val_edp`` and ``train_summary`` (the last epoch's
    validation record and whole-epoch training summary), ``status`` (at the end) and
    ``should_stop`` (set it to end the run after this epoch), ``idp`` (the last
    iteration data point, NNx's ``ctx.idp``).
    """

    def __init__(self, model: Any, run: Any) -> None:
        self.model = model
        self.run = run
        self.epoch = 0
        self.step = 0
        self.val_edp: Any = None
        self.train_summary: dict[str, Any] | None = None
        self.status: str | None = None
        self.should_stop = False

    def show_figure(self, name: str, kind: str, data: Any, *, epoch: int | None = None) -> None:
        """Hand the monitor a figure for this epoch (or ``epoch``), kept in the run folder:
        ``kind`` "png", "plotly" or "scatter" (``TrainingControl.show_figure``)."""
        control = getattr(self, "control", None)
        if control is None:
            raise RuntimeError("show_figure needs a running loop: call it from a hook")
        control.show_figure(name, self.epoch if epoch is None else epoch, kind, data)

    @property
    def idps(self) -> list[Any]:
        return self.run.idps if self.run is not None else []

    @property
    def idp(self) -> Any:
        idps = self.idps
        return idps[-1] if idps else None


class _NNxHooks:
    """Calls an NNx-style callback's hooks from the stream's events."""

    def __init__(self, callback: Any, ctx: TrainingContext) -> None:
        self.callback, self.ctx = callback, ctx
        self._control: TrainingControl | None = None

    def _call(self, name: str) -> None:
        fn = getattr(self.callback, name, None)
        if callable(fn):
            fn(self.ctx)

    def on_attach(self, control: TrainingControl) -> None:
        self._control = control
        self.ctx.control = control  # ctx.show_figure goes through it
        attach = getattr(self.callback, "on_attach", None)
        if callable(attach):
            attach(control)

    def on_detach(self) -> None:
        self._control = None
        detach = getattr(self.callback, "on_detach", None)
        if callable(detach):
            detach()

    def on_run_started(self, event: RunStarted) -> None:
        self.ctx.step = event.start_step
        self._call("on_train_begin")

    def on_epoch_started(self, event: EpochStarted) -> None:
        self.ctx.epoch, self.ctx.step = event.epoch, event.step
        self._call("on_epoch_begin")

    def on_epoch_ended(self, event: EpochEnded) -> None:
        ctx = self.ctx
        ctx.epoch, ctx.step = event.epoch, event.step
        ctx.val_edp = EDP.from_json(event.val)
        ctx.train_summary = dict(event.train)
        self._call("on_epoch_end")
        if ctx.should_stop and self._control is not None:
            self._control.finish_early(
                f"{type(self.callback).__name__} set ctx.should_stop at epoch {event.epoch}"
            )

    def on_run_ending(self, event: RunEnding) -> None:
        # Before the LAST checkpoint is written (its writer listens after the callbacks),
        # so what on_train_end changes in the net reaches LAST, as in NNx.
        self.ctx.status = event.status
        self._call("on_train_end")


class _LegacyCallable:
    """NNx's legacy ``fn(idps)``, called after each epoch with the history so far."""

    def __init__(self, fn: Any, ctx: TrainingContext) -> None:
        self.fn, self.ctx = fn, ctx

    def on_epoch_ended(self, event: EpochEnded) -> None:
        self.fn(self.ctx.idps)


def _early_stopping_own(cb: Any, hook: str) -> bool:
    """EarlyStopping's own NNx hook (the run drives it through its events, not twice)."""
    own = getattr(EarlyStopping, hook, None)
    return own is not None and getattr(type(cb), hook, None) is own


def adapt_callbacks(callbacks: Sequence[Any], model: Any, run: Any) -> list[Any]:
    """The sinks to attach for ``callbacks``: nnx-lab sinks as they are, NNx-style
    callbacks and legacy callables adapted. Each object is checked first."""
    sinks: list[Any] = []
    for cb in callbacks:
        check_callback(cb)
        own = any(callable(getattr(cb, h, None)) for h in HOOKS)
        nnx = any(overrides(cb, h) and not _early_stopping_own(cb, h) for h in NNX_HOOKS)
        if nnx:
            sinks.append(_NNxHooks(cb, TrainingContext(model, run)))
            if own:
                sinks.append(_OwnHooks(cb))
        elif own or any(callable(getattr(cb, h, None)) for h in LIFECYCLE):
            sinks.append(cb)
        elif inspect.isfunction(cb) or inspect.ismethod(cb):
            sinks.append(_LegacyCallable(cb, TrainingContext(model, run)))
        # else: a Callback subclass that overrides nothing, which NNx accepts too
    return sinks


class _OwnHooks:
    """The nnx-lab event hooks of an object whose lifecycle the NNx adapter drives."""

    def __init__(self, callback: Any) -> None:
        for hook in HOOKS:
            fn = getattr(callback, hook, None)
            if callable(fn):
                setattr(self, hook, fn)
