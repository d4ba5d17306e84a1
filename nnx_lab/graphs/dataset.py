"""``NNGraphDataset`` (§2.12): a node-classification graph whose masks are its splits.

``ds_class(root, transform)`` is any class with torch-geometric's dataset surface
(``dataset[0]`` is a ``Data`` with ``x``, ``edge_index``, ``y`` and ``train_mask``;
``val_mask`` / ``test_mask`` optional). An empty optional mask is an absent split: its
loader is ``None`` and its resolved batch size 0, so ``train()`` skips validation
instead of scoring zero rows. An empty train mask is refused at construction.

``sampler="full"``: one full-batch step per epoch over the whole graph, the split's seed
nodes scored. Neighbour sampling needs a compiled backend torch-geometric does not
ship (pyg-lib or torch-sparse); any other sampler is refused, naming it.
"""

from __future__ import annotations

from typing import Any

import torch

from ..engine.nets_graph import require_pyg
from ..errors import ConfigError, DataError
from .batch import GraphBatch, GraphLoader, digest_tensors

__all__ = ["NNGraphDataset"]

_SLOTS = ("train", "val", "test")
SAMPLERS = ("full",)


def check_graph_tensors(
    x: Any, edge_index: Any, field: str, *, y: Any = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` float (N, F) and finite, ``edge_index`` int64 (2, E) within N; ``y`` one
    per node when given. Refused naming ``field``."""
    if not isinstance(x, torch.Tensor) or x.ndim != 2 or not x.is_floating_point():
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise DataError(f"{field}.x", f"is {got}", "pass float node features of shape (N, F)")
    if not bool(torch.isfinite(x).all()):
        raise DataError(f"{field}.x", "holds NaN/inf values", "clean or impute the node features")
    n = int(x.shape[0])
    if (
        not isinstance(edge_index, torch.Tensor)
        or edge_index.ndim != 2
        or edge_index.shape[0] != 2
        or edge_index.is_floating_point()
    ):
        got = tuple(edge_index.shape) if isinstance(edge_index, torch.Tensor) else edge_index
        raise DataError(
            f"{field}.edge_index", f"is {got}", "pass integer node pairs of shape (2, E)"
        )
    edge_index = edge_index.long()
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= n):
        raise DataError(
            f"{field}.edge_index",
            f"names node {int(edge_index.max())} (or a negative one) of a graph of {n} nodes",
            "use node indices 0..N-1",
        )
    if y is not None and (not isinstance(y, torch.Tensor) or y.shape[:1] != (n,)):
        got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
        raise DataError(f"{field}.y", f"is {got} for {n} nodes", "pass one class per node")
    return x.float(), edge_index


def _mask(data: Any, name: str, n: int, field: str) -> torch.Tensor | None:
    mask = getattr(data, name, None)
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.shape != (n,):
        got = f"{mask.dtype} {tuple(mask.shape)}" if isinstance(mask, torch.Tensor) else mask
        raise DataError(f"{field}.{name}", f"is {got}", f"pass a bool mask of shape ({n},)")
    return mask


class NNGraphDataset:
    """The splits of one graph as loaders of full-graph batches (§2.12)."""

    def __init__(
        self,
        ds_class: Any,
        root: str = "data",
        transform: Any = None,
        sampler: str = "full",
        *,
        name: str | None = None,
    ) -> None:
        if sampler not in SAMPLERS:
            raise ConfigError(
                "NNGraphDataset.sampler",
                sampler,
                "only sampler='full' (full-batch) is built in: neighbour sampling needs "
                "torch-geometric's compiled backend pyg-lib (or torch-sparse), which the "
                "graph extra does not ship",
            )
        if not callable(ds_class):
            raise ConfigError(
                "NNGraphDataset.ds_class",
                ds_class,
                "pass a dataset class: ds_class(root, transform)",
            )
        require_pyg("NNGraphDataset")
        field = "NNGraphDataset.ds_class[0]"
        data = ds_class(root, transform)[0]
        x, edges = check_graph_tensors(
            getattr(data, "x", None),
            getattr(data, "edge_index", None),
            field,
            y=getattr(data, "y", None),
        )
        y = data.y.long()
        n = int(x.shape[0])
        masks = {slot: _mask(data, f"{slot}_mask", n, field) for slot in _SLOTS}
        if masks["train"] is None or not bool(masks["train"].any()):
            raise DataError(
                f"{field}.train_mask",
                "is missing or selects no node",
                "mark the training nodes: train_mask must hold at least one True",
            )
        self.name = name or getattr(ds_class, "__name__", type(ds_class).__name__)
        self.sampler = sampler
        self.num_nodes, self.num_edges = n, int(edges.shape[1])
        self.input_dim = int(x.shape[1])
        declared = getattr(ds_class, "num_classes", None)
        self.output_dim = int(declared) if declared else int(y.max()) + 1
        self.rows: dict[str, torch.Tensor] = {}
        loaders: dict[str, GraphLoader | None] = {}
        for slot in _SLOTS:
            mask = masks[slot]
            seed = torch.zeros(0, dtype=torch.long) if mask is None else mask.nonzero().view(-1)
            self.rows[slot] = seed
            if seed.numel() == 0:  # an absent split, not a split of zero rows
                loaders[slot] = None
                continue
            identity = {"graph": digest_tensors(x, edges, y, seed), "sampler": sampler}
            loaders[slot] = GraphLoader(
                [(GraphBatch(x, edges, seed=seed), y[seed])], seed, identity
            )
        self.train_loader = loaders["train"]
        self.val_loader = loaders["val"]
        self.test_loader = loaders["test"]
        self.batch_sizes: tuple[int, int, int] = tuple(  # type: ignore[assignment]
            int(self.rows[slot].numel()) for slot in _SLOTS
        )

    def state(self) -> dict[str, Any]:
        """What the dataset is, as data."""
        return {
            "name": self.name,
            "input_dim": self.input_dim,
            "output_dim": self.output_dim,
            "num_nodes": self.num_nodes,
            "num_edges": self.num_edges,
            "sampler": self.sampler,
            "batch_sizes": [str(b) for b in self.batch_sizes],
            "sizes": {slot: int(rows.numel()) for slot, rows in self.rows.items()},
        }

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={int(v.numel())}" for k, v in self.rows.items())
        return (
            f"NNGraphDataset({self.name}: {self.num_nodes} nodes, {self.input_dim} features "
            f"-> {self.output_dim} classes; {sizes})"
        )
