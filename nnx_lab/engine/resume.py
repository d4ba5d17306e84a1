"""Warm resume (§2.3): plan and validate before anything is touched, then apply.

``plan_resume`` runs before the run directory is reserved and only reads the source run;
every refusal is raised there, so a refused resume leaves no trace: no run directory,
no change to the model, the source run untouched. ``ResumePlan.apply`` runs after the
callbacks' reset hooks and after seeding, so the restored state wins over both.

The training-state contract (what a stateful checkpoint carries) is
``REQUIRED_STATE_KEYS``; docs/resume.md describes each key.
"""

from __future__ import annotations

import json
import random
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .checkpoint import NNCheckpoint
from .errors import ConfigError
from .precision import ResolvedPrecision

if TYPE_CHECKING:
    from .model import NNModel
    from .params import NNTrainParams
    from .runs import NNRun

__all__ = ["REQUIRED_STATE_KEYS", "ResumeError", "ResumePlan", "plan_resume", "restore_rng"]

TRAINING_STATE_GENERATION = 1

# What generation 1 of the training-state sidecar must hold (``TrainingLoop.training_state``).
REQUIRED_STATE_KEYS = (
    "generation",
    "epoch",
    "step",
    "epoch_complete",
    "batches_done",
    "optimizer",
    "optimizer_topology",
    "optimizer_name",
    "scheduler",
    "scheduler_params",
    "scaler",
    "rng",
    "epoch_start_rng",
    "best_value",
    "has_best",
    "callbacks",
    "planned_epochs",
)

# Optimizer settings a stateful resume takes from the checkpoint (load_state_dict
# restores them); a different value in NNOptimParams would be silently ignored, so it is
# refused. grad_clip_norm is applied by the loop from the new params and may change.
_OPTIM_STATE_FIELDS = ("name", "max_lr", "momentum", "weight_decay")


class ResumeError(ValueError):
    """A resume request was refused before the model or any run was touched."""


@dataclass
class ResumePlan:
    """A validated resume: the source checkpoint, its state and the epochs to train."""

    source_id: str
    source_dir: Path
    checkpoint: NNCheckpoint
    state: dict[str, Any] | None  # None for resume_mode="weights_only"
    mode: str
    n_epochs: int  # epochs this run trains
    planned_epochs: int  # the total this run plans (source epochs + n_epochs)

    def apply(
        self,
        model: NNModel,
        params: NNTrainParams,
        run: NNRun,
        start: dict[str, Any],
        callbacks: Any,
        components: Any,
    ) -> None:
        """Load the weights (and, stateful, everything else) into the fresh run's objects."""
        model.net.load_state_dict(self.checkpoint.model_state)
        start["n_epochs"] = self.n_epochs
        start["planned_epochs"] = self.planned_epochs
        restored = ["weights"]
        state = self.state
        if self.mode == "stateful":
            assert state is not None
            start["optimizer"].load_state_dict(state["optimizer"])
            restored.append("optimizer")
            if start["scheduler"] is not None and state["scheduler"] is not None:
                start["scheduler"].load_state_dict(state["scheduler"])
                restored.append("scheduler")
            if start["scaler"] is not None and state["scaler"] is not None:
                start["scaler"].load_state_dict(state["scaler"])
                restored.append("scaler")
            start["epoch"], start["step"] = int(state["epoch"]), int(state["step"])
            start["best_value"], start["has_best"] = state["best_value"], state["has_best"]
            restored += ["epoch", "best"]
            objects = [*callbacks, *components]
            restored += _restore_objects(objects, state["callbacks"])
            loaders = [params.train_loader, params.val_loader]
            if state["epoch_complete"]:
                restore_rng(state["rng"], loaders)
            else:
                # Replay the interrupted epoch's order, skip the loader batches it already
                # trained, then continue from the RNG as it was at the stop.
                restore_rng(state["epoch_start_rng"], loaders)
                start["skip_batches"] = int(state["batches_done"])
                start["rng_after_skip"] = state["rng"]
            restored.append("rng")
        else:
            # A warm start: fresh optimizer, scheduler, callbacks and components; the
            # epoch and step counters continue the source's history.
            start["epoch"], start["step"] = int(self.checkpoint.epoch), int(self.checkpoint.step)
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
        self._inherit_history(run)

    def _inherit_history(self, run: NNRun) -> None:
        """The child's log starts with the parent's history up to the checkpoint."""
        src = self.source_dir / "metrics.jsonl"
        if not src.is_file():
            return
        upto = int(self.checkpoint.step)
        lines = []
        with open(src, encoding="utf-8") as fh:
            for line in fh:
                if not line.endswith("\n"):
                    break  # a torn last line: the writer died mid-line
                obj = json.loads(line)
                if obj.get("event") in ("step", "epoch_ended") and obj.get("step", 0) <= upto:
                    lines.append(line)
        if lines:
            with open(run.run_dir / "metrics.jsonl", "a", encoding="utf-8") as fh:
                fh.writelines(lines)
            from .events import event_from_json

            run.replay(event_from_json(json.loads(line)) for line in lines)


def _restore_objects(objects: list[Any], saved: dict[str, Any]) -> list[str]:
    """Match saved states to objects by type, in the order they were given.

    Keys are ``"<index>:<qualname>"``; the index orders objects of one type (the JSON
    may list keys in any order). Returns what was restored, for ``resume_status``.
    """
    by_type: dict[str, list[tuple[int, Any]]] = {}
    for key, value in saved.items():
        index, _, qualname = key.partition(":")
        by_type.setdefault(qualname, []).append((int(index), value))
    for queue in by_type.values():
        queue.sort(key=lambda item: item[0])
    restored = []
    for obj in objects:
        if not callable(getattr(obj, "load_state_dict", None)):
            continue
        name = type(obj).__qualname__
        queue = by_type.get(name)
        if queue:
            obj.load_state_dict(queue.pop(0)[1])
            restored.append(name)
        else:
            warnings.warn(
                f"resume: the checkpoint holds no state for {name}; it starts fresh",
                RuntimeWarning,
                stacklevel=4,
            )
    left = [name for name, queue in by_type.items() for _ in queue]
    if left:
        warnings.warn(
            f"resume: the checkpoint's state for {', '.join(left)} was not restored (no such "
            "callback or component in this train() call); pass the same objects to continue "
            "exactly",
            RuntimeWarning,
            stacklevel=4,
        )
    return restored


def restore_rng(state: dict[str, Any], loaders: list[Any]) -> None:
    """Set Python, NumPy, torch CPU/CUDA/MPS RNG and the loaders' generators."""
    py = state.get("python")
    if py is not None:  # absent from the epoch-start capture (capture_rng(host=False))
        random.setstate((py["version"], tuple(py["state"].tolist()), py["gauss"]))
    if state.get("numpy") is not None:
        np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch_cpu"])
    if state.get("torch_cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["torch_cuda"])
    if state.get("torch_mps") is not None and torch.backends.mps.is_available():
        torch.mps.set_rng_state(state["torch_mps"])  # pragma: no cover - no MPS in CI
    for loader, gen_state in zip(loaders, state.get("loader_generators") or [], strict=False):
        gen = getattr(loader, "generator", None)
        if gen_state is not None and isinstance(gen, torch.Generator):
            gen.set_state(gen_state)
    for loader, gen_state in zip(loaders, state.get("sampler_generators") or [], strict=False):
        gen = getattr(getattr(loader, "sampler", None), "generator", None)
        if gen_state is not None and isinstance(gen, torch.Generator):
            gen.set_state(gen_state)


def plan_resume(
    model: NNModel, params: NNTrainParams, precision: ResolvedPrecision, root: Path
) -> ResumePlan | None:
    """Validate a resume request against the source run; raise before any side effect."""
    source_id = params.resume_from_run_id
    if source_id is None:
        return None
    source_dir = root / source_id
    if not (source_dir / "run.yaml").is_file():
        raise FileNotFoundError(
            f"NNTrainParams.resume_from_run_id={source_id!r}: no such run under the runs "
            f"root {root.resolve()}/ (searched {source_dir / 'run.yaml'}); check the id, or "
            "pass runs_root= where that run was written"
        )
    ckpt = NNCheckpoint.load(source_id, params.resume_from_checkpoint, root)
    if ckpt.net_params != model.net_params:
        raise ResumeError(
            f"resume network mismatch: run {source_id} was trained with {ckpt.net_params}, "
            f"this model has {model.net_params}; build the model with the source's NNParams"
        )
    state = ckpt.training_state()
    mode = params.resume_mode
    if mode == "weights_only":
        done = int(ckpt.epoch)
        n_epochs = _epochs_to_train(params, source_id, done, _planned_total(ckpt, state))
        return ResumePlan(source_id, source_dir, ckpt, None, mode, n_epochs, done + n_epochs)
    if state is None:
        raise ResumeError(
            f"resume_mode='stateful' but the {ckpt.type.value} checkpoint of run {source_id} "
            "is weights-only (it carries no optimizer, scheduler or RNG state); pass "
            "resume_mode='weights_only' to warm-start from its weights"
        )
    if state.get("generation") != TRAINING_STATE_GENERATION:
        raise ResumeError(
            f"resume training-state generation mismatch: the checkpoint of run {source_id} "
            f"has generation {state.get('generation')!r}, this nnx_lab reads "
            f"{TRAINING_STATE_GENERATION}; resume with resume_mode='weights_only'"
        )
    missing = [k for k in REQUIRED_STATE_KEYS if k not in state]
    if missing:
        raise ResumeError(
            f"resume: the training state of run {source_id} lacks {', '.join(missing)} "
            f"(read from {ckpt.path}); resume with resume_mode='weights_only'"
        )
    _check_precision(source_id, state, precision)
    _check_optimizer(source_id, state, model, params)
    sched = None if params.scheduler is None else params.scheduler.to_json()
    if state["scheduler_params"] != sched:
        raise ResumeError(
            f"resume scheduler mismatch: the checkpoint's plateau settings are "
            f"{state['scheduler_params']}, this run asks for {sched}; keep the source's "
            "NNSchedulerParams, or resume_mode='weights_only' to start a fresh schedule"
        )
    saved_accum = state.get("accumulation_steps")
    if not state["epoch_complete"] and saved_accum not in (None, params.accumulation_steps):
        raise ResumeError(
            f"resume accumulation mismatch: the checkpoint stopped mid-epoch with "
            f"accumulation_steps={saved_accum}, this run asks for "
            f"{params.accumulation_steps}; keep it until the epoch completes"
        )
    _warn_workers(params.train_loader)
    done = int(state["epoch"])
    n_epochs = _epochs_to_train(params, source_id, done, int(state["planned_epochs"]))
    return ResumePlan(source_id, source_dir, ckpt, state, mode, n_epochs, done + n_epochs)


def _planned_total(ckpt: NNCheckpoint, state: dict[str, Any] | None) -> int | None:
    if state is not None and "planned_epochs" in state:
        return int(state["planned_epochs"])
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


def _check_precision(source_id: str, state: dict[str, Any], precision: ResolvedPrecision) -> None:
    has_scaler = state.get("scaler") is not None
    saved_effective = (state.get("precision") or {}).get("effective")
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
    source_id: str, state: dict[str, Any], model: NNModel, params: NNTrainParams
) -> None:
    topology = [[list(p.shape) for p in model.net.parameters() if p.requires_grad]]
    if (
        state["optimizer_name"] != params.optim.name.value
        or state["optimizer_topology"] != topology
    ):
        raise ResumeError(
            f"resume optimizer topology mismatch: the checkpoint of run {source_id} holds a "
            f"{state['optimizer_name']} over {_describe(state['optimizer_topology'])}, this "
            f"run builds a {params.optim.name.value} over {_describe(topology)}; use the "
            "source run's optimizer and trainable parameters, or resume_mode='weights_only'"
        )
    saved = state.get("optim_params")
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
    from torch.utils.data import DataLoader

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
