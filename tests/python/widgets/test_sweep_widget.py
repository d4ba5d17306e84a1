"""The Sweep widget: trials raced in one TrainingMonitor, their rows filled as each
ends, finished runs read instead of retrained, brushing and selection from the page,
Compare and "Branch from the best" as messages, refusals before anything runs."""

from __future__ import annotations

import pytest
from plan_factories import toy_plan

from nnx_lab.errors import ConfigError
from nnx_lab.plans import PlanError, loguniform
from nnx_lab.widgets import PlanBuilder, Sweep, TrainingMonitor
from nnx_lab.widgets._sweep import passes_brushes
from nnx_lab.widgets._testing import FakeFrontend

SPACE = {"train.optim.max_lr": [1e-3, 1e-2], "net.hidden_dims": [[8], [16, 8]]}


@pytest.fixture
def base(tmp_path):
    return toy_plan(tmp_path / "runs", 1)


def _message(widget, kind, **content):
    widget._dispatch_frontend_msg(widget, {"kind": kind, **content}, [])


def test_trials_race_in_one_monitor_and_fill_the_chart(base, tmp_path):
    monitor = TrainingMonitor()
    sweep = Sweep(base, SPACE, monitor=monitor)
    result = sweep.wait(120)
    assert sweep.status == "finished"
    assert sweep.error == ""
    assert [t.status for t in result.trials] == ["finished"] * 4
    # one race: a lane per trial, each its own run
    assert sorted(monitor.results) == [f"trial {i}" for i in range(4)]
    assert {r.run.id for r in monitor.results.values()} == {t.run_id for t in result.trials}
    # the rows hold the final epoch's metrics, as the run recorded them
    for t, row in zip(result.trials, sweep.trials, strict=True):
        res = monitor.results[t.name]
        assert row["metrics"]["val.loss"] == pytest.approx(res.metrics["val"].values["loss"])
        assert row["values"] == dict(t.values.items())
        assert row["seed"] == t.seed
    assert [a["key"] for a in sweep.axes][:3] == [
        "train.optim.max_lr",
        "net.hidden_dims",
        "val.loss",
    ]
    assert sweep.axes[1]["choices"] == [[8], [16, 8]]
    assert sweep.best == result.best().index
    monitor.close()


def test_a_second_sweep_reads_the_finished_runs(base):
    first = Sweep(base, SPACE).wait(120)
    monitor = TrainingMonitor()
    again = Sweep(base, SPACE, monitor=monitor)
    res = again.wait(120)
    assert [t.status for t in res.trials] == ["reused"] * 4
    assert monitor.results == {}  # nothing raced
    assert [t.metrics for t in res.trials] == [t.metrics for t in first.trials]
    assert again.best == first.best().index
    monitor.close()


def test_brushes_and_selection_from_the_page_filter_and_compare(base):
    sweep = Sweep(base, SPACE)
    sweep.wait(120)
    page = FakeFrontend(sweep)
    page.set_traits(brushes={"net.hidden_dims": [1, 1]})  # the [16, 8] choice only
    assert sweep.visible() == [1, 3]
    page.set_traits(brushes={"train.optim.max_lr": [5e-3, 1]})
    assert sweep.visible() == [2, 3]
    page.set_traits(selected=[0, 3])
    _message(sweep, "compare")
    cmp = sweep.comparison
    assert isinstance(cmp, TrainingMonitor)
    assert sorted(lane.info()["run_id"] for lane in cmp._lanes) == sorted(
        sweep.result.trials[i].run_id for i in (0, 3)
    )
    page.set_traits(status="running")  # the kernel's trait: refused
    assert sweep.status == "finished"
    own = sweep._monitor
    sweep.close()  # the monitor it made and the comparison go with it
    assert own.comm is None
    assert cmp.comm is None


def test_the_drift_of_two_selected_trials_names_what_the_sweep_changed(base):
    from nnx_lab.widgets import DriftReport

    sweep = Sweep(base, SPACE)
    sweep.wait(120)
    page = FakeFrontend(sweep)
    page.set_traits(selected=[0, 3])  # lr 1e-3 [8] against lr 1e-2 [16, 8]
    _message(sweep, "drift")
    drift = sweep.comparison
    assert isinstance(drift, DriftReport)
    changed = {row.what for row in drift.report.changed}
    assert {"train.optim.max_lr", "net.hidden_dims"} <= changed
    assert "train.n_epochs" not in changed
    page.set_traits(selected=[1])
    with pytest.raises(ConfigError, match="exactly two"):
        sweep.drift()
    sweep.close()
    assert drift.comm is None


def test_branch_from_the_best_loads_the_builder(base):
    builder = PlanBuilder(base, run_id=False)
    sweep = Sweep(base, SPACE, builder=builder)
    res = sweep.wait(120)
    _message(sweep, "branch", index=-1)
    best = res.best()
    assert builder.plan == best.plan
    assert builder.plan.value("train.optim.max_lr") == best.values["train.optim.max_lr"]
    assert f"sweep {best.name}" in builder.branches
    _message(sweep, "branch", index=2)
    assert builder.plan == res.trials[2].plan
    builder.close()


def test_refusals_before_anything_runs(base, tmp_path):
    with pytest.raises(ConfigError) as info:
        Sweep(base, {"train.optim.max_rl": [1e-3]})
    assert info.value.field == "space"
    with pytest.raises(PlanError, match="sweep trial 1"):
        Sweep(base, {"train.optim.max_lr": [1e-3, -1.0]})
    with pytest.raises(ConfigError) as info:
        Sweep(base, {"train.optim.max_lr": loguniform(1e-4, 1e-1)}, search=object())
    assert info.value.field == "search"
    assert not (tmp_path / "runs").exists()
    sweep = Sweep(base, {"train.optim.max_lr": [1e-3]}, start=False)
    with pytest.raises(ConfigError, match=r"Sweep\.builder"):
        sweep.branch_from()
    with pytest.raises(ConfigError, match=r"Sweep\.selected"):
        sweep.compare([0])  # not run yet


def test_passes_brushes_rule():
    axes = [
        {"key": "a", "kind": "value", "scale": "choice", "choices": [[8], [16, 8]]},
        {"key": "val.loss", "kind": "metric", "scale": "linear", "choices": []},
    ]
    row = {"values": {"a": [16, 8]}, "metrics": {"val.loss": 0.5}}
    assert passes_brushes(row, axes, {})
    assert passes_brushes(row, axes, {"a": [1, 1], "val.loss": [0.4, 0.6]})
    assert not passes_brushes(row, axes, {"a": [0, 0]})
    assert not passes_brushes({"values": {"a": [8]}, "metrics": {}}, axes, {"val.loss": [0, 1]})


def test_more_trials_than_a_race_draws_go_twelve_a_race(base):
    monitor = TrainingMonitor()
    lrs = [1e-3 * (i + 1) for i in range(14)]
    sweep = Sweep(base, {"train.optim.max_lr": lrs}, monitor=monitor)
    res = sweep.wait(180)
    assert sweep.error == ""
    assert [t.status for t in res.trials] == ["finished"] * 14
    assert all(r["metrics"].get("val.loss") is not None for r in sweep.trials)
    assert sorted(monitor.results) == ["trial 12", "trial 13"]  # the last race's two
    monitor.close()
