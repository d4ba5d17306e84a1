"""IA3: a frozen ``nn.Linear`` whose outputs are rescaled by a trainable vector.

``y = base(x) * scale`` with ``scale`` (out,) starting at ones, so a fresh layer is its
base; merging folds the scale into the weight and bias. Trainable per layer: ``out``
values (the peft library's non-feed-forward IA3 layer computes the same).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..errors import ConfigError
from ._base import PeftLayer, wrap_linears
from .lora import _copy_linear

__all__ = ["IA3Linear", "apply_ia3_to"]


class IA3Linear(PeftLayer):
    """``IA3Linear(base)``: ``base`` frozen (kept as ``.base``), ``scale`` trainable."""

    adapter_kind = "IA3"

    def __init__(self, base: nn.Linear) -> None:
        if not isinstance(base, nn.Linear):
            raise ConfigError("IA3Linear.base", type(base).__name__, "pass an nn.Linear")
        super().__init__()
        self.base = base
        base.requires_grad_(False)
        kw = {"device": base.weight.device, "dtype": base.weight.dtype}
        self.scale = nn.Parameter(torch.ones(base.out_features, **kw))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) * self.scale

    def merged(self) -> nn.Linear:
        out = _copy_linear(self.base)
        with torch.no_grad():
            out.weight.mul_(self.scale[:, None])
            if out.bias is not None:
                out.bias.mul_(self.scale)
        return out

    def adapter_tensors(self) -> dict[str, torch.Tensor]:
        return {"scale": self.scale}

    def base_tensors(self) -> dict[str, torch.Tensor]:
        return dict(self.base.named_parameters(prefix="base"))


def apply_ia3_to(module: Any, target_patterns: Any) -> tuple[str, ...]:
    """Wrap the matching ``nn.Linear`` layers in ``IA3Linear`` (``apply_lora_to``'s
    patterns and checks); the wrapped names."""
    return wrap_linears(module, target_patterns, "apply_ia3_to", IA3Linear)
