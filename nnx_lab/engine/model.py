"""``NNModel``: build, train, evaluate and predict with the NNx API.

``train()`` is where a run is assembled: every check first, then the run directory, then
a ``TrainingLoop`` with the handlers that record the run attached to its event stream.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import inspect
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError, PredictionValidationError
from ..runs import FORMAT_VERSION, resolve_runs_root, writer_identity
from ..runs._provenance import PROVENANCE_FILE, check_manifest, record_attempt
from .checkpoint import NNCheckpoint
from .collective import Collective, DistributedTrainStep
from .data import (
    batch_problem,
    check_inputs,
    check_loader,
    data_identity,
    first_targets,
    iter_inputs,
    shuffles,
    tensor_digest,
)
from .drift import print_model_banner
from .edp import EDP
from .enums import Devices, RunStatus
from .evaluate import evaluate, inference
from .events import TrainingControl
from .fingerprint import callable_identity, code_record
from .handlers import (
    CheckpointPolicy,
    JsonlLogger,
    ProgressBar,
    RunRecorder,
    adapt_callbacks,
    tqdm_disabled,
)
from .loop import RunInfo, TrainingLoop
from .losses import LossFn
from .nets import build_net
from .optim import build_optimizer, build_scheduler, trainable_groups
from .params import CustomLossRef, NNModelParams, NNParams, NNTrainParams
from .precision import PrecisionPolicy, ResolvedPrecision, resolve_precision
from .prediction_stream import PredictionStream, plain_batch, rich_batch
from .probabilities import PredictionResult, ProbabilitySpec, prediction_from_logits
from .reservation import existing_run_error, inspect_existing, reserve_run_dir
from .resume import plan_resume
from .run_handle import NNRun, environment_metadata, run_id_for, write_metadata
from .scoring import check_declared
from .sinks import EventBus, check_callback
from .tasks import Task, task_for
from .train_step import TrainStep
from .training_state import is_stateful, seed_everything
from .update import Updater

__all__ = ["NNModel", "Prediction"]


@dataclass(frozen=True)
class Prediction:
    """``predict()``'s result: raw float32 logits and decoded classes (or values).

    Unpacks as NNx's does: ``logits, classes = model.predict(X=X)``.
    """

    logits: torch.Tensor
    classes: torch.Tensor

    def __len__(self) -> int:
        return int(self.logits.shape[0])

    def __iter__(self) -> Iterator[torch.Tensor]:
        return iter((self.logits, self.classes))


def _device(kind: Devices) -> torch.device:
    if kind is Devices.CUDA and not torch.cuda.is_available():
        raise ConfigError(
            "NNModelParams.device",
            kind,
            "no CUDA device is present; use Devices.get() or Devices.CPU",
        )
    if kind is Devices.MPS and not torch.backends.mps.is_available():
        raise ConfigError(
            "NNModelParams.device",
            kind,
            "no MPS device is present; use Devices.get() or Devices.CPU",
        )
    return torch.device(kind.value)


def _check_distributed(distributed: Any, params: NNTrainParams) -> None:
    if not isinstance(distributed, Collective):
        raise ConfigError(
            "distributed", distributed, "pass nnx_lab.distributed.DDP() (after init_process_group)"
        )
    for name, maker in (("train_loader", "train_loader"), ("val_loader", "validation_loader")):
        loader = getattr(params, name)
        if loader is not None and not getattr(loader, "nnx_distributed", False):
            raise ConfigError(
                f"NNTrainParams.{name}",
                type(loader).__name__,
                f"under distributed= every rank needs its share of the data: use "
                f"nnx_lab.distributed.{maker}(dataset, batch_size)",
            )


@contextlib.contextmanager
def _agreed(distributed: Any, what: str) -> Iterator[None]:
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


def _check_eval_step(fn: Any) -> None:
    """Refuse an ``eval_step_fn`` that cannot be called as the loop calls it."""
    fix = (
        "pass a function fn(net, loader, loss, task, *, device, precision) -> EDP, e.g. "
        "nnx_lab.streaming_eval_step"
    )
    if not callable(fn):
        raise ConfigError("eval_step_fn", fn, fix)
    try:
        inspect.signature(fn).bind(None, None, None, None, device=None, precision=None)
    except TypeError as exc:
        raise ConfigError(
            "eval_step_fn", fn, f"its signature does not fit ({exc}); {fix}"
        ) from None
    except ValueError:  # a builtin with no signature: let the call decide
        pass


def _check_metric_params(params: NNTrainParams, task: Task, eval_step_fn: Any) -> None:
    """Declared metrics must fit the task's outputs, and a monitor must name a value the
    run records (refused before any side effect)."""
    check_declared(params.metrics, task, "NNTrainParams.metrics")
    monitor = params.monitor
    if monitor is None:
        return
    if monitor.split == "val" and params.val_loader is None:
        raise ConfigError(
            "NNTrainParams.monitor",
            monitor,
            "it monitors the validation split and val_loader is None: pass a val_loader, "
            "or MonitorSpec(..., split='train') for the whole training epoch",
        )
    fields = ["loss"]
    if task.k is not None:
        fields += ["error", "accuracy", "precision", "recall", "f1"]
    keys = [*task.record_metrics, *(m.key for m in params.metrics)]
    if monitor.metric in fields or monitor.metric in keys:
        return
    if monitor.split == "val" and eval_step_fn is not None:
        return  # a custom evaluator may report it in EDP.metrics itself
    names = ", ".join(repr(n) for n in dict.fromkeys([*fields, *keys]))
    raise ConfigError(
        "NNTrainParams.monitor",
        monitor.metric,
        f"this run records {names}; declare the metric "
        f"(NNTrainParams(metrics=[MetricSpec({monitor.metric.split('(')[0]!r}), ...])) or "
        "monitor one of those",
    )


def _warn_positions(X: Any, stacklevel: int) -> None:
    if shuffles(X):
        warnings.warn(
            "this loader shuffles (or samples), so sample_ids are positions in this "
            "iteration's order, not dataset indices; predict from a loader with "
            "shuffle=False to get dataset indices",
            UserWarning,
            stacklevel=stacklevel + 1,
        )


def _refuse_loss_ref(loss: Any) -> None:
    if isinstance(loss, CustomLossRef):
        raise ConfigError(
            "NNModelParams.loss",
            loss.name,
            "this record was trained with a custom loss, which is not saved as code; pass "
            "the loss again: NNModel.from_checkpoint(ckpt, loss=YourLoss()) or "
            "NNModelParams(loss=YourLoss())",
        )


class NNModel:
    """A network plus its loss, device and precision; ``model.net`` is the torch module.

    The network is built under ``init_seed`` in a forked RNG, so the same parameters give
    the same initial weights and the caller's random streams are left alone.
    """

    def __init__(
        self,
        net_params: NNParams | None = None,
        params: NNModelParams | None = None,
        *,
        init_seed: int = 0,
    ) -> None:
        if params is None:
            params = NNModelParams()
        if not isinstance(params, NNModelParams):
            raise ConfigError("params", params, "pass an NNModelParams(...)")
        if not isinstance(net_params, NNParams):
            raise ConfigError(
                "net_params",
                net_params,
                "pass NNParams(input_dim=..., output_dim=..., hidden_dims=[...])",
            )
        _refuse_loss_ref(params.loss)
        if params.task is not None:
            params.task.check(params.loss, net_params.output_dim)
        self.net_params = net_params
        self.params = params
        self.device = _device(params.device)
        self.precision: ResolvedPrecision = resolve_precision(
            params.precision, params.mixed_precision, self.device.type
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(init_seed)
            self.net = build_net(params.net, net_params).to(self.device)
        self._task_spec = params.task  # the declared task the loss was built for
        self._loss = LossFn(params.loss, params.task)
        self._task: Task | None = None  # the task of the last train() (a custom loss's)
        self.last_run: NNRun | None = None
        # What this model fixed at construction: the network is built from these values
        # and keeps them whatever is assigned to ``net_params`` / ``params`` later. A
        # drift report compares this record with the present (nnx_lab.drift_report).
        self._built_net_params, self._built_params = net_params, params
        self._fixed = self._fix_record()

    def _fix_record(self) -> dict[str, Any]:
        code = [] if self._loss.kind is not None else [code_record(self._loss.custom, "model.loss")]
        return {
            "net": self._built_net_params.to_json(),
            "model": self._trained_params().to_json(),
            "code": code,
        }

    def _trained_params(self) -> NNModelParams:
        """What ``train()`` trains with: the net kind and device the network was built
        with, the loss this model holds, and the precision as ``params`` says now (it is
        resolved afresh by every run)."""
        p, built = self.params, self._built_params
        loss = self._loss.kind if self._loss.kind is not None else self._loss.custom
        task = self._task_spec
        if p.net is built.net and p.device is built.device and p.loss is loss and p.task == task:
            return p
        return p.replace(net=built.net, device=built.device, loss=loss, task=task)

    def __repr__(self) -> str:
        return (
            f"NNModel(net={self.params.net.name}, dims={self.net_params.input_dim}->"
            f"{list(self.net_params.hidden_dims)}->{self.net_params.output_dim}, "
            f"loss={self._loss.name}, device={self.device}, "
            f"precision={self.precision.effective})"
        )

    @property
    def loss_fn(self) -> LossFn:
        """The loss: ``model.loss_fn(out, y)`` is a batch's mean. Assign a ``Losses``
        member, a loss module or a callable to change it (it enters the run id)."""
        return self._loss

    @loss_fn.setter
    def loss_fn(self, loss: Any) -> None:
        _refuse_loss_ref(loss)
        raw = loss.kind if isinstance(loss, LossFn) else loss
        if raw is None and isinstance(loss, LossFn):
            raw = loss.custom
        if self._task_spec is not None:
            self._task_spec.check(raw, field="model.loss_fn")
        resolved = LossFn(raw, self._task_spec)
        self.params = self.params.replace(loss=resolved.kind or resolved.custom)
        self._loss, self._task = resolved, None
        self._fixed = self._fix_record()  # the model now holds this loss: fixed anew

    def task(self, y_sample: torch.Tensor | None = None) -> Task:
        """How outputs are decoded and scored (the loss's task; a custom loss's follows
        its targets' dtype)."""
        if self._loss.kind is None and y_sample is None and self._task is not None:
            return self._task
        return task_for(self._loss, self.net_params.output_dim, y_sample, self._task_spec)

    # -- training ---------------------------------------------------------------------------
    def train(
        self,
        params: NNTrainParams,
        callbacks: Sequence[Any] = (),
        components: Sequence[Any] = (),
        control: TrainingControl | None = None,
        *,
        distributed: Any = None,
        provenance: Any = None,
        eval_step_fn: Callable[..., EDP] | None = None,
    ) -> NNRun:
        """Train and record a run; every check runs before the run directory exists.

        ``callbacks`` are event sinks (or NNx-style callbacks, or NNx's legacy
        ``fn(idps)``); ``components`` are extra objects whose ``state_dict()`` travels
        with checkpoints; ``control`` lets another thread stop the run between steps;
        ``provenance`` is an ``ExperimentManifest`` (§2.15), written into the run
        directory with this attempt (``run.provenance``); it never changes the run id.
        ``eval_step_fn(net, loader, loss, task, *, device, precision) -> EDP`` replaces
        ``evaluate()`` for the per-epoch validation pass (e.g. ``streaming_eval_step``);
        it enters the run id by its code. ``distributed=nnx_lab.distributed.DDP()`` makes
        this process one rank of a data-parallel run (docs/distributed.md): rank 0 writes
        the run, every rank returns the same ``NNRun``.

        The run trains, and records, what this model was built with: if ``net_params``
        or ``params`` were reassigned since, a drift banner says so first.
        """
        if not isinstance(params, NNTrainParams):
            raise ConfigError("params", params, "pass an NNTrainParams(...)")
        if distributed is not None:
            _check_distributed(distributed, params)
        if eval_step_fn is not None:
            _check_eval_step(eval_step_fn)
        callbacks, components = list(callbacks), list(components)
        for cb in callbacks:
            check_callback(cb)
        for comp in components:
            if not is_stateful(comp):
                raise ConfigError(
                    "components",
                    comp,
                    "each component must define state_dict() and load_state_dict()",
                )
        print_model_banner(self)
        pre = self._preflight(params, distributed, eval_step_fn)
        precision, task, root, resume, config = (
            pre.precision, pre.task, pre.root, pre.resume, pre.config
        )  # fmt: skip
        if provenance is not None:
            check_manifest(provenance, config)
        run_id = pre.run_id
        writer = distributed is None or distributed.rank == 0
        existing = None
        with _agreed(distributed, "check the run"):
            if writer:
                existing = inspect_existing(root, run_id)
                if existing is not None:
                    existing_run_error(root, run_id, existing, params.overwrite_existing)

        # -- side effects start here --------------------------------------------------------
        lock: Any = None
        recorder: RunRecorder | None = None
        with _agreed(distributed, "reserve the run directory"):
            if writer:
                run, lock = self._open_run(
                    root, run_id, config, params, precision, existing, provenance
                )
                recorder = RunRecorder(run, lock)
            else:  # another rank: the same run, in memory; rank 0 writes it
                run = self._rank_run(root, run_id, config, precision)
        try:
            loop = self._assemble(
                run,
                recorder,
                params,
                precision,
                task,
                resume,
                callbacks,
                components,
                control or TrainingControl(),
                distributed,
                eval_step_fn,
            )
        except BaseException as exc:  # never leave a run "running" behind
            if writer:
                run.status = RunStatus.FAILED
                run.metadata.update(
                    status=RunStatus.FAILED.value, error=f"{type(exc).__name__}: {exc}"
                )
                with contextlib.suppress(OSError):
                    write_metadata(run)
                lock.release()
            raise
        self.precision, self._task = precision, task
        outcome = loop.run()
        if outcome.raised is not None:
            raise outcome.raised
        if distributed is not None:
            distributed.barrier()  # rank 0 has written everything once the others return
        return run

    def _preflight(
        self, params: NNTrainParams, distributed: Any = None, eval_step_fn: Any = None
    ) -> SimpleNamespace:
        """The checks and the run's identity, with no side effect: what ``train`` knows
        before it touches the runs root (``nnx_lab.launch`` calls it for rank 0 of a run
        it has not started, to refuse before any process exists)."""
        net_params, model_params = self._built_net_params, self._trained_params()
        # The policy is resolved afresh: the device's abilities may differ from build time.
        precision = resolve_precision(
            model_params.precision, model_params.mixed_precision, self.device.type
        )
        task = self._task_for_loader(params.train_loader, "NNTrainParams.train_loader")
        _check_metric_params(params, task, eval_step_fn)
        check_loader(params.train_loader, "NNTrainParams.train_loader", net_params, task)
        if params.val_loader is not None:
            check_loader(params.val_loader, "NNTrainParams.val_loader", net_params, task)
        root = resolve_runs_root(params.runs_root)
        world = 1 if distributed is None else int(distributed.world_size)
        resume = plan_resume(self, params, precision, root, world)
        config = self.run_config(params, distributed, eval_step_fn)
        return SimpleNamespace(
            precision=precision,
            task=task,
            root=root,
            resume=resume,
            config=config,
            run_id=run_id_for(config),
        )

    def _rank_run(
        self, root: Any, run_id: str, config: dict[str, Any], precision: ResolvedPrecision
    ) -> NNRun:
        run = NNRun(
            id=run_id,
            run_dir=root / run_id,
            config=config,
            status=RunStatus.RUNNING,
            precision=precision,
        )
        self.last_run = run
        return run

    def run_config(
        self, params: NNTrainParams, distributed: Any = None, eval_step_fn: Any = None
    ) -> dict[str, Any]:
        """The ``run.yaml`` a ``train(params)`` would write; its MD5 is the run id.

        Reads no batch (the data's identity hashes tensors without iterating a loader).
        """
        config = {
            "format": FORMAT_VERSION,
            "net": self._built_net_params.to_json(),
            "model": self._trained_params().to_json(),
            "train": params.identity(),
            "data": data_identity(params.train_loader, params.val_loader, params.data_id),
            "initial_weights": None
            if params.resume_from_run_id is not None
            else self.weights_digest(),
        }
        if distributed is not None and self._built_net_params.dropout_prob > 0:
            # Each rank draws its own dropout masks: the result depends on the world size.
            config["distributed"] = {"world_size": distributed.world_size}
        if eval_step_fn is not None:  # absent by default: existing run ids stay as they were
            config["eval_step"] = callable_identity(eval_step_fn)
        return config

    def expected_run_id(self, params: NNTrainParams) -> str:
        """The id ``train(params)`` would give its run (see ``run_config``)."""
        return run_id_for(self.run_config(params))

    def _assemble(
        self,
        run: NNRun,
        recorder: RunRecorder | None,
        params: NNTrainParams,
        precision: ResolvedPrecision,
        task: Task,
        resume: Any,
        callbacks: list[Any],
        components: list[Any],
        control: TrainingControl,
        distributed: Any = None,
        eval_step_fn: Callable[..., EDP] | None = None,
    ) -> TrainingLoop:
        """The loop and its handlers (a non-writing rank gets only the run's history and
        the callbacks), with the resumed state applied."""
        for obj in (*callbacks, *components):
            reset = getattr(obj, "reset", None)
            if callable(reset):
                reset()
        seed_everything(params.seed)
        optimizer = build_optimizer(trainable_groups(self.net), params.optim)
        scaler = torch.amp.GradScaler(self.device.type) if precision.uses_scaler else None
        updater = Updater(optimizer, scaler, precision, params.optim.grad_clip_norm)
        bus = EventBus([run])
        if recorder is not None:
            bus.add(recorder)
            bus.add(JsonlLogger(run.run_dir / "metrics.jsonl"))
            if params.progress and not tqdm_disabled():
                bus.add(ProgressBar())
        for sink in adapt_callbacks(callbacks, self, run):
            bus.add(sink)
        parts = (self.net, self._loss, task, self.device, precision, updater)
        step = (
            TrainStep(*parts)
            if distributed is None
            else DistributedTrainStep(*parts, collective=distributed)
        )
        loop = TrainingLoop(
            step,
            params,
            scheduler=build_scheduler(
                optimizer, params.scheduler, monitored=params.monitor is not None
            ),
            bus=bus,
            control=control,
            stateful=[*callbacks, *components],
            info=RunInfo(run.id, str(run.run_dir), run.config, run.parent_run_id),
            n_epochs=resume.n_epochs if resume else None,
            planned_epochs=resume.planned_epochs if resume else None,
            diagnose=lambda batch, field, where: batch_problem(
                batch, field, self._built_net_params, task, where
            ),
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
                )
            )
        if resume is not None:
            resume.apply(self, loop, run, [*callbacks, *components], writes=recorder is not None)
        return loop

    def _task_for_loader(self, loader: Any, field: str) -> Task:
        if self._loss.kind is not None:
            return self.task()
        return self.task(first_targets(loader, field))

    def _open_run(
        self,
        root: Any,
        run_id: str,
        config: dict[str, Any],
        params: NNTrainParams,
        precision: ResolvedPrecision,
        existing: Any,
        provenance: Any = None,
    ) -> tuple[NNRun, Any]:
        """Reserve the run directory with its records (status "running") and its lock;
        a provenance manifest is written with them, so the folder appears whole."""
        now = time.time()
        extra: dict[str, Any] = {}
        recorded = None
        if provenance is not None:
            recorded = record_attempt(provenance, run_id, started_at=now)
            extra[PROVENANCE_FILE] = recorded.to_json()
        parent = None if params.resume_from_run_id is None else params.resume_from_run_id
        metadata = {
            **environment_metadata(str(self.device), params.seed),
            "status": RunStatus.RUNNING.value,
            "started_at": now,
            "heartbeat": now,
            "writer": writer_identity(),
            "precision": precision.record(),
            "parent_run_id": parent,
        }
        path, lock = reserve_run_dir(
            root,
            run_id,
            existing,
            overwrite=params.overwrite_existing,
            config=config,
            metadata=metadata,
            extra=extra,
        )
        run = NNRun(
            id=run_id,
            run_dir=path,
            config=config,
            status=RunStatus.RUNNING,
            precision=precision,
            metadata=metadata,
            provenance=recorded,
        )
        self.last_run = run
        return run, lock

    def weights_digest(self) -> str:
        h = hashlib.sha256()
        for name, tensor in self.net.state_dict().items():
            h.update(name.encode())
            tensor_digest(h, tensor)
        return h.hexdigest()

    def lr_finder(self, train_loader: Any, **kwargs: Any) -> Any:
        """``nnx_lab.lr_finder`` on this model's network, loss and precision policy; the
        model is left exactly as it was (see docs/lr_finder.md)."""
        from ..lr_sweep import lr_finder  # the tool builds on the engine, not the reverse

        kwargs.setdefault("precision", self.precision)
        return lr_finder(self.net, train_loader, self._loss.kind or self._loss.custom, **kwargs)

    # -- evaluation and prediction ----------------------------------------------------------
    def evaluate(
        self,
        loader: Any,
        metrics: Sequence[Any] = (),
        extra_metrics: dict[str, Callable[[Any, Any], Any]] | None = None,
    ) -> EDP:
        """Metrics over the whole loader (sums and a confusion matrix, finalized once).

        A declared task's metrics come in ``EDP.metrics``; ``metrics`` (``MetricSpec``)
        adds registry metrics there too, and ``extra_metrics`` callables are called once
        on the aggregate predictions (``EDP.extra``), as in training (§2.6)."""
        checked = NNTrainParams(metrics=metrics, extra_metrics=extra_metrics)  # same checks
        task = self._task_for_loader(loader, "loader")
        check_declared(checked.metrics, task, "metrics")
        check_loader(loader, "loader", self.net_params, task)
        return evaluate(
            self.net,
            loader,
            self._loss,
            task,
            device=self.device,
            precision=self.precision,
            metrics=checked.metrics,
            extra_metrics=checked.extra_metrics,
        )

    def _check_features(self, xb: torch.Tensor) -> None:
        if xb.ndim < 2 or xb.shape[-1] != self.net_params.input_dim:
            raise ConfigError(
                "X",
                f"a batch of shape {tuple(xb.shape)}",
                f"features must have {self.net_params.input_dim} columns (NNParams.input_dim)",
            )

    def _logits(self, X: Any, surface: str) -> torch.Tensor:
        """Float32 logits of every row, on the host: the one inference path of
        ``predict`` and ``predict_proba``."""
        check_inputs(X)
        outs = []
        with inference(self.net, self.precision, surface):
            for xb in iter_inputs(X):
                self._check_features(xb)
                outs.append(self.net(xb.to(self.device)).float())
        if not outs:
            return torch.empty(0, self.net_params.output_dim)
        return torch.cat(outs).cpu()

    def predict(self, X: Any) -> Prediction:
        """Raw float32 logits and decoded classes for a tensor, array, tuple or loader."""
        logits = self._logits(X, "predict")
        return Prediction(logits=logits, classes=self.task().decode(logits))

    def _probability_spec(self, spec: ProbabilitySpec | None) -> ProbabilitySpec | None:
        """The spec to apply (None: a declared regression task), refused before any
        inference when it cannot fit this network's outputs."""
        if spec is None:
            declared = getattr(self.params, "task", None)
            if declared is None:
                raise PredictionValidationError(
                    "spec",
                    "no ProbabilitySpec was passed and the model declares no task",
                    "pass one, e.g. model.predict_proba(X, ProbabilitySpec(kind='categorical', "
                    "labels=(...))); the kind is declared, never inferred from the loss",
                )
            # Seam for declared tasks (§2.5): a task gives its spec, None for regression.
            spec = declared.probability_spec()
            if spec is None:
                return None
        if not isinstance(spec, ProbabilitySpec):
            raise PredictionValidationError(
                "spec",
                f"a {type(spec).__name__} is not a ProbabilitySpec",
                "pass ProbabilitySpec(kind='categorical' | 'bernoulli', class_axis=..., "
                "labels=...)",
            )
        spec.check_shape((0, self.net_params.output_dim))
        return spec

    def predict_proba(self, X: Any, spec: ProbabilitySpec | None = None) -> PredictionResult:
        """Logits (exactly ``predict()``'s), probabilities, decoded classes and sample
        ids, through the same inference path as ``predict`` (§2.13).

        ``sample_ids`` are input row indices for tensors and arrays, and positions in
        iteration order for a loader (dataset indices only when it does not shuffle: a
        shuffling loader warns).
        """
        derived = spec is None
        spec = self._probability_spec(spec)
        _warn_positions(X, stacklevel=2)
        logits = self._logits(X, "predict_proba")
        if spec is None:
            ids = np.arange(logits.shape[0], dtype=np.int64)
            return PredictionResult(logits, None, self.task().decode(logits), None, ids)
        result = prediction_from_logits(logits, spec)
        task = self._task_spec
        if derived and task is not None and task.kind == "multilabel" and task.threshold != 0.5:
            # the declared threshold decodes, as in predict() and the records
            result = dataclasses.replace(result, decoded=self.task().decode(logits))
        return result

    def iter_predict(
        self, loader: Any, rich: bool = False, spec: ProbabilitySpec | None = None
    ) -> PredictionStream:
        """A context manager streaming one result per loader batch, in order (§2.21).

        ``rich=False`` yields ``PredictionBatch`` (``predict()``'s logits and classes,
        plus ``sample_ids``); ``rich=True`` yields ``PredictionResult`` as
        ``predict_proba`` would (``spec``, or the model's declared task). Concatenated,
        the batches equal ``predict()`` / ``predict_proba()``.
        """
        if not isinstance(rich, bool):
            raise ConfigError("rich", rich, "pass True (PredictionResult) or False")
        if not rich and spec is not None:
            raise ConfigError(
                "spec", spec, "a spec applies to rich=True streams; pass rich=True with it"
            )
        check_inputs(loader)  # refused now, not at the first batch
        task = self.task()
        make = rich_batch(self._probability_spec(spec), task) if rich else plain_batch(task)
        _warn_positions(loader, stacklevel=2)
        return PredictionStream(self, loader, make, "predict_proba" if rich else "predict")

    # -- reloading -------------------------------------------------------------------------
    @classmethod
    def from_checkpoint(
        cls,
        checkpoint: NNCheckpoint,
        device: Devices | str | None = None,
        precision: PrecisionPolicy | str | None = None,
        *,
        loss: Any = None,
    ) -> NNModel:
        """Rebuild the model from a checkpoint; the policy is resolved on the new device.

        ``loss`` passes a custom loss again (it is recorded, not saved as code).
        """
        if not isinstance(checkpoint, NNCheckpoint):
            raise ConfigError(
                "checkpoint",
                checkpoint,
                "pass NNCheckpoint.load(run=..., type=Checkpoints.BEST|LAST)",
            )
        mp = checkpoint.model_params
        changes: dict[str, Any] = {}
        if device is not None:
            changes["device"] = device
        if precision is not None:
            changes["precision"] = precision
            changes["mixed_precision"] = False
        if loss is not None:
            changes["loss"] = loss
        if changes:
            mp = mp.replace(**changes)
        model = cls(net_params=checkpoint.net_params, params=mp)
        model.net.load_state_dict(checkpoint.model_state)
        return model
