"""§3.9: split_links, link_metrics against scikit-learn, LinkTask end to end."""

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score, log_loss, roc_auc_score

from nnx_lab import MonitorSpec, NNModel, NNModelParams, NNOptimParams, NNTrainParams, Optims
from nnx_lab.errors import ConfigError, DataError, SplitError
from nnx_lab.link_tasks import LinkSplit, LinkTask, link_metrics, link_predictor_spec, split_links


def _graph(n=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    comm = torch.arange(n) % 3
    x = torch.nn.functional.one_hot(comm, 3).float() + 0.1 * torch.randn(n, 3, generator=g)
    u = torch.randint(0, n, (500,), generator=g)
    v = torch.randint(0, n, (500,), generator=g)
    keep = comm[u] == comm[v]
    return x, torch.stack([u[keep], v[keep]]), n


def _codes(pairs, n):
    lo, hi = pairs.min(1).values, pairs.max(1).values
    return set((lo * n + hi).tolist())


def test_the_split_is_canonical_disjoint_and_negatives_are_non_edges():
    _, ei, n = _graph()
    split = split_links(ei, n, val=0.1, test=0.2, seed=3)
    pos = split.positives
    all_edges = _codes(ei.t(), n) - {i * n + i for i in range(n)}
    assert set().union(*(_codes(p, n) for p in pos.values())) == all_edges
    assert sum(len(p) for p in pos.values()) == len(all_edges)  # each edge once
    for p in pos.values():
        assert bool((p[:, 0] < p[:, 1]).all())
    assert not _codes(pos["val"], n) & _codes(pos["test"], n)
    negs = split.negatives
    assert len(negs["val"]) == len(pos["val"])
    assert len(negs["test"]) == len(pos["test"])
    assert not (_codes(negs["val"], n) | _codes(negs["test"], n)) & all_edges
    assert not _codes(negs["val"], n) & _codes(negs["test"], n)
    assert bool((negs["val"][:, 0] != negs["val"][:, 1]).all())


def test_the_split_ignores_direction_order_and_duplicates_and_replays():
    _, ei, n = _graph()
    a = split_links(ei, n, seed=1)
    shuffled = torch.cat([ei.flip(0), ei], 1)[:, torch.randperm(2 * ei.shape[1])]
    b = split_links(shuffled, n, seed=1)
    assert a.digest() == b.digest()
    assert split_links(ei, n, seed=2).digest() != a.digest()
    again = LinkSplit.from_state(a.state())
    assert again.digest() == a.digest()
    assert torch.equal(again.negatives["test"], a.negatives["test"])
    a.replay(shuffled, n)
    with pytest.raises(SplitError):
        a.replay(ei[:, :-4], n)
    state = a.state()
    state["positives"]["val"] = state["positives"]["val"][1:]
    with pytest.raises(SplitError, match="digest"):
        LinkSplit.from_state(state)


def test_split_refusals():
    _, ei, n = _graph()
    with pytest.raises(ConfigError, match=r"split_links\.val"):
        split_links(ei, n, val=1.5)
    with pytest.raises(ConfigError, match=r"split_links\.test"):
        split_links(ei, n, val=0.5, test=0.5)
    with pytest.raises(DataError, match="edge_index"):
        split_links(torch.tensor([[0, 1], [1, 70]]), n)


def test_link_metrics_match_scikit_learn_with_ties():
    r = np.random.default_rng(0)
    z = np.round(r.normal(size=300), 1)  # many ties
    y = (r.random(300) < 0.35).astype(float)
    m = link_metrics(z, y, from_logits=True)
    p = 1 / (1 + np.exp(-z))
    assert m["auroc"] == pytest.approx(roc_auc_score(y, z), abs=1e-12)
    assert m["average_precision"] == pytest.approx(average_precision_score(y, z), abs=1e-12)
    assert m["bce"] == pytest.approx(log_loss(y, p), abs=1e-12)
    q = link_metrics(p, y, from_logits=False)
    assert q["auroc"] == pytest.approx(m["auroc"])
    assert q["bce"] == pytest.approx(m["bce"])


def test_confident_logits_keep_their_exact_ranking():
    # float32 sigmoid rounds all of these to 1.0: ranking the logits keeps them apart
    z = torch.tensor([30.0, 31.0, 32.0, 33.0])
    y = torch.tensor([0.0, 0.0, 1.0, 1.0])
    assert bool((torch.sigmoid(z) == 1.0).all())
    m = link_metrics(z, y)
    assert m["auroc"] == 1.0
    assert m["average_precision"] == 1.0
    assert m["bce"] == pytest.approx(float(np.mean([30, 31, 0, 0])), rel=1e-9)


def _train(task, x, runs_root, epochs=20, **kw):
    model = NNModel(params=NNModelParams(net=link_predictor_spec(input_dim=3)))
    params = NNTrainParams(
        n_epochs=epochs,
        train_loader=task.loader("train", x, 64),
        val_loader=task.loader("val", x, 64),
        metrics=task.metric_specs(),
        monitor=MonitorSpec("auroc"),
        optim=NNOptimParams(name=Optims.ADAM, max_lr=1e-2),
        runs_root=runs_root,
        **kw,
    )
    return model, model.train(
        params=params, objective=task.objective(), eval_step_fn=task.eval_step()
    )


def test_link_prediction_trains_selects_on_auroc_and_predicts(runs_root):
    x, ei, n = _graph()
    split = split_links(ei, n, val=0.1, test=0.1, seed=0)
    task = LinkTask(split)
    model, run = _train(task, x, runs_root)
    val = run.idps[-1].val_edp
    assert val.metrics["auroc"] > 0.8
    assert "average_precision" in val.extra
    prediction = task.predict(model, task.loader("test", x, 16))
    assert prediction.logits.dtype == np.float64
    assert prediction.targets.sum() == len(split.positives["test"])
    m = link_metrics(prediction.logits, prediction.targets, from_logits=True)
    assert m["auroc"] == pytest.approx(roc_auc_score(prediction.targets, prediction.logits))
    assert m["auroc"] > 0.7
    # the evaluator's numbers are link_metrics of the same scores
    again = link_metrics(*_scores(task, model, x))
    assert again["auroc"] == pytest.approx(val.metrics["auroc"])


def _scores(task, model, x):
    p = task.predict(model, task.loader("val", x, 64))
    return p.logits, p.targets


def test_a_held_out_positive_in_the_message_graph_fails_before_any_run(runs_root):
    x, ei, n = _graph()
    split = split_links(ei, n, seed=0)
    task = LinkTask(split)
    train = task.loader("train", x, 64)
    u, v = split.positives["test"][0].tolist()
    leaked = [
        {**b, "edge_index": torch.cat([b["edge_index"], torch.tensor([[v], [u]])], 1)}
        for b in train
    ]
    model = NNModel(params=NNModelParams(net=link_predictor_spec(input_dim=3)))
    before = [p.detach().clone() for p in model.net.parameters()]
    with pytest.raises(DataError, match=rf"held-out positive \({v}, {u}\)"):
        model.train(
            params=NNTrainParams(n_epochs=1, train_loader=leaked, runs_root=runs_root),
            objective=task.objective(),
        )
    assert not runs_root.exists() or not any(runs_root.iterdir())
    assert all(torch.equal(a, b) for a, b in zip(before, model.net.parameters(), strict=True))


def test_the_default_paths_refuse_link_batches(runs_root):
    x, ei, n = _graph()
    task = LinkTask(split_links(ei, n))
    model = NNModel(params=NNModelParams(net=link_predictor_spec(input_dim=3)))
    with pytest.raises(DataError):
        model.train(
            params=NNTrainParams(
                n_epochs=1, train_loader=task.loader("train", x, 64), runs_root=runs_root
            )
        )
    assert not runs_root.exists() or not any(runs_root.iterdir())


def test_loader_refusals():
    x, ei, n = _graph()
    task = LinkTask(split_links(ei, n))
    with pytest.raises(ConfigError, match="split_name"):
        task.loader("dev", x, 8)
    with pytest.raises(DataError, match="rows"):
        task.loader("val", x[:10], 8)
