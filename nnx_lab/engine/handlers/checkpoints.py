"""LAST and BEST checkpoints of a run, written as the loop's events say.

At an epoch's end, LAST is written when it is due (the final epoch, every epoch with
``checkpoint_every_s=0``, else once that many seconds have passed since the last
write); BEST is written with it when the epoch became BEST (§2.11). A BEST found in
between waits in memory and is committed with the next LAST, or when the run ends. On
a stop, LAST is written at once, mid-epoch if need be; on a failure the last good BEST
is kept.

The order keeps BEST, LAST and the records agreeing after a kill at any instant
(docs/resume.md): every sidecar records the epoch its selection counts as BEST
(``best_epoch``, ``best_step``), and no write ever leaves a LAST naming a BEST that is
not on disk. LAST is committed before BEST, so a kill between leaves a LAST that names
itself as BEST. A BEST that waited in memory replaces BEST alone when the LAST on disk
does not depend on it (there is none, or it names itself); when that LAST names the BEST
on disk, the waiting BEST is committed as LAST and BEST of its own epoch, in that order,
before the newer LAST. ``metadata.yaml`` names a BEST only once it is on disk
(``RunRecorder.on_checkpoint_written``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ...errors import RunDirectoryError
from ..checkpoint import write_checkpoint
from ..events import CheckpointWritten, EpochEnded, Event, RunEnding, RunStarted
from ..phases import phase_schedule
from ..write_faults import cannot_write, is_write_fault

__all__ = ["CheckpointPolicy"]


def _clone_tree(tree: Any) -> Any:
    """A copy of nested state whose tensors no longer share memory with the model."""
    if isinstance(tree, torch.Tensor):
        return tree.detach().clone()
    if isinstance(tree, dict):
        return {k: _clone_tree(v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(_clone_tree(v) for v in tree)
    return tree


class CheckpointPolicy:
    def __init__(
        self,
        run_dir: Path,
        loop: Any,
        meta: dict[str, Any],
        every_s: float,
        emit: Callable[[Event], None],
        gone: Callable[[], str | None] | None = None,
        best_at: tuple[int, int] | None = None,
        phases: bool = True,
    ) -> None:
        """``loop`` is the TrainingLoop (its state and counters); ``meta`` what every
        sidecar records besides (run id, the model's recipe); ``gone()`` says why the
        run directory is no longer this run's, or None (checked before every write, so
        a folder replaced by another writer is never written into); ``best_at`` the
        (epoch, step) of the BEST a resumed run carries; ``phases`` whether NNx's phase
        checkpoints are written."""
        self.run_dir, self.loop, self.meta = run_dir, loop, meta
        self.every_s = every_s
        self.emit = emit
        self.gone = gone
        self.best_at = best_at  # the (epoch, step) the selection counts as BEST
        self._pending_best: dict[str, Any] | None = None
        self._last_commit = time.perf_counter()
        self._committed_step = -1
        self._last_names_best = False  # the LAST on disk names the BEST on disk (not itself)
        self._phases: dict[int, Any] = {}  # epoch -> the phase written at its end
        self._write_phases = phases

    # -- events ---------------------------------------------------------------------------
    def on_run_started(self, event: RunStarted) -> None:
        if self._write_phases:
            self._phases = phase_schedule(event.start_epoch, event.n_epochs)

    def on_epoch_ended(self, event: EpochEnded) -> None:
        loop = self.loop
        selection = loop.last_selection  # "improved" | "baseline" | None
        unavailable = selection == "baseline"
        if selection is not None:
            self.best_at = (loop.epoch, loop.step)
        due = (
            loop.final_epoch
            or self.every_s == 0
            or time.perf_counter() - self._last_commit >= self.every_s
        )
        phase = self._phases.get(loop.epoch)
        phases = [] if phase is None else [phase.value]
        if due:
            if selection is not None:
                self._pending_best = None  # superseded: this epoch is BEST
                # LAST first: a kill between the two leaves a LAST that is itself BEST
                self._write(["last", "best", *phases], complete=True, unavailable=unavailable)
            else:
                self._commit_pending_best()
                self._write(["last", *phases], complete=True)
        else:
            if selection is not None:
                self._pending_best = self._snapshot(complete=True, unavailable=unavailable)
            if phases:  # a phase alone names no BEST on disk it could outlive
                self._write(phases, complete=True, unavailable=unavailable)

    def on_run_ending(self, event: RunEnding) -> None:
        if event.status == "failed":
            self._commit_pending_best()  # the last good BEST is worth keeping
        elif event.status == "stopped":
            self._commit_pending_best()
            if event.mid_epoch:
                self._write(["last"], complete=False)
            elif self._committed_step != event.step:
                self._write(["last"], complete=True)
        else:  # finished: the final epoch wrote LAST; a BEST may still wait
            self._commit_pending_best()
            if self._net_changed():  # e.g. an NNx on_train_end hook: LAST holds it
                self._write(["last"], complete=True)

    # -- writing --------------------------------------------------------------------------
    def _state(self, complete: bool, unavailable: bool) -> dict[str, Any]:
        loop = self.loop
        return {
            "model_state": loop.train_step.net.state_dict(),
            "training_state": loop.capture_state(complete).to_tree(),
            "meta": {
                **self.meta,  # run id, the model's recipe, the world size
                "epoch": loop.epoch,
                "step": loop.step,
                "epoch_complete": complete,
                "signal_unavailable": unavailable,
                "best_epoch": None if self.best_at is None else self.best_at[0],
                "best_step": None if self.best_at is None else self.best_at[1],
            },
        }

    def _snapshot(self, *, complete: bool, unavailable: bool) -> dict[str, Any]:
        """The checkpoint's content now, detached from the live tensors."""
        return _clone_tree(self._state(complete, unavailable))

    def _commit(self, types: list[str], content: dict[str, Any]) -> None:
        self._check_ours()
        try:
            paths = write_checkpoint(self.run_dir, types, **content)
        except OSError as exc:
            self._check_ours(exc)
            if is_write_fault(exc):
                what = " and ".join(t.upper() for t in types) + " checkpoint"
                raise cannot_write(what, self.run_dir / "checkpoints", exc) from exc
            raise
        meta = content["meta"]
        if "last" in types:
            self._last_commit = time.perf_counter()
            self._committed_step = meta["step"]
            named = (meta["best_epoch"], meta["best_step"])
            self._last_names_best = named[0] is not None and named != (meta["epoch"], meta["step"])
        for type_, path in zip(types, paths, strict=True):
            self.emit(
                CheckpointWritten(
                    type=type_, epoch=meta["epoch"], step=meta["step"], path=str(path)
                )
            )

    def _check_ours(self, cause: BaseException | None = None) -> None:
        reason = None if self.gone is None else self.gone()
        if reason is not None:
            raise RunDirectoryError(
                f"{reason}; no checkpoint was written there and the run ends as failed"
            ) from cause

    def _write(self, types: list[str], *, complete: bool, unavailable: bool = False) -> None:
        """Write the current state now (no copy needed: nothing trains meanwhile)."""
        if "last" in types:
            self._written = self._net_marks()
        self._commit(types, self._state(complete, unavailable))

    def _net_marks(self) -> tuple[Any, ...]:
        # Each tensor's storage and in-place version counter: any change since LAST was
        # written (an added buffer, an in-place edit, a reassigned tensor) shows here.
        net = self.loop.train_step.net
        return tuple((k, v.data_ptr(), v._version) for k, v in net.state_dict().items())

    def _net_changed(self) -> bool:
        return getattr(self, "_written", None) not in (None, self._net_marks())

    def _commit_pending_best(self) -> None:
        """Commit the BEST that waited in memory. When the LAST on disk names the BEST on
        disk, replacing that BEST alone would leave LAST naming a BEST that is gone: the
        waiting one is then committed as LAST and BEST of its own epoch (its state is
        newer than that LAST), and a LAST written after it names it as BEST."""
        if self._pending_best is not None:
            content, self._pending_best = self._pending_best, None
            self._commit(["last", "best"] if self._last_names_best else ["best"], content)
