"""The Sweep widget with an Optuna sampler and pruner: trials asked one at a time into
one race, a pruned trial's lane stopped and its row marked, and the same widget sweep
after a restart reading every run back (none retrained)."""

from __future__ import annotations

import optuna
import pytest
from plan_factories import toy_plan

from nnx_lab import NNRun
from nnx_lab.plans import loguniform
from nnx_lab.widgets import Sweep, TrainingMonitor

optuna.logging.set_verbosity(optuna.logging.WARNING)

SPACE = {"train.optim.max_lr": loguniform(1e-4, 1e-1), "net.hidden_dims": [[8], [16, 8]]}


class PruneSecondAtEpoch2(optuna.pruners.BasePruner):
    def prune(self, study, trial):
        return trial.number == 1 and max(trial.intermediate_values, default=0) >= 2


def _sweep(plan, monitor):
    return Sweep(
        plan,
        SPACE,
        n_trials=3,
        sampler=optuna.samplers.TPESampler(seed=0, n_startup_trials=2),
        pruner=PruneSecondAtEpoch2(),
        monitor=monitor,
    )


def test_optuna_trials_race_in_one_monitor_and_a_pruned_one_is_marked(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    plan = toy_plan(root, 4)
    monitor = TrainingMonitor()
    sweep = _sweep(plan, monitor)
    res = sweep.wait(180)
    assert sweep.error == ""
    assert [t.status for t in res.trials] == ["finished", "pruned", "finished"]
    assert [row["status"] for row in sweep.trials] == ["finished", "pruned", "finished"]
    # one race of three lanes; the pruned one stopped through the engine's stop path
    assert [lane["name"] for lane in monitor.runs] == ["trial 0", "trial 1", "trial 2"]
    assert [lane["status"] for lane in monitor.runs] == ["finished", "stopped", "finished"]
    assert len(NNRun.load(res.trials[1].run_id, root).epochs) == 2
    S = optuna.trial.TrialState
    assert [t.state for t in res.study.trials] == [S.COMPLETE, S.PRUNED, S.COMPLETE]
    # the values are what Optuna asked for, and the same as plan.sweep's search
    same = plan.sweep(
        SPACE,
        n_trials=3,
        sampler=optuna.samplers.TPESampler(seed=0, n_startup_trials=2),
        pruner=PruneSecondAtEpoch2(),
    )
    assert [t.values for t in same.trials] == [t.values for t in res.trials]
    assert [t.status for t in same.trials] == ["reused", "pruned", "reused"]
    sweep.close()
    # a restart: the widget reads every run back, trains none
    monkeypatch.setattr(type(plan), "fit", lambda *a, **k: pytest.fail("retrained"))
    monitor2 = TrainingMonitor()
    again = _sweep(plan, monitor2)
    res2 = again.wait(120)
    assert [t.status for t in res2.trials] == ["reused", "pruned", "reused"]
    assert [t.metrics for t in res2.trials] == [t.metrics for t in res.trials]
    assert [lane["status"] for lane in monitor2.runs] == ["skipped"] * 3
    again.close()
    monitor.close()
    monitor2.close()
