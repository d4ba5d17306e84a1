"""``NNMoEParams``: the shape of ``Nets.FEED_FWD_MOE``, a feed-forward network whose
hidden layers are mixture-of-experts layers (a router picks ``top_k`` of
``num_experts`` expert MLPs per row), with a load-balancing term."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .enums import Activations, coerce_enum
from .params_base import Params, finite, positive_int, set_dropout, set_field

__all__ = ["NNMoEParams"]


@dataclass(frozen=True)
class NNMoEParams(Params):
    """``Linear(input_dim, hidden_dim)`` -> ``n_layers`` residual MoE layers (each
    expert ``Linear(hidden_dim, expert_dim) -> activation -> Linear(expert_dim,
    hidden_dim)``, ``top_k`` of ``num_experts`` per row, gates renormalized over the
    chosen) -> ``Linear(hidden_dim, output_dim)``. The Switch-style load-balancing term
    ``num_experts * sum_i(f_i * P_i)`` is added to the gradients with weight
    ``load_balance_coef`` and reported on the network (``net.load_balance_loss``)."""

    input_dim: int
    output_dim: int
    num_experts: int = 4
    top_k: int = 2
    hidden_dim: int = 64
    expert_dim: int = 128
    n_layers: int = 1
    load_balance_coef: float = 0.01
    dropout_prob: float = 0.0
    activation: Activations = Activations.RELU

    def __post_init__(self) -> None:
        f = "NNMoEParams."
        for name in ("input_dim", "output_dim", "hidden_dim", "expert_dim", "n_layers"):
            set_field(self, name, positive_int(getattr(self, name), f + name))
        set_field(self, "num_experts", positive_int(self.num_experts, f + "num_experts", 2))
        top_k = positive_int(self.top_k, f + "top_k")
        if top_k > self.num_experts:
            raise ConfigError(
                f + "top_k", top_k, f"pick at most num_experts={self.num_experts} experts per row"
            )
        set_field(self, "top_k", top_k)
        set_field(
            self,
            "load_balance_coef",
            finite(
                self.load_balance_coef,
                f + "load_balance_coef",
                low=0.0,
                fix="pass a weight >= 0 (0: reported, not trained on), e.g. 0.01",
            ),
        )
        set_dropout(self, f + "dropout_prob")
        set_field(self, "activation", coerce_enum(Activations, self.activation, f + "activation"))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NNMoEParams:
        return cls(**data)
