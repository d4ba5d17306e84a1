"""The PlanBuilder's "processes" setting: 1 trains in the kernel as before; N > 1 makes Fit
launch the plan as N processes (torchrun, gloo, CPU) with the builder's monitor following
the launched run; bad values, and plans a launch cannot take, are refused with a message
before anything starts."""

from __future__ import annotations

import json
import time

import launch_factories as lf
import pytest
import traitlets

from nnx_lab import ExperimentPlan, NNParams, NNRun, NNTrainParams, RunStatus, TrainingMonitor
from nnx_lab.plans import set_config_report
from nnx_lab.widgets import PlanBuilder
from nnx_lab.widgets._testing import FakeFrontend

NET = NNParams(input_dim=8, output_dim=3, hidden_dims=[16])


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    before = set_config_report(False)
    yield
    set_config_report(before)


def _plan(root, train=lf.make_train_loader, seed=5):
    return (
        ExperimentPlan()
        .with_net(NET)
        .with_train(NNTrainParams(n_epochs=1))
        .with_data(train, val=lf.make_val_loader, identity=train.__name__)
        .with_seed(seed)
        .with_runs_root(root)
    )


def send(builder, kind, **content):
    """What the view sends (a box committed, a button clicked)."""
    builder._dispatch_frontend_msg(builder, {"kind": kind, **content}, [])


def _wait_for(predicate, timeout=30.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_processes_typed_in_the_view_are_checked_and_a_refusal_is_shown(runs_root):
    builder = PlanBuilder(_plan(runs_root), run_id=False)
    fe = FakeFrontend(builder)
    try:
        assert builder.processes == 1
        send(builder, "set_processes", text=" 2 ")
        assert builder.processes == 2
        assert fe.state["processes"] == 2
        assert builder.processes_error == ""
        assert "Fit launches 2 processes" in repr(builder)
        for text, words in [
            ("0", "processes=0: pass 1 (train in the kernel) or 2 to 64"),
            ("-3", "processes=-3: pass 1"),
            ("65", "processes=65: pass 1"),
            ("two", "processes='two': type a whole number"),
            ("2.5", "processes='2.5': type a whole number"),
            ("", "processes='': type a whole number"),
        ]:
            fe.clear()
            send(builder, "set_processes", text=text)
            assert builder.processes == 2, text  # the kernel keeps its last valid value
            assert builder.processes_error.startswith(words), builder.processes_error
            assert fe.state["processes_error"] == builder.processes_error
            # the kept value is sent back, for the box to show
            assert any(u.get("processes") == 2 for u in fe.updates), fe.updates
            assert builder.error == ""  # beside the box, not under the widget
        send(builder, "set_processes", text="1")
        assert builder.processes == 1
        assert builder.processes_error == ""
        # from Python: the same check, as an exception
        for bad in (0, 65, True):
            with pytest.raises(traitlets.TraitError, match=f"processes={bad}: pass"):
                builder.processes = bad
        for bad in (2.5, "2"):
            with pytest.raises(traitlets.TraitError, match="processes"):
                builder.processes = bad
        assert builder.processes == 1
    finally:
        builder.close()


def test_fit_with_two_processes_launches_and_the_monitor_follows(runs_root):
    builder = PlanBuilder(_plan(runs_root), run_id=False)
    fe = FakeFrontend(builder)
    try:
        builder.processes = 2
        send(builder, "fit")  # the Fit button
        assert builder.error == ""
        handle = builder.launched
        assert handle is not None
        assert handle.world_size == 2
        monitor = builder.monitor
        assert isinstance(monitor, TrainingMonitor)
        assert monitor is handle.monitor
        assert fe.state["monitor"].endswith(monitor.model_id)  # drawn in the builder
        assert builder.busy == "launch"
        # a second Fit while it runs is refused, and starts nothing
        send(builder, "fit")
        assert "still running" in builder.error
        assert len(list((runs_root / ".launches").iterdir())) == 1

        run = builder.wait(timeout=240)
        assert isinstance(run, NNRun)
        assert run.status is RunStatus.FINISHED
        assert run.id == handle.run_id
        monitor.wait(timeout=30)
        assert monitor.run_id == run.id
        assert monitor.status == "finished"
        assert monitor.step == 256 // 32  # global steps: each rank took 16 of 32 rows
        lines = (runs_root / run.id / "metrics.jsonl").read_text().splitlines()
        steps = sum(json.loads(x).get("event") == "step" for x in lines if x.strip())
        assert monitor.step == steps
        assert (handle.folder / "rank1.log").is_file()  # two processes ran
        _wait_for(lambda: builder.busy == "", what="the builder to leave 'launch'")

        # back to 1 process: a fit in the kernel, in a new monitor (the old one follows
        # a log and cannot train)
        builder.processes = 1
        builder.set_value("train.seed", 6)
        send(builder, "fit")
        assert builder.error == ""
        assert builder.launched is None
        assert builder.monitor is not monitor
        result = builder.wait(timeout=120)
        assert result.run.status is RunStatus.FINISHED
        assert len(list((runs_root / ".launches").iterdir())) == 1  # nothing launched
    finally:
        builder.close()


def test_what_a_launch_cannot_take_is_refused_before_anything_starts(runs_root):
    # 64 rows in batches of 15 do not split across 2 processes
    builder = PlanBuilder(_plan(runs_root, train=lf.make_odd_batch_loader), run_id=False)
    FakeFrontend(builder)
    try:
        builder.processes = 2
        send(builder, "fit")
        assert "does not split across 2 processes" in builder.error
        assert builder.launched is None
        assert builder.monitor is None
        assert builder.busy == ""
        # fit options are for a fit in the kernel
        with pytest.raises(ValueError, match=r"fit\(epochs=...\) with processes=2"):
            builder.fit(epochs=3)
        # branches race in the kernel
        builder.branch("a")
        send(builder, "fit_branches")
        assert "Fit branches with processes=2" in builder.error
        assert builder.monitor is None
        assert not runs_root.exists() or not any(runs_root.iterdir())
    finally:
        builder.close()
