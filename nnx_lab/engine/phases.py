"""NNx's phase checkpoints: FIRST after a run's first epoch, Q1 / Q2 / Q3 at the
quarters of the epochs it plans, and ``run.checkpoints()`` (docs/runs.md#phase-checkpoints).

Quarter ``k`` of a run that trains ``n`` epochs is the end of its epoch ``floor(k * n / 4)``
(counted from the run's first epoch), NNx's schedule. A quarter that falls on the first
epoch is FIRST and is not written again, and one that falls before it does not exist, so a
run of fewer than 8 epochs has no Q1 and one of 1 or 2 epochs has FIRST alone; its
``checkpoints()`` entries are then None, as in NNx. Q3 never falls on the last epoch, which
LAST holds.
"""

from __future__ import annotations

from typing import Any

from .enums import Checkpoints

__all__ = ["PHASES", "phase_schedule", "run_checkpoints"]

# The order of ``run.checkpoints()``: NNx's cadence (BEST is left out: it duplicates
# whichever of these won; load it with NNCheckpoint.load(run, Checkpoints.BEST)).
PHASES = (Checkpoints.FIRST, Checkpoints.Q1, Checkpoints.Q2, Checkpoints.Q3)
_CADENCE = (*PHASES, Checkpoints.LAST)


def phase_schedule(start_epoch: int, n_epochs: int) -> dict[int, Checkpoints]:
    """The epoch (1-based, as the loop counts) at whose end each phase is written, for a
    run whose first epoch is ``start_epoch`` and that trains ``n_epochs``."""
    schedule = {start_epoch: Checkpoints.FIRST}
    for k, phase in enumerate(PHASES[1:], start=1):
        offset = k * n_epochs // 4  # epochs into the run at quarter k
        if offset > 1:  # 1 is FIRST's epoch; 0 is before the run
            schedule.setdefault(start_epoch + offset - 1, phase)
    return schedule


def run_checkpoints(run: Any, root: Any = None) -> list[Any]:
    """``[FIRST, Q1, Q2, Q3, LAST]`` of ``run`` (under ``root``, default the run's own
    folder), each an ``NNCheckpoint`` or None where the run has none of that type. Each
    present one is verified as ``NNCheckpoint.load`` verifies it (a damaged one raises,
    naming the file)."""
    from .checkpoint import NNCheckpoint, checkpoint_folder  # it imports the run handle

    source: Any = run if root is None else run.id
    folder = checkpoint_folder(source, root)
    return [
        NNCheckpoint.load(source, type_, root)
        if (folder / f"{type_.value}.json").is_file()
        else None
        for type_ in _CADENCE
    ]
