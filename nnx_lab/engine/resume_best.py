"""Which BEST a resumed run carries: the check that the source run's checkpoints and its
log agree on it, made before anything is written (docs/resume.md).

A stateful checkpoint's selection state counts one epoch as BEST; its sidecar names it
(``best_epoch``, ``best_step``; for a checkpoint written before those were recorded, the
last epoch its log marks ``improved``). The resumed run's BEST must hold exactly that
epoch, so BEST, the resumed selection, ``metadata.yaml`` and the inherited log agree:

- the checkpoint resumed from is itself that epoch (resuming from BEST; or a LAST whose
  BEST was not yet written when the run was killed): it is carried as BEST;
- the source's BEST holds that epoch (and the same best value): it is carried;
- neither (a BEST that is missing, damaged, of another epoch): the resume is refused,
  naming both, with the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ResumeError
from .checkpoint import NNCheckpoint, write_checkpoint
from .enums import Checkpoints
from .training_state import TrainingState

__all__ = ["CarriedBest", "best_to_carry"]

# What a carried-over BEST keeps of its sidecar (the run id becomes the child's).
_CARRIED_META = ("epoch", "step", "epoch_complete", "signal_unavailable", "world_size")


@dataclass(frozen=True)
class CarriedBest:
    """The BEST a resumed run starts with: its content, where it is in the history, and
    what ``metadata.yaml`` says of it (None for a baseline BEST, which has no value)."""

    checkpoint: NNCheckpoint
    epoch: int
    step: int
    record: dict[str, Any] | None

    def write(self, run: Any) -> None:
        """The child's BEST: the carried content under the child's id and recipe."""
        source = self.checkpoint
        meta = {k: v for k, v in source.sidecar.items() if k in _CARRIED_META}
        meta.update(
            epoch=self.epoch,
            step=self.step,
            best_epoch=self.epoch,
            best_step=self.step,
            run_id=run.id,
            net_params=run.config["net"],  # the same network (checked)
            model_params=run.config["model"],  # the child's own model settings
        )
        write_checkpoint(
            run.run_dir,
            ["best"],
            model_state=source.model_state,
            training_state=source.training_state_tree(),
            meta=meta,
        )


def best_to_carry(
    source_id: str,
    root: Path,
    ckpt: NNCheckpoint,
    state: TrainingState | None,
    history: list[Any],
) -> CarriedBest | None:
    """The BEST a stateful resume from ``ckpt`` carries, or None when its selection has
    none yet; ``ResumeError`` when the source's checkpoints disagree."""
    if state is None or not state.has_best:
        return None
    named = _named_best(ckpt, history)
    own = (int(ckpt.epoch), int(ckpt.step))
    complete = bool(ckpt.sidecar.get("epoch_complete", True))
    if ckpt.type is Checkpoints.BEST or (named == own and complete):
        source = ckpt
    else:
        try:
            best = NNCheckpoint.load(source_id, Checkpoints.BEST, root)
        except FileNotFoundError:
            best = None
        at = None if best is None else (int(best.epoch), int(best.step))
        agrees = at is not None and (named == at or (named is None and at[1] <= own[1]))
        if best is None or not agrees or not _same_best(best, state):
            raise ResumeError(_disagreement(source_id, ckpt, named, at))
        source = best
    epoch, step = int(source.epoch), int(source.step)
    return CarriedBest(source, epoch, step, _record(history, epoch, state))


def _named_best(ckpt: NNCheckpoint, history: list[Any]) -> tuple[int, int] | None:
    """The (epoch, step) ``ckpt``'s selection counts as BEST, or None if unknown."""
    epoch, step = ckpt.sidecar.get("best_epoch"), ckpt.sidecar.get("best_step")
    if isinstance(epoch, int) and isinstance(step, int):
        return epoch, step
    improved = [e for e in history if e.kind == "epoch_ended" and e.improved]
    return (int(improved[-1].epoch), int(improved[-1].step)) if improved else None


def _same_best(best: NNCheckpoint, state: TrainingState) -> bool:
    """Whether BEST's own record of the best value is the one ``state`` continues."""
    if best.sidecar.get("training_state") is None:
        return True  # a weights-only BEST records no value to compare
    own = best.training_state()
    return own is None or own.best_value == state.best_value


def _record(history: list[Any], epoch: int, state: TrainingState) -> dict[str, Any] | None:
    """``metadata.yaml``'s ``best`` for the carried BEST, from the log's line of it."""
    for event in reversed(history):
        if event.kind == "epoch_ended" and int(event.epoch) == epoch and event.improved:
            return {"value": event.signal, "source": event.signal_source, "epoch": epoch}
    if state.best_value is None:
        return None  # a baseline BEST: an epoch without a signal
    return {"value": state.best_value, "source": None, "epoch": epoch}


def _disagreement(
    source_id: str,
    ckpt: NNCheckpoint,
    named: tuple[int, int] | None,
    at: tuple[int, int] | None,
) -> str:
    kind = ckpt.type.name
    wants = "its best epoch" if named is None else f"epoch {named[0]} (step {named[1]})"
    holds = "there is no BEST checkpoint" if at is None else f"BEST holds epoch {at[0]}"
    if at is not None:
        holds += f" (step {at[1]})"
    return (
        f"resume: the {kind} checkpoint of run {source_id} (epoch {ckpt.epoch}, step "
        f"{ckpt.step}) counts {wants} as BEST, but {holds}: they were not written "
        "together (a run killed mid-write by an older nnx_lab, or a checkpoint copied "
        "or restored from elsewhere), and a resumed run would record a BEST it does not "
        "have. Resume from BEST (resume_from_checkpoint='best') to continue from the "
        f"epoch BEST holds, or resume_mode='weights_only' to warm-start from {kind}'s "
        "weights with a fresh selection"
    )
