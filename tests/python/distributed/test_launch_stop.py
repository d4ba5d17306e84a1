"""Stop ends the job "stopped" in every state: before torchrun has started a rank,
while the ranks start, once the run has started but trained no step, and while rank
0 saves at an epoch's end (while it trains: test_launch's monitor test)."""

from __future__ import annotations

import launch_factories as lf
import pytest
import yaml

from nnx_lab import ExperimentPlan, NNCheckpoint, NNParams, NNTrainParams, RunStatus, launch
from nnx_lab.plans import set_config_report


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    before = set_config_report(False)
    yield
    set_config_report(before)


@pytest.fixture
def markers(tmp_path):
    folder = tmp_path / "markers"
    folder.mkdir()
    return folder


def _plan(root, *, train=lf.make_train_loader, callbacks=(), epochs=3):
    plan = (
        ExperimentPlan()
        .with_net(NNParams(input_dim=8, output_dim=3, hidden_dims=[16]))
        .with_train(NNTrainParams(n_epochs=epochs, checkpoint_every_s=0))  # LAST every epoch
        .with_data(train, identity=train.__name__)
        .with_seed(11)
        .with_runs_root(root)
    )
    return plan.with_callbacks(*callbacks) if callbacks else plan


def _launch(plan, markers, monitor=False):
    return launch(plan, 2, monitor=monitor, env={"NNX_TEST_MARKERS": str(markers)})


def _ended_with_no_process(handle):
    lf.wait_for(lambda: lf.processes_of(handle.folder) == [], timeout=30, what="no processes")


def test_stop_before_torchrun_started_a_rank_ends_stopped_with_no_run(runs_root, markers):
    handle = _launch(_plan(runs_root), markers, monitor=True)
    assert not list(handle.folder.glob("rank*.pid.json"))  # torchrun is still importing
    monitor = handle.monitor
    assert monitor.can_stop  # the Stop button works while the launch starts
    monitor.stop()  # the button: handle.stop(wait=False)
    assert monitor.status == "stopping"
    assert handle.wait(timeout=120) is None  # no run was started
    assert handle.status == "stopped"
    assert handle.returncode == 0
    assert handle.run is None
    assert not handle.run_dir.exists()
    assert handle.error is None
    monitor.wait(timeout=30)
    assert monitor.status == "stopped"
    _ended_with_no_process(handle)


def test_stop_while_the_ranks_start_ends_stopped_with_no_run(runs_root, markers):
    handle = _launch(_plan(runs_root, train=lf.make_slow_train_loader), markers)
    lf.wait_for(
        lambda: (markers / "building0").exists() and (markers / "building1").exists(),
        timeout=120,
        what="both ranks building the plan",
    )
    handle.stop()  # waits for the end
    assert handle.returncode == 0
    assert handle.status == "stopped"
    assert handle.run is None
    assert not handle.run_dir.exists()
    assert "stopped before the run started" in handle.logs(0)
    _ended_with_no_process(handle)


def test_stop_after_the_run_started_and_before_its_first_step(runs_root, markers):
    handle = _launch(_plan(runs_root, callbacks=(lf.SlowStartOnRankZero,)), markers)
    lf.wait_for(lambda: (markers / "run_started").exists(), timeout=120, what="the run")
    handle.stop("no step, please")
    run = handle.wait(timeout=10)
    assert handle.status == "stopped"
    assert run.status is RunStatus.STOPPED
    meta = yaml.safe_load((run.run_dir / "metadata.yaml").read_text())
    assert meta["steps"] == 0
    assert "no step, please" in meta["stop_reason"]
    assert NNCheckpoint.load(run).step == 0  # LAST, of the weights it started from
    _ended_with_no_process(handle)


def test_stop_while_rank_zero_saves_stops_after_that_epoch(runs_root, markers):
    plan = _plan(runs_root, callbacks=(lf.SlowSaveOnRankZero,), epochs=6)
    handle = _launch(plan, markers)
    lf.wait_for(lambda: (markers / "saving").exists(), timeout=120, what="rank 0 saving")
    handle.stop()
    run = handle.wait(timeout=10)
    assert handle.status == "stopped"
    assert run.status is RunStatus.STOPPED
    meta = yaml.safe_load((run.run_dir / "metadata.yaml").read_text())
    assert meta["epochs_completed"] == 1  # the epoch whose save it was in
    assert NNCheckpoint.load(run).step == meta["steps"]  # LAST where every rank stopped
    _ended_with_no_process(handle)
