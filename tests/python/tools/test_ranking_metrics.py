"""Ranking metrics per query (§3.7): NDCG@k against scikit-learn's ``ndcg_score``, MRR@k
and Recall@k on hand-made queries, the tie rule (candidate id), excluded queries, and a
query split over two validation batches measured as one."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import ndcg_score

from nnx_lab.errors import DataError
from nnx_lab.ranking import RankingTask, query_metrics


def _rows(queries):
    """Flat (qid, cid, score, rel) arrays from {qid: [(cid, score, rel), ...]}."""
    q, c, s, r = [], [], [], []
    for qid, cands in queries.items():
        for cid, score, rel in cands:
            q.append(qid), c.append(cid), s.append(score), r.append(rel)
    return np.array(q), np.array(c), np.array(s, dtype=float), np.array(r)


@pytest.mark.parametrize("k", [1, 3, 5, 12])
def test_ndcg_equals_sklearn_on_queries_without_ties(k):
    rng = np.random.default_rng(k)
    n_q, n_c = 9, 8
    rel = rng.integers(0, 3, size=(n_q, n_c))
    rel[0] = 0  # no relevant candidate: excluded here (sklearn scores it 0)
    rel[1, :] = 0
    rel[1, 3] = 2
    scores = rng.normal(size=(n_q, n_c))  # continuous: no ties
    q = np.repeat(np.arange(n_q), n_c)
    c = np.tile(np.arange(n_c), n_q)
    got = query_metrics(q, c, scores.ravel(), rel.ravel(), [k])
    keep = rel.sum(1) > 0
    want = [ndcg_score(rel[i : i + 1], scores[i : i + 1], k=k) for i in np.flatnonzero(keep)]
    np.testing.assert_allclose(got.per_query[f"ndcg_at_{k}"], want, rtol=1e-12)
    assert got.values[f"ndcg_at_{k}"] == pytest.approx(ndcg_score(rel[keep], scores[keep], k=k))
    assert (got.queries, got.excluded_queries) == (int(keep.sum()), int((~keep).sum()))


def test_ndcg_equals_sklearn_with_queries_of_different_lengths():
    rng = np.random.default_rng(7)
    queries, want = {}, []
    for qid, n in enumerate([3, 11, 6, 1, 9]):
        rel = rng.integers(0, 3, size=n)
        rel[0] = max(rel[0], 1)
        score = rng.normal(size=n)
        queries[qid] = list(zip(rng.permutation(100)[:n], score, rel, strict=True))
        want.append(ndcg_score([rel], [score], k=5) if n > 1 else 1.0)  # sklearn needs 2
    got = query_metrics(*_rows(queries), k=[5])
    np.testing.assert_allclose(got.per_query["ndcg_at_5"], want, rtol=1e-12)


def test_mrr_and_recall_on_hand_made_queries():
    queries = {
        # ranked: c3 (0), c1 (1), c2 (2), c4 (0): first relevant at rank 2
        10: [(1, 0.8, 1), (2, 0.5, 2), (3, 0.9, 0), (4, 0.1, 0)],
        # ranked: c7 (2) first; 2 relevant, one in the top 1, both in the top 3
        11: [(5, 0.2, 0), (6, 0.4, 1), (7, 0.7, 2)],
        # ranked: c8, c9, c10 (the only relevant, at rank 3)
        12: [(8, 3.0, 0), (9, 2.0, 0), (10, 1.0, 1)],
    }
    got = query_metrics(*_rows(queries), k=[1, 2, 3])
    per = got.per_query
    np.testing.assert_allclose(per["mrr_at_1"], [0, 1, 0])
    np.testing.assert_allclose(per["mrr_at_2"], [1 / 2, 1, 0])
    np.testing.assert_allclose(per["mrr_at_3"], [1 / 2, 1, 1 / 3])
    np.testing.assert_allclose(per["recall_at_1"], [0, 1 / 2, 0])
    np.testing.assert_allclose(per["recall_at_2"], [1 / 2, 1, 0])
    np.testing.assert_allclose(per["recall_at_3"], [1, 1, 1])
    assert got.values["mrr_at_3"] == pytest.approx((1 / 2 + 1 + 1 / 3) / 3)
    # NDCG@2 of query 10 by hand: ranked gains 0, 1; ideal 2, 1
    dcg, idcg = 1 / np.log2(3), 2 + 1 / np.log2(3)
    assert per["ndcg_at_2"][0] == pytest.approx(dcg / idcg)


def test_ties_are_broken_by_candidate_id_whatever_the_row_order():
    # every score equal: the ranking is by candidate id, lower first
    queries = {0: [(5, 0.0, 1), (2, 0.0, 0), (9, 0.0, 0), (7, 0.0, 2)]}
    q, c, s, r = _rows(queries)
    got = query_metrics(q, c, s, r, k=[1, 2])
    # ranked: c2 (0), c5 (1), c7 (2), c9 (0)
    assert got.per_query["mrr_at_1"][0] == 0.0
    assert got.per_query["mrr_at_2"][0] == pytest.approx(1 / 2)
    assert got.per_query["recall_at_2"][0] == pytest.approx(1 / 2)
    for seed in range(5):
        perm = np.random.default_rng(seed).permutation(len(q))
        again = query_metrics(q[perm], c[perm], s[perm], r[perm], k=[1, 2])
        assert again.values == got.values
    # a tie between two of three: ids 4 < 8 decide, the higher score still leads
    partial = {0: [(8, 1.0, 2), (4, 1.0, 0), (1, 0.5, 1)]}
    per = query_metrics(*_rows(partial), k=[1]).per_query
    assert per["mrr_at_1"][0] == 0.0  # c4 ranks first, not c8


def test_queries_without_a_relevant_candidate_are_excluded_and_counted():
    queries = {
        0: [(1, 0.3, 0), (2, 0.1, 0)],
        1: [(1, 0.9, 1), (2, 0.1, 0)],
        2: [(3, 0.2, 0)],
    }
    got = query_metrics(*_rows(queries), k=[10])
    assert (got.queries, got.excluded_queries) == (1, 2)
    assert got.values["ndcg_at_10"] == 1.0
    assert got.values["mrr_at_10"] == 1.0
    none = query_metrics(*_rows({0: [(1, 0.3, 0)]}), k=[10])
    assert none.values["ndcg_at_10"] is None
    assert none.excluded_queries == 1


def test_a_candidate_twice_in_one_query_is_refused():
    with pytest.raises(DataError, match="query 3, candidate 4"):
        query_metrics(*_rows({3: [(4, 0.1, 1), (4, 0.2, 0)]}), k=[1])


def test_a_query_split_over_two_batches_equals_the_query_in_one_batch():
    g = torch.Generator().manual_seed(0)
    n = 30
    features = torch.randn(n, 4, generator=g)
    qids = torch.tensor([0] * 7 + [1] * 13 + [2] * 10)
    cids = torch.randperm(n, generator=g)
    rel = torch.randint(0, 3, (n,), generator=g)
    net = torch.nn.Linear(4, 1)
    evaluation = RankingTask(k=(3, 10)).eval_step()
    with torch.no_grad():
        whole = evaluation.evaluate(net, [(features, qids, cids, rel)])
        # batch boundaries at 5 and 17: queries 0 and 1 each span two batches
        cuts = [slice(0, 5), slice(5, 17), slice(17, n)]
        split = evaluation.evaluate(net, [(features[s], qids[s], cids[s], rel[s]) for s in cuts])
        # the rows in another order too: the metrics follow the ids, not the rows
        perm = torch.randperm(n, generator=g)
        shuffled = evaluation.evaluate(net, [(features[perm], qids[perm], cids[perm], rel[perm])])
    assert split.metrics == whole.metrics == shuffled.metrics
    assert split.loss == pytest.approx(whole.loss, rel=1e-12)
    assert split.extra == whole.extra == {"queries": 3, "excluded_queries": 0}
    # one batch per half of query 1, scored separately, would not give the same metrics
    halves = query_metrics(
        np.r_[qids[:12].numpy(), qids[12:].numpy() + 100],
        cids.numpy(),
        net(features).detach().double().numpy()[:, 0],
        rel.numpy(),
        [3, 10],
    )
    assert halves.values != whole.metrics


def test_the_ranking_metrics_are_reported_metrics_of_the_registry():
    from nnx_lab import MonitorSpec, StreamingMetrics
    from nnx_lab.data.metrics import MetricSpec, metric_info, metric_names, register_reported_metric
    from nnx_lab.errors import ConfigError

    task = RankingTask(k=(3,))
    assert [s.key for s in task.metric_specs()] == ["mrr_at_3", "recall_at_3", "ndcg_at_3"]
    info = metric_info("ndcg_at_3")
    assert info.reported
    assert info.direction == "higher"
    assert MonitorSpec("ndcg_at_3").mode == "max"  # no mode= needed
    assert register_reported_metric("ndcg_at_3", "higher", "again") is info  # a no-op
    with pytest.raises(ConfigError, match="registered otherwise"):
        register_reported_metric("ndcg_at_3", "lower", "another direction")
    with pytest.raises(ConfigError, match="registered otherwise"):
        register_reported_metric("accuracy", "higher", "a built-in")
    assert "ndcg_at_3" not in metric_names("categorical")  # no output gives it
    with pytest.raises(ConfigError, match="reported by a custom evaluator"):
        StreamingMetrics([MetricSpec("ndcg_at_3")], kind="regression")
