"""One optimizer update under a precision policy (§2.2).

The order is fixed: unscale (fp16) → normalize (accumulation) → finite check (scaler-
free bf16) → clip → step. fp16 steps through the GradScaler, which skips a non-finite
update; bf16 has no scaler, so it checks the gradients itself and raises rather than
apply a non-finite update.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .grad_ops import clip_grad_norm, zero_grad
from .precision import ResolvedPrecision

__all__ = ["Updater"]


class Updater:
    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        scaler: Any,
        precision: ResolvedPrecision,
        clip_norm: float | None,
    ) -> None:
        self.optimizer = optimizer
        self.scaler = scaler
        self.precision = precision
        self.clip_norm = clip_norm
        self.params = [p for group in optimizer.param_groups for p in group["params"]]
        self._check_finite = scaler is None and precision.reduced

    def zero_grad(self) -> None:
        zero_grad(self.optimizer)

    def backward(self, loss: torch.Tensor) -> None:
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()

    def step(self, normalize: float | torch.Tensor | None = None, *, step_number: int = 0) -> None:
        """Apply the accumulated gradients (divided by ``normalize`` when given; a
        tensor stays on the device: no host sync)."""
        opt, scaler, params = self.optimizer, self.scaler, self.params
        if scaler is not None:
            scaler.unscale_(opt)
        if normalize is not None:
            grads = [p.grad for p in params if p.grad is not None]
            if grads:
                if isinstance(normalize, torch.Tensor):
                    torch._foreach_div_(grads, normalize.to(grads[0].dtype))
                else:
                    torch._foreach_div_(grads, float(normalize))
        if self._check_finite:
            norm = clip_grad_norm(params, self.clip_norm or math.inf)
            if not bool(torch.isfinite(norm)):
                raise FloatingPointError(
                    f"non-finite gradients at step {step_number} under "
                    f"{self.precision.effective}; the update was not applied. Lower max_lr, "
                    "set grad_clip_norm, or train in fp32"
                )
        elif self.clip_norm:
            clip_grad_norm(params, self.clip_norm)
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
