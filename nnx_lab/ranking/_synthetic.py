"""Synthetic ranking queries for demos and tests: seeded, offline, learnable.

Each row is a (query, candidate) pair with ``n_features`` standard-normal features. A
hidden linear scorer ``w`` gives each row a utility ``x @ w`` plus Gaussian ``noise``;
the relevance grades cut the utility at global quantiles, so the top ``relevant`` share
of all rows is relevant (``max_relevance`` for the best, ``1`` for the least), a linear
scorer can learn the order, and a few queries have no relevant candidate at all (the
evaluation excludes and counts them). Candidate ids are drawn without replacement from
a corpus of ``corpus_size`` ids (default: the candidates per query, every query then
holding the whole corpus, as ``candidate_sets="full"`` asks).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import ConfigError

__all__ = ["RankingData", "synthetic_queries"]


@dataclass(frozen=True)
class RankingData:
    """Rows grouped by query: ``features [N, F]``, ``query_ids``, ``candidate_ids`` and
    ``relevance`` (``[N]``, long), and the hidden scorer ``weights [F]``."""

    features: torch.Tensor
    query_ids: torch.Tensor
    candidate_ids: torch.Tensor
    relevance: torch.Tensor
    weights: torch.Tensor

    def __len__(self) -> int:
        return int(self.features.shape[0])

    @property
    def n_queries(self) -> int:
        return int(torch.unique(self.query_ids).numel())

    def batches(self, batch_size: int) -> list[tuple[torch.Tensor, ...]]:
        """Consecutive rows in batches of ``batch_size``: a query may span two batches."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError("batch_size", batch_size, "pass a positive int, e.g. 64")
        cols = (self.features, self.query_ids, self.candidate_ids, self.relevance)
        return [tuple(c[i : i + batch_size] for c in cols) for i in range(0, len(self), batch_size)]

    def subset(self, queries: torch.Tensor) -> RankingData:
        """The rows of the given query ids, in their order here."""
        keep = torch.isin(self.query_ids, queries)
        return RankingData(
            self.features[keep],
            self.query_ids[keep],
            self.candidate_ids[keep],
            self.relevance[keep],
            self.weights,
        )

    def split(self, val_fraction: float = 0.25, seed: int = 0) -> tuple[RankingData, RankingData]:
        """(train, val) by whole queries, drawn with ``seed``."""
        if not 0.0 < val_fraction < 1.0:
            raise ConfigError("val_fraction", val_fraction, "pass a fraction in (0, 1)")
        ids = torch.unique(self.query_ids)
        order = ids[torch.randperm(len(ids), generator=torch.Generator().manual_seed(seed))]
        n_val = max(1, round(len(ids) * val_fraction))
        return self.subset(order[n_val:]), self.subset(order[:n_val])


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(name, value, "pass a positive int")
    return value


def synthetic_queries(
    n_queries: int = 200,
    candidates: int = 20,
    n_features: int = 8,
    *,
    max_relevance: int = 2,
    relevant: float = 0.15,
    noise: float = 0.5,
    corpus_size: int | None = None,
    seed: int = 0,
) -> RankingData:
    """``n_queries`` queries of ``candidates`` rows each (see the module's docstring)."""
    _positive("n_queries", n_queries)
    _positive("candidates", candidates)
    _positive("n_features", n_features)
    _positive("max_relevance", max_relevance)
    if not 0.0 < relevant < 1.0:
        raise ConfigError("relevant", relevant, "pass the relevant share of rows, in (0, 1)")
    if not noise >= 0.0:
        raise ConfigError("noise", noise, "pass a noise scale >= 0")
    corpus = candidates if corpus_size is None else _positive("corpus_size", corpus_size)
    if corpus < candidates:
        raise ConfigError(
            "corpus_size", corpus_size, f"pass at least the candidates per query ({candidates})"
        )
    g = torch.Generator().manual_seed(seed)
    weights = torch.randn(n_features, generator=g)
    rows = n_queries * candidates
    features = torch.randn(rows, n_features, generator=g)
    utility = features @ weights + noise * torch.randn(rows, generator=g)
    # grade 1..max_relevance for the top `relevant` share, in equal quantile steps
    levels = torch.linspace(1.0 - relevant, 1.0, max_relevance + 1)[:-1]
    cuts = torch.quantile(utility, levels)
    relevance = (utility[:, None] > cuts[None, :]).sum(1).long()
    query_ids = torch.arange(n_queries).repeat_interleave(candidates)
    candidate_ids = torch.stack(
        [torch.randperm(corpus, generator=g)[:candidates] for _ in range(n_queries)]
    ).reshape(-1)
    return RankingData(features, query_ids, candidate_ids, relevance, weights)
