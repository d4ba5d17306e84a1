"""Which params class each built-in network takes (torch-free): ``Nets.FEED_FWD`` takes
``NNParams``, ``Nets.CONV`` ``NNConvParams``. A member given another class is refused
with the one it takes; a record's ``net`` is read back as its member's class."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .conv_params import NNConvParams
from .enums import Nets
from .model_params import NNParams
from .moe_params import NNMoEParams
from .transformer_params import NNTransformerParams, NNViTParams

__all__ = ["NET_PARAMS", "check_net_params", "net_params_from_json"]

NET_PARAMS: dict[Nets, type] = {
    Nets.FEED_FWD: NNParams,
    Nets.CONV: NNConvParams,
    Nets.TRANSFORMER: NNTransformerParams,
    Nets.VIT: NNViTParams,
    Nets.FEED_FWD_MOE: NNMoEParams,
    Nets.GRAPH_CONV: NNParams,
    Nets.GRAPH_SAGE: NNParams,
    Nets.GRAPH_ATT: NNParams,
}

_EXAMPLES = {
    Nets.FEED_FWD: "NNParams(input_dim=..., output_dim=..., hidden_dims=[...])",
    Nets.CONV: "NNConvParams(output_dim=..., in_channels=1, image_size=28, conv_channels=[16, 32])",
    Nets.TRANSFORMER: "NNTransformerParams(vocab_size=..., n_layers=2, d_model=64, n_heads=4)",
    Nets.VIT: "NNViTParams(output_dim=..., image_size=28, patch_size=7, in_channels=1)",
    Nets.FEED_FWD_MOE: "NNMoEParams(input_dim=..., output_dim=..., num_experts=4, top_k=2)",
    **dict.fromkeys(
        (Nets.GRAPH_CONV, Nets.GRAPH_SAGE, Nets.GRAPH_ATT),
        "NNParams(input_dim=node features, output_dim=classes, hidden_dims=[...])",
    ),
}


def check_net_params(kind: Nets, net_params: Any) -> None:
    cls = NET_PARAMS.get(kind)
    if cls is None:
        raise ConfigError("NNModelParams.net", kind, "this network is not built by nnx_lab yet")
    if not isinstance(net_params, cls):
        others = [n for n, c in NET_PARAMS.items() if isinstance(net_params, c)]
        hint = (
            f" ({type(net_params).__name__} is the params of Nets.{others[0].name})"
            if others
            else ""
        )
        raise ConfigError(
            "net_params",
            net_params,
            f"Nets.{kind.name} takes {_EXAMPLES[kind]}{hint}; or use "
            "NNModelParams(net=ModelSpec(...)) / NNModel(module=...) for your own module",
        )


def net_params_from_json(kind: Any, data: dict[str, Any]) -> Any:
    """A record's ``net`` as the params class of its member (NNParams for a record of
    an older nnx-lab, which only had FEED_FWD)."""
    cls = NET_PARAMS.get(kind, NNParams) if isinstance(kind, Nets) else NNParams
    return cls.from_json(data)
