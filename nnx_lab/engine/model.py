"""``NNModel``: build, train, evaluate and predict with the NNx API.

The facade holds what a model is (its network, loss, device, precision and what it
was built from) and reads as a table of contents; the work is elsewhere:

- ``train``: the refusals (``train_checks``), the run's identity (``preflight``:
  precision, first-batch checks or step-owned batches (``step_batches``), the resume
  plan, ``run_config``), the run directory and the loop (``run_assembly``), the run;
- ``evaluate``: ``evaluate.evaluate``; ``predict``, ``predict_proba``, ``iter_predict``:
  ``prediction`` (one inference path) and ``prediction_stream``;
- ``from_checkpoint``: the recipe a checkpoint's sidecar carries (``checkpoint``);
  ``evaluate``, ``iter_predict`` and ``from_checkpoint`` are done in ``model_reload``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..errors import ConfigError
from ..runs import emit, resolve_runs_root
from .adapters import BatchAdapter, adapt_inputs
from .checkpoint import NNCheckpoint
from .compile_options import check_compile
from .data import check_inputs, first_targets, tensor_digest
from .edp import EDP
from .enums import Devices
from .events import TrainingControl
from .finetune import freeze, frozen, unfreeze
from .fingerprint import code_record
from .losses import LossFn
from .model_reload import evaluate_model, open_stream, rebuild
from .network_source import (
    adapt_train_params,
    build_network,
    check_adapter,
    current_params,
    learn_output_dim,
    model_device,
    net_json,
    refuse_loss_ref,
)
from .param_groups import optimizer_groups
from .params import NNModelParams, NNParams, NNTrainParams
from .precision import PrecisionPolicy, ResolvedPrecision, resolve_precision
from .prediction import (
    Prediction,
    predict_logits,
    probabilities,
    probability_spec,
    warn_positions,
)
from .prediction_stream import PredictionStream
from .probabilities import PredictionResult, ProbabilitySpec
from .resume import plan_resume
from .run_assembly import (
    Preflight,
    assemble_loop,
    reserve_run,
    run_config,
)
from .run_handle import NNRun, run_id_for, saved_line
from .step_batches import check_batches, own_batches, owned_task, owns_batches, run_step_checks
from .tasks import Task, task_for
from .train_checks import (
    check_metric_params,
    check_step_precision,
)
from .train_gate import check_train

__all__ = ["NNModel"]


class NNModel:
    """A network plus its loss, device and precision; ``model.net`` is the torch module.

    The network is built under ``init_seed`` in a forked RNG, so the same parameters give
    the same initial weights and the caller's random streams are left alone.

    Your own module (§2.14): ``NNModelParams(net=ModelSpec(id, version, config))`` builds
    a registered factory's network under the spec's seed; ``module=`` wraps an instance
    as it is (``model.net is module``; runtime-only). ``batch_adapter`` says how batches
    reach its ``forward`` (``PositionalInputs``, ``KeywordInputs``); see docs/models.md.
    """

    def __init__(
        self,
        net_params: NNParams | None = None,
        params: NNModelParams | None = None,
        *,
        init_seed: int = 0,
        module: torch.nn.Module | None = None,
        batch_adapter: BatchAdapter | None = None,
    ) -> None:
        if params is None:
            params = NNModelParams()
        if not isinstance(params, NNModelParams):
            raise ConfigError("params", params, "pass an NNModelParams(...)")
        refuse_loss_ref(params.loss)
        self.batch_adapter = check_adapter(batch_adapter)
        self.device = model_device(params.device)
        built = build_network(net_params, params, module, init_seed, self.device)
        self.net_params = net_params
        self.params = params = built.params
        self.net, self._shape = built.net, built.shape
        self.precision: ResolvedPrecision = resolve_precision(
            params.precision, params.mixed_precision, self.device.type
        )
        self._resolved_from = (params.precision, params.mixed_precision)
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
            "net": net_json(self._built_net_params, self._built_params),
            "model": self.trained_params().to_json(),
            "code": code,
        }

    def trained_params(self) -> NNModelParams:
        """What ``train()`` trains with: the net kind and device the network was built
        with, the loss this model holds, and the precision as ``params`` says now (it is
        resolved afresh by every run)."""
        p, built = self.params, self._built_params
        loss = self._loss.kind if self._loss.kind is not None else self._loss.custom
        task = self._task_spec
        if p.net is built.net and p.device is built.device and p.loss is loss and p.task == task:
            return current_params(self.net, p)
        p = p.replace(net=built.net, device=built.device, loss=loss, task=task)
        return current_params(self.net, p)

    def __repr__(self) -> str:
        if not isinstance(self.net_params, NNParams):
            return (
                f"NNModel(net={self.params.net!r}, loss={self._loss.name}, "
                f"device={self.device}, precision={self.precision.effective})"
            )
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
        refuse_loss_ref(loss)
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
        return task_for(self._loss, self._output_dim(), y_sample, self._task_spec)

    def _output_dim(self) -> int:
        return self._shape.known_output_dim(self.params.net)

    def _learn_outputs(self, source: Any, field: str) -> None:
        """An own module's output width, from one no-grad forward on the first batch
        (once; the built-in MLP's is known from NNParams)."""
        if self._shape.output_dim is not None:
            return
        self._shape = learn_output_dim(
            self.net, self._shape, source, field, self.device, self._task_spec, self.params.loss
        )

    @property
    def fixed(self) -> dict[str, Any]:
        """What this model fixed at construction: the net and model params it trains
        and records (JSON) and the code records of a custom loss; a drift report
        compares it with the present."""
        return self._fixed

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
        salt: str | None = None,
        objective: Any = None,
        train_step_fn: Callable[..., EDP] | None = None,
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
        the run, every rank returns the same ``NNRun``. ``salt`` (NNx's): a non-empty
        string folded into the run id, so the same configuration can run twice apart
        (``run.salt``). ``objective`` (an ``Objective``): the loss as named terms, the
        update left to the engine (docs/custom_training.md); it enters the run id.
        ``train_step_fn(ctx: TrainStepContext) -> EDP``: a step that owns forward,
        backward and update, and calls ``ctx.report_update()`` per optimizer step.

        The run trains, and records, what this model was built with: if ``net_params``
        or ``params`` were reassigned since, a drift banner says so first.
        """
        gate = check_train(
            self,
            params,
            callbacks,
            components,
            distributed=distributed,
            provenance=provenance,
            eval_step_fn=eval_step_fn,
            salt=salt,
            objective=objective,
            train_step_fn=train_step_fn,
        )
        params, callbacks, components = gate.params, gate.callbacks, gate.components
        pre, existing = gate.pre, gate.existing

        # -- side effects start here --------------------------------------------------------
        run, recorder = reserve_run(
            pre, params, distributed, existing, provenance, device=str(self.device)
        )
        self.last_run = run
        loop = assemble_loop(
            self,
            run,
            recorder,
            pre,
            params,
            callbacks,
            components,
            control or TrainingControl(),
            distributed,
            eval_step_fn,
            net_params=self._shape,
            objective=objective,
            train_step_fn=train_step_fn,
        )
        self.precision, self._task = pre.precision, pre.task
        self._resolved_from = (self.params.precision, self.params.mixed_precision)
        outcome = loop.run()
        if outcome.raised is not None:
            raise outcome.raised
        if distributed is not None:
            distributed.barrier()  # rank 0 has written everything once the others return
        if recorder is not None:
            emit(saved_line(run.run_dir))  # NNx's closing line; set_config_report silences it
        return run

    def preflight(
        self,
        params: NNTrainParams,
        distributed: Any = None,
        eval_step_fn: Any = None,
        *,
        salt: str | None = None,
        objective: Any = None,
        train_step_fn: Any = None,
    ) -> Preflight:
        """The checks and the run's identity, with no side effect: what ``train`` knows
        before it touches the runs root (``nnx_lab.launch`` calls it for rank 0 of a run
        it has not started, to refuse before any process exists)."""
        params = own_batches(
            adapt_train_params(params, self.batch_adapter), objective, train_step_fn
        )
        owned = owns_batches(params)  # the step reads the batches: no (X, y) checks
        if not owned:
            self._learn_outputs(params.train_loader, "NNTrainParams.train_loader")
        net_params, model_params = self._shape, self.trained_params()
        # The policy is resolved afresh: the device's abilities may differ from build time.
        precision = resolve_precision(
            model_params.precision, model_params.mixed_precision, self.device.type
        )
        check_step_precision(train_step_fn, precision)
        if owned:
            task = owned_task(self)
        else:
            task = self._task_for_loader(params.train_loader, "NNTrainParams.train_loader")
        check_metric_params(params, task, eval_step_fn)
        check_compile(model_params.compile, distributed)
        optimizer_groups(self.net, params.optim)  # a rule with no parameter is refused now
        check_batches(params, net_params, task, eval_step_fn, owned)
        run_step_checks(self, params, objective, train_step_fn)
        root = resolve_runs_root(params.runs_root)
        world = 1 if distributed is None else int(distributed.world_size)
        resume = plan_resume(self, params, precision, root, world)
        config = self.run_config(
            params,
            distributed,
            eval_step_fn,
            salt=salt,
            objective=objective,
            train_step_fn=train_step_fn,
        )
        return Preflight(precision, task, root, resume, config, run_id_for(config))

    def run_config(
        self,
        params: NNTrainParams,
        distributed: Any = None,
        eval_step_fn: Any = None,
        *,
        salt: str | None = None,
        objective: Any = None,
        train_step_fn: Any = None,
    ) -> dict[str, Any]:
        """The ``run.yaml`` a ``train(params)`` would write; its MD5 is the run id.

        Reads no batch (the data's identity hashes tensors without iterating a loader).
        """
        return run_config(
            params,
            distributed,
            eval_step_fn,
            net_params=net_json(self._built_net_params, self._built_params),
            model_params=self.trained_params(),
            weights_digest=self.weights_digest,
            dropout=getattr(self._built_net_params, "dropout_prob", None),
            salt=salt,
            objective=objective,
            train_step_fn=train_step_fn,
            frozen=frozen(self.net),
        )

    def expected_run_id(self, params: NNTrainParams, *, salt: str | None = None) -> str:
        """The id ``train(params)`` would give its run (see ``run_config``)."""
        return run_id_for(self.run_config(params, salt=salt))

    def freeze(self, *patterns: str) -> int:
        """Freeze the parameters matching the globs (``finetune.freeze``); the count."""
        return freeze(self.net, *patterns)

    def unfreeze(self, *patterns: str) -> int:
        """Unfreeze the parameters matching the globs (``finetune.unfreeze``); the count."""
        return unfreeze(self.net, *patterns)

    def weights_digest(self) -> str:
        h = hashlib.sha256()
        for name, tensor in self.net.state_dict().items():
            h.update(name.encode())
            tensor_digest(h, tensor)
        return h.hexdigest()

    def _policy_now(self) -> ResolvedPrecision:
        """The precision inference runs under: a policy swapped into ``model.params``
        since it was last resolved is resolved afresh, as NNx's predict does."""
        source = (self.params.precision, self.params.mixed_precision)
        if source != self._resolved_from:
            self.precision = resolve_precision(*source, self.device.type)
            self._resolved_from = source
        return self.precision

    def _task_for_loader(self, loader: Any, field: str) -> Task:
        if self._loss.kind is not None:
            return self.task()
        return self.task(first_targets(loader, field))

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
        return evaluate_model(self, loader, metrics, extra_metrics)

    def _logits(self, X: Any, surface: str) -> torch.Tensor:
        return predict_logits(
            self.net,
            X,
            device=self.device,
            precision=self._policy_now(),
            input_dim=self._shape,
            output_dim=self._output_dim(),
            surface=surface,
        )

    def predict(self, X: Any) -> Prediction:
        """Raw float32 logits and decoded classes for a tensor, array, tuple or loader."""
        X = self._prediction_inputs(X)
        logits = self._logits(X, "predict")
        return Prediction(logits=logits, classes=self.task().decode(logits))

    def predict_proba(self, X: Any, spec: ProbabilitySpec | None = None) -> PredictionResult:
        """Logits (exactly ``predict()``'s), probabilities, decoded classes and sample
        ids, through the same inference path as ``predict`` (§2.13).

        ``sample_ids`` are input row indices for tensors and arrays, and positions in
        iteration order for a loader (dataset indices only when it does not shuffle: a
        shuffling loader warns).
        """
        derived = spec is None
        X = self._prediction_inputs(X)
        spec = probability_spec(spec, self.params.task, self._output_dim())
        warn_positions(X, stacklevel=2)
        logits = self._logits(X, "predict_proba")
        return probabilities(logits, spec, self.task(), self._task_spec, derived, source=X)

    def iter_predict(
        self, loader: Any, rich: bool = False, spec: ProbabilitySpec | None = None
    ) -> PredictionStream:
        """A context manager streaming one result per loader batch, in order (§2.21).

        ``rich=False`` yields ``PredictionBatch`` (``predict()``'s logits and classes,
        plus ``sample_ids``); ``rich=True`` yields ``PredictionResult`` as
        ``predict_proba`` would (``spec``, or the model's declared task). Concatenated,
        the batches equal ``predict()`` / ``predict_proba()``.
        """
        return open_stream(self, loader, rich, spec)

    def _prediction_inputs(self, X: Any) -> Any:
        X = adapt_inputs(X, self.batch_adapter)
        if self._shape.output_dim is None:
            check_inputs(X)
            self._learn_outputs(X, "X")
        return X

    # -- reloading -------------------------------------------------------------------------
    @classmethod
    def from_checkpoint(
        cls,
        checkpoint: NNCheckpoint,
        device: Devices | str | None = None,
        precision: PrecisionPolicy | str | None = None,
        *,
        loss: Any = None,
        module: torch.nn.Module | None = None,
        batch_adapter: BatchAdapter | None = None,
    ) -> NNModel:
        """Rebuild the model from a checkpoint; the policy is resolved on the new device.

        ``loss`` passes a custom loss again (it is recorded, not saved as code). A
        ``ModelSpec``'s network is rebuilt through the registry (an unregistered id
        raises ``MissingModelFactoryError``); a wrapped module's weights load only into
        the ``module`` passed again. Missing, unexpected or reshaped keys are refused
        before any weight is copied.
        """
        return rebuild(
            cls,
            checkpoint,
            device,
            precision,
            loss=loss,
            module=module,
            batch_adapter=batch_adapter,
        )
