"""``RankingTask``: train a scorer per query and evaluate whole queries (§3.7).

The task hands the engine's public hooks what they take: ``objective()`` (the pairwise
logistic loss, ``_objective``), ``eval_step()`` (an ``eval_step_fn(ctx)`` over the whole
validation loader, ``_evaluate``) and ``metric_specs()`` (the reported metrics, so
``MonitorSpec("ndcg_at_10")`` selects BEST). Its arguments are checked when it is made;
its batches before any run, by the objective's ``check(model, params)``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from ..data.metrics import MetricSpec, register_reported_metric
from ..errors import ConfigError
from ._metrics import metric_keys
from ._pairwise import WEIGHTINGS

__all__ = ["CANDIDATE_SETS", "RankingTask", "register_metrics"]

# "sampled": each query's candidates are the rows given (a sample of a larger corpus:
# the metrics are sampled metrics, over those rows); "full": every query is ranked
# against the same candidate ids (the whole corpus), which the evaluation checks.
CANDIDATE_SETS = ("sampled", "full")
_WORDS = {"mrr": "mean reciprocal rank", "recall": "recall", "ndcg": "NDCG"}


def register_metrics(k: Sequence[int]) -> None:
    """Register ``mrr_at_k``, ``recall_at_k`` and ``ndcg_at_k`` (higher is better) as
    reported metrics, so a ``MonitorSpec`` of one knows its direction."""
    for key in metric_keys(k):
        name, _, cut = key.partition("_at_")
        register_reported_metric(
            key,
            "higher",
            f"{_WORDS[name]} at {cut} per complete query (nnx_lab.ranking.RankingTask)",
        )


def _check_k(k: Any) -> tuple[int, ...]:
    values = (k,) if isinstance(k, numbers.Integral) and not isinstance(k, bool) else k
    fix = "pass a positive int or a tuple of them, e.g. k=(1, 5, 10)"
    if isinstance(values, str) or not isinstance(values, Sequence) or not values:
        raise ConfigError("RankingTask.k", k, fix)
    for cut in values:
        if isinstance(cut, bool) or not isinstance(cut, numbers.Integral) or cut < 1:
            raise ConfigError("RankingTask.k", k, f"{cut!r} is not a positive int; {fix}")
    if len(set(values)) != len(values):
        raise ConfigError("RankingTask.k", k, "name each cutoff once")
    return tuple(sorted(int(c) for c in values))


class RankingTask:
    """``RankingTask(k=(10,), max_relevance=2, weighting="query", candidate_sets="sampled")``.

    Batches are ``(features [N, F], query_ids [N], candidate_ids [N], relevance [N])``;
    the network scores each row (one output). ``k``: the cutoffs of MRR@k, Recall@k and
    NDCG@k. ``max_relevance``: relevance grades are ``0..max_relevance`` (0: not
    relevant). ``weighting``: ``"query"`` (each query weighs the same in the loss) or
    ``"pair"`` (each pair does). ``candidate_sets``: ``"sampled"`` (each query's rows
    are its candidates) or ``"full"`` (every query has the same candidate ids).
    """

    def __init__(
        self,
        k: int | Sequence[int] = (10,),
        max_relevance: int = 2,
        weighting: str = "query",
        candidate_sets: str = "sampled",
    ) -> None:
        self.k = _check_k(k)
        if (
            isinstance(max_relevance, bool)
            or not isinstance(max_relevance, numbers.Integral)
            or max_relevance < 1
        ):
            raise ConfigError(
                "RankingTask.max_relevance",
                max_relevance,
                "pass the highest relevance grade, an int >= 1 (grades are 0..max_relevance)",
            )
        self.max_relevance = int(max_relevance)
        if weighting not in WEIGHTINGS:
            raise ConfigError(
                "RankingTask.weighting",
                weighting,
                "use 'query' (each query weighs the same) or 'pair' (each pair does)",
            )
        self.weighting = weighting
        if candidate_sets not in CANDIDATE_SETS:
            raise ConfigError(
                "RankingTask.candidate_sets",
                candidate_sets,
                "use 'sampled' (each query's rows are its candidates) or 'full' (every "
                "query has the same candidate ids)",
            )
        self.candidate_sets = candidate_sets
        register_metrics(self.k)

    @property
    def metric_keys(self) -> list[str]:
        """The keys the evaluation reports, e.g. ``["mrr_at_10", "recall_at_10", "ndcg_at_10"]``."""
        return metric_keys(self.k)

    def config(self) -> dict[str, Any]:
        """The task's settings as JSON (they enter the run id through the hooks)."""
        return {
            "k": list(self.k),
            "max_relevance": self.max_relevance,
            "weighting": self.weighting,
            "candidate_sets": self.candidate_sets,
        }

    def objective(self) -> Any:
        """The pairwise logistic loss, for ``NNModel.train(objective=...)``."""
        from ._objective import PairwiseObjective

        return PairwiseObjective(self)

    def eval_step(self) -> Any:
        """An ``eval_step_fn(ctx)`` giving MRR@k, Recall@k and NDCG@k per complete query."""
        from ._evaluate import RankingEvaluation

        return RankingEvaluation(self)

    def metric_specs(self) -> list[MetricSpec]:
        """``MetricSpec`` of every reported metric, for ``NNTrainParams(metrics=...)``."""
        return [MetricSpec(key) for key in self.metric_keys]

    def __repr__(self) -> str:
        return (
            f"RankingTask(k={self.k}, max_relevance={self.max_relevance}, "
            f"weighting={self.weighting!r}, candidate_sets={self.candidate_sets!r})"
        )
