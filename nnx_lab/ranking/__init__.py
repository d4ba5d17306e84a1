"""Ranking and retrieval evaluation (§3.7): issue 26.

``RankingTask`` trains a scorer per query on the engine's public hooks (an objective,
an ``eval_step_fn(ctx)`` and reported metrics) and measures MRR@k, Recall@k and NDCG@k
per complete query; ``synthetic_queries`` makes seeded demo data. See docs/ranking.md.
"""

from ._evaluate import pairwise_loss
from ._metrics import QueryMetrics, query_metrics
from ._synthetic import RankingData, synthetic_queries
from ._task import RankingTask, register_metrics

__all__ = [
    "QueryMetrics",
    "RankingData",
    "RankingTask",
    "pairwise_loss",
    "query_metrics",
    "synthetic_queries",
]

register_metrics((10,))  # the default cutoff: MonitorSpec("ndcg_at_10") before any task
