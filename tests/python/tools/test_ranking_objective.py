"""The ranking objective (§3.7): the pairwise logistic loss over unequal-relevance pairs
within a query, against a hand-written double loop (loss and gradients), for both
weightings; exact accumulation over micro-batches; the synthetic queries."""

from __future__ import annotations

import math

import pytest
import torch

from nnx_lab.engine.objective import ObjectiveContext
from nnx_lab.ranking import RankingTask, pairwise_loss, synthetic_queries


def _batch(seed=0, n=26):
    g = torch.Generator().manual_seed(seed)
    features = torch.randn(n, 5, generator=g)
    qids = torch.tensor([3] * 6 + [1] * 9 + [8] * 4 + [5] * 7)[:n]
    qids[15:19] = 8  # query 8: every candidate equally relevant, so it has no pair
    rel = torch.randint(0, 3, (n,), generator=g)
    rel[15:19] = 1
    cids = torch.arange(n)
    return features, qids, cids, rel


def _by_hand(scores, qids, rel, weighting):
    """The loss with two Python loops: each pair i > j of one query, log(1 + e^-(si-sj))."""
    per_query, pairs = {}, []
    n = len(scores)
    for i in range(n):
        for j in range(n):
            if qids[i] == qids[j] and rel[i] > rel[j]:
                loss = torch.log1p(torch.exp(-(scores[i] - scores[j])))
                per_query.setdefault(int(qids[i]), []).append(loss)
                pairs.append(loss)
    if weighting == "pair":
        return torch.stack(pairs).mean()
    return torch.stack([torch.stack(v).mean() for v in per_query.values()]).mean()


def _ctx():
    return ObjectiveContext(
        step=1, epoch=1, micro_batch=0, window_size=1, precision=None, device=None, loss=None
    )


@pytest.mark.parametrize("weighting", ["query", "pair"])
def test_the_loss_and_its_gradients_equal_a_hand_written_pairwise_loss(weighting):
    features, qids, cids, rel = _batch()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    objective = RankingTask(weighting=weighting).objective()
    (term,) = objective(net, (features, qids, cids, rel), _ctx()).terms
    assert term.name == "pairwise"
    loss = term.numerator / term.denominator
    want = _by_hand(net(features)[:, 0], qids, rel, weighting)
    assert loss.item() == pytest.approx(want.item(), rel=1e-6)
    grads = torch.autograd.grad(loss, list(net.parameters()))
    want_grads = torch.autograd.grad(want, list(net.parameters()))
    for got, exp in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(got, exp, rtol=1e-5, atol=1e-7)
    # the denominators: pairs, or queries with a pair (query 8 has none)
    if weighting == "query":
        assert float(term.denominator) == 3.0
    else:
        n_pairs = sum(
            int(qids[i] == qids[j] and rel[i] > rel[j]) for i in range(26) for j in range(26)
        )
        assert float(term.denominator) == n_pairs
    # the validation loss is the same definition on the same scores
    with torch.no_grad():
        scores = net(features)[:, 0].double().numpy()
    val = pairwise_loss(qids.numpy(), scores, rel.numpy(), weighting)
    assert val == pytest.approx(want.item(), rel=1e-6)


def test_the_weightings_differ_when_queries_have_different_pair_counts():
    features, qids, _cids, rel = _batch()
    scores = features[:, 0]
    by_query = _by_hand(scores, qids, rel, "query")
    by_pair = _by_hand(scores, qids, rel, "pair")
    assert not math.isclose(float(by_query), float(by_pair), rel_tol=1e-3)


def test_query_weighting_accumulates_exactly_over_whole_query_micro_batches():
    features, qids, cids, rel = _batch()
    net = torch.nn.Linear(5, 1)
    objective = RankingTask().objective()
    whole = objective(net, (features, qids, cids, rel), _ctx()).terms[0]
    parts = [slice(0, 15), slice(15, 26)]  # each query inside one part
    terms = [
        objective(net, tuple(t[s] for t in (features, qids, cids, rel)), _ctx()).terms[0]
        for s in parts
    ]
    union = sum(t.numerator for t in terms) / sum(float(t.denominator) for t in terms)
    assert union.item() == pytest.approx((whole.numerator / whole.denominator).item(), rel=1e-6)


def test_a_batch_without_an_unequal_pair_contributes_nothing():
    features = torch.randn(4, 5)
    batch = (features, torch.zeros(4, dtype=torch.long), torch.arange(4), torch.ones(4).long())
    for weighting in ("query", "pair"):
        (term,) = (
            RankingTask(weighting=weighting).objective()(torch.nn.Linear(5, 1), batch, _ctx()).terms
        )
        assert term.numerator.item() == 0.0
        assert float(term.denominator) == 0.0


def test_synthetic_queries_are_seeded_and_a_linear_scorer_of_them_ranks_well():
    a, b = synthetic_queries(50, 10, 4, seed=3), synthetic_queries(50, 10, 4, seed=3)
    assert torch.equal(a.features, b.features)
    assert torch.equal(a.relevance, b.relevance)
    assert not torch.equal(a.features, synthetic_queries(50, 10, 4, seed=4).features)
    assert len(a) == 500
    assert a.n_queries == 50
    assert int(a.relevance.min()) == 0
    assert int(a.relevance.max()) == 2
    # the hidden scorer itself ranks far better than a random one
    evaluation = RankingTask(k=(5,)).eval_step()
    linear = torch.nn.Linear(4, 1, bias=False)
    with torch.no_grad():
        linear.weight.copy_(a.weights[None, :])
        good = evaluation.evaluate(linear, a.batches(64)).metrics["ndcg_at_5"]
        linear.weight.copy_(torch.randn(1, 4, generator=torch.Generator().manual_seed(0)))
        other = evaluation.evaluate(linear, a.batches(64)).metrics["ndcg_at_5"]
    assert good > 0.8
    assert good > other + 0.2
    train, val = a.split(0.2, seed=1)
    assert train.n_queries == 40
    assert val.n_queries == 10
    assert not set(train.query_ids.tolist()) & set(val.query_ids.tolist())
