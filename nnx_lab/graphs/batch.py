"""``GraphBatch``: one graph batch as the engine carries it, and ``GraphLoader``, the
re-iterable batch source of a split.

A graph batch is an adapted input (``engine.adapters.Inputs``): it moves to a device
like a tensor and goes to the network whole, so the default loop, ``evaluate`` and
``predict`` train and score graphs with no graph-specific branch. Its rows are the
rows the network returns: the seed nodes of a node split, or the graphs of a batch of
graphs. The targets travel beside it, one per row, as for any ``(X, y)`` batch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from ..engine.adapters import BatchAdapter, Inputs

__all__ = ["GraphBatch", "GraphLoader", "digest_tensors"]


class GraphBatch(Inputs):
    """Node features ``x`` (N, F), ``edge_index`` (2, E), and either ``seed`` (the node
    indices whose outputs count) or ``graph`` (each node's graph in the batch, with
    ``num_graphs``) for a pooled network."""

    __slots__ = ("edge_index", "graph", "num_graphs", "seed", "x")

    def __init__(
        self,
        x: torch.Tensor,
        edge_index: torch.Tensor,
        seed: torch.Tensor | None = None,
        graph: torch.Tensor | None = None,
        num_graphs: int | None = None,
    ) -> None:
        super().__init__(BatchAdapter(), (x, edge_index), {})
        self.x, self.edge_index, self.seed = x, edge_index, seed
        self.graph, self.num_graphs = graph, num_graphs

    @property
    def n_rows(self) -> int:
        if self.seed is not None:
            return int(self.seed.shape[0])
        if self.graph is not None:
            return int(self.num_graphs or 0)
        return int(self.x.shape[0])

    @property
    def shape(self) -> torch.Size:
        """(rows the network returns, node features): the batch checks count these."""
        return torch.Size([self.n_rows, int(self.x.shape[1])])

    def tensors(self) -> list[torch.Tensor]:
        # the node features were checked finite when the graph was read; a row check
        # against the seed count would refuse every graph (E edges, N nodes)
        return []

    def to(self, device: Any, non_blocking: bool = False) -> GraphBatch:
        move = lambda t: None if t is None else t.to(device, non_blocking=non_blocking)  # noqa: E731
        return GraphBatch(
            move(self.x), move(self.edge_index), move(self.seed), move(self.graph), self.num_graphs
        )

    def call(self, net: torch.nn.Module) -> torch.Tensor:
        return net(self)

    def __repr__(self) -> str:
        return (
            f"GraphBatch(nodes={int(self.x.shape[0])}, edges={int(self.edge_index.shape[1])}, "
            f"rows={self.n_rows})"
        )


def digest_tensors(*parts: Any) -> str:
    """A content digest of tensors and plain values (a loader's run-id identity)."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, torch.Tensor):
            t = part.detach().cpu().contiguous()
            h.update(f"{t.dtype}{tuple(t.shape)}".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        else:
            h.update(repr(part).encode())
    return h.hexdigest()


class GraphLoader:
    """A fixed list of ``(GraphBatch, y)`` batches, re-iterable. ``sample_ids`` are the
    ids of the rows in iteration order (global node indices, or graph ids), read by
    ``predict_proba``; ``nnx_identity`` fingerprints the content for the run id."""

    def __init__(
        self, batches: Sequence[tuple[GraphBatch, torch.Tensor]], sample_ids: Any, identity: dict
    ) -> None:
        self.batches = list(batches)
        self.sample_ids = sample_ids
        self.nnx_identity = identity

    def __iter__(self) -> Iterator[tuple[GraphBatch, torch.Tensor]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)

    def __repr__(self) -> str:
        return f"GraphLoader({len(self.batches)} batches, {len(self.sample_ids)} rows)"
