"""The multi-optimizer Trainer (§3.2): GANs' G and D, actor-critic's policy and value.

``Trainer(model).train(params=NNTrainerParams(...), trainer_step_fn=... | objective=...)``
trains ``model`` through ``NNModel.train``: the run, its id, the checkpoints, warm
resume, the event stream and the monitor are that path's. The Trainer adds the named
optimizers (``trainer_optims.NamedOptimizers``): a component, so every optimizer's and
scheduler's state travels with each checkpoint, with every optimizer's settings in the
run id; each step record carries ``lrs``, every optimizer's current rate by name (the
single ``lr`` is null: no one rate stands for several).
``Trainer.check`` makes every refusal of ``train`` with no side effect: a race checks a
``TrainJob(trainer, params, ...)`` with it before any of its runs starts.

A ``trainer_step_fn`` is the run's ``train_step_fn`` (``_NamedStep``): it owns its
updates, its accumulation and its precision (fp32 only), and cannot run under
``distributed=`` (the engine would not see its updates to all-reduce them). An
``objective=`` is the engine's objective path with every optimizer stepping once per
window (``trainer_objective``): accumulation, ``nonfinite="skip"``, precision
policies and ``distributed=`` are that path's.

Ownership: each optimizer owns the trainable parameters its ``param_groups`` select;
a parameter selected by two optimizers, and a trainable one that none selects, are
refused before any run (freeze a parameter no optimizer should train). A frozen
parameter belongs to no optimizer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ConfigError
from .custom_step import TrainStepContext
from .edp import EDP
from .fingerprint import callable_identity
from .grad_ops import clip_grad_norm, zero_grad
from .objective import Objective
from .trainer_objective import TrainerObjective
from .trainer_optims import NamedOptimizers, owned_groups
from .trainer_params import NNTrainerParams

__all__ = ["Trainer", "TrainerStepContext", "owned_groups"]


@dataclass(frozen=True)
class TrainerStepContext:
    """What a ``trainer_step_fn`` is given for one loader batch. It updates with
    ``optimizers[name]`` (or ``update(name, loss)``) and calls ``report_update(name)``
    after each optimizer step it takes: the run's step count advances by those."""

    model: torch.nn.Module
    batch: Any
    optimizers: dict[str, torch.optim.Optimizer]
    schedulers: dict[str, Any]  # the plateau schedulers by name (stepped by the run)
    report_update: Callable[[str], None]
    update: Callable[[str, torch.Tensor], None]
    batch_idx: int
    epoch_idx: int
    is_last_batch: bool | None
    state: dict[str, Any]  # the step's own scratch space, kept for the run
    device: torch.device | None
    loss_fn: Any = None
    precision: Any = None  # the run's ResolvedPrecision (fp32: see full_precision_only)
    updates: dict[str, int] | None = None  # each optimizer's updates so far (a copy)
    grad_clip_norms: dict[str, float | None] | None = None
    scaler: Any = None  # an fp16 policy's GradScaler (the objective path only)
    # Gradient accumulation (NNTrainerParams.accumulation_steps): the step owns it, as a
    # train_step_fn does. This batch is micro-batch ``micro_batch`` (0-based) of a
    # window of ``window_size`` (``accumulate_grad_batches``, or fewer for an epoch's
    # short last window); ``update(name, loss)`` still steps at once.
    accumulate_grad_batches: int = 1
    micro_batch: int = 0
    window_size: int = 1


class _NamedStep(NamedOptimizers):
    """The run's ``train_step_fn``: the named optimizers and schedulers around the
    user's step, and their state as the run's component."""

    # A step function owns every update, so it would own autocast and a scaler per
    # optimizer too: refused under a reduced policy (an objective's updates are the
    # engine's, and run in the policy).
    __nnx_full_precision_only__ = True

    def __init__(self, net: torch.nn.Module, params: NNTrainerParams, fn: Callable) -> None:
        super().__init__(net, params, fn)
        self.fn = fn
        try:
            self._batches: int | None = len(params.train_loader)
        except TypeError:
            self._batches = None

    def __repr__(self) -> str:  # how a refusal names this step
        return f"Trainer(optims {', '.join(self.optimizers)})"

    # -- the step -------------------------------------------------------------------------
    def __call__(self, ctx: TrainStepContext) -> EDP:
        def report_update(name: str) -> None:
            self.check_name(name, "report_update")
            self.updates[name] += 1
            ctx.report_update()

        def update(name: str, loss: torch.Tensor) -> None:
            self.check_name(name, "update")
            opt = self.optimizers[name]
            zero_grad(opt)
            loss.backward()
            if self.clip[name]:
                owned = [p for g in opt.param_groups for p in g["params"]]
                clip_grad_norm(owned, self.clip[name])
            opt.step()
            report_update(name)

        accum = ctx.accumulate_grad_batches
        position = ctx.batch_idx % accum
        start = ctx.batch_idx - position
        size = accum if self._batches is None else min(accum, self._batches - start)
        return self.fn(
            TrainerStepContext(
                model=ctx.model,
                batch=ctx.batch,
                optimizers=self.optimizers,
                schedulers=self.schedulers,
                report_update=report_update,
                update=update,
                batch_idx=ctx.batch_idx,
                epoch_idx=ctx.epoch_idx,
                is_last_batch=ctx.is_last_batch,
                state=self.state,
                device=ctx.device,
                loss_fn=ctx.loss_fn,
                precision=ctx.precision,
                updates=dict(self.updates),
                grad_clip_norms=dict(self.clip),
                scaler=ctx.scaler,
                accumulate_grad_batches=accum,
                micro_batch=position,
                window_size=size,
            )
        )

    # -- what the engine asks of it --------------------------------------------------------
    def run_identity(self) -> dict[str, Any]:
        return {"step": callable_identity(self.fn), **self.params.identity()}


class Trainer:
    """Trains one ``NNModel`` with several named optimizers (§3.2)."""

    def __init__(self, model: Any) -> None:
        from .model import NNModel  # the model module is heavy; the Trainer wraps one

        if not isinstance(model, NNModel):
            raise ConfigError("Trainer(model)", type(model).__name__, "pass an NNModel(...)")
        self.model = model
        self.last_step: NamedOptimizers | None = None  # the last run's optimizers

    def train(
        self,
        params: NNTrainerParams,
        *,
        trainer_step_fn: Callable[[TrainerStepContext], EDP] | None = None,
        objective: Any = None,
        callbacks: Sequence[Any] = (),
        components: Sequence[Any] = (),
        **train_kw: Any,
    ) -> Any:
        """Train and record a run (``NNModel.train``'s, whose keywords ``control``,
        ``provenance``, ``eval_step_fn`` and ``salt`` pass through); every check runs
        before the run directory exists. Returns the ``NNRun``."""
        step = self._step(params, trainer_step_fn, objective, train_kw)
        self.last_step = _optimizers_of(step)
        return self.model.train(params.train_params(), callbacks, components, **step, **train_kw)

    def check(
        self,
        params: NNTrainerParams,
        *,
        trainer_step_fn: Callable[[TrainerStepContext], EDP] | None = None,
        objective: Any = None,
        callbacks: Sequence[Any] = (),
        components: Sequence[Any] = (),
        banner: bool = True,
        **train_kw: Any,
    ) -> Any:
        """Every refusal ``train`` makes with these arguments before its run directory
        exists (its own, then ``NNModel.train``'s: ``train_gate.check_train``), with no
        side effect: no run directory, no file, no training, ``last_step`` unchanged.
        Returns the ``TrainGate`` (its ``pre.run_id`` is the run's id). A race checks a
        Trainer job with it; ``banner=False`` keeps the model's drift banner for the run."""
        from .train_gate import check_train  # the run's checks load the heavy modules

        step = self._step(params, trainer_step_fn, objective, train_kw)
        return check_train(
            self.model,
            params.train_params(),
            callbacks,
            components,
            banner=banner,
            **step,
            **train_kw,
        )

    def _step(
        self,
        params: Any,
        trainer_step_fn: Any,
        objective: Any,
        train_kw: dict[str, Any],
    ) -> dict[str, Any]:
        """The Trainer's own refusals, then ``NNModel.train``'s step keyword for this run
        (``objective=`` a ``TrainerObjective`` or ``train_step_fn=`` a ``_NamedStep``),
        with fresh named optimizers (building them refuses a parameter two optimizers
        select or none does). ``train`` and ``check`` both start here."""
        if not isinstance(params, NNTrainerParams):
            raise ConfigError("params", type(params).__name__, "pass an NNTrainerParams(...)")
        if (trainer_step_fn is None) == (objective is None):
            raise ConfigError(
                "trainer_step_fn",
                trainer_step_fn,
                "pass exactly one of trainer_step_fn= (a function (ctx: TrainerStepContext) "
                "-> EDP that steps the optimizers) and objective= (an Objective), not both",
            )
        if "train_step_fn" in train_kw:
            raise ConfigError(
                "train_step_fn",
                train_kw["train_step_fn"],
                "the Trainer's step is trainer_step_fn= or objective= (its optimizers are named)",
            )
        if objective is not None:
            if not isinstance(objective, Objective):
                raise ConfigError("objective", objective, "pass an nnx_lab.Objective(...)")
            return {"objective": TrainerObjective(objective, self.model.net, params)}
        if not callable(trainer_step_fn):
            raise ConfigError(
                "trainer_step_fn",
                trainer_step_fn,
                "pass a function (ctx: TrainerStepContext) -> EDP that steps the optimizers",
            )
        if train_kw.get("distributed") is not None:
            raise ConfigError(
                "trainer_step_fn",
                getattr(trainer_step_fn, "__qualname__", type(trainer_step_fn).__name__),
                "a trainer_step_fn steps the optimizers itself, so the engine cannot apply "
                "the data-parallel gradient all-reduce to its updates; under distributed= "
                "describe the loss as an objective= (every optimizer then steps on the "
                "union's gradients)",
            )
        return {"train_step_fn": _NamedStep(self.model.net, params, trainer_step_fn)}


def _optimizers_of(step: dict[str, Any]) -> NamedOptimizers:
    """The named optimizers of ``_step``'s keyword (an objective holds them, a step is them)."""
    (wrapped,) = step.values()
    return wrapped.named if isinstance(wrapped, TrainerObjective) else wrapped
