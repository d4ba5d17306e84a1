"""A sweep with the real Optuna: a TPE sampler and a pruner. Each trial reports its
objective per epoch to its Optuna trial; a pruned trial stops through the engine's stop
path, its run kept and marked, and a resumed sweep reads it back instead of retraining."""

from __future__ import annotations

import optuna
import pytest
from plan_factories import toy_plan

from nnx_lab import NNRun
from nnx_lab.errors import ConfigError
from nnx_lab.plans import loguniform
from nnx_lab.plans._sweep_optuna import PRUNED_REASON

optuna.logging.set_verbosity(optuna.logging.WARNING)

SPACE = {"train.optim.max_lr": loguniform(1e-4, 1e-1), "net.hidden_dims": [[8], [16, 8]]}


class PruneSecondAtEpoch2(optuna.pruners.BasePruner):
    """Prunes trial 1 once it has reported epoch 2: a decision the test knows."""

    def prune(self, study, trial):
        return trial.number == 1 and max(trial.intermediate_values, default=0) >= 2


def _sweep(plan, **kw):
    return plan.sweep(
        SPACE,
        n_trials=3,
        sampler=optuna.samplers.TPESampler(seed=0, n_startup_trials=2),
        pruner=PruneSecondAtEpoch2(),
        **kw,
    )


def test_a_pruned_trial_stops_and_its_run_is_kept_and_marked(tmp_path):
    root = tmp_path / "runs"
    res = _sweep(toy_plan(root, 4))
    assert [t.status for t in res.trials] == ["finished", "pruned", "finished"]
    pruned = res.trials[1]
    run = NNRun.load(pruned.run_id, root)
    assert run.status.value == "stopped"  # the engine's stop path
    assert run.metadata["stop_reason"] == PRUNED_REASON
    assert [e["epoch"] for e in run.epochs] == [1, 2]  # stopped after the pruned epoch
    assert pruned.metric("val.loss") == pytest.approx(run.epochs[-1]["val"]["loss"])
    states = [t.state for t in res.study.trials]
    S = optuna.trial.TrialState
    assert states == [S.COMPLETE, S.PRUNED, S.COMPLETE]
    # each epoch's objective went to the Optuna trial as it ended
    for trial, ot in zip(res.trials, res.study.trials, strict=True):
        logged = NNRun.load(trial.run_id, root).epochs
        assert ot.intermediate_values == {e["epoch"]: e["val"]["loss"] for e in logged}
    assert res.best().index != 1  # a pruned trial is not a candidate for the best
    assert res.to_json()["trials"][1]["status"] == "pruned"


def test_a_resumed_sweep_reads_the_pruned_and_finished_runs(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    plan = toy_plan(root, 4)
    first = _sweep(plan)
    monkeypatch.setattr(type(plan), "fit", lambda *a, **k: pytest.fail("retrained"))
    again = _sweep(plan)
    assert [t.status for t in again.trials] == ["reused", "pruned", "reused"]
    assert [t.values for t in again.trials] == [t.values for t in first.trials]
    assert [t.metrics for t in again.trials] == [t.metrics for t in first.trials]
    # the pruner saw the same history: the same states and reported values
    assert [t.state for t in again.study.trials] == [t.state for t in first.study.trials]
    assert [t.intermediate_values for t in again.study.trials] == [
        t.intermediate_values for t in first.study.trials
    ]


def test_median_pruner_prunes_a_hopeless_trial(tmp_path):
    # trial 0 trains at a sound learning rate; trial 1, at one far too small, keeps the
    # untrained loss, above trial 0's at the same epoch: the median rule prunes it
    plan = toy_plan(tmp_path / "runs", 6)
    res = plan.sweep(
        {"train.optim.max_lr": [1e-9, 5e-2]},
        n_trials=2,
        sampler=optuna.samplers.RandomSampler(seed=0),  # draws 5e-2, then 1e-9
        pruner=optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0),
        objective="train.loss",
    )
    assert [t.values["train.optim.max_lr"] for t in res.trials] == [5e-2, 1e-9]
    assert [t.status for t in res.trials] == ["finished", "pruned"]
    assert len(NNRun.load(res.trials[1].run_id, tmp_path / "runs").epochs) < 6


def test_a_pruner_without_an_optuna_sampler_is_refused_before_any_run(tmp_path):
    root = tmp_path / "runs"
    plan = toy_plan(root, 1)
    with pytest.raises(ConfigError) as info:
        plan.sweep({"train.optim.max_lr": [1e-3]}, pruner=optuna.pruners.MedianPruner())
    assert info.value.field == "pruner"
    with pytest.raises(ConfigError) as info:
        plan.sweep(SPACE, n_trials=2, search="random", sampler=optuna.samplers.TPESampler())
    assert info.value.field == "sampler"
    with pytest.raises(ConfigError) as info:
        plan.sweep(
            SPACE,
            n_trials=2,
            sampler=optuna.samplers.TPESampler(),
            pruner="median",  # not a pruner object
        )
    assert info.value.field == "pruner"
    assert not root.exists()
