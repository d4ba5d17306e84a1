"""``Nets.GRAPH_CONV`` / ``GRAPH_SAGE`` / ``GRAPH_ATT``: message-passing networks on an
``NNParams`` shape (GCN, GraphSAGE and GAT layers of torch-geometric).

torch-geometric is the optional graph extra: it is imported inside functions only, so
the engine imports (and every other network builds) without it. A graph network takes
one graph batch (anything with ``x``, ``edge_index`` and ``seed``: the graph package's
``GraphBatch``) and returns the logits of its seed rows only, so the loss, the metrics
and ``predict()`` see exactly the rows a split owns.
"""

from __future__ import annotations

import itertools
from typing import Any

from torch import nn

from .enums import Nets
from .params import NNParams

__all__ = ["GRAPH_EXTRA", "GraphNodeNN", "require_pyg"]

GRAPH_EXTRA = 'pip install "nnx-lab[graph]"'

_LAYERS = {Nets.GRAPH_CONV: "GCNConv", Nets.GRAPH_SAGE: "SAGEConv", Nets.GRAPH_ATT: "GATConv"}


def require_pyg(what: str) -> Any:
    """The ``torch_geometric`` module, or an ImportError naming ``what`` needs it and
    the install command."""
    try:
        import torch_geometric
    except ImportError as exc:
        raise ImportError(
            f"{what} needs torch-geometric, the graph extra ({exc}); install it: {GRAPH_EXTRA}"
        ) from None
    return torch_geometric


def conv_layer(kind: Nets, d_in: int, d_out: int) -> nn.Module:
    require_pyg(f"Nets.{kind.name}")
    from torch_geometric import nn as gnn

    return getattr(gnn, _LAYERS[kind])(d_in, d_out)


class GraphNodeNN(nn.Module):
    """input -> [conv -> activation -> Dropout] x len(hidden_dims) -> conv (raw logits
    of the seed rows)."""

    def __init__(self, kind: Nets, params: NNParams) -> None:
        super().__init__()
        from .nets import activation_module

        dims = [params.input_dim, *params.hidden_dims, params.output_dim]
        self.convs = nn.ModuleList(conv_layer(kind, a, b) for a, b in itertools.pairwise(dims))
        self.act = activation_module(params.activation)
        self.dropout = nn.Dropout(params.dropout_prob)

    def forward(self, batch: Any):
        h, edges = batch.x, batch.edge_index
        for i, conv in enumerate(self.convs):
            h = conv(h, edges)
            if i < len(self.convs) - 1:
                h = self.dropout(self.act(h))
        seed = getattr(batch, "seed", None)
        return h if seed is None else h[seed]
