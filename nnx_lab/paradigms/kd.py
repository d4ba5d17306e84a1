"""Knowledge distillation (Hinton et al. 2015): a student learns from a frozen teacher's
softened class distribution and from the hard labels (§3.4).

    loss = alpha · T² · KL(softmax(t / T) ‖ softmax(s / T)) + (1 − alpha) · CE(s, y)

``soft`` is the KL of the softened distributions summed over classes and averaged over
the batch's rows, scaled by T² so its gradients keep the hard term's scale as T grows;
``hard`` is the model's own loss on the student's logits. Both are reported by name:
as the objective's ``LossTerm``s (``kd_objective``) or in the step record's ``terms``
(``kd_train_step_factory``). The teacher is frozen (``requires_grad=False``) and put in
eval mode at factory time and kept there; ``check(model, params)`` refuses before any
run a teacher that is the student or a part of it (its weights would be in the
optimizer) and a teacher with another class count than the student.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from ..engine.adapters import forward
from ..engine.custom_step import full_precision_only
from ..engine.edp import EDP
from ..engine.objective import LossTerm, Objective, ObjectiveResult
from ..errors import ConfigError
from ._step import (
    apply_update,
    check_one_batch_per_update,
    peek_batch,
    step_device,
    supervised_pair,
)

__all__ = ["kd_objective", "kd_train_step_factory", "soft_kl_sum"]


def soft_kl_sum(student: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    """T² · Σ over rows of KL(softmax(teacher / T) ‖ softmax(student / T)), in fp32."""
    log_p_s = F.log_softmax(student.float() / temperature, dim=1)
    log_p_t = F.log_softmax(teacher.float() / temperature, dim=1)
    kl = F.kl_div(log_p_s, log_p_t, reduction="sum", log_target=True)
    return kl * (temperature * temperature)


class _Teacher:
    """The frozen teacher: its network, its device, its forward under no_grad in eval."""

    def __init__(self, teacher: Any, alpha: Any, temperature: Any, where: str) -> None:
        net = getattr(teacher, "net", teacher)  # an NNModel or a bare module
        if not isinstance(net, torch.nn.Module):
            raise ConfigError(
                f"{where}(teacher)", type(teacher).__name__, "a trained NNModel or torch.nn.Module"
            )
        if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 <= alpha <= 1:
            raise ConfigError(
                f"{where}(alpha)",
                alpha,
                "a weight in [0, 1]: the soft term's (the hard term gets 1 - alpha)",
            )
        ok = isinstance(temperature, int | float) and not isinstance(temperature, bool)
        if not ok or not math.isfinite(temperature) or temperature <= 0:
            raise ConfigError(
                f"{where}(temperature)", temperature, "a finite temperature > 0 (1 to 8 is usual)"
            )
        self.net, self.alpha, self.temperature = net, float(alpha), float(temperature)
        net.eval()
        for p in net.parameters():
            p.requires_grad_(False)

    def logits(self, X: torch.Tensor, device: torch.device) -> torch.Tensor:
        # kept in eval mode, whatever the caller did since: reading the flags costs a
        # fraction of setting them (Module.eval() walks and sets every submodule's)
        if any(m.training for m in self.net.modules()):
            self.net.eval()
        params = next(self.net.parameters(), None)
        here = X if params is None or params.device == X.device else X.to(params.device)
        with torch.no_grad():
            return forward(self.net, here).to(device)

    def config(self) -> dict[str, Any]:
        from ..engine.fingerprint import callable_identity

        digest = _weights_digest(self.net)
        return {
            "alpha": self.alpha,
            "temperature": self.temperature,
            "teacher": {"code": callable_identity(type(self.net)), "weights": digest},
        }

    def check(self, model: Any, params: Any) -> None:
        """Refuse a teacher the student trains, or one of another class count."""
        student = getattr(model, "net", model)
        mine = {id(p) for p in self.net.parameters()}
        if self.net is student or any(id(p) in mine for p in student.parameters()):
            raise ConfigError(
                "teacher",
                type(self.net).__name__,
                "the teacher is the student or a submodule of it, so its weights would be "
                "in the optimizer: pass a separate trained model as the teacher",
            )
        X, _ = supervised_pair(peek_batch(params), "NNTrainParams.train_loader")
        device = next(student.parameters()).device
        was_training = student.training
        student.eval()
        try:
            with torch.no_grad():
                s = forward(student, X[:2].to(device))
        finally:
            student.train(was_training)
        t = self.logits(X[:2], device)
        if s.dim() != 2 or t.shape != s.shape:
            raise ConfigError(
                "teacher",
                f"teacher logits {tuple(t.shape[1:])}, student logits {tuple(s.shape[1:])}",
                "distillation needs a teacher with the student's class count: (N, classes) "
                "logits of one width from both",
            )


def _weights_digest(net: torch.nn.Module) -> str:
    import hashlib

    h = hashlib.sha256()
    for name, value in net.state_dict().items():
        h.update(name.encode())
        h.update(value.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


class KDStep:
    """The distillation ``train_step_fn`` (fp32, one update per batch)."""

    def __init__(self, teacher: Any, alpha: Any, temperature: Any) -> None:
        self.teacher = _Teacher(teacher, alpha, temperature, "kd_train_step_factory")
        self.terms: Any = None
        full_precision_only(self)

    def __call__(self, ctx: Any) -> EDP:
        device = step_device(ctx)
        X, y = supervised_pair(ctx.batch, "NNTrainParams.train_loader")
        X, y = X.to(device), y.to(device)
        t = self.teacher.logits(X, device)
        s = forward(ctx.model, X)
        rows = int(y.shape[0])
        soft = soft_kl_sum(s, t, self.teacher.temperature) / rows
        hard = ctx.loss_fn(s, y)
        alpha = self.teacher.alpha
        loss = alpha * soft + (1.0 - alpha) * hard
        apply_update(ctx, loss)
        soft, hard = soft.detach(), hard.detach().float()
        self.terms = (
            {"soft": soft, "hard": hard},
            {"soft": (soft * rows, rows), "hard": (hard * rows, rows)},
        )
        return EDP(loss=float(loss.detach()), samples=rows)

    def current_terms(self) -> Any:
        return self.terms

    def run_identity(self) -> dict[str, Any]:
        return self.teacher.config()

    def check(self, model: Any, params: Any) -> None:
        check_one_batch_per_update(params, "kd_train_step_factory")
        self.teacher.check(model, params)


def kd_train_step_factory(teacher: Any, alpha: float = 0.5, temperature: float = 4.0) -> KDStep:
    """A ``train_step_fn`` distilling ``teacher`` (a trained NNModel or module) into
    the model trained: ``alpha`` weighs the soft term, ``1 - alpha`` the hard one."""
    return KDStep(teacher, alpha, temperature)


class KDObjective(Objective):
    """Distillation as an objective: the engine keeps the update (precision,
    accumulation, clipping); the terms are ``soft`` (weight alpha) and ``hard``
    (weight 1 - alpha), each a sum over rows (or valid targets) over their count, so
    accumulation is exact. The student's logits score the task's metrics."""

    scores_outputs = True

    def __init__(self, teacher: Any, alpha: Any, temperature: Any, nonfinite: str) -> None:
        super().__init__(nonfinite=nonfinite)
        self.teacher = _Teacher(teacher, alpha, temperature, "kd_objective")

    def compute(self, net: torch.nn.Module, batch: Any, ctx: Any) -> ObjectiveResult:
        X, y = supervised_pair(batch, "NNTrainParams.train_loader")
        t = self.teacher.logits(X, X.device)
        s = forward(net, X)
        rows = int(y.shape[0])
        soft = LossTerm("soft", soft_kl_sum(s, t, self.teacher.temperature), rows)
        loss = ctx.loss
        if loss.per == "target":
            hard = LossTerm("hard", loss.total(s, y), loss.valid_targets(y))
        else:
            hard = LossTerm("hard", loss(s, y) * rows, rows)
        alpha = self.teacher.alpha
        soft = LossTerm(soft.name, soft.numerator, soft.denominator, weight=alpha)
        hard = LossTerm(hard.name, hard.numerator, hard.denominator, weight=1.0 - alpha)
        return ObjectiveResult([soft, hard], None, s)

    def run_identity(self) -> dict[str, Any]:
        return self.teacher.config()

    def check(self, model: Any, params: Any) -> None:
        self.teacher.check(model, params)

    @property
    def name(self) -> str:
        return "kd_objective"


def kd_objective(
    teacher: Any, alpha: float = 0.5, temperature: float = 4.0, *, nonfinite: str = "fail"
) -> KDObjective:
    """Distillation as an ``Objective`` (use it for accumulation or reduced precision)."""
    return KDObjective(teacher, alpha, temperature, nonfinite)
