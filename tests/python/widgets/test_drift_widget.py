"""The DriftReport widget renders the engine's report and follows its sides: a plan edited
in a linked PlanBuilder, a run that ends in a TrainingMonitor."""

from __future__ import annotations

import threading

import pytest
from plan_factories import make_train_loader, make_val_loader

from nnx_lab import ExperimentPlan, drift_report
from nnx_lab.widgets import DriftReport, PlanBuilder
from nnx_lab.widgets._testing import FakeFrontend

LR = "train.optim.max_lr"


@pytest.fixture
def base(tmp_path):
    return (
        ExperimentPlan()
        .with_net(input_dim=8, output_dim=3, hidden_dims=[16])
        .with_data(make_train_loader, val=make_val_loader, identity="toy")
        .with_seed(3)
        .with_epochs(2)
        .with_runs_root(str(tmp_path / "runs"))
    )


def changed(widget):
    return {r["what"]: r for r in widget.data["rows"] if r["changed"]}


def test_the_widget_renders_the_engine_report(base, tmp_path):
    other = base.with_lr(0.01).with_train(log_every=10)
    widget = DriftReport(base, other)
    try:
        fe = FakeFrontend(widget)
        assert widget.data == drift_report(base, other).to_json()
        assert widget.report.labels == ("A", "B")
        rows = changed(widget)
        assert set(rows) == {LR, "train.log_every"}
        assert rows[LR]["changes_run_id"] is True
        assert rows["train.log_every"]["changes_run_id"] is False
        assert rows["train.log_every"]["action"] == "nothing: does not affect results"
        assert repr(widget) == (
            f"DriftReport(A = plan; B = plan: 2 of {len(widget.data['rows'])} rows differ "
            "(1 change the run id))"
        )
        widget.refresh()
        assert fe.state["version"] == widget.version == 2
    finally:
        widget.close()


def test_a_plan_edited_in_a_linked_builder_updates_the_report(base):
    result = base.fit(report=False)
    builder = PlanBuilder(base)
    widget = DriftReport(result.run, builder)
    try:
        fe = FakeFrontend(widget)
        assert changed(widget) == {}
        assert widget.side_names[1] == "the plan of a PlanBuilder (followed)"
        builder._dispatch_frontend_msg(
            builder, {"kind": "edit", "path": LR, "text": "0.02"}, []
        )  # typed into the form
        rows = changed(widget)
        assert set(rows) == {LR}
        assert (rows[LR]["then"], rows[LR]["now"]) == (0.001, 0.02)
        assert rows[LR]["changes_run_id"] is True
        assert rows[LR]["action"] == "a new run"
        assert fe.state["data"] == widget.data
        # a refused value changes nothing, the plan kept its last valid state
        version = widget.version
        builder._dispatch_frontend_msg(builder, {"kind": "edit", "path": LR, "text": "x"}, [])
        assert widget.version == version
        builder.plan = base
        assert changed(widget) == {}
    finally:
        widget.close()
        builder.close()


def test_a_run_that_ends_in_a_monitor_updates_the_report(base):
    builder = PlanBuilder(base.with_epochs(3))
    gate = threading.Event()
    release = threading.Event()

    class Hold:
        def on_step_ended(self, event):
            gate.set()
            release.wait(30)

    monitor = builder.fit(callbacks=[Hold()])
    widget = DriftReport(base, monitor)
    try:
        assert gate.wait(60)
        assert widget.waiting.startswith(f"waiting for run {monitor.run_id[:8]} to end")
        assert widget.report is None
        release.set()
        builder.wait(timeout=120)
        assert widget.waiting == ""
        rows = changed(widget)
        assert set(rows) == {"train.n_epochs"}
        assert (rows["train.n_epochs"]["then"], rows["train.n_epochs"]["now"]) == (2, 3)
        assert widget.report.sides[1] == f"run {monitor.run_id[:8]}"
    finally:
        widget.close()
        builder.close()


def test_a_side_that_cannot_be_read_is_shown_and_the_last_report_stays(base, tmp_path):
    widget = DriftReport(base, base.with_lr(0.5))
    try:
        data = widget.data
        widget.b = "0123456789abcdef"  # no such run
        assert widget.error.startswith("FileNotFoundError")
        assert widget.data == data
        widget.b = base.with_epochs(7)
        assert widget.error == ""
        assert set(changed(widget)) == {"train.n_epochs"}
    finally:
        widget.close()


def test_the_changed_only_filter_is_state_the_kernel_keeps(base):
    widget = DriftReport(base, changed_only=True)
    try:
        assert widget.changed_only is True
        assert widget.report.labels == ("then", "now")
        # the browser's checkbox writes the trait (a state update from the front end)
        widget.set_state({"changed_only": False})
        assert widget.changed_only is False
    finally:
        widget.close()


def test_closing_stops_following(base):
    builder = PlanBuilder(base)
    widget = DriftReport(builder)
    version = widget.version
    widget.close()
    builder.set_value(LR, 0.2)
    assert widget.version == version
    builder.close()
