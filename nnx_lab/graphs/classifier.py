"""``graph_classifier_spec`` (§3.8): a registered recipe for graph-level classification,
so a checkpoint reloads the encoder, the pool and the head with no pickled code.

The network: message-passing layers (``conv``: GCN, GraphSAGE or GAT) over every node,
a pool (``mean`` / ``sum`` / ``max``) per graph of the batch, and a linear head to the
class logits, one row per graph. The factory is registered when this module is
imported (``nnx_lab.graph_tasks`` imports it): a fresh process imports it before
``NNModel.from_checkpoint``.
"""

from __future__ import annotations

import itertools
from typing import Any

from torch import nn

from ..engine.enums import Activations, Nets
from ..engine.nets import activation_module
from ..engine.nets_graph import conv_layer, require_pyg
from ..engine.registry import ModelSpec, register_model_factory
from ..errors import ConfigError

__all__ = ["GRAPH_CLASSIFIER_ID", "POOLS", "GraphClassifierNN", "graph_classifier_spec"]

GRAPH_CLASSIFIER_ID = "nnx_lab.graph_classifier"
POOLS = ("mean", "sum", "max")
_CONVS = {"gcn": Nets.GRAPH_CONV, "sage": Nets.GRAPH_SAGE, "gat": Nets.GRAPH_ATT}


def _positive(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(field, value, "pass a positive integer")
    return value


def graph_classifier_spec(
    input_dim: int,
    num_classes: int,
    pool: str = "mean",
    *,
    hidden_dims: tuple[int, ...] | list[int] = (32, 32),
    conv: str = "gcn",
    activation: str = "relu",
    dropout_prob: float = 0.0,
    seed: int = 0,
) -> ModelSpec:
    """The ``ModelSpec`` of a graph classifier (``NNModelParams(net=...)``)."""
    _positive(input_dim, "graph_classifier_spec.input_dim")
    _positive(num_classes, "graph_classifier_spec.num_classes")
    if pool not in POOLS:
        raise ConfigError("graph_classifier_spec.pool", pool, f"use one of {', '.join(POOLS)}")
    if conv not in _CONVS:
        raise ConfigError("graph_classifier_spec.conv", conv, f"use one of {', '.join(_CONVS)}")
    hidden = list(hidden_dims)
    if not hidden:
        raise ConfigError(
            "graph_classifier_spec.hidden_dims", hidden_dims, "pass at least one layer, e.g. [32]"
        )
    for h in hidden:
        _positive(h, "graph_classifier_spec.hidden_dims")
    act = Activations(activation).value
    if not 0.0 <= float(dropout_prob) < 1.0:
        raise ConfigError("graph_classifier_spec.dropout_prob", dropout_prob, "pass 0 <= p < 1")
    require_pyg("graph_classifier_spec")
    config = {
        "input_dim": input_dim,
        "num_classes": num_classes,
        "pool": pool,
        "hidden_dims": hidden,
        "conv": conv,
        "activation": act,
        "dropout_prob": float(dropout_prob),
    }
    return ModelSpec(GRAPH_CLASSIFIER_ID, 1, config, seed=seed)


class GraphClassifierNN(nn.Module):
    """encoder (convs over nodes) -> pool (per graph) -> head (class logits)."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        kind = _CONVS[config["conv"]]
        dims = [config["input_dim"], *config["hidden_dims"]]
        self.encoder = nn.ModuleList(conv_layer(kind, a, b) for a, b in itertools.pairwise(dims))
        self.act = activation_module(Activations(config["activation"]))
        self.dropout = nn.Dropout(config["dropout_prob"])
        self.pool = config["pool"]
        self.head = nn.Linear(dims[-1], config["num_classes"])
        self.output_dim = config["num_classes"]

    def forward(self, batch: Any):
        from torch_geometric.nn import global_add_pool, global_max_pool, global_mean_pool

        h = batch.x
        for conv in self.encoder:
            h = self.dropout(self.act(conv(h, batch.edge_index)))
        pool = {"mean": global_mean_pool, "sum": global_add_pool, "max": global_max_pool}
        pooled = pool[self.pool](h, batch.graph, size=batch.num_graphs)
        return self.head(pooled)


register_model_factory(GRAPH_CLASSIFIER_ID, 1, GraphClassifierNN)
