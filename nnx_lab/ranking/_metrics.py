"""MRR@k, Recall@k and NDCG@k per query, from gathered rows (NumPy, float64).

A query is ranked by score, highest first, ties broken by candidate id (lower first),
so a ranking is a function of the scores and ids alone, never of the row order. Gains
are linear (the relevance itself, scikit-learn's ``ndcg_score``), discounted by
``1 / log2(rank + 1)``. A candidate is relevant when its relevance is above 0. A query
without a relevant candidate has no defined metric: it is excluded and counted.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import DataError

__all__ = ["QueryMetrics", "metric_keys", "query_metrics", "ranked_order"]

_NAMES = ("mrr", "recall", "ndcg")


def metric_keys(k: Sequence[int]) -> list[str]:
    """``["mrr_at_10", "recall_at_10", "ndcg_at_10", ...]`` for each cutoff."""
    return [f"{name}_at_{cut}" for cut in k for name in _NAMES]


@dataclass(frozen=True)
class QueryMetrics:
    """The mean of each metric over the evaluated queries (None when none is), the
    number evaluated, and the queries excluded for having no relevant candidate."""

    values: dict[str, float | None]
    queries: int
    excluded_queries: int
    per_query: dict[str, np.ndarray] = field(default_factory=dict, repr=False)


def ranked_order(query_ids: np.ndarray, scores: np.ndarray, candidate_ids: np.ndarray):
    """Row indices grouped by query (ascending id), each query best first (score
    descending, then candidate id ascending)."""
    return np.lexsort((candidate_ids, -scores, query_ids))


def query_metrics(
    query_ids: np.ndarray,
    candidate_ids: np.ndarray,
    scores: np.ndarray,
    relevance: np.ndarray,
    k: Sequence[int],
) -> QueryMetrics:
    """Per-query metrics at each cutoff in ``k``, averaged over the queries that have a
    relevant candidate. Every array is 1-D, one row per (query, candidate)."""
    qid = np.asarray(query_ids).astype(np.int64, copy=False)
    cid = np.asarray(candidate_ids).astype(np.int64, copy=False)
    score = np.asarray(scores, dtype=np.float64)
    rel = np.asarray(relevance, dtype=np.float64)
    if np.isnan(score).any():
        raise DataError("scores", "NaN", "the network scored a candidate NaN; check the model")
    order = ranked_order(qid, score, cid)
    qid, cid, rel = qid[order], cid[order], rel[order]
    same = (qid[1:] == qid[:-1]) & (cid[1:] == cid[:-1])
    if same.any():
        at = int(np.argmax(same))
        raise DataError(
            "candidate_ids",
            f"query {int(qid[at])}, candidate {int(cid[at])}",
            "each candidate appears once per query; drop the duplicate rows",
        )
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    bounds = np.r_[starts, len(qid)]
    per: dict[str, list[float]] = {key: [] for key in metric_keys(k)}
    excluded = 0
    for lo, hi in itertools.pairwise(bounds):
        ranked = rel[lo:hi]  # this query's relevances in ranked order
        relevant = ranked > 0
        n_relevant = int(relevant.sum())
        if n_relevant == 0:
            excluded += 1
            continue
        discount = 1.0 / np.log2(np.arange(2, len(ranked) + 2))
        ideal = np.sort(ranked)[::-1]
        first = int(np.argmax(relevant))  # 0-based rank of the first relevant
        for cut in k:
            top = slice(0, cut)
            per[f"mrr_at_{cut}"].append(1.0 / (first + 1) if first < cut else 0.0)
            per[f"recall_at_{cut}"].append(float(relevant[top].sum()) / n_relevant)
            dcg = float((ranked[top] * discount[top]).sum())
            idcg = float((ideal[top] * discount[top]).sum())
            per[f"ndcg_at_{cut}"].append(dcg / idcg)
    arrays = {key: np.asarray(v, dtype=np.float64) for key, v in per.items()}
    values = {key: (float(a.mean()) if a.size else None) for key, a in arrays.items()}
    n = len(bounds) - 1 - excluded
    return QueryMetrics(values, n, excluded, arrays)
