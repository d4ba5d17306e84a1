"""``RankingTask.eval_step()``: the validation pass over whole queries.

A query's candidates may span batches, so the pass scores every batch of the
validation loader first, gathers the rows on the host (float64 scores), and only then
groups them by query: a query split over two batches is measured as the same query in
one batch. The EDP holds the pairwise loss in the training objective's weighting
(``loss``; None when no query has an unequal-relevance pair), the metrics by key, and
in ``extra`` the number of queries evaluated and of queries excluded for having no
relevant candidate.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import numpy as np
import torch

from ..engine.edp import EDP
from ..errors import DataError
from ._batches import check_structure, check_values, scores_of
from ._metrics import query_metrics

__all__ = ["RankingEvaluation", "check_full", "gather", "pairwise_loss"]


def gather(net: torch.nn.Module, loader: Any, device: Any = None, precision: Any = None):
    """(query_ids, candidate_ids, scores, relevance) of every row of ``loader``, as
    host arrays, the scores in float64."""
    parts: list[tuple[np.ndarray, ...]] = []
    for index, batch in enumerate(loader):
        where = f"NNTrainParams.val_loader batch {index}"
        features, qids, cids, rel = check_structure(batch, where)
        if device is not None:
            features = features.to(device)
        autocast = precision.autocast() if precision is not None else contextlib.nullcontext()
        with autocast:
            scores = scores_of(net(features), "the ranking network's output")
        parts.append(
            (
                qids.cpu().numpy(),
                cids.cpu().numpy(),
                scores.detach().double().cpu().numpy(),
                rel.cpu().numpy(),
            )
        )
    if not parts:
        raise DataError(
            "NNTrainParams.val_loader", "yields no batch", "pass at least one ranking batch"
        )
    return tuple(np.concatenate(column) for column in zip(*parts, strict=True))


def pairwise_loss(
    query_ids: np.ndarray, scores: np.ndarray, relevance: np.ndarray, weighting: str
) -> float | None:
    """The objective's pairwise logistic loss over whole queries (float64)."""
    order = np.argsort(query_ids, kind="stable")
    qid, s, r = query_ids[order], scores[order], relevance[order]
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    total = pairs = 0.0
    query_means: list[float] = []
    for lo, hi in itertools.pairwise(np.r_[starts, len(qid)]):
        sq, rq = s[lo:hi], r[lo:hi]
        mask = rq[:, None] > rq[None, :]
        n = int(mask.sum())
        if n == 0:
            continue
        losses = np.logaddexp(0.0, sq[None, :] - sq[:, None])[mask]
        total += float(losses.sum())
        pairs += n
        query_means.append(float(losses.mean()))
    if not query_means:
        return None
    return total / pairs if weighting == "pair" else float(np.mean(query_means))


def check_full(query_ids: np.ndarray, candidate_ids: np.ndarray) -> None:
    """``candidate_sets="full"``: every query has the same candidate ids."""
    corpus = np.unique(candidate_ids)
    pairs = np.unique(np.stack([query_ids, candidate_ids], axis=1), axis=0)
    queries, counts = np.unique(pairs[:, 0], return_counts=True)
    short = np.flatnonzero(counts != len(corpus))
    if short.size:
        q = queries[short[0]]
        missing = np.setdiff1d(corpus, pairs[pairs[:, 0] == q, 1])
        raise DataError(
            "NNTrainParams.val_loader",
            f"query {int(q)} lacks {len(missing)} of the {len(corpus)} candidates "
            f"(e.g. candidate {int(missing[0])})",
            "under candidate_sets='full' every query is ranked against every "
            "candidate; pass them all, or RankingTask(candidate_sets='sampled')",
        )


class RankingEvaluation:
    """An ``eval_step_fn(ctx) -> EDP``: MRR@k, Recall@k and NDCG@k per complete query."""

    def __init__(self, task: Any) -> None:
        self.task = task

    def __call__(self, ctx: Any) -> EDP:
        return self.evaluate(ctx.model, ctx.val_loader, ctx.device, ctx.precision)

    def evaluate(
        self, net: torch.nn.Module, loader: Any, device: Any = None, precision: Any = None
    ) -> EDP:
        """The same pass outside a run (the network in eval mode, no grad: the caller's)."""
        qid, cid, scores, rel = gather(net, loader, device, precision)
        check_values(rel, self.task.max_relevance, "NNTrainParams.val_loader")
        if self.task.candidate_sets == "full":
            check_full(qid, cid)
        result = query_metrics(qid, cid, scores, rel, self.task.k)
        return EDP(
            loss=pairwise_loss(qid, scores, rel, self.task.weighting),  # type: ignore[arg-type]
            samples=len(qid),
            metrics=dict(result.values),
            extra={"queries": result.queries, "excluded_queries": result.excluded_queries},
        )

    def run_identity(self) -> dict[str, Any]:
        return self.task.config()
