"""Mixup (Zhang et al. 2018): train on convex blends of a batch with a shuffled copy
of itself (§3.4).

Per batch, from the step's own generator: ``lam ~ Beta(alpha, alpha)`` and a
permutation ``perm`` of the rows. The network sees ``lam · X + (1 − lam) · X[perm]`` and
the loss is ``lam · loss(out, y) + (1 − lam) · loss(out, y[perm])`` with the model's
own loss. The generator's state is the step's component state, checkpointed with the
run, so a resumed run draws what the uninterrupted one would. ``lam`` is logged in the
step record's ``terms``. The batch is ``(X, y)`` with floating-point inputs.
"""

from __future__ import annotations

from typing import Any

import torch

from ..engine.adapters import forward
from ..engine.custom_step import full_precision_only
from ..engine.edp import EDP
from ..errors import DataError
from ._step import (
    GeneratorStep,
    apply_update,
    beta_draw,
    check_alpha,
    check_one_batch_per_update,
    peek_batch,
    step_device,
    supervised_pair,
)

__all__ = ["MixingStep", "mixup_train_step_factory"]


class MixingStep(GeneratorStep):
    """One update on a batch mixed with its own permutation; ``mix`` says how."""

    factory = "mixup_train_step_factory"
    component_name = "mixup"

    def __init__(self, alpha: Any, seed: int) -> None:
        self.alpha = check_alpha(f"{self.factory}(alpha)", alpha)
        super().__init__(seed)
        self.terms: Any = None
        full_precision_only(self)

    def mix(self, X: torch.Tensor) -> tuple[torch.Tensor, float, torch.Tensor]:
        """(mixed inputs, the weight of the unpermuted targets, the permutation)."""
        lam = beta_draw(self.alpha, self.generator)
        perm = torch.randperm(X.shape[0], generator=self.generator).to(X.device)
        return lam * X + (1.0 - lam) * X[perm], lam, perm

    def __call__(self, ctx: Any) -> EDP:
        device = step_device(ctx)
        X, y = supervised_pair(ctx.batch, "NNTrainParams.train_loader")
        self.check_inputs(X, "NNTrainParams.train_loader")
        X, y = X.to(device), y.to(device)
        mixed, lam, perm = self.mix(X)
        out = forward(ctx.model, mixed)
        loss = lam * ctx.loss_fn(out, y) + (1.0 - lam) * ctx.loss_fn(out, y[perm])
        apply_update(ctx, loss)
        rows = int(y.shape[0])
        value = torch.tensor(lam, dtype=torch.float32)
        self.terms = ({"lam": value}, {"lam": (value * rows, rows)})
        return EDP(loss=float(loss.detach()), samples=rows)

    def check_inputs(self, X: torch.Tensor, where: str) -> None:
        if not X.is_floating_point():
            raise DataError(
                where,
                f"the inputs are {X.dtype} of shape {tuple(X.shape)}",
                f"{self.factory} blends inputs: pass floating-point features or images "
                "(not token ids)",
            )

    def current_terms(self) -> Any:
        return self.terms

    def run_identity(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "seed": self.seed}

    def check(self, model: Any, params: Any) -> None:
        check_one_batch_per_update(params, self.factory)
        X, _ = supervised_pair(peek_batch(params), "NNTrainParams.train_loader")
        self.check_inputs(X, "NNTrainParams.train_loader")


def mixup_train_step_factory(alpha: float = 0.2, *, seed: int = 0) -> MixingStep:
    """A ``train_step_fn`` training on Mixup blends, ``lam ~ Beta(alpha, alpha)`` drawn
    from its own generator (seeded by ``seed``, checkpointed with the run)."""
    return MixingStep(alpha, seed)
