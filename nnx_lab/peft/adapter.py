"""``AdapterLayer``: a bottleneck residual the user inserts where it should go.

``y = x + up(act(down(dropout(x))))`` on the last dimension, with ``up`` zero (weight and
bias), so a fresh adapter is the identity. Every parameter of it trains: ``2 * dim *
bottleneck + bottleneck + dim`` values. Put it in with ``nn.Sequential`` or by replacing
a submodule (``model.blocks[0].mlp = nn.Sequential(block.mlp, AdapterLayer(d, 8))``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..errors import ConfigError
from ._base import PeftLayer

__all__ = ["AdapterLayer"]

_ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU, "tanh": nn.Tanh, "silu": nn.SiLU}


def _positive(value: Any, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(field, value, "pass a positive int")
    return value


class AdapterLayer(PeftLayer):
    """``AdapterLayer(dim, bottleneck=16, activation="gelu", dropout=0.0)``."""

    adapter_kind = "Adapter"

    def __init__(
        self, dim: int, bottleneck: int = 16, activation: str = "gelu", dropout: float = 0.0
    ) -> None:
        dim = _positive(dim, "AdapterLayer.dim")
        bottleneck = _positive(bottleneck, "AdapterLayer.bottleneck")
        if activation not in _ACTIVATIONS:
            raise ConfigError(
                "AdapterLayer.activation", activation, f"pass one of {sorted(_ACTIVATIONS)}"
            )
        if (
            not isinstance(dropout, int | float)
            or isinstance(dropout, bool)
            or not 0 <= dropout < 1
        ):
            raise ConfigError("AdapterLayer.dropout", dropout, "pass a probability in [0, 1)")
        super().__init__()
        self.dim, self.bottleneck, self.activation = dim, bottleneck, activation
        self.dropout = nn.Dropout(dropout) if dropout else nn.Identity()
        self.down = nn.Linear(dim, bottleneck)
        self.act = _ACTIVATIONS[activation]()
        self.up = nn.Linear(bottleneck, dim)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.up(self.act(self.down(self.dropout(x))))

    def adapter_tensors(self) -> dict[str, torch.Tensor]:
        return dict(self.named_parameters())

    def adapter_config(self) -> dict[str, Any]:
        return {"bottleneck": self.bottleneck}
