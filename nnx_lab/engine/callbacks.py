"""The built-in sinks: the JSONL event log, the progress bar and EarlyStopping."""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import fields
from pathlib import Path
from typing import Any

from .events import (
    EpochEnded,
    Event,
    RunFinished,
    RunStarted,
    StepEnded,
    StepMetrics,
    StepRecord,
    TrainingControl,
)
from .sinks import Callback

__all__ = ["EarlyStopping", "JsonlLogger", "ProgressBar", "tqdm_disabled"]


class JsonlLogger(Callback):
    """Appends one JSON object per line to ``metrics.jsonl``; flushed after each event.

    Per-step records arrive in bulk (``StepMetrics``) and are written one line per step
    (``"event": "step"``), so the file reads as NNx's history and tails cheaply.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fh: Any = None

    def _write(self, lines: list[dict[str, Any]]) -> None:
        if self._fh is None:
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self._fh.write("".join(json.dumps(obj, allow_nan=True) + "\n" for obj in lines))
        self._fh.flush()

    def _event(self, event: Event) -> None:
        self._write([event.to_json()])

    on_run_started = _event
    on_epoch_ended = _event
    on_checkpoint_written = _event
    on_run_finished = _event

    def on_step_metrics(self, event: StepMetrics) -> None:
        if self._fh is None:
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self._fh.write("".join(map(_step_line, event.records)))
        self._fh.flush()

    def on_detach(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


_STEP_FIELDS = tuple(f.name for f in fields(StepRecord))


def _json_number(x: float | int | None) -> str:
    """A number as json.dumps(allow_nan=True) writes it, without its per-call overhead."""
    if x is None:
        return "null"
    if isinstance(x, int):
        return str(x)
    if x != x:
        return "NaN"
    if x in (math.inf, -math.inf):
        return "Infinity" if x > 0 else "-Infinity"
    return repr(x)


def _step_line(record: StepRecord) -> str:
    body = ",".join(f'"{n}":{_json_number(getattr(record, n))}' for n in _STEP_FIELDS)
    return f'{{"event":"step",{body}}}\n'


def tqdm_disabled() -> bool:
    """§2.7: NNX_TQDM_DISABLE=1/true/yes (any case) silences the bar."""
    return os.environ.get("NNX_TQDM_DISABLE", "").strip().lower() in ("1", "true", "yes")


class ProgressBar(Callback):
    """A ``tqdm.auto`` bar over optimizer steps (renders in notebooks and terminals)."""

    def __init__(self) -> None:
        self._bar: Any = None

    def on_run_started(self, event: RunStarted) -> None:
        from tqdm.auto import tqdm

        total = None if event.steps_per_epoch is None else event.steps_per_epoch * event.n_epochs
        self._bar = tqdm(total=total, desc=f"run {event.run_id[:8]}", unit="step", leave=True)

    def on_step_ended(self, event: StepEnded) -> None:
        self._bar.update(1)

    def on_step_metrics(self, event: StepMetrics) -> None:
        last = event.records[-1]
        self._bar.set_postfix(epoch=last.epoch, loss=f"{last.loss:.4g}", refresh=False)

    def on_run_finished(self, event: RunFinished) -> None:
        self.on_detach()

    def on_detach(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


_MONITORS = ("val_edp.error", "val_edp.loss", "train_edp.error", "train_edp.loss")


class EarlyStopping(Callback):
    """Stop when the monitored value has not improved for ``patience`` epochs.

    ``monitor=None`` (default) reads validation data only: ``val_edp.error``, or
    ``val_edp.loss`` where the evaluator reports no error. Without a value to read it
    warns once and never stops. Its state (best value, counter) resumes with the run.
    """

    def __init__(
        self, patience: int = 10, monitor: str | None = None, min_delta: float = 0.0
    ) -> None:
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ValueError(
                f"EarlyStopping.patience={patience!r} is invalid: pass an integer >= 1"
            )
        if monitor is not None and monitor not in _MONITORS:
            raise ValueError(
                f"EarlyStopping.monitor={monitor!r} is invalid: use one of "
                f"{', '.join(_MONITORS)}, or None for validation error/loss"
            )
        if not isinstance(min_delta, int | float) or min_delta < 0:
            raise ValueError(
                f"EarlyStopping.min_delta={min_delta!r} is invalid: pass a number >= 0"
            )
        self.patience, self.monitor, self.min_delta = patience, monitor, float(min_delta)
        self._control: TrainingControl | None = None
        self.reset()

    def reset(self) -> None:
        self.best: float | None = None
        self.counter = 0
        self.stopped_epoch: int | None = None
        self._warned = False

    def on_attach(self, control: TrainingControl) -> None:
        self._control = control

    def on_detach(self) -> None:
        self._control = None

    def _value(self, event: EpochEnded) -> float | None:
        monitor = self.monitor
        if monitor is None:
            if event.val is None:
                return None
            err = event.val.get("error")
            return err if err is not None else event.val.get("loss")
        source, name = monitor.split(".")
        record = event.val if source == "val_edp" else event.train_last
        return None if record is None else record.get(name)

    def on_epoch_ended(self, event: EpochEnded) -> None:
        value = self._value(event)
        if value is None:
            if not self._warned:
                warnings.warn(
                    f"EarlyStopping(monitor={self.monitor or 'val_edp.error'!r}) has "
                    "no value to read (no validation split?); it will never stop. "
                    "Point monitor= at a train metric, e.g. 'train_edp.loss'",
                    RuntimeWarning,
                    stacklevel=2,
                )
                self._warned = True
            return
        if math.isfinite(value) and (self.best is None or value < self.best - self.min_delta):
            self.best, self.counter = float(value), 0
            return
        self.counter += 1
        if self.counter >= self.patience:
            self.stopped_epoch = event.epoch
            if self._control is not None:
                self._control.finish_early(
                    f"early stopping: no improvement of {self.monitor or 'validation error'} "
                    f"for {self.patience} epochs"
                )

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "counter": self.counter, "stopped_epoch": self.stopped_epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.counter = state["best"], int(state["counter"])
        self.stopped_epoch = state.get("stopped_epoch")
