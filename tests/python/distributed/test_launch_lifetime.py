"""No process outlives the process that launched it, in any state (starting, training,
stopping), and none dies because the thread that launched it ended."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import launch_factories as lf
import pytest

from nnx_lab import ExperimentPlan, NNParams, NNTrainParams, RunStatus
from nnx_lab.distributed import launch
from nnx_lab.plans import set_config_report

HERE = Path(__file__).resolve().parents[1]  # tests/python: the helper scripts


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    before = set_config_report(False)
    yield
    set_config_report(before)


def _parent(runs_root, mode):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parents[1])])}
    return subprocess.Popen(
        [sys.executable, str(HERE / "launch_parent.py"), str(runs_root), mode],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


@pytest.mark.parametrize("mode", ["start", "stop"])
def test_killing_the_launching_process_leaves_no_process_in_any_state(runs_root, mode):
    """("train", killed while the ranks train, is test_launch's orphan test.)"""
    parent = _parent(runs_root, mode)
    try:
        folder = Path(parent.stdout.readline().strip())
        if mode == "stop":
            assert parent.stdout.readline().strip() == "stopping"
        else:  # torchrun is still starting: no rank exists yet
            assert not list(folder.glob("rank*.pid.json"))
        parent.send_signal(signal.SIGKILL)  # the kernel dies without a word
        parent.wait(timeout=10)
        lf.wait_for(lambda: lf.processes_of(folder) == [], timeout=60, what="no processes")
        if mode == "stop":
            ranks = [json.loads(p.read_text())["pid"] for p in folder.glob("rank*.pid.json")]
            assert len(ranks) == 2
            assert not any(Path(f"/proc/{pid}").exists() for pid in ranks)
    finally:
        if parent.poll() is None:
            parent.kill()


def test_a_launch_from_a_thread_that_ends_keeps_its_processes(runs_root):
    """torchrun dies with the thread that started it (PR_SET_PDEATHSIG follows the
    thread): a widget's handler, a kernel subshell a page reload drops. The launcher
    starts it from a thread of its own that lives as long as the process."""
    plan = (
        ExperimentPlan()
        .with_net(NNParams(input_dim=8, output_dim=3, hidden_dims=[16]))
        .with_train(NNTrainParams(n_epochs=2))
        .with_data(lf.make_train_loader, identity="thread")
        .with_seed(2)
        .with_runs_root(runs_root)
    )
    handles = []
    starter = threading.Thread(target=lambda: handles.append(launch(plan, 2)))
    starter.start()
    starter.join()  # the thread that launched is gone
    run = handles[0].wait(timeout=180)
    assert run.status is RunStatus.FINISHED
    assert handles[0].returncode == 0
