"""``split_links`` (§3.9): an edge split as a replayable manifest.

Edges are made canonical first (undirected: each pair once as ``(min, max)``, self-loops
dropped, sorted), so the split does not depend on the order or the direction the edges
were listed in. A seeded permutation picks the validation and test positives; the
validation and test negatives are fixed pairs drawn from the complement (node pairs
that are not edges), disjoint from each other. ``state()`` is plain JSON with a digest;
``LinkSplit.from_state`` rebuilds the split and ``replay(edge_index, num_nodes)``
checks that a graph gives the very same one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ConfigError, DataError, SplitError

__all__ = ["LinkSplit", "canonical_edges", "pair_codes", "split_links"]

SLOTS = ("train", "val", "test")


def canonical_edges(edge_index: Any, num_nodes: int, field: str = "edge_index") -> torch.Tensor:
    """(E, 2) int64 pairs ``u < v``, each once, sorted; refused when not node pairs."""
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 2:
        raise ConfigError("num_nodes", num_nodes, "pass the number of nodes (an int >= 2)")
    e = torch.as_tensor(edge_index)
    if e.ndim != 2 or e.shape[0] != 2 or e.is_floating_point():
        raise DataError(field, f"has shape {tuple(e.shape)}", "pass integer pairs of shape (2, E)")
    e = e.long()
    if e.numel() and (int(e.min()) < 0 or int(e.max()) >= num_nodes):
        raise DataError(field, f"names nodes outside 0..{num_nodes - 1}", "fix num_nodes or edges")
    lo, hi = torch.minimum(e[0], e[1]), torch.maximum(e[0], e[1])
    keep = lo != hi
    codes = torch.unique(lo[keep] * num_nodes + hi[keep])  # sorted
    return torch.stack([codes // num_nodes, codes % num_nodes], 1)


def pair_codes(pairs: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """One int64 per undirected pair (direction ignored)."""
    lo, hi = torch.minimum(pairs[:, 0], pairs[:, 1]), torch.maximum(pairs[:, 0], pairs[:, 1])
    return lo * num_nodes + hi


def _fraction(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
        raise ConfigError(name, value, "pass a fraction in [0, 1)")
    return float(value)


def _negatives(n: int, count: int, taken: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """``count`` distinct pairs u < v whose codes are not in ``taken``."""
    out = torch.zeros(0, dtype=torch.long)
    seen = taken
    for _ in range(100):
        if out.shape[0] >= count:
            break
        want = 2 * (count - out.shape[0]) + 16
        u = torch.randint(0, n, (want,), generator=gen)
        v = torch.randint(0, n, (want,), generator=gen)
        pairs = torch.stack([torch.minimum(u, v), torch.maximum(u, v)], 1)
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        codes = pairs[:, 0] * n + pairs[:, 1]
        # first occurrence of each new code, in draw order (unique() would sort them)
        fresh = ~torch.isin(codes, seen)
        codes, pairs = codes[fresh], pairs[fresh]
        first = torch.ones_like(codes, dtype=torch.bool)
        order = torch.argsort(codes, stable=True)
        sorted_codes = codes[order]
        first[order[1:]] = sorted_codes[1:] != sorted_codes[:-1]
        pairs, codes = pairs[first], codes[first]
        out = torch.cat([out, pairs])
        seen = torch.cat([seen, codes])
    return out[:count]


@dataclass(frozen=True)
class LinkSplit:
    """The manifest: ``num_nodes``, the ``seed``, positives per split (``train`` /
    ``val`` / ``test``, (E, 2) int64) and the held-out ``negatives`` (``val`` /
    ``test``)."""

    num_nodes: int
    seed: int
    val: float
    test: float
    positives: dict[str, torch.Tensor]
    negatives: dict[str, torch.Tensor]

    def message_edges(self) -> torch.Tensor:
        """The training topology as a (2, 2E) directed edge_index (both directions)."""
        e = self.positives["train"]
        return torch.cat([e, e.flip(1)]).t().contiguous()

    def held_out_codes(self) -> torch.Tensor:
        return pair_codes(
            torch.cat([self.positives["val"], self.positives["test"]]), self.num_nodes
        )

    def state(self) -> dict[str, Any]:
        body = {
            "num_nodes": self.num_nodes,
            "seed": self.seed,
            "val": self.val,
            "test": self.test,
            "positives": {k: v.tolist() for k, v in self.positives.items()},
            "negatives": {k: v.tolist() for k, v in self.negatives.items()},
        }
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return {**body, "digest": hashlib.sha256(text.encode()).hexdigest()}

    def digest(self) -> str:
        return self.state()["digest"]

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> LinkSplit:
        body = {k: v for k, v in state.items() if k != "digest"}
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        if hashlib.sha256(text.encode()).hexdigest() != state.get("digest"):
            raise SplitError("the link split's digest does not match its content (edited?)")

        def pairs(v: list) -> torch.Tensor:
            return torch.tensor(v, dtype=torch.long).view(-1, 2)

        return cls(
            int(body["num_nodes"]),
            int(body["seed"]),
            float(body["val"]),
            float(body["test"]),
            {k: pairs(v) for k, v in body["positives"].items()},
            {k: pairs(v) for k, v in body["negatives"].items()},
        )

    def replay(self, edge_index: Any, num_nodes: int) -> LinkSplit:
        """The split of ``edge_index`` planned again; refused unless it is this one."""
        again = split_links(edge_index, num_nodes, val=self.val, test=self.test, seed=self.seed)
        if again.digest() != self.digest():
            raise SplitError(
                "these edges do not give the recorded link split (another graph, or edges "
                "changed since): pass the graph the split was planned on"
            )
        return again


def split_links(
    edge_index: Any, num_nodes: int, val: float = 0.1, test: float = 0.1, seed: int = 0
) -> LinkSplit:
    """Split the (undirected) edges into train / val / test positives, with as many
    fixed negatives from the complement for val and test."""
    v, t = _fraction(val, "split_links.val"), _fraction(test, "split_links.test")
    if v + t >= 1:
        raise ConfigError("split_links.test", test, "val + test must leave training edges")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError("split_links.seed", seed, "pass an integer seed >= 0")
    edges = canonical_edges(edge_index, num_nodes)
    m = int(edges.shape[0])
    n_val, n_test = round(m * v), round(m * t)
    if m - n_val - n_test < 1:
        raise DataError("edge_index", f"has {m} edges", "pass a graph with more edges to split")
    complement = num_nodes * (num_nodes - 1) // 2 - m
    if n_val + n_test > complement:
        raise DataError(
            "edge_index",
            f"leaves {complement} non-edges for {n_val + n_test} held-out negatives",
            "pass a sparser graph, or smaller val / test fractions",
        )
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(m, generator=gen)
    sort = lambda p: p[torch.argsort(p[:, 0] * num_nodes + p[:, 1])]  # noqa: E731
    positives = {
        "val": sort(edges[order[:n_val]]),
        "test": sort(edges[order[n_val : n_val + n_test]]),
        "train": sort(edges[order[n_val + n_test :]]),
    }
    taken = edges[:, 0] * num_nodes + edges[:, 1]
    drawn = _negatives(num_nodes, n_val + n_test, taken, gen)
    negatives = {"val": drawn[:n_val], "test": drawn[n_val:]}
    return LinkSplit(num_nodes, seed, v, t, positives, negatives)
