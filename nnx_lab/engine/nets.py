"""Network builders. ``Nets.FEED_FWD`` is a plain MLP with dropout between layers."""

from __future__ import annotations

import itertools
from typing import Any

from torch import nn

from .enums import Activations, Nets
from .params import NNParams

__all__ = ["FeedFwdNN", "activation_module", "build_net"]

_ACTIVATIONS: dict[Activations, type[nn.Module]] = {
    Activations.RELU: nn.ReLU,
    Activations.LEAKY_RELU: nn.LeakyReLU,
    Activations.GELU: nn.GELU,
    Activations.TANH: nn.Tanh,
    Activations.SIGMOID: nn.Sigmoid,
    Activations.SILU: nn.SiLU,
    Activations.ELU: nn.ELU,
}


def activation_module(kind: Activations) -> nn.Module:
    return _ACTIVATIONS[kind]()


class FeedFwdNN(nn.Module):
    """input -> [Linear -> activation -> Dropout] x len(hidden_dims) -> Linear (raw logits)."""

    def __init__(self, params: NNParams) -> None:
        super().__init__()
        dims = [params.input_dim, *params.hidden_dims]
        layers: list[nn.Module] = []
        for d_in, d_out in itertools.pairwise(dims):
            layers.append(nn.Linear(d_in, d_out))
            layers.append(_ACTIVATIONS[params.activation]())
            if params.dropout_prob > 0:
                layers.append(nn.Dropout(params.dropout_prob))
        layers.append(nn.Linear(dims[-1], params.output_dim))
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x)


def build_net(kind: Nets, params: Any) -> nn.Module:
    """The built-in network ``kind`` of ``params`` (checked to be its params class by
    ``net_kinds.check_net_params``)."""
    if kind is Nets.FEED_FWD:
        return FeedFwdNN(params)
    if kind is Nets.CONV:
        from .nets_conv import ConvNN

        return ConvNN(params)
    if kind is Nets.TRANSFORMER:
        from .nets_transformer import TransformerNN

        return TransformerNN(params)
    if kind is Nets.VIT:
        from .nets_transformer import ViTNN

        return ViTNN(params)
    if kind is Nets.FEED_FWD_MOE:
        from .nets_moe import MoENN

        return MoENN(params)
    if kind in (Nets.GRAPH_CONV, Nets.GRAPH_SAGE, Nets.GRAPH_ATT):
        from .nets_graph import GraphNodeNN

        return GraphNodeNN(kind, params)
    raise NotImplementedError(f"net {kind!r} is not built by nnx_lab yet")
