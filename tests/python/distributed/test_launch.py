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

HERE = Path(__file__).resolve().parents[1]  # tests/python: the helper scripts
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


def test_a_worker_reads_its_plan_as_data_and_refuses_what_no_plan_writes(runs_root, tmp_path):
    """A launch folder's plan.json is a file on disk like any other: a rank checks its
    shape, then its references, before anything it names is imported or a group joined."""
    marker = tmp_path / "imported.txt"
    code = tmp_path / "code"
    code.mkdir()
    (code / "honest_factories.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\ndef make():\n    return []\n"
    )
    good = _plan(runs_root).to_json()
    hostile = json.loads(json.dumps(good))
    hostile["data"]["train"]["factory"] = "honest_factories:make"
    hostile["callbacks"] = [{"factory": "os:abort", "via": "with_callbacks"}]
    deep = json.dumps(good).replace(
        '"values": {', '"values": {"x": ' + "[" * 100_000 + "]" * 100_000 + ", ", 1
    )
    env = {
        **os.environ,
        "RANK": "0",
        "PYTHONPATH": os.pathsep.join([str(code), str(HERE), *sys.path]),
    }
    for document, error, says in (
        (json.dumps(hostile), "PlanError", "standard library"),
        (deep, "PlanSchemaError", "nested deeper"),
    ):
        folder = tmp_path / f"launch-{error}"
        folder.mkdir()
        (folder / "plan.json").write_text(document)
        out = subprocess.run(
            [sys.executable, "-m", "nnx_lab.distributed.worker", str(folder)],
            env=env,
            capture_output=True,
            timeout=180,
        )
        assert out.returncode == 1
        record = json.loads((folder / "rank0.error.json").read_text())
        assert record["type"] == error, record
        assert says in record["message"]
        assert not (folder / "run.json").exists()
    assert not marker.exists()


# -- the launcher is a source of events: any sink, no widget -----------------------------

RUN = "cd" * 16


class _Sink:
    def __init__(self):
        self.events = []

    def on_run_started(self, event):
        self.events.append(("started", event.run_id))

    def on_epoch_ended(self, event):
        self.events.append(("epoch", event.epoch))

    def on_run_finished(self, event):
        self.events.append(("finished", event.status, event.error, event.traceback))


# A stand-in for torchrun: it writes rank 0's log (and, failing, rank 1's error record)
# the way the workers do, and exits with the code it is given.
_WRITER = """
import json, sys, time
from pathlib import Path
run, folder, code = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
run.mkdir(parents=True)
lines = [
    {"event": "run_started", "run_id": run.name, "run_dir": str(run), "n_epochs": 2,
     "start_epoch": 1, "start_step": 0, "steps_per_epoch": 1, "config": {}, "time": 1.0},
    {"event": "epoch_ended", "epoch": 1, "step": 1, "lr": 0.1, "train": {}, "val": None,
     "signal": None, "signal_source": None, "improved": False, "seconds": 0.1},
]
if code == 0:
    lines.append({"event": "run_finished", "run_id": run.name, "status": "finished",
                  "epochs_completed": 1, "steps": 1, "time": 2.0})
with open(run / "metrics.jsonl", "a") as fh:
    for line in lines:
        fh.write(json.dumps(line) + "\\n"); fh.flush(); time.sleep(0.3)
status = "finished" if code == 0 else "failed"
(run / "metadata.yaml").write_text(f"status: {status}\\n")
if code:
    (folder / "rank1.error.json").write_text(json.dumps({
        "rank": 1, "exit_code": code, "type": "ValueError", "message": "no shard",
        "traceback": "Traceback: in fails_here", "time": 1.0}))
sys.exit(code)
"""


def _fake_launch(tmp_path, code):
    from nnx_lab.distributed import LaunchHandle

    root, folder = tmp_path / "runs", tmp_path / "launch"
    folder.mkdir()
    out = open(folder / "torchrun.log", "ab")  # noqa: SIM115 - the handle closes it
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(root / RUN), str(folder), str(code)], stdout=out
    )
    return LaunchHandle(proc, folder, root, RUN, 2, out)


def test_attach_follows_rank_zeros_log_into_any_sink(tmp_path):
    handle = _fake_launch(tmp_path, 0)
    sink = _Sink()
    early = handle.attach(sink)  # before the log exists
    assert handle.wait(timeout=60) is None  # the stand-in wrote no run.yaml: no NNRun
    assert handle.status == "finished"
    assert early.join(timeout=10)
    assert sink.events == [("started", RUN), ("epoch", 1), ("finished", "finished", None, None)]
    late = _Sink()
    handle.attach(late)  # after the end: the whole log at once
    assert late.events == sink.events
    assert handle.monitor is None  # the launcher owns no widget


def test_a_failed_launch_ends_its_sinks_with_the_failing_ranks_traceback(tmp_path):
    handle = _fake_launch(tmp_path, 1)
    sink = _Sink()
    follower = handle.attach(sink)
    with pytest.raises(RuntimeError, match=r"rank 1 failed \(exit code 1\): ValueError: no shard"):
        handle.wait(timeout=60)
    assert follower.join(timeout=10)
    assert sink.events[:2] == [("started", RUN), ("epoch", 1)]
    assert sink.events[-1] == (
        "finished",
        "failed",
        "rank 1 failed (exit code 1): ValueError: no shard",
        "Traceback: in fails_here",
    )


def test_the_launcher_imports_no_widget_and_refuses_to_own_a_monitor(runs_root):
    out = subprocess.run(
        [sys.executable, "-c", "import sys, nnx_lab.distributed; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=HERE.parents[1],
        env={**os.environ, "PYTHONPATH": str(HERE.parents[1])},
    )
    mods = set(out.stdout.split())
    assert "nnx_lab.distributed._launch" in mods
    assert not any(m.startswith("nnx_lab.widgets") for m in mods)
    from nnx_lab.distributed import launch as bare

    with pytest.raises(ConfigError, match=r"monitor.*TrainingMonitor.for_launch\(handle\)"):
        bare(_plan(runs_root), 2, monitor=True)
    assert not runs_root.exists()
