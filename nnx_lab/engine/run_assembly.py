"""Assembling a run for ``NNModel.train``: its identity, its directory, its loop.

In order: the run's configuration and id (``run_config``, ``Preflight``: no side
effect), the existing-run check, then the side effects: the run directory reserved with
its records and lock (``reserve_run``), and the ``TrainingLoop`` with the handlers that
record the run attached to its event stream (``assemble_loop``). Under ``distributed=``
every rank takes each step, and a refusal on any rank is raised on all of them
(``agreed``); only rank 0 writes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..errors import ConfigError
from ..runs import FORMAT_VERSION, PROVENANCE_FILE, record_attempt, writer_identity
from .collective import DistributedTrainStep
from .compile_options import compiled_net, same_numbers
from .components import is_component
from .custom_step import CustomStep
from .data import batch_problem, data_identity
from .edp import EDP
from .enums import RunStatus
from .events import TrainingControl
from .fingerprint import callable_identity
from .handlers import (
    CheckpointPolicy,
    FigureWriter,
    JsonlLogger,
    ProgressBar,
    RunRecorder,
    adapt_callbacks,
    tqdm_disabled,
)
from .handlers.gradient_health import bind_probes
from .handlers.run_directory import RunEndRecord, write_end_record
from .loop import RunInfo, TrainingLoop
from .objective_ddp import DistributedObjectiveStep
from .objective_step import ObjectiveStep
from .optim import build_optimizer, build_scheduler, optimizer_groups
from .params import NNModelParams, NNTrainParams
from .precision import ResolvedPrecision
from .registry import RuntimeModuleRef
from .reservation import existing_run_error, inspect_existing, reserve_run_dir
from .resume import ResumePlan
from .run_handle import NNRun, environment_metadata
from .sinks import EventBus
from .tasks import Task
from .train_step import TrainStep
from .training_state import is_stateful, seed_everything
from .update import Updater

if TYPE_CHECKING:
    from .model import NNModel

__all__ = [
    "Preflight",
    "agreed",
    "assemble_loop",
    "check_existing",
    "reserve_run",
    "run_config",
]


@dataclass(frozen=True)
class Preflight:
    """What ``train`` knows before it touches the runs root: the precision resolved on
    the device, the task, the runs root, the resume plan (None: a fresh run), the
    ``run.yaml`` and the run id (its hash)."""

    precision: ResolvedPrecision
    task: Task
    root: Path
    resume: ResumePlan | None
    config: dict[str, Any]
    run_id: str


def run_config(
    params: NNTrainParams,
    distributed: Any,
    eval_step_fn: Any,
    *,
    net_params: Any,
    model_params: NNModelParams,
    weights_digest: Callable[[], str],
    dropout: float | None = None,
    salt: str | None = None,
    objective: Any = None,
    train_step_fn: Any = None,
    frozen: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The ``run.yaml`` of a run of these params; ``weights_digest()`` gives the initial
    weights' digest (not asked for a resumed run, whose weights come from its source,
    nor for a wrapped module, identified by its topology). ``net_params`` is the net's
    JSON; ``dropout`` the MLP's (None: an own module, which may hold dropout);
    ``frozen`` the names of the parameters that do not train."""
    runtime = isinstance(model_params.net, RuntimeModuleRef)
    initial = None if params.resume_from_run_id is not None or runtime else weights_digest()
    config = {
        "format": FORMAT_VERSION,
        "net": net_params.to_json() if hasattr(net_params, "to_json") else net_params,
        "model": _model_identity(model_params),
        "train": params.identity(),
        "data": data_identity(params.train_loader, params.val_loader, params.data_id),
        "initial_weights": initial,
    }
    if dropout is None:
        dropout = getattr(net_params, "dropout_prob", 1.0)  # unknown: as if it had some
    if distributed is not None and dropout > 0:
        # Each rank draws its own dropout masks: the result depends on the world size.
        config["distributed"] = {"world_size": distributed.world_size}
    if frozen:  # absent when nothing is frozen: existing run ids stay as they were
        config["frozen"] = list(frozen)
    if eval_step_fn is not None:  # absent by default: existing run ids stay as they were
        config["eval_step"] = callable_identity(eval_step_fn)
        own = getattr(eval_step_fn, "run_identity", None)
        if callable(own):  # an evaluator that carries configuration (a ranking task's k)
            config["eval_step"]["config"] = own()
    if objective is not None:  # its code and its non-finite policy make another run
        config["objective"] = {
            "code": callable_identity(objective.identity_target()),
            "nonfinite": objective.nonfinite,
        }
        own = getattr(objective, "run_identity", None)
        if callable(own):  # an objective's own settings (a noise schedule, a vocabulary)
            config["objective"]["config"] = own()
    if train_step_fn is not None:
        config["train_step"] = callable_identity(train_step_fn)
        own = getattr(train_step_fn, "run_identity", None)
        if callable(own):  # a step that carries configuration (the Trainer's optimizers)
            config["train_step"]["config"] = own()
    if salt is not None:  # NNx's train(salt=): the same configuration, another run id
        if not isinstance(salt, str) or not salt.strip():
            raise ConfigError("salt", salt, "NNRun.salt must be a non-empty string when provided")
        config["salt"] = salt
    return config


def _model_identity(model_params: NNModelParams) -> dict[str, Any]:
    """The model's JSON, less compile options that leave every number as eager's."""
    data = model_params.to_json()
    if same_numbers(model_params.compile):
        data.pop("compile", None)
    return data


@contextlib.contextmanager
def agreed(distributed: Any, what: str) -> Iterator[None]:
    """Run a block on every rank; a refusal on any rank is raised on all of them, so no
    rank goes on to train alone (and hang)."""
    if distributed is None:
        yield
        return
    error: BaseException | None = None
    try:
        yield
    except Exception as exc:
        error = exc
    message = distributed.agree(None if error is None else f"{type(error).__name__}: {error}")
    if error is not None:
        raise error
    if message is not None:
        raise RuntimeError(f"another rank could not {what}: {message}")


def check_existing(pre: Preflight, params: NNTrainParams, distributed: Any) -> Any:
    """A run of the same id on disk, refused unless ``overwrite_existing`` (rank 0
    looks; every rank learns the answer)."""
    existing = None
    with agreed(distributed, "check the run"):
        if distributed is None or distributed.rank == 0:
            existing = inspect_existing(pre.root, pre.run_id)
            if existing is not None:
                existing_run_error(pre.root, pre.run_id, existing, params.overwrite_existing)
    return existing


def reserve_run(
    pre: Preflight,
    params: NNTrainParams,
    distributed: Any,
    existing: Any,
    provenance: Any,
    device: str,
) -> tuple[NNRun, RunRecorder | None]:
    """The run, and on rank 0 its directory reserved (status "running") with its lock,
    held by the returned ``RunRecorder``; another rank gets the same run, in memory."""
    with agreed(distributed, "reserve the run directory"):
        if distributed is None or distributed.rank == 0:
            run, lock = _open_run(pre, params, existing, provenance, device)
            return run, RunRecorder(run, lock)
        run = NNRun(
            id=pre.run_id,
            run_dir=pre.root / pre.run_id,
            config=pre.config,
            status=RunStatus.RUNNING,
            precision=pre.precision,
        )
    return run, None


def _open_run(
    pre: Preflight, params: NNTrainParams, existing: Any, provenance: Any, device: str
) -> tuple[NNRun, Any]:
    """Reserve the run directory with its records and its lock; a provenance manifest
    is written with them, so the folder appears whole."""
    now = time.time()
    extra: dict[str, Any] = {}
    recorded = None
    if provenance is not None:
        recorded = record_attempt(provenance, pre.run_id, started_at=now)
        extra[PROVENANCE_FILE] = recorded.to_json()
    metadata = {
        **environment_metadata(device, params.seed),
        "status": RunStatus.RUNNING.value,
        "started_at": now,
        "heartbeat": now,
        "writer": writer_identity(),
        "precision": pre.precision.record(),
        "parent_run_id": params.resume_from_run_id,
    }
    if params.name is not None:  # first: what a person reads the file for
        metadata = {"name": params.name, **metadata}
    path, lock = reserve_run_dir(
        pre.root,
        pre.run_id,
        existing,
        overwrite=params.overwrite_existing,
        config=pre.config,
        metadata=metadata,
        extra=extra,
    )
    run = NNRun(
        id=pre.run_id,
        run_dir=path,
        config=pre.config,
        status=RunStatus.RUNNING,
        precision=pre.precision,
        metadata=metadata,
        provenance=recorded,
    )
    return run, lock


def assemble_loop(
    model: NNModel,
    run: NNRun,
    recorder: RunRecorder | None,
    pre: Preflight,
    params: NNTrainParams,
    callbacks: list[Any],
    components: list[Any],
    control: TrainingControl,
    distributed: Any = None,
    eval_step_fn: Callable[..., EDP] | None = None,
    *,
    net_params: Any,
    objective: Any = None,
    train_step_fn: Any = None,
) -> TrainingLoop:
    """The loop and its handlers (a non-writing rank gets only the run's history and
    the callbacks), with the resumed state applied. ``net_params`` are the ones the
    network was built with (a failing batch is diagnosed against them). If this fails,
    the reserved run is recorded as failed (as far as the disk allows) and its lock
    released: a run is never left "running" behind, and can be trained again."""
    try:
        return _assemble(
            model,
            run,
            recorder,
            pre,
            params,
            callbacks,
            components,
            control,
            distributed,
            eval_step_fn,
            net_params,
            objective,
            train_step_fn,
        )
    except BaseException as exc:
        if recorder is not None:
            run.status = RunStatus.FAILED
            run.error = f"{type(exc).__name__}: {exc}"
            run.metadata.update(status=RunStatus.FAILED.value, error=run.error)
            with contextlib.suppress(OSError):
                write_end_record(run)
            recorder.lock.release()
        raise


def _owners(optimizer: Any, train_step_fn: Any) -> dict[str | None, list[Any]]:
    """Each optimizer's tensors: the Trainer's by name, else the one optimizer's."""
    named = getattr(train_step_fn, "optimizers", None)
    if isinstance(named, dict) and named:
        return {k: [p for g in o.param_groups for p in g["params"]] for k, o in named.items()}
    return {None: [p for g in optimizer.param_groups for p in g["params"]]}


def own_state(*objects: Any) -> list[Any]:
    """The objective's and the step's own state (a generator, an EMA) travel with the
    checkpoints as a component's does."""
    return [o for o in objects if o is not None and (is_stateful(o) or is_component(o))]


def _assemble(
    model: NNModel,
    run: NNRun,
    recorder: RunRecorder | None,
    pre: Preflight,
    params: NNTrainParams,
    callbacks: list[Any],
    components: list[Any],
    control: TrainingControl,
    distributed: Any,
    eval_step_fn: Callable[..., EDP] | None,
    net_params: Any,
    objective: Any = None,
    train_step_fn: Any = None,
) -> TrainingLoop:
    precision, task, resume = pre.precision, pre.task, pre.resume
    for obj in (*callbacks, *components):
        reset = getattr(obj, "reset", None)
        if callable(reset):
            reset()
    seed_everything(params.seed)
    optimizer = build_optimizer(optimizer_groups(model.net, params.optim), params.optim)
    scaler = torch.amp.GradScaler(model.device.type) if precision.uses_scaler else None
    updater = Updater(optimizer, scaler, precision, params.optim.grad_clip_norm)
    bus = EventBus([run])
    if recorder is not None:
        bus.add(recorder)
        bus.add(JsonlLogger(run.run_dir / "metrics.jsonl"))
        bus.add(FigureWriter(run.run_dir))
        if params.progress and not tqdm_disabled():
            bus.add(ProgressBar())
    for sink in adapt_callbacks(callbacks, model, run):
        bus.add(sink)
    parts = (model.net, model.loss_fn, task, model.device, precision, updater)
    if train_step_fn is not None:
        step: TrainStep = CustomStep(*parts, fn=train_step_fn, params=params)
    elif callable(getattr(objective, "make_step", None)):  # the Trainer's named optimizers
        step = objective.make_step(*parts, collective=distributed)
    elif objective is not None and distributed is not None:
        step = DistributedObjectiveStep(*parts, objective=objective, collective=distributed)
    elif objective is not None:
        step = ObjectiveStep(*parts, objective=objective)
    elif distributed is None:
        step = TrainStep(*parts)
    else:
        step = DistributedTrainStep(*parts, collective=distributed)
    step.forward_net = compiled_net(model, model.net, model.trained_params().compile)
    if distributed is None or distributed.rank == 0:  # rank 0's synchronized gradients
        bind_probes(callbacks, model.net, _owners(optimizer, train_step_fn or objective), bus)
    # fp32 has no scaler or gradient check: the loss itself is checked before the update.
    # A rank of a DDP run leaves it to the collective flush (a lone raise would hang).
    step.guard_loss = params.stop_on_nonfinite and not precision.reduced and distributed is None
    loop = TrainingLoop(
        step,
        params,
        scheduler=build_scheduler(
            optimizer, params.scheduler, monitored=params.monitor is not None
        ),
        bus=bus,
        control=control,
        stateful=[*callbacks, *components, *own_state(objective, train_step_fn)],
        info=RunInfo(run.id, str(run.run_dir), run.config, run.parent_run_id),
        n_epochs=resume.n_epochs if resume else None,
        planned_epochs=resume.planned_epochs if resume else None,
        diagnose=lambda batch, field, where: batch_problem(batch, field, net_params, task, where),
        evaluator=eval_step_fn,
    )
    meta = {
        "run_id": run.id,
        "net_params": run.config["net"],
        "model_params": run.config["model"],
        # a stateful resume continues a run with the same number of processes
        "world_size": 1 if distributed is None else int(distributed.world_size),
    }
    if recorder is not None:
        bus.add(
            CheckpointPolicy(
                run.run_dir,
                loop,
                meta,
                params.checkpoint_every_s,
                bus.emit,
                gone=recorder.gone_reason,
                best_at=None if resume is None else resume.best_at,
                phases=params.save_phase_checkpoints,
            )
        )
        bus.add(RunEndRecord(recorder, loop))  # after the policy: the end once saved
    if resume is not None:
        resume.apply(model, loop, run, loop.stateful, writes=recorder is not None)
    return loop
