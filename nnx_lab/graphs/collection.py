"""``GraphCollection`` (§3.8): many small graphs, each with an id and, unless flagged
``unlabeled``, a class target.

Split it by graph id (``subset(ids)``), batch it (``loader(batch_size)``): each batch
joins its graphs into one disjoint graph (node offsets added to the edges, a ``graph``
vector naming each node's graph) with one target per graph. An unlabeled graph's target
is ``IGNORE``, the ``ignore_index`` of ``TaskSpec.categorical(n, ignore_index=IGNORE)``,
so the loss and the metrics average over the labeled graphs only. A loader's
``sample_ids`` are its graph ids, which ``predict_proba`` returns row by row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..engine.nets_graph import require_pyg
from ..errors import ConfigError, DataError
from .batch import GraphBatch, GraphLoader, digest_tensors
from .dataset import check_graph_tensors

__all__ = ["IGNORE", "GraphCollection"]

IGNORE = -100  # the target of an unlabeled graph (TaskSpec.categorical's ignore_index)


def _parts(graph: Any, where: str) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(graph, Mapping):
        x, edges = graph.get("x"), graph.get("edge_index")
    else:
        x, edges = getattr(graph, "x", None), getattr(graph, "edge_index", None)
    return check_graph_tensors(x, edges, where)


class GraphCollection:
    """``GraphCollection(graphs, ids, targets=..., unlabeled=[...])``: ``graphs`` are
    torch-geometric ``Data`` objects (or dicts) with ``x`` and ``edge_index``; ``ids``
    one unique integer id per graph; ``targets`` one class per graph (a
    sequence in the graphs' order, or a mapping id -> class), ``None`` allowed for the
    ids listed in ``unlabeled``."""

    def __init__(
        self,
        graphs: Sequence[Any],
        ids: Sequence[Any],
        targets: Sequence[Any] | Mapping[Any, Any] | None = None,
        unlabeled: Sequence[Any] = (),
    ) -> None:
        require_pyg("GraphCollection")
        graphs, ids = list(graphs), list(ids)
        if not graphs:
            raise DataError("GraphCollection.graphs", "is empty", "pass at least one graph")
        if len(ids) != len(graphs):
            raise DataError(
                "GraphCollection.ids",
                f"has {len(ids)} ids for {len(graphs)} graphs",
                "pass one id per graph",
            )
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int | np.integer):
                # sample ids are int64 everywhere downstream (predict_proba, abstention)
                raise ConfigError(
                    "GraphCollection.ids", i, "use integer graph ids (keep a dict id -> name)"
                )
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise DataError("GraphCollection.ids", f"repeats the id {dup!r}", "use unique ids")
        known = set(ids)
        missing = [u for u in unlabeled if u not in known]
        if missing:
            raise DataError(
                "GraphCollection.unlabeled", f"names unknown ids {missing[:5]}", "list graph ids"
            )
        flagged = set(unlabeled)
        if targets is None:
            targets = {}
        if isinstance(targets, Mapping):
            values = [targets.get(i) for i in ids]
        else:
            values = list(targets)
            if len(values) != len(ids):
                raise DataError(
                    "GraphCollection.targets",
                    f"has {len(values)} targets for {len(ids)} graphs",
                    "pass one target per graph (None for an unlabeled one), or a dict id -> class",
                )
        y = []
        for gid, value in zip(ids, values, strict=True):
            if gid in flagged:
                y.append(IGNORE)
                continue
            if value is None or isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise DataError(
                    f"GraphCollection.targets[{gid!r}]",
                    f"is {value!r}",
                    "pass a class index >= 0, or flag the graph: unlabeled=[..., id]",
                )
            if int(value) < 0:
                raise DataError(
                    f"GraphCollection.targets[{gid!r}]", f"is {value}", "pass a class index >= 0"
                )
            y.append(int(value))
        self._graphs = [_parts(g, f"GraphCollection.graphs[{k}]") for k, g in enumerate(graphs)]
        widths = {int(x.shape[1]) for x, _ in self._graphs}
        if len(widths) != 1:
            raise DataError(
                "GraphCollection.graphs",
                f"have node features of widths {sorted(widths)}",
                "give every graph the same number of node features",
            )
        self.ids = ids
        self.targets = torch.tensor(y, dtype=torch.long)
        self.unlabeled = [i for i in ids if i in flagged]
        self.input_dim = widths.pop()
        labeled = self.targets[self.targets != IGNORE]
        self.num_classes = int(labeled.max()) + 1 if labeled.numel() else 0

    def __len__(self) -> int:
        return len(self.ids)

    def subset(self, ids: Sequence[Any]) -> GraphCollection:
        """The graphs of ``ids``, in that order (a split by graph id)."""
        ids = list(ids)
        where = {gid: k for k, gid in enumerate(self.ids)}
        unknown = [i for i in ids if i not in where]
        if unknown:
            raise DataError(
                "GraphCollection.subset",
                f"unknown ids {unknown[:5]}",
                "pass ids of this collection",
            )
        out = object.__new__(GraphCollection)
        pick = [where[i] for i in ids]
        if len(set(pick)) != len(pick):
            raise DataError("GraphCollection.subset", "repeats an id", "pass each id once")
        out._graphs = [self._graphs[k] for k in pick]
        out.ids = ids
        out.targets = self.targets[pick]
        out.unlabeled = [i for i in ids if i in set(self.unlabeled)]
        out.input_dim, out.num_classes = self.input_dim, self.num_classes
        return out

    def loader(self, batch_size: int) -> GraphLoader:
        """Batches of ``batch_size`` graphs in the collection's order (the last may be
        smaller): ``(GraphBatch, targets)``, one target per graph."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError("GraphCollection.loader.batch_size", batch_size, "pass an int >= 1")
        batches = []
        for start in range(0, len(self.ids), batch_size):
            part = self._graphs[start : start + batch_size]
            xs, edges, owner, offset = [], [], [], 0
            for k, (x, e) in enumerate(part):
                xs.append(x)
                edges.append(e + offset)
                owner.append(torch.full((int(x.shape[0]),), k, dtype=torch.long))
                offset += int(x.shape[0])
            batch = GraphBatch(
                torch.cat(xs), torch.cat(edges, 1), graph=torch.cat(owner), num_graphs=len(part)
            )
            batches.append((batch, self.targets[start : start + batch_size]))
        parts = [t for x, e in self._graphs for t in (x, e)]
        identity = {
            "graphs": digest_tensors(*parts, self.targets, [int(i) for i in self.ids]),
            "batch_size": batch_size,
        }
        return GraphLoader(batches, np.asarray(self.ids, dtype=np.int64), identity)

    def __repr__(self) -> str:
        return (
            f"GraphCollection({len(self.ids)} graphs, {len(self.unlabeled)} unlabeled, "
            f"{self.input_dim} node features)"
        )
