"""Warm resume (§2.3): plan and validate before anything is touched, then apply.

``plan_resume`` runs before the run directory is reserved and only reads the source run;
every refusal is raised there, so a refused resume leaves no trace: no run directory,
no change to the model, the source run untouched. ``ResumePlan.apply`` runs after the
callbacks' reset hooks and after seeding, so the restored state wins over both. What a
stateful checkpoint carries is ``training_state.TrainingState``; which BEST the resumed
run starts with, and the check that the source agrees on it, is ``resume_best``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch.utils.data import DataLoader

from ..errors import ConfigError, ResumeError, ResumeNotFoundError, TrainingStateError
from ..runs import run_dir
from .checkpoint import NNCheckpoint
from .handlers.jsonl_log import JsonlLogger
from .optim import optimizer_groups, optimizer_topology
from .precision import ResolvedPrecision
from .resume_best import CarriedBest, best_to_carry
from .run_handle import read_events, write_metadata
from .training_state import TrainingState, restore_objects
from .write_faults import cannot_write, is_write_fault

if TYPE_CHECKING:
    from .loop import TrainingLoop
    from .model import NNModel
    from .params import NNTrainParams
    from .run_handle import NNRun

__all__ = ["ResumeError", "ResumePlan", "plan_resume"]

# Optimizer settings a stateful resume takes from the checkpoint (load_state_dict
# restores them); a different value in NNOptimParams would be silently ignored, so it is
# refused. grad_clip_norm is applied by the loop from the new params and may change.
_OPTIM_STATE_FIELDS = ("name", "max_lr", "momentum", "weight_decay", "param_groups")


@dataclass
class ResumePlan:
    """A validated resume: the source checkpoint, its state and the epochs to train."""

    source_id: str
    source_dir: Path
    checkpoint: NNCheckpoint
    state: TrainingState | None  # None for resume_mode="weights_only"
    mode: str
    n_epochs: int  # epochs this run trains
    planned_epochs: int  # the total this run plans (source epochs + n_epochs)
    history: list[Any]  # the parent's step and epoch events up to the checkpoint
    best: CarriedBest | None = None  # the BEST the child starts with (resume_best)

    @property
    def best_at(self) -> tuple[int, int] | None:
        """The (epoch, step) of the carried BEST: what the child's checkpoints name."""
        return None if self.best is None else (self.best.epoch, self.best.step)

    def apply(
        self,
        model: NNModel,
        loop: TrainingLoop,
        run: NNRun,
        objects: list[Any],
        writes: bool = True,
    ) -> None:
        """Load the weights (and, stateful, everything else) into the fresh run's objects.

        ``objects`` are the callbacks and components whose state travels with the run;
        ``writes=False`` for a rank that does not write the run (DDP rank > 0): it
        loads the same state and history, and writes nothing into the run folder.
        """
        model.net.load_state_dict(self.checkpoint.model_state)
        restored = ["weights"]
        if self.state is not None:
            restored += loop.load_state(self.state)
            restored += restore_objects(objects, self.state.callbacks)
            if self.best is not None:
                if writes:
                    self._carry_best(run)
                restored.append("best checkpoint")
        else:
            # A warm start: fresh optimizer, scheduler, callbacks and components; the
            # epoch and step counters continue the source's history.
            loop.epoch, loop.step = int(self.checkpoint.epoch), int(self.checkpoint.step)
        run.resume_status = {
            "from_run_id": self.source_id,
            "checkpoint": self.checkpoint.type.value,
            "mode": self.mode,
            "restored": restored,
            "from_epoch": int(self.checkpoint.epoch),
            "from_step": int(self.checkpoint.step),
            "epoch_complete": bool(self.checkpoint.sidecar.get("epoch_complete", True)),
            "n_epochs": self.n_epochs,
            "planned_epochs": self.planned_epochs,
        }
        run.metadata["resume_status"] = run.resume_status
        self._inherit_history(run, writes)

    def _carry_best(self, run: NNRun) -> None:
        """The parent's BEST becomes the child's until the child beats it, so BEST of a
        resumed run is the best of its whole history, as in the uninterrupted run; the
        child's record names it once it is on disk."""
        assert self.best is not None
        try:
            self.best.write(run)
            if self.best.record is not None:
                run.metadata["best"] = self.best.record
                write_metadata(run)
        except OSError as exc:
            if is_write_fault(exc):
                raise cannot_write("the carried BEST", run.run_dir, exc) from exc
            raise

    def _inherit_history(self, run: NNRun, writes: bool) -> None:
        """The child's log starts with the parent's history up to the checkpoint."""
        if not self.history:
            return
        if not writes:
            run.replay(self.history)
            return
        logger = JsonlLogger(run.run_dir / "metrics.jsonl")
        try:
            for event in self.history:
                getattr(logger, event.hook)(event)
        finally:
            logger.on_detach()
        run.replay(self.history)


def plan_resume(
    model: NNModel,
    params: NNTrainParams,
    precision: ResolvedPrecision,
    root: Path,
    world_size: int = 1,
) -> ResumePlan | None:
    """Validate a resume request against the source run; raise before any side effect.
    ``world_size``: the processes the resumed run trains with (1 without DDP)."""
    source_id = params.resume_from_run_id
    if source_id is None:
        return None
    source_dir = run_dir(root, source_id, "NNTrainParams.resume_from_run_id")
    if not (source_dir / "run.yaml").is_file():
        raise ResumeNotFoundError(
            f"NNTrainParams.resume_from_run_id={source_id!r}: no such run under the runs "
            f"root {root.resolve()}/ (searched {source_dir / 'run.yaml'}); check the id, or "
            "pass runs_root= where that run was written"
        )
    ckpt = NNCheckpoint.load(source_id, params.resume_from_checkpoint, root)
    if ckpt.net_params != model.net_params or ckpt.model_params.net != model.trained_params().net:
        raise ResumeError(
            f"resume network mismatch: run {source_id} was trained with {ckpt.net_params}, "
            f"this model has {model.net_params}; build the model with the source's NNParams"
        )
    mode = params.resume_mode
    # The parent's log is read (and checked) now, before the child's directory exists.
    history = _parent_history(source_dir / "metrics.jsonl", int(ckpt.step))
    if mode == "weights_only":
        try:
            state = ckpt.training_state()
        except TrainingStateError:
            state = None  # an unreadable training state does not matter for the weights
        done = int(ckpt.epoch)
        n_epochs = _epochs_to_train(params, source_id, done, _planned_total(ckpt, state))
        return ResumePlan(
            source_id, source_dir, ckpt, None, mode, n_epochs, done + n_epochs, history
        )
    if ckpt.sidecar.get("training_state") is None:
        raise ResumeError(
            f"resume_mode='stateful' but the {ckpt.type.value} checkpoint of run {source_id} "
            "is weights-only (it carries no optimizer, scheduler or RNG state); pass "
            "resume_mode='weights_only' to warm-start from its weights"
        )
    saved_world = ckpt.sidecar.get("world_size", 1)
    if saved_world != world_size:
        raise ResumeError(
            f"resume world-size mismatch: run {source_id} was trained by {saved_world} "
            f"process(es), this run has {world_size}; a stateful resume continues the same "
            f"data-parallel run. Resume with {saved_world} process(es), or pass "
            "resume_mode='weights_only' to warm-start from its weights"
        )
    state = ckpt.training_state()
    assert state is not None
    saved_loss = ckpt.sidecar["model_params"].get("loss")
    loss_now = model.params.to_json()["loss"]
    if saved_loss != loss_now:
        raise ResumeError(
            f"resume loss mismatch: run {source_id} trained with the loss {saved_loss!r}, this "
            f"model has {loss_now!r}; a stateful resume continues that optimization. Keep the "
            "source's loss, or resume_mode='weights_only' to fine-tune with another"
        )
    _check_precision(source_id, state, precision)
    _check_optimizer(source_id, state, model, params)
    sched = None if params.scheduler is None else params.scheduler.to_json()
    if state.scheduler_params != sched:
        raise ResumeError(
            f"resume scheduler mismatch: the checkpoint's plateau settings are "
            f"{state.scheduler_params}, this run asks for {sched}; keep the source's "
            "NNSchedulerParams, or resume_mode='weights_only' to start a fresh schedule"
        )
    saved_monitor = None if state.monitor is None else state.monitor.get("spec")
    monitor = None if params.monitor is None else params.monitor.to_json()
    if saved_monitor != monitor:
        raise ResumeError(
            f"resume monitor mismatch: run {source_id} selected BEST and stepped its "
            f"scheduler on the monitor {saved_monitor}, this run asks for {monitor}; a "
            "stateful resume continues that decision. Keep the source's MonitorSpec, or "
            "resume_mode='weights_only' to start a fresh selection"
        )
    saved_accum = state.accumulation_steps
    if not state.epoch_complete and saved_accum not in (None, params.accumulation_steps):
        raise ResumeError(
            f"resume accumulation mismatch: the checkpoint stopped mid-epoch with "
            f"accumulation_steps={saved_accum}, this run asks for "
            f"{params.accumulation_steps}; keep it until the epoch completes"
        )
    # BEST, this checkpoint's selection and the log must agree before anything is written
    best = best_to_carry(source_id, root, ckpt, state, history)
    _warn_workers(params.train_loader)
    done = int(state.epoch)
    n_epochs = _epochs_to_train(params, source_id, done, int(state.planned_epochs))
    return ResumePlan(
        source_id, source_dir, ckpt, state, mode, n_epochs, done + n_epochs, history, best
    )


def _parent_history(log: Path, upto: int) -> list[Any]:
    """The step and epoch events of the parent's log up to step ``upto``."""
    if not log.is_file():
        return []
    return [
        event
        for event in read_events(log)
        if event.kind in ("step_metrics", "epoch_ended") and _step_of(event) <= upto
    ]


def _step_of(event: Any) -> int:
    return event.records[0].step if event.kind == "step_metrics" else int(event.step)


def _planned_total(ckpt: NNCheckpoint, state: TrainingState | None) -> int | None:
    if state is not None:
        return int(state.planned_epochs)
    planned = ckpt.sidecar.get("planned_epochs")
    return None if planned is None else int(planned)


def _epochs_to_train(params: NNTrainParams, source_id: str, done: int, planned: int | None) -> int:
    """``n_epochs`` more ("additional"), or up to the source's planned total ("planned")."""
    if params.resume_epochs == "additional":
        return params.n_epochs
    if planned is None:
        raise ResumeError(
            f"resume_epochs='planned' but the checkpoint of run {source_id} does not record "
            "its planned total; use resume_epochs='additional' and n_epochs=<epochs to add>"
        )
    if params.n_epochs != planned:
        raise ConfigError(
            "NNTrainParams.n_epochs",
            params.n_epochs,
            f"with resume_epochs='planned' it must equal the source run's planned total "
            f"({planned}); or use resume_epochs='additional' to count the epochs to add",
        )
    if done >= planned:
        raise ResumeError(
            f"run {source_id} already reached its planned {planned} epochs; use "
            "resume_epochs='additional' to train more"
        )
    return planned - done


def _check_precision(source_id: str, state: TrainingState, precision: ResolvedPrecision) -> None:
    has_scaler = state.scaler is not None
    saved_effective = (state.precision or {}).get("effective")
    if saved_effective is None:  # written before precision was recorded: a scaler means fp16
        saved_effective = "fp16" if has_scaler else "fp32"
    scaler_note = ""
    if has_scaler != precision.uses_scaler:
        scaler_note = (
            f"resume GradScaler presence mismatch: the checkpoint "
            f"{'has' if has_scaler else 'has no'} GradScaler state and this run "
            f"{'uses' if precision.uses_scaler else 'uses no'} GradScaler"
        )
    if saved_effective != precision.effective:
        raise ResumeError(
            f"resume precision mismatch: run {source_id} trained in {saved_effective}, this "
            f"model resolves to {precision.effective}"
            + (f" ({scaler_note})" if scaler_note else "")
            + "; use the same PrecisionPolicy, or resume_mode='weights_only' to switch "
            "precision"
        )
    if scaler_note:
        raise ResumeError(
            f"{scaler_note}; match the source run's precision policy, or resume_mode='weights_only'"
        )


def _check_optimizer(
    source_id: str, state: TrainingState, model: NNModel, params: NNTrainParams
) -> None:
    topology = optimizer_topology(optimizer_groups(model.net, params.optim))
    if state.optimizer_name != params.optim.name.value or state.optimizer_topology != topology:
        raise ResumeError(
            f"resume optimizer topology mismatch: the checkpoint of run {source_id} holds a "
            f"{state.optimizer_name} over {_describe(state.optimizer_topology)}, this "
            f"run builds a {params.optim.name.value} over {_describe(topology)}; use the "
            "source run's optimizer and trainable parameters, or resume_mode='weights_only'"
        )
    saved = state.optim_params
    if saved is None:
        return
    now = params.optim.to_json()
    changed = [f for f in _OPTIM_STATE_FIELDS if _plain(saved.get(f)) != _plain(now.get(f))]
    if changed:
        diff = ", ".join(f"{f}: {saved.get(f)!r} -> {now.get(f)!r}" for f in changed)
        raise ResumeError(
            f"resume optimizer settings mismatch ({diff}): a stateful resume continues the "
            "checkpoint's optimizer state, which carries its own settings; keep the source's "
            "NNOptimParams, or resume_mode='weights_only' to start a fresh optimizer"
        )


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple | list) else value


def _warn_workers(loader: Any) -> None:
    if isinstance(loader, DataLoader) and loader.num_workers > 0:
        warnings.warn(
            f"resume: the train loader uses num_workers={loader.num_workers}; worker "
            "processes draw their own random numbers, so the continuation may not be exact. "
            "Use num_workers=0 when exact continuation matters",
            RuntimeWarning,
            stacklevel=4,
        )


def _describe(topology: list[list[list[int]]]) -> str:
    n = sum(len(g) for g in topology)
    return f"{len(topology)} group(s) of {n} tensors"
