"""Warm resume (§2.3): plan and validate before anything is touched, then apply.

``plan_resume`` runs before the run directory is reserved and reads only the source
run; every refusal is raised there. ``ResumePlan.apply`` runs after the callbacks'
reset hooks and after seeding, so the restored state wins over both.
"""

from __future__ import annotations

import json
import random
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

__all__ = ["ResumeError", "ResumePlan", "plan_resume", "restore_rng"]

TRAINING_STATE_GENERATION = 1


class ResumeError(ValueError):
    """A resume request was refused before the model or any run was touched."""


@dataclass
class ResumePlan:
    source_id: str
    source_dir: Path
    checkpoint: NNCheckpoint
    state: dict[str, Any] | None
    mode: str
    n_epochs: int
    planned_epochs: int

    def apply(
        self,
        model: NNModel,
        params: NNTrainParams,
        run: NNRun,
        start: dict[str, Any],
        callbacks: Any,
        components: Any,
    ) -> None:
        model.net.load_state_dict(self.checkpoint.model_state)
        start["n_epochs"] = self.n_epochs
        start["planned_epochs"] = self.planned_epochs
        state = self.state
        stateful = self.mode == "stateful"
        if stateful:
            assert state is not None
            start["optimizer"].load_state_dict(state["optimizer"])
            if start["scheduler"] is not None and state["scheduler"] is not None:
                start["scheduler"].load_state_dict(state["scheduler"])
            if start["scaler"] is not None and state["scaler"] is not None:
                start["scaler"].load_state_dict(state["scaler"])
            start["epoch"], start["step"] = int(state["epoch"]), int(state["step"])
            start["best_value"], start["has_best"] = state["best_value"], state["has_best"]
            _restore_objects([*callbacks, *components], state["callbacks"])
            if state["epoch_complete"]:
                restore_rng(state["rng"], [params.train_loader])
            else:
                # Replay the interrupted epoch's order, skip what it already trained, then
                # continue from the RNG as it was at the stop.
                restore_rng(state["epoch_start_rng"], [params.train_loader])
                start["skip_batches"] = int(state["batches_done"]) * params.accumulation_steps
                start["rng_after_skip"] = state["rng"]
        else:
            start["epoch"], start["step"] = int(self.checkpoint.epoch), int(self.checkpoint.step)
        run.resume_status = {
            "from_run_id": self.source_id,
            "checkpoint": self.checkpoint.type.value,
            "mode": self.mode,
            "restored": [
                "weights",
                "optimizer",
                "scheduler",
                "scaler",
                "epoch",
                "rng",
                "callbacks",
                "components",
            ]
            if stateful
            else ["weights"],
            "from_epoch": int(self.checkpoint.epoch),
            "from_step": int(self.checkpoint.step),
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
                    break
                obj = json.loads(line)
                if obj.get("event") in ("step", "epoch_ended") and obj.get("step", 0) <= upto:
                    lines.append(line)
        if lines:
            with open(run.run_dir / "metrics.jsonl", "a", encoding="utf-8") as fh:
                fh.writelines(lines)
            from .events import event_from_json

            run.replay(event_from_json(json.loads(line)) for line in lines)


def _restore_objects(objects: list[Any], saved: dict[str, Any]) -> None:
    """Match saved states to objects by type, in order of appearance."""
    by_type: dict[str, list[Any]] = {}
    for key, value in saved.items():
        by_type.setdefault(key.split(":", 1)[1], []).append(value)
    for obj in objects:
        if not callable(getattr(obj, "load_state_dict", None)):
            continue
        queue = by_type.get(type(obj).__qualname__)
        if queue:
            obj.load_state_dict(queue.pop(0))


def restore_rng(state: dict[str, Any], loaders: list[Any]) -> None:
    py = state["python"]
    random.setstate((py["version"], tuple(py["state"].tolist()), py["gauss"]))
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
            f"NNTrainParams.resume_from_run_id={source_id!r}: no such run under "
            f"{root.resolve()}/; check the id, or pass runs_root= where that run was written"
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
        return ResumePlan(
            source_id, source_dir, ckpt, None, mode, params.n_epochs, ckpt.epoch + params.n_epochs
        )
    if state is None:
        raise ResumeError(
            f"resume_mode='stateful' but the {ckpt.type.value} checkpoint of run {source_id} "
            "is weights-only; pass resume_mode='weights_only' to warm-start from its weights"
        )
    if state.get("generation") != TRAINING_STATE_GENERATION:
        raise ResumeError(
            f"resume training-state generation mismatch: the checkpoint has "
            f"{state.get('generation')!r}, this nnx_lab reads {TRAINING_STATE_GENERATION}; "
            "resume with resume_mode='weights_only'"
        )
    saved_precision = state.get("precision") or {}
    saved_effective = saved_precision.get("effective")
    if saved_effective is None:  # written before precision was recorded: a scaler means fp16
        saved_effective = "fp16" if state.get("scaler") is not None else "fp32"
    if saved_effective != precision.effective:
        raise ResumeError(
            f"resume precision mismatch: run {source_id} trained in {saved_effective}, this "
            f"model resolves to {precision.effective}; use the same PrecisionPolicy, or "
            "resume_mode='weights_only' to switch precision"
        )
    if (state.get("scaler") is not None) != precision.uses_scaler:
        raise ResumeError(
            f"resume GradScaler presence mismatch: the checkpoint "
            f"{'has' if state.get('scaler') is not None else 'has no'} scaler state but this "
            f"run {'uses' if precision.uses_scaler else 'uses no'} scaler; match the precision "
            "policy, or resume_mode='weights_only'"
        )
    topology = [[list(p.shape) for p in model.net.parameters() if p.requires_grad]]
    if (
        state["optimizer_name"] != params.optim.name.value
        or state["optimizer_topology"] != topology
    ):
        raise ResumeError(
            f"resume optimizer topology mismatch: the checkpoint holds a "
            f"{state['optimizer_name']} over {_describe(state['optimizer_topology'])}, this run "
            f"builds a {params.optim.name.value} over {_describe(topology)}; use the source "
            "run's optimizer, or resume_mode='weights_only'"
        )
    sched = None if params.scheduler is None else params.scheduler.to_json()
    if state["scheduler_params"] != sched:
        raise ResumeError(
            f"resume scheduler mismatch: the checkpoint's plateau settings are "
            f"{state['scheduler_params']}, this run asks for {sched}; keep the source's "
            "NNSchedulerParams, or resume_mode='weights_only'"
        )
    done = int(state["epoch"])
    if params.resume_epochs == "planned":
        planned = int(state["planned_epochs"])
        if params.n_epochs != planned:
            raise ConfigError(
                "NNTrainParams.n_epochs",
                params.n_epochs,
                f"with resume_epochs='planned' it must equal the source run's "
                f"planned total ({planned})",
            )
        remaining = planned - done + (0 if state["epoch_complete"] else 1)
        if remaining <= 0 or (done >= planned and state["epoch_complete"]):
            raise ResumeError(
                f"run {source_id} already reached its planned {planned} epochs; use "
                "resume_epochs='additional' to train more"
            )
        return ResumePlan(source_id, source_dir, ckpt, state, mode, planned - done, planned)
    return ResumePlan(
        source_id, source_dir, ckpt, state, mode, params.n_epochs, done + params.n_epochs
    )


def _describe(topology: list[list[list[int]]]) -> str:
    n = sum(len(g) for g in topology)
    return f"{len(topology)} group(s) of {n} tensors"
