"""A run's progress as its events tell it: steps, epochs, samples, the loss and its
non-finite streaks, and from them the expected end, the rates and the ETA.

The monitor keeps one ``RunProgress`` per run it shows (a new one at each
``run_started``) and copies it into its synced counters at every flush. No widget code
here: the arithmetic is tested on its own.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RATE_WINDOW_S", "RunProgress"]

RATE_WINDOW_S = 10.0  # rates while a run is live: over about the last ten seconds


@dataclass
class RunProgress:
    start_step: int = 0  # global steps done before this run (a resumed run's parent)
    start_epoch: int = 1
    steps_per_epoch: int | None = None  # None: the loader has no len(); known after epoch 1
    n_epochs: int = 0  # epochs this run trains
    t0_mono: float | None = None  # the monitor's clock at run_started (a live run)
    started_wall: float | None = None
    finished_wall: float | None = None
    samples_stepped: int = 0  # from StepEnded
    samples_recorded: int = 0  # from StepMetrics records
    step: int = 0  # the furthest step any event reported
    epoch: int = 0
    last_loss: float | None = None
    last_finite: tuple[int, float] | None = None  # (step, loss)
    nonfinite_since: int | None = None  # first step of the current non-finite streak
    nonfinite_steps: int = 0
    window: collections.deque[tuple[float, int, int]] = field(
        default_factory=collections.deque
    )  # (clock, step, samples) at each flush of a live run

    @classmethod
    def of_run(cls, event: Any, now: float) -> RunProgress:
        """The progress of the run a ``RunStarted`` event begins."""
        start = int(event.start_step)
        return cls(
            start_step=start,
            start_epoch=int(event.start_epoch),
            steps_per_epoch=event.steps_per_epoch,
            n_epochs=int(event.n_epochs),
            t0_mono=now,
            started_wall=float(event.time),
            step=start,
            epoch=int(event.start_epoch),
        )

    @property
    def samples(self) -> int:
        return max(self.samples_stepped, self.samples_recorded)

    @property
    def last_epoch(self) -> int:
        """The last epoch this run trains."""
        return self.start_epoch + self.n_epochs - 1

    def reached(self, step: int, epoch: int) -> None:
        if step > self.step:
            self.step, self.epoch = step, epoch

    def add_losses(self, steps: Sequence[int], losses: Sequence[float]) -> None:
        for step, loss in zip(steps, losses, strict=True):
            if math.isfinite(loss):
                self.last_finite = (step, loss)
                self.nonfinite_since = None
            else:
                if self.nonfinite_since is None:
                    self.nonfinite_since = step
                self.nonfinite_steps += 1
        if losses:
            self.last_loss = losses[-1]

    def first_epoch_ended(self, step: int) -> None:
        """Without a loader length, the first epoch tells the steps per epoch."""
        if self.steps_per_epoch is None:
            self.steps_per_epoch = step - self.start_step

    def total_steps(self) -> int | None:
        """The global step the run ends at (None while the epoch length is unknown)."""
        spe = self.steps_per_epoch
        if spe is None:
            return None
        # A run resumed mid-epoch has done part of its first epoch already.
        done = self.start_step - (self.start_epoch - 1) * spe
        return self.start_step + spe * self.n_epochs - (done if 0 < done < spe else 0)

    def elapsed(self, now_mono: float, *, from_log: bool) -> float:
        """Seconds of the run: by the monitor's clock for a live run, by the wall clock
        for one read from its log (it may have started long before it was opened)."""
        if self.started_wall is None:
            return 0.0
        if self.finished_wall is not None:
            return max(0.0, self.finished_wall - self.started_wall)
        if not from_log and self.t0_mono is not None:
            return max(0.0, now_mono - self.t0_mono)
        return max(0.0, time.time() - self.started_wall)

    def observe(self, now: float) -> None:
        """Remember where a live run is at ``now``, for its recent rates."""
        w = self.window
        w.append((now, self.step, self.samples))
        while len(w) > 2 and now - w[0][0] > RATE_WINDOW_S:
            w.popleft()

    def rates(self, elapsed: float, *, live: bool) -> tuple[float | None, float | None]:
        """(samples/s, steps/s): over the last seconds while live, else overall."""
        w = self.window
        if live and len(w) >= 2 and w[-1][0] - w[0][0] >= 0.5:
            dt = w[-1][0] - w[0][0]
            return (w[-1][2] - w[0][2]) / dt, (w[-1][1] - w[0][1]) / dt
        if elapsed > 0 and self.samples > 0:
            return self.samples / elapsed, (self.step - self.start_step) / elapsed
        return None, None

    def eta(self, total_steps: int | None, steps_per_s: float | None) -> float | None:
        if total_steps is None or not steps_per_s:
            return None
        return max(0.0, (total_steps - self.step) / steps_per_s)
