"""DoRA: LoRA's low-rank direction plus a trainable per-output magnitude.

The adapted weight is ``W' = m * V / ||V||`` with ``V = W + (alpha / r) * B @ A`` and the
norm taken per output row; ``m`` starts at ``||W||`` (per row), so with ``B = 0`` a fresh
layer computes exactly its base. As in the DoRA paper (§4.3) and the peft library, the
norm is detached from the graph: the gradient flows through ``m`` and the direction, not
through the normalisation, which saves the memory of the norm's backward.
Trainable per layer: ``r * (in + out) + out`` values.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ._base import check_rank, wrap_linears
from .lora import LoRALinear, _copy_linear, generator_of

__all__ = ["DoRALinear", "apply_dora_to"]


class DoRALinear(LoRALinear):
    """``DoRALinear(base, r=8, alpha=16, dropout=0.0, *, seed=None)``: a ``LoRALinear``
    with ``magnitude`` (out,), one trainable scale per output."""

    adapter_kind = "DoRA"

    def __init__(
        self,
        base: nn.Linear,
        r: int = 8,
        alpha: float = 16,
        dropout: float = 0.0,
        *,
        seed: Any = None,
    ) -> None:
        super().__init__(base, r, alpha, dropout, seed=seed)
        self.magnitude = nn.Parameter(self._row_norm(base.weight.detach()))

    @staticmethod
    def _row_norm(weight: torch.Tensor) -> torch.Tensor:
        return torch.linalg.vector_norm(weight, dim=1)

    def _scale(self) -> torch.Tensor:
        """``m / ||W + delta||`` per output, the norm detached."""
        direction = self.base.weight + self.delta()
        return self.magnitude / self._row_norm(direction).detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        low = F.linear(F.linear(self.dropout(x), self.lora_A), self.lora_B) * self.scaling
        out = self._scale() * (F.linear(x, self.base.weight) + low)
        return out if self.base.bias is None else out + self.base.bias

    def merged(self) -> nn.Linear:
        out = _copy_linear(self.base)
        with torch.no_grad():
            out.weight.copy_(self._scale()[:, None] * (self.base.weight + self.delta()))
        return out

    def adapter_tensors(self) -> dict[str, torch.Tensor]:
        return {**super().adapter_tensors(), "magnitude": self.magnitude}


def apply_dora_to(
    module: Any,
    target_patterns: Any,
    r: int = 8,
    alpha: float = 16,
    dropout: float = 0.0,
    *,
    seed: Any = None,
) -> tuple[str, ...]:
    """``apply_lora_to`` with ``DoRALinear`` layers (the same patterns, checks and order)."""
    r, alpha, dropout = check_rank(r, alpha, dropout, "apply_dora_to")
    generator = generator_of(seed)
    return wrap_linears(
        module,
        target_patterns,
        "apply_dora_to",
        lambda linear: DoRALinear(linear, r, alpha, dropout, seed=generator),
    )
