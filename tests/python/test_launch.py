"""nnx_lab.launch: a plan trained by two real processes (torchrun, gloo, CPU), followed
by a TrainingMonitor in this process, stopped from it, failing on one rank, and never
outliving the process that launched it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import launch_factories as lf
import pytest
import torch

from nnx_lab import (
    ConfigError,
    ExperimentPlan,
    NNCheckpoint,
    NNParams,
    NNRun,
    NNTrainParams,
    ResumeError,
    RunStatus,
    TrainingMonitor,
    launch,
)
from nnx_lab.plans import PlanError, set_config_report

HERE = Path(__file__).parent
NET = NNParams(input_dim=8, output_dim=3, hidden_dims=[16])


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    before = set_config_report(False)
    yield
    set_config_report(before)


def _plan(root, train=lf.make_train_loader, val=lf.make_val_loader, epochs=3, seed=5):
    return (
        ExperimentPlan()
        .with_net(NET)
        .with_train(NNTrainParams(n_epochs=epochs))
        .with_data(train, val=val, identity=train.__name__)
        .with_seed(seed)
        .with_runs_root(root)
    )


def _processes_of(folder: Path) -> list[int]:
    """Live processes whose command line names the launch folder (torchrun, workers)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().split(") ", 1)[1][0]
        except OSError:
            continue
        if str(folder) in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


def _wait_for(predicate, timeout=90.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_two_processes_train_the_plan_and_the_monitor_follows_them(runs_root):
    plan = _plan(runs_root)
    handle = launch(plan, 2)
    assert handle.status in ("starting", "running")
    run = handle.wait(timeout=180)
    assert isinstance(run, NNRun)
    assert run.status is RunStatus.FINISHED
    assert handle.status == "finished"
    assert handle.returncode == 0
    # the id the launcher computed before starting anything is the one rank 0 wrote
    assert run.id == handle.run_id == json.loads((handle.folder / "run.json").read_text())["run_id"]

    monitor = handle.monitor
    assert isinstance(monitor, TrainingMonitor)
    monitor.wait(timeout=30)
    assert monitor.run_id == run.id
    assert monitor.status == "finished"
    assert [row["epoch"] for row in monitor.epoch_rows] == [1, 2, 3]
    assert monitor.step == 3 * 256 // 32  # global steps: each rank took 16 of 32 rows
    # the validation union: 66 rows, counted once across the two ranks
    assert run.idps[-1].val_edp.samples == 66

    # the same plan in one process: the same weights (within float reduction order); its
    # id differs, as the loading pipeline (a sharded sampler of 16 rows a rank) enters it
    single = _plan(runs_root / "single").fit().run
    a, b = NNCheckpoint.load(run).model_state, NNCheckpoint.load(single).model_state
    assert a.keys() == b.keys()
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-5), name
    assert "rank 0" in handle.logs(0)

    # launching it again: refused before any process or launch folder
    launches = sorted((runs_root / ".launches").iterdir())
    with pytest.raises(FileExistsError, match="already") as refused:
        launch(plan, 2)
    assert run.id in str(refused.value)
    assert sorted((runs_root / ".launches").iterdir()) == launches


def test_stop_from_the_monitor_stops_every_rank_and_the_run_resumes(runs_root):
    plan = _plan(runs_root, train=lf.make_long_train_loader, val=None, epochs=50)
    handle = launch(plan, 2)
    monitor = handle.monitor
    _wait_for(lambda: monitor.step >= 5, what="the first steps in the monitor")
    assert monitor.can_stop
    monitor.stop()
    assert monitor.status == "stopping"
    run = handle.wait(timeout=120)
    assert run.status is RunStatus.STOPPED
    assert handle.status == "stopped"
    assert run.idps[-1].epoch < 50
    assert NNCheckpoint.load(run).step == monitor.step  # LAST written where it stopped
    monitor.wait(timeout=30)
    assert monitor.status == "stopped"
    assert _processes_of(handle.folder) == []

    # resumed: with another number of processes only from the weights (refused at once)
    child = plan.resuming(run, epochs="additional").with_epochs(1)
    with pytest.raises(ResumeError, match="world-size mismatch"):
        launch(child, 1)
    resumed = launch(child, 2, monitor=False).wait(timeout=120)
    assert resumed.status is RunStatus.FINISHED
    assert resumed.parent_run_id == run.id
    steps = [p.iteration for p in resumed.idps]  # the parent's history, then its own
    last = NNCheckpoint.load(run).step
    assert steps == list(range(steps[0], steps[-1] + 1))  # no step repeated or skipped
    assert steps[-1] > last  # it continued where LAST stopped


def test_a_failing_rank_ends_the_launch_with_its_traceback(runs_root):
    handle = launch(_plan(runs_root, train=lf.fails_on_rank_one), 2)
    with pytest.raises(
        RuntimeError, match=r"rank 1 failed \(exit code 1\): ValueError: rank 1 could not"
    ):
        handle.wait(timeout=180)
    assert handle.status == "failed"
    assert "fails_on_rank_one" in handle.error  # the traceback, not only the message
    _wait_for(lambda: handle.monitor.status == "failed", timeout=10, what="the monitor")
    assert "rank 1 could not read its shard" in handle.monitor.error
    _wait_for(lambda: _processes_of(handle.folder) == [], timeout=30, what="no processes")


def test_killing_the_launching_process_leaves_no_orphans(runs_root, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parents[1])])}
    parent = subprocess.Popen(
        [sys.executable, str(HERE / "launch_parent.py"), str(runs_root)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        folder = Path(parent.stdout.readline().strip())
        _wait_for(lambda: len(list(folder.glob("rank*.pid.json"))) == 2, what="both ranks to start")
        ranks = [json.loads(p.read_text())["pid"] for p in folder.glob("rank*.pid.json")]
        assert set(ranks) <= set(_processes_of(folder))
        parent.send_signal(signal.SIGKILL)  # the kernel dies without a word
        parent.wait(timeout=10)
        _wait_for(lambda: _processes_of(folder) == [], timeout=60, what="the ranks to end")
    finally:
        if parent.poll() is None:
            parent.kill()


def test_refusals_come_before_any_process_or_folder(runs_root):
    def local_factory():
        return lf.make_train_loader()

    with pytest.raises(PlanError, match="inside another function"):
        launch(_plan(runs_root, train=local_factory), 2)
    with pytest.raises(ConfigError, match="does not split across 2 processes"):
        launch(_plan(runs_root, train=lf.make_odd_batch_loader), 2)
    with pytest.raises(ConfigError, match="nproc_per_node"):
        launch(_plan(runs_root), 0)
    with pytest.raises(ConfigError, match="rdzv_endpoint"):
        launch(_plan(runs_root), 2, nnodes=2)
    with pytest.raises(ConfigError, match="plan"):
        launch("train.yaml", 2)
    assert not runs_root.exists() or not any(runs_root.iterdir())
