"""The pairwise logistic loss over unequal-relevance pairs within a query.

For candidates ``i`` and ``j`` of one query with ``rel_i > rel_j`` the pair's loss is
``log(1 + exp(-(s_i - s_j)))`` (RankNet's, ``softplus(s_j - s_i)``). A batch is scored
as a whole: the pairs are the masked cells of one ``N x N`` matrix, so the step is a few
tensor ops, with no Python loop over queries.

Weighting (``RankingTask(weighting=...)``):

- ``"query"``: each query weighs the same: the mean over queries of the mean over the
  query's pairs (a query with 100 pairs does not outweigh one with 3);
- ``"pair"``: each pair weighs the same: the mean over every pair of the batch.

Both come as a numerator and a denominator, so accumulation over micro-batches is
exact when a query's rows sit in one micro-batch; pairs across micro-batches are never
formed (the pairs of a query split by a batch boundary are those within each part).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["WEIGHTINGS", "pairwise_terms"]

WEIGHTINGS = ("query", "pair")


def pairwise_terms(
    scores: torch.Tensor, query_ids: torch.Tensor, relevance: torch.Tensor, weighting: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """(numerator, denominator) of the batch's pairwise loss: the summed pair losses
    and the pair count (``"pair"``), or the summed per-query means and the count of
    queries that have a pair (``"query"``). Scores are 1-D, one per row."""
    s = scores.float()
    same = query_ids[:, None] == query_ids[None, :]
    better = relevance[:, None] > relevance[None, :]
    pairs = same & better  # pairs[i, j]: i should rank above j
    losses = F.softplus(s[None, :] - s[:, None])  # losses[i, j] = log(1 + e^(s_j - s_i))
    mask = pairs.to(s.dtype)
    if weighting == "pair":
        return (losses * mask).sum(), mask.sum()
    per_row = mask.sum(1)  # pairs led by row i
    same_f = same.to(s.dtype)  # converted once: the N x N matrix serves twice
    per_query = same_f @ per_row  # pairs of row i's query
    weights = torch.where(per_query > 0, 1.0 / per_query.clamp(min=1.0), 0.0)
    numerator = ((losses * mask).sum(1) * weights).sum()
    # each query with a pair counted once: its rows' shares 1 / (rows of the query)
    rows = same_f.sum(1)
    queries = ((per_query > 0).to(s.dtype) / rows).sum().round()
    return numerator, queries
