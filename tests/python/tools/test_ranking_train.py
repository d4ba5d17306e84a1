"""A ranking run through ``NNModel.train`` (§3.7): BEST selected by ``ndcg_at_10``, the
queries excluded and counted in the log, the task's settings in the run id, and every
refusal before any run directory exists."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nnx_lab import (
    MetricSpec,
    MonitorSpec,
    NNCheckpoint,
    NNModel,
    NNOptimParams,
    NNParams,
    NNTrainParams,
)
from nnx_lab.errors import ConfigError, DataError
from nnx_lab.ranking import RankingTask, synthetic_queries


def _model(output_dim=1, seed=0):
    torch.manual_seed(seed)
    return NNModel(net_params=NNParams(input_dim=6, output_dim=output_dim, hidden_dims=[16]))


def _data(seed=1):
    data = synthetic_queries(60, 12, 6, noise=1.0, seed=seed)
    return data.split(0.3, seed=seed)


def _params(root, train, val, task, **kw):
    base = {
        "n_epochs": 6,
        "train_loader": train.batches(48),
        "val_loader": val.batches(40),  # queries of 12 rows: some span two batches
        "metrics": task.metric_specs(),
        "monitor": MonitorSpec("ndcg_at_10"),
        "runs_root": str(root),
        "seed": 1,
        "progress": False,
        "optim": NNOptimParams(max_lr=0.05),  # a rate that makes NDCG move up and down
    }
    base.update(kw)
    return NNTrainParams(**base)


def test_best_is_the_epoch_of_the_highest_ndcg_at_10(runs_root):
    train, val = _data()
    task = RankingTask(k=(1, 10))
    model = _model()
    run = model.train(
        _params(runs_root, train, val, task),
        objective=task.objective(),
        eval_step_fn=task.eval_step(),
    )
    ndcg = [e["val"]["metrics"]["ndcg_at_10"] for e in run.epochs]
    losses = [e["val"]["loss"] for e in run.epochs]
    first_max = int(np.argmax(ndcg)) + 1
    assert first_max != int(np.argmin(losses)) + 1  # the fixture tells the two apart
    assert first_max != len(ndcg)  # and NDCG did not just rise every epoch
    best = NNCheckpoint.load(run=run, type="best", runs_root=runs_root)
    assert best.epoch == first_max
    assert all(e["selection"]["metric"] == "ndcg_at_10" for e in run.epochs)
    # the BEST weights, reloaded, give the NDCG recorded for that epoch
    again = NNModel.from_checkpoint(best)
    again.net.eval()
    with torch.no_grad():
        edp = task.eval_step().evaluate(again.net, val.batches(40))
    assert edp.metrics["ndcg_at_10"] == pytest.approx(ndcg[first_max - 1], rel=1e-9)
    # every epoch reports each key, and counts the excluded queries
    keys = {"mrr_at_1", "recall_at_1", "ndcg_at_1", "mrr_at_10", "recall_at_10", "ndcg_at_10"}
    excluded = int(
        sum(int(val.relevance[val.query_ids == q].max()) == 0 for q in val.query_ids.unique())
    )
    assert excluded > 0  # the fixture has such queries
    for e in run.epochs:
        assert set(e["val"]["metrics"]) == keys
        assert e["val"]["extra"] == {
            "queries": val.n_queries - excluded,
            "excluded_queries": excluded,
        }
    # the training records hold the pairwise term, and it went down
    terms = [e["train"]["terms"]["pairwise"] for e in run.epochs]
    assert terms[-1] < terms[0]


def test_the_weighting_and_the_cutoffs_enter_the_run_id(runs_root):
    train, val = _data()

    def run_id(task, evaluate):
        run = _model().train(
            _params(
                runs_root,
                train,
                val,
                task,
                n_epochs=1,
                metrics=(),
                monitor=None,
                val_loader=val.batches(40) if evaluate else None,
            ),
            objective=task.objective(),
            eval_step_fn=task.eval_step() if evaluate else None,
        )
        return run.run_dir.name

    # the objective carries its weighting; the evaluator its cutoffs
    assert run_id(RankingTask(), False) != run_id(RankingTask(weighting="pair"), False)
    assert run_id(RankingTask(), True) != run_id(RankingTask(k=(5, 10)), True)


def _refused(runs_root, exc, match, *, task=None, model=None, **kw):
    task = task or RankingTask()
    train, val = _data()
    objective = kw.pop("objective", task.objective())
    eval_step_fn = kw.pop("eval_step_fn", task.eval_step())
    with pytest.raises(exc, match=match):
        (model or _model()).train(
            _params(runs_root, train, val, task, **kw),
            objective=objective,
            eval_step_fn=eval_step_fn,
        )
    assert not runs_root.exists() or not any(runs_root.iterdir())


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"k": 0}, "RankingTask.k"),
        ({"k": (10, -1)}, "RankingTask.k"),
        ({"k": (5, 5)}, "RankingTask.k"),
        ({"k": 2.5}, "RankingTask.k"),
        ({"k": ()}, "RankingTask.k"),
        ({"k": True}, "RankingTask.k"),
        ({"max_relevance": 0}, "RankingTask.max_relevance"),
        ({"weighting": "candidate"}, "RankingTask.weighting"),
        ({"candidate_sets": "all"}, "RankingTask.candidate_sets"),
    ],
)
def test_bad_arguments_are_refused_naming_the_field(kwargs, field):
    with pytest.raises(ConfigError) as info:
        RankingTask(**kwargs)
    assert info.value.field == field


def test_relevance_out_of_range_is_refused_before_any_run(runs_root):
    train, val = _data()
    bad = [(f, q, c, torch.where(r == 2, 3, r)) for f, q, c, r in train.batches(48)]
    _refused(runs_root, DataError, r"relevance of 3 outside \[0, 2\]", train_loader=bad)
    vbad = [(f, q, c, r - 1) for f, q, c, r in val.batches(40)]
    _refused(runs_root, DataError, "val_loader batch 0.relevance", val_loader=vbad)


def test_a_batch_of_the_wrong_shape_is_refused_before_any_run(runs_root):
    train, val = _data()
    three = [(f, q, r) for f, q, _, r in train.batches(48)]
    _refused(runs_root, DataError, "got a 3-tuple", train_loader=three)
    ragged = [(f, q[:-1], c, r) for f, q, c, r in train.batches(48)]
    _refused(runs_root, DataError, "query_ids", train_loader=ragged)
    floats = [(f, q, c, r.float()) for f, q, c, r in val.batches(40)]
    _refused(runs_root, DataError, "relevance: dtype", val_loader=floats)


def test_a_scorer_of_two_outputs_is_refused_before_any_run(runs_root):
    _refused(runs_root, ConfigError, "output_dim=1", model=_model(output_dim=2))


def test_a_monitor_at_a_cutoff_the_task_does_not_report_is_refused(runs_root):
    _refused(runs_root, ConfigError, r"k=\(5, 10\)", monitor=MonitorSpec("ndcg_at_5", mode="max"))


def test_reported_metrics_without_the_evaluator_are_refused(runs_root):
    _refused(runs_root, ConfigError, "reported by a custom evaluator", eval_step_fn=None)
    with pytest.raises(ConfigError, match="reported by a custom evaluator"):
        _model().evaluate(
            [(torch.randn(4, 6), torch.randn(4, 1))], metrics=[MetricSpec("ndcg_at_10")]
        )


def test_full_candidate_sets_refuse_a_query_missing_a_candidate(runs_root):
    _train, val = _data()  # 12 candidates per query, the corpus is those 12 ids
    task = RankingTask(candidate_sets="full")
    cut = [tuple(t[1:] for t in batch) for batch in val.batches(40)]  # drops 1 row of q0
    _refused(runs_root, DataError, "lacks 1 of the 12 candidates", task=task, val_loader=cut)
    sampled = synthetic_queries(30, 12, 6, corpus_size=50, seed=2)
    _refused(
        runs_root, DataError, "candidate_sets='full'", task=task, val_loader=sampled.batches(40)
    )
