"""``Trainer.train(objective=)``: an ``Objective`` as the Trainer's step (§3.2).

One micro-batch per update: the objective's weighted total (each ``"mean"`` term its
numerator over its denominator, each ``"sum"`` term its numerator) is backpropagated
once and every optimizer steps the parameters it owns, with its own ``grad_clip_norm``;
each of those steps is a reported update. That is the right update when each
optimizer's parameters get their gradient from their own terms (actor-critic: the
policy's term, the value's term); a GAN, whose players pull against each other, needs
a ``trainer_step_fn``. A non-finite total stops the run before the update
(``nonfinite="skip"`` is refused by the Trainer); ``after_update`` runs after each
update; the terms are logged by name, per step and as the epoch's exact means.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..errors import NonFiniteLossError
from .edp import EDP
from .objective import Objective, ObjectiveContext

__all__ = ["ObjectiveTrainerStep"]


class ObjectiveTrainerStep:
    """A ``trainer_step_fn`` that trains ``objective`` with every optimizer at once."""

    def __init__(self, objective: Objective) -> None:
        self.objective = objective
        # the last update's terms for the log: each one's value, and (Σ numerator, Σ
        # denominator) for the epoch's exact per-term mean
        self.terms: tuple[dict[str, torch.Tensor], dict[str, tuple[Any, Any]]] | None = None

    def identity_target(self) -> Any:
        return self.objective.identity_target()

    def __call__(self, ctx: Any) -> EDP:
        X, y = ctx.batch
        device = ctx.device if ctx.device is not None else next(ctx.model.parameters()).device
        batch = (X.to(device), y.to(device))
        # every optimizer steps once per batch here, so the batches updated so far + 1
        # (the run's step counts each optimizer's update: it advances by len(optimizers))
        step = sum(ctx.updates.values()) // max(len(ctx.optimizers), 1) + 1
        octx = ObjectiveContext(step, ctx.epoch_idx, 0, 1, ctx.precision, device, ctx.loss_fn)
        with ctx.precision.autocast():
            result = self.objective(ctx.model, batch, octx)
        total: Any = None
        values: dict[str, torch.Tensor] = {}
        sums: dict[str, tuple[Any, Any]] = {}
        for term in result.terms:
            value = term.numerator
            den = term.denominator if term.reduction == "mean" else 1
            if term.reduction == "mean":
                value = value / term.denominator
            values[term.name] = value.detach().float().reshape(())
            sums[term.name] = (term.numerator.detach().float().reshape(()), den)
            part = value if term.weight == 1 else value * term.weight
            total = part if total is None else total + part
        loss = float(total.detach())
        rows = int(y.shape[0])
        if not math.isfinite(loss):
            raise NonFiniteLossError(f"non-finite training loss ({loss})", loss)
        for opt in ctx.optimizers.values():
            opt.zero_grad(set_to_none=True)
        scaler = ctx.scaler  # fp16: one scaler serves every optimizer of one backward
        (total.reshape(()) if scaler is None else scaler.scale(total.reshape(()))).backward()
        for name, opt in ctx.optimizers.items():
            clip = ctx.grad_clip_norms.get(name)
            if scaler is not None:
                scaler.unscale_(opt)  # clip the true gradients
            if clip:
                owned = [p for g in opt.param_groups for p in g["params"]]
                torch.nn.utils.clip_grad_norm_(owned, clip)
            if scaler is None:
                opt.step()
            else:
                scaler.step(opt)  # skipped when this optimizer's gradients are not finite
            ctx.report_update(name)
        if scaler is not None:
            scaler.update()
        self.objective.after_update(ctx.model, step)
        self.terms = values, sums
        return EDP(loss=loss, samples=rows)

    def current_terms(self) -> Any:
        return self.terms

    def state_dict(self) -> dict[str, Any] | None:
        own = getattr(self.objective, "state_dict", None)
        return own() if callable(own) else None

    def load_state_dict(self, state: Any) -> None:
        own = getattr(self.objective, "load_state_dict", None)
        if callable(own) and state is not None:
            own(state)
