"""The loop's side of the resume contract (docs/resume.md).

``capture_state`` is everything a stateful resume restores, as a ``TrainingState``: the
counters, the optimizer, scheduler and scaler, the random streams, the selection, the
stateful callbacks, and, for a stop in the middle of an epoch, where it stopped and the
epoch's sums. ``load_state`` puts a validated state (``resume.plan_resume`` checked it)
back into a fresh loop; a mid-epoch state leaves a ``ResumeCursor`` that the next epoch
follows: it replays the interrupted epoch's order, skips the batches already trained,
continues from the random streams as they were at the stop, and carries the sums on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .optim import load_optimizer_state
from .training_state import RngState, TrainingState, capture_objects

if TYPE_CHECKING:
    from .loop import TrainingLoop

__all__ = ["ResumeCursor", "capture_state", "load_state"]


@dataclass(frozen=True)
class ResumeCursor:
    """Where a mid-epoch resume picks the interrupted epoch up."""

    skip: int  # loader batches the interrupted epoch already trained
    rng: RngState  # the random streams at the stop, restored after the skipped batches
    partial: dict[str, Any] | None  # the epoch's sums at the stop (EpochSums.to_partial)


def capture_state(loop: TrainingLoop, complete: bool) -> TrainingState:
    """The loop's state at an epoch's end (``complete``) or in the middle of one."""
    p, selector, sums = loop.params, loop.selector, loop.sums
    monitor = selector.monitor_state
    return TrainingState(
        epoch=loop.epoch,
        step=loop.step,
        epoch_complete=complete,
        batches_done=0 if complete else sums.batches,
        optimizer=loop.optimizer.state_dict(),
        optimizer_topology=loop.topology,
        optimizer_name=p.optim.name.value,
        optim_params=p.optim.to_json(),
        accumulation_steps=p.accumulation_steps,
        scheduler=None if loop.scheduler is None else loop.scheduler.state_dict(),
        scheduler_params=None if p.scheduler is None else p.scheduler.to_json(),
        scaler=None if loop.scaler is None else loop.scaler.state_dict(),
        precision=loop.train_step.precision.record(),
        rng=RngState.capture(loop.loaders),
        epoch_start_rng=None if complete else loop.epoch_start_rng,
        best_value=selector.best_value,
        has_best=selector.has_best,
        callbacks=capture_objects(loop.stateful),
        planned_epochs=loop.planned_epochs,
        monitor=None if monitor is None else monitor.state_dict(),
        partial_epoch=None if complete else sums.to_partial(),
    )


def load_state(loop: TrainingLoop, state: TrainingState) -> list[str]:
    """Continue ``loop`` from ``state``; returns what was restored."""
    restored = ["optimizer"]
    load_optimizer_state(loop.optimizer, state.optimizer)
    if loop.scheduler is not None and state.scheduler is not None:
        loop.scheduler.load_state_dict(state.scheduler)
        restored.append("scheduler")
    if loop.scaler is not None and state.scaler is not None:
        loop.scaler.load_state_dict(state.scaler)
        restored.append("scaler")
    loop.epoch, loop.step = int(state.epoch), int(state.step)
    selector = loop.selector
    selector.best_value, selector.has_best = state.best_value, bool(state.has_best)
    if selector.monitor_state is not None and state.monitor is not None:
        selector.monitor_state.load_state_dict(state.monitor)  # resume checked the spec
    if state.epoch_complete:
        state.rng.restore(loop.loaders)
    else:
        assert state.epoch_start_rng is not None  # TrainingState.from_tree checks it
        state.epoch_start_rng.restore(loop.loaders)
        loop.resume_cursor = ResumeCursor(int(state.batches_done), state.rng, state.partial_epoch)
    return [*restored, "epoch", "best", "rng"]
