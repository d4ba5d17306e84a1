"""EarlyStopping: end the run when the monitored value stops improving."""

from __future__ import annotations

import math
import warnings
from typing import Any

from ..events import EpochEnded, TrainingControl
from ..monitor_names import monitor_label
from ..selection import MonitorSpec, MonitorState

__all__ = ["MONITORS", "EarlyStopping"]

# The values EarlyStopping(monitor=...) takes by name (the §2.11 record fields).
MONITORS = ("val_edp.error", "val_edp.loss", "train_edp.error", "train_edp.loss")


class EarlyStopping:
    """Stop when the monitored value has not improved for ``patience`` epochs.

    ``monitor=None`` (default) reads validation data only and chooses once per run, at
    the first validated epoch with a finite value: ``val_edp.error``, or
    ``val_edp.loss`` when the error is not finite there (the §2.11 first-finite order,
    so a NaN error next to a finite, falling loss is followed through the loss). The
    choice then stays fixed (``selected``). A NaN/inf value never becomes the best and
    counts as an epoch without improvement. With no value to read (no validation
    split) it warns once and never stops. Its state resumes with the run; the run ends
    as "finished".
    """

    def __init__(
        self,
        patience: int | str | MonitorSpec | None = 10,
        monitor: str | MonitorSpec | int | None = None,
        min_delta: float = 0.0,
        *,
        mode: str = "min",
        name: str | None = None,
    ) -> None:
        """``EarlyStopping(patience, monitor=None, min_delta=0.0, *, mode="min",
        name=None)``; NNx's positional form, monitor first (``EarlyStopping(
        "val_edp.loss", 3)``), is read as well: a first argument that is a monitor name,
        a ``MonitorSpec`` or None is the monitor.

        ``monitor`` may be a ``MonitorSpec`` (§2.6): the one the run selects BEST and
        steps its plateau scheduler on (``NNTrainParams(monitor=...)``), so all three
        follow one decision: an epoch counts when the monitor did not improve by more
        than its ``min_delta``, an unavailable value neither counts nor resets.
        ``mode="max"`` counts an epoch as an improvement when the value rose; it needs
        an explicit ``monitor`` (the default choice reads errors and losses)."""
        if patience is None or isinstance(patience, str | MonitorSpec):
            # NNx's positional order: the monitor first, then the patience
            patience, monitor = (10 if monitor is None else monitor), patience
        if mode not in ("min", "max"):
            raise ValueError(f"EarlyStopping.mode={mode!r} is invalid: pass 'min' or 'max'")
        if mode == "max" and monitor is None:
            raise ValueError(
                "EarlyStopping: mode='max' requires an explicit monitor; the default "
                "choice (val_edp.error, else val_edp.loss) only ever falls"
            )
        if isinstance(monitor, MonitorSpec) and mode != "min":
            raise ValueError(
                f"EarlyStopping.mode={mode!r} with monitor={monitor!r}: the spec carries its "
                "own mode; set it there, MonitorSpec(..., mode=...)"
            )
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError(f"EarlyStopping.name={name!r} is invalid: pass a non-empty string")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ValueError(
                f"EarlyStopping.patience={patience!r} is invalid: pass an integer >= 1 "
                "(NNx also takes 0; see docs/nnx_differences.md)"
            )
        spec = monitor if isinstance(monitor, MonitorSpec) else None
        if spec is None and monitor is not None and monitor not in MONITORS:
            raise ValueError(
                f"EarlyStopping.monitor={monitor!r} is invalid: use one of "
                f"{', '.join(MONITORS)}, a MonitorSpec, or None for validation error/loss"
            )
        if isinstance(min_delta, bool) or not isinstance(min_delta, int | float) or min_delta < 0:
            raise ValueError(
                f"EarlyStopping.min_delta={min_delta!r} is invalid: pass a number >= 0"
            )
        if spec is not None and min_delta:
            raise ValueError(
                f"EarlyStopping.min_delta={min_delta!r} with monitor={spec!r}: the spec "
                "carries its own min_delta; set it there, MonitorSpec(..., min_delta=...)"
            )
        self.spec = spec
        self.mode, self.name = mode, name
        self.patience, self.min_delta = patience, float(min_delta)
        self.monitor = spec.source if spec is not None else monitor
        self._control: TrainingControl | None = None
        self.reset()

    def reset(self) -> None:
        self.best: float | None = None
        self.counter = 0
        self.stopped_epoch: int | None = None
        self.selected: str | None = self.monitor
        self._warned = False
        self._decision = None if self.spec is None else MonitorState(self.spec)
        self._seen_epoch: int | None = None  # each epoch is counted once, by either hook

    @property
    def selected_monitor(self) -> str | None:
        """NNx's name for the monitor followed (None until the default chose one)."""
        return self.selected

    def on_attach(self, control: TrainingControl) -> None:
        self._control = control

    def on_detach(self) -> None:
        self._control = None

    def _value(self, event: EpochEnded) -> float | None:
        """The value to compare this epoch; None when there is nothing to read."""
        if self.selected is None:  # the default: choose among the validation values
            if event.val is None:
                return None
            for name in ("error", "loss"):
                value = event.val.get(name)
                if value is not None and math.isfinite(value):
                    self.selected = f"val_edp.{name}"
                    return float(value)
            present = [event.val.get(n) for n in ("error", "loss")]
            present = [v for v in present if v is not None]
            return float(present[0]) if present else None  # non-finite: counts, choice open
        source, name = self.selected.split(".")
        record = event.val if source == "val_edp" else event.train_last
        value = None if record is None else record.get(name)
        return None if value is None else float(value)

    def _follow(self, event: EpochEnded) -> None:
        """Count the epochs the monitor decided were no improvement."""
        spec, decision = self.spec, self._decision
        assert spec is not None
        assert decision is not None
        record = self._decision.observe(
            spec.read(event.val if spec.split == "val" else event.train)
        )
        self.best = self._decision.best
        if record.status == "unavailable":
            if not self._warned:
                warnings.warn(
                    f"EarlyStopping(monitor={spec.source!r}) found no finite value at epoch "
                    f"{event.epoch}; such epochs neither count nor reset its patience",
                    RuntimeWarning,
                    stacklevel=3,
                )
                self._warned = True
            return
        if record.improved:
            self.counter = 0
            return
        self._count(event)

    def _count(self, event: EpochEnded) -> None:
        self.counter += 1
        if self.counter >= self.patience:
            self.stopped_epoch = event.epoch
            if self._control is not None:
                self._control.finish_early(
                    f"early stopping: no improvement of {monitor_label(self.selected)} "
                    f"for {self.patience} epochs"
                )

    def on_epoch_end(self, ctx: Any) -> None:
        """NNx's hook, for code that drives EarlyStopping itself: the epoch as ``ctx``
        holds it (``epoch``, ``val_edp``, ``train_summary``, ``idp``), counted as the
        run's own event counts it; ``ctx.should_stop`` is set when patience ran out and
        no run is attached (an attached run is stopped by the run's own stop). Within
        a run an epoch is counted once, whichever hook sees it first."""
        stopped = self.stopped_epoch
        self.on_epoch_ended(_EpochView(ctx))  # type: ignore[arg-type]
        if self._control is None and self.stopped_epoch not in (None, stopped):
            ctx.should_stop = True

    def on_epoch_ended(self, event: EpochEnded) -> None:
        if self._control is not None and event.epoch == self._seen_epoch:
            return  # a subclass's NNx hook already counted this epoch of the run
        self._seen_epoch = event.epoch
        if self.spec is not None:
            self._follow(event)
            return
        value = self._value(event)
        if value is None:
            if not self._warned:
                warnings.warn(
                    f"EarlyStopping(monitor={self.monitor!r}): epoch {event.epoch} has no "
                    "validation data point, so there is nothing to monitor and this epoch "
                    "is not counted toward patience (no value to read: it will never "
                    "stop). Configure a val_loader, or pass monitor='train_edp.loss' / "
                    "'train_edp.error'",
                    RuntimeWarning,
                    stacklevel=2,
                )
                self._warned = True
            return
        if math.isfinite(value) and (self.best is None or self._better(value)):
            self.best, self.counter = value, 0
            return
        self._count(event)

    def _better(self, value: float) -> bool:
        assert self.best is not None
        if self.mode == "max":
            return value > self.best + self.min_delta
        return value < self.best - self.min_delta

    def state_dict(self) -> dict[str, Any]:
        state = {
            "best": self.best,
            "counter": self.counter,
            "stopped_epoch": self.stopped_epoch,
            "selected": self.selected,
        }
        if self._decision is not None:
            state["monitor"] = self._decision.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.counter = state["best"], int(state["counter"])
        self.stopped_epoch = state.get("stopped_epoch")
        self.selected = state.get("selected", self.monitor)
        if self._decision is not None and state.get("monitor") is not None:
            self._decision.load_state_dict(state["monitor"])


class _EpochView:
    """An NNx callback context read as the fields of the epoch's event."""

    def __init__(self, ctx: Any) -> None:
        self.epoch = int(getattr(ctx, "epoch", 0))
        val = getattr(ctx, "val_edp", None)
        self.val = None if val is None else (val if isinstance(val, dict) else val.to_json())
        self.train = dict(getattr(ctx, "train_summary", None) or {})
        idp = getattr(ctx, "idp", None)
        last = None if idp is None else getattr(idp, "train_edp", None)
        self.train_last = None if last is None else last.to_json()
