"""ExperimentPlan.sweep: the space checked before anything runs, grid and random trials
with their seeds, one fit per trial, and a resumed sweep reading finished runs."""

from __future__ import annotations

import math

import pytest
from plan_factories import toy_plan

from nnx_lab import NNRun
from nnx_lab.errors import ConfigError
from nnx_lab.plans import PlanError, SweepResult, loguniform, uniform
from nnx_lab.plans._sweep_space import SweepSpace


def _runs(root):
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_grid_fits_each_trial_with_its_seed(tmp_path):
    root = tmp_path / "runs"
    plan = toy_plan(root, 1)
    res = plan.sweep({"train.optim.max_lr": [1e-3, 1e-2], "net.hidden_dims": [[8], [16, 8]]})
    assert isinstance(res, SweepResult)
    assert [t.values for t in res.trials] == [
        {"train.optim.max_lr": 1e-3, "net.hidden_dims": [8]},
        {"train.optim.max_lr": 1e-3, "net.hidden_dims": [16, 8]},
        {"train.optim.max_lr": 1e-2, "net.hidden_dims": [8]},
        {"train.optim.max_lr": 1e-2, "net.hidden_dims": [16, 8]},
    ]
    assert [t.seed for t in res.trials] == [7, 8, 9, 10]  # the plan's seed + index
    assert [t.status for t in res.trials] == ["finished"] * 4
    assert len({t.run_id for t in res.trials}) == 4
    assert sorted(t.run_id for t in res.trials) == _runs(root)
    for t in res.trials:  # what each run recorded is the trial's plan
        run = NNRun.load(t.run_id, root)
        assert run.config["train"]["seed"] == t.seed
        assert run.config["net"]["hidden_dims"] == t.values["net.hidden_dims"]
        assert run.epochs[-1]["val"]["loss"] == pytest.approx(t.metric("val.loss"))
    best = res.best()
    assert best.metric("val.loss") == min(t.metric("val.loss") for t in res.trials)
    row = res.rows()[best.index]
    assert row["val.loss"] == best.metric("val.loss")
    assert row["seed"] == best.seed
    assert res.to_json()["trials"][0]["values"]["net.hidden_dims"] == [8]


def test_resume_reads_finished_runs_instead_of_training(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    plan = toy_plan(root, 1)
    space = {"train.optim.max_lr": loguniform(1e-3, 1e-1)}
    first = plan.sweep(space, n_trials=3, search="random", seed=3)
    # a restart: the same call again; fitting would now be a bug
    monkeypatch.setattr(type(plan), "fit", lambda *a, **k: pytest.fail("retrained"))
    again = plan.sweep(space, n_trials=3, search="random", seed=3)
    assert [t.status for t in again.trials] == ["reused"] * 3
    assert [t.run_id for t in again.trials] == [t.run_id for t in first.trials]
    assert [t.metrics for t in again.trials] == [t.metrics for t in first.trials]


def test_partial_sweep_resumes_where_it_stopped(tmp_path):
    root = tmp_path / "runs"
    plan = toy_plan(root, 1)
    space = {"train.optim.max_lr": [1e-3, 3e-3, 1e-2]}
    plan.sweep(space, n_trials=2)  # stopped after two trials
    res = plan.sweep(space)
    assert [t.status for t in res.trials] == ["reused", "reused", "finished"]
    assert len(_runs(root)) == 3


def test_random_search_is_seeded_and_in_range():
    space = SweepSpace.of(
        {
            "train.optim.max_lr": loguniform(1e-4, 1e-1),
            "net.dropout_prob": uniform(0.0, 0.5),
            "net.hidden_dims": [[32], [64, 32]],
        }
    )
    a, b, c = space.random(20, 0), space.random(20, 0), space.random(20, 1)
    assert a == b
    assert a != c
    lrs = [t["train.optim.max_lr"] for t in a]
    assert all(1e-4 <= v <= 1e-1 for v in lrs)
    # log-uniform: draws spread over decades, not bunched near the top
    assert min(lrs) < 1e-3
    assert all(0.0 <= t["net.dropout_prob"] <= 0.5 for t in a)
    assert {tuple(t["net.hidden_dims"]) for t in a} == {(32,), (64, 32)}


@pytest.mark.parametrize(
    ("space", "kwargs", "field"),
    [
        ({"train.optim.max_rl": [1e-3]}, {}, "space"),
        ({"train.optim.max_lr": []}, {}, "space['train.optim.max_lr']"),
        ({"train.optim.max_lr": 1e-3}, {}, "space['train.optim.max_lr']"),
        ({"train.optim.max_lr": loguniform(1e-4, 1e-1)}, {}, "space['train.optim.max_lr']"),
        ({"train.optim.max_lr": [1e-3]}, {"search": "random"}, "n_trials"),
        ({"train.optim.max_lr": [1e-3]}, {"n_trials": 2}, "n_trials"),
        ({"train.optim.max_lr": [1e-3]}, {"search": "bayes"}, "search"),
        ({"train.optim.max_lr": [1e-3]}, {"seeds": "all"}, "seeds"),
        ({}, {}, "space"),
    ],
)
def test_bad_space_refused_before_anything_runs(tmp_path, space, kwargs, field):
    root = tmp_path / "runs"
    with pytest.raises(ConfigError) as info:
        toy_plan(root, 1).sweep(space, **kwargs)
    assert info.value.field == field
    assert not root.exists()


def test_bad_value_in_a_later_trial_refused_before_the_first_fit(tmp_path):
    root = tmp_path / "runs"
    with pytest.raises(PlanError) as info:
        toy_plan(root, 1).sweep({"train.optim.max_lr": [1e-3, -1.0]})
    assert info.value.field == "train.optim.max_lr"
    assert "sweep trial 1" in str(info.value)
    assert not root.exists()


def test_distribution_bounds_refused():
    with pytest.raises(ConfigError, match=r"loguniform\.low"):
        loguniform(0, 1)
    with pytest.raises(ConfigError, match=r"uniform\.high"):
        uniform(1, 1)
    with pytest.raises(ConfigError, match=r"uniform\.low"):
        uniform(math.nan, 1)


def test_same_seed_option_and_on_trial_hook(tmp_path):
    root = tmp_path / "runs"
    plan = toy_plan(root, 1)
    seen = []
    res = plan.sweep(
        {"train.optim.max_lr": [1e-3, 1e-2]},
        seeds="same",
        on_trial=lambda t, r: seen.append((t.index, t.status)),
    )
    assert [t.seed for t in res.trials] == [7, 7]
    assert seen == [(0, "finished"), (1, "finished")]
