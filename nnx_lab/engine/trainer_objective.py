"""``Trainer.train(objective=)``: an ``Objective`` trained by several named optimizers (§3.2).

The engine's own objective step does the work (``ObjectiveStep``, or
``DistributedObjectiveStep`` under ``distributed=``): exact accumulation (Σ numerator
/ Σ denominator per term over each window, uneven masks and a short last window
included), ``nonfinite="fail"|"skip"``, the union's loss and summed gradients across
ranks, ``after_update``, the terms by name. The Trainer changes who steps: its
``NamedUpdater`` lets every optimizer step the parameters it owns, with its own
``grad_clip_norm``, once per window; each of those steps is a reported update (the
run's step advances by the number of optimizers), and the step records carry ``lrs``.

That is the right update when each optimizer's parameters get their gradient from
their own terms (actor-critic: the policy's term, the value's term); a GAN, whose
players pull against each other, needs a ``trainer_step_fn``.
"""

from __future__ import annotations

from typing import Any

import torch

from .objective import Objective, ObjectiveContext, ObjectiveResult
from .objective_ddp import DistributedObjectiveStep
from .objective_step import ObjectiveStep
from .train_step import StepOutput
from .trainer_optims import NamedOptimizers, NamedUpdater
from .trainer_params import NNTrainerParams

__all__ = ["TrainerObjective"]


class TrainerObjective(Objective):
    """The user's ``objective`` with the Trainer's optimizers: what ``NNModel.train``
    is given as its ``objective=``. Its run identity adds every optimizer's and
    scheduler's settings; it is the run's component ``"trainer"``."""

    def __init__(self, objective: Objective, net: torch.nn.Module, params: NNTrainerParams):
        super().__init__(nonfinite=objective.nonfinite)
        self.objective = objective
        self.named = NamedOptimizers(net, params, objective)
        self.scores_outputs = objective.scores_outputs
        for hook in ("owns_batches", "check"):  # the hooks the engine asks an objective for
            if hasattr(objective, hook):
                setattr(self, hook, getattr(objective, hook))

    def __call__(self, net: torch.nn.Module, batch: Any, ctx: ObjectiveContext) -> ObjectiveResult:
        return self.objective(net, batch, ctx)

    def after_update(self, net: torch.nn.Module, step: int) -> None:
        self.objective.after_update(net, step)

    @property
    def name(self) -> str:
        return self.objective.name

    @property
    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """The named optimizers (a HealthProbe tags each tensor with its owner)."""
        return self.named.optimizers

    def identity_target(self) -> Any:
        return self.objective.identity_target()

    def run_identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {"trainer": self.named.params.identity()}
        own = getattr(self.objective, "run_identity", None)
        if callable(own):
            ident["objective"] = own()
        return ident

    def make_step(self, *parts: Any, collective: Any = None) -> ObjectiveStep:
        """The engine's objective step, one process or one rank, stepping the named
        optimizers (``run_assembly`` asks an objective for its step when it has this)."""
        if collective is None:
            return _TrainerStep(*parts, objective=self)
        return _DistributedTrainerStep(*parts, objective=self, collective=collective)

    # -- the component: the optimizers, schedulers, counts and the objective's own state --
    def component_spec(self) -> Any:
        return self.named.component_spec()

    def component_state(self) -> dict[str, Any]:
        return self.named.component_state()

    def check_component_state(self, state: dict[str, Any], version: int) -> list[str]:
        return self.named.check_component_state(state, version)

    def load_component_state(self, state: dict[str, Any], version: int = 1) -> None:
        self.named.load_component_state(state, version)


class _NamedSteps:
    """What the Trainer changes in the engine's objective step (a mixin for both)."""

    objective: TrainerObjective
    updater: Any

    def _named_updater(self) -> None:
        self.updater = NamedUpdater(self.updater, self.objective.named)

    def accumulated(self, window: list[tuple[Any, Any]], step_number: int = 0) -> Any:
        named = self.objective.named
        n = len(named.optimizers)
        # the objective's ctx.step and after_update count updates (windows), as with one
        # optimizer; the run's step counts every optimizer's
        update = sum(named.updates.values()) // n + 1
        out: StepOutput | None = super().accumulated(window, update)  # type: ignore[misc]
        if out is None:  # nonfinite="skip": no optimizer stepped
            return None
        for name in named.updates:
            named.updates[name] += 1
        out.updates = n
        out.lrs = self.current_lrs()
        return out

    def current_lrs(self) -> dict[str, float]:
        """Each optimizer's rate (the loop's records carry them, and no single lr)."""
        return self.objective.named.current_lrs()

    def plateau_step(self, value: float) -> None:
        """The epoch's plateau signal for the named schedulers (the loop calls it)."""
        self.objective.named.plateau_step(value)


class _TrainerStep(_NamedSteps, ObjectiveStep):
    def __init__(self, *parts: Any, objective: TrainerObjective) -> None:
        super().__init__(*parts, objective=objective)
        self._named_updater()


class _DistributedTrainerStep(_NamedSteps, DistributedObjectiveStep):
    def __init__(self, *parts: Any, objective: TrainerObjective, collective: Any) -> None:
        super().__init__(*parts, objective=objective, collective=collective)
        self._named_updater()
