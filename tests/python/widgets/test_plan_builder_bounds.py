"""The PlanBuilder's bounds and what a refused field blocks (issue 20 section 6, issue 21
defect 3).

* Every numeric field has a documented bound (``PlanField.bound``); past the form's own
  limit a typed value is refused with the bound named, the text stays and the plan keeps
  its last valid value; past what any run takes (2**53 - 1 for the counts) the plan
  itself refuses it, whatever wrote the plan.
* The network's size is read on the meta device: a network too large for the form is
  refused, and one too large to preview (set from code) gets no run id until Fit, with
  no module built on a real device.
* While a field is refused, Fit, Fit branches and Branch from the page are refused,
  naming the field.
"""

from __future__ import annotations

import re

import pytest
from plan_factories import make_train_loader, make_val_loader

import nnx_lab.engine.model as engine_model
import nnx_lab.engine.nets as engine_nets
import nnx_lab.engine.network_source as engine_network_source
from nnx_lab import ExperimentPlan
from nnx_lab.plans import plan_fields
from nnx_lab.runs import PlanSchemaError
from nnx_lab.widgets import PlanBuilder
from nnx_lab.widgets._plan_form import (
    FORM_MAX_PARAMETERS,
    PREVIEW_MAX_PARAMETERS,
    network_parameters,
)

SAFE_INT = 2**53 - 1
NUMERIC = ("int", "float", "int_list")


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


@pytest.fixture
def builder(base):
    b = PlanBuilder(base, run_id=False)
    yield b
    b.close()


def edit(builder, path, text):
    builder._dispatch_frontend_msg(builder, {"kind": "edit", "path": path, "text": text}, [])


def click(builder, kind, **content):
    builder._dispatch_frontend_msg(builder, {"kind": kind, **content}, [])


def shown(number: float) -> str:
    """A bound as the refusals write it."""
    if number == SAFE_INT:
        return "2**53 - 1"
    if number == 3.4028234663852886e38:
        return "3.4e38"
    return f"{int(number):,}" if float(number).is_integer() else f"{number:g}"


def above(number: float) -> float:
    """A value just past a limit (x 10 for a float one, where + 1 would round away)."""
    return number + 1 if isinstance(number, int) else number * 10


def form_limited():
    for f in plan_fields():
        if f.bound is not None and f.bound.form_high is not None:
            yield pytest.param(f, id=f.path)


def plan_limited():
    for f in plan_fields():
        if f.bound is not None and f.bound.plan_high:
            yield pytest.param(f, id=f.path)


def test_every_numeric_field_has_a_documented_bound():
    numeric = [f for f in plan_fields() if f.type in NUMERIC]
    assert numeric
    for f in numeric:
        assert f.bound is not None, f.path
        assert f.bound.text(), f.path
        assert f.to_json()["bound"]["text"] == f.bound.text()
        if f.type in ("int", "int_list"):  # every count has an upper end somewhere
            assert f.bound.high is not None, f.path
    by_path = {f.path: f.bound for f in plan_fields() if f.bound}
    assert by_path["train.optim.momentum"].text() == "[0, 1)"
    assert by_path["train.n_epochs"].text() == "1 to 2**53 - 1"
    assert by_path["net.hidden_dims"].form_items == 64


@pytest.mark.parametrize("f", list(form_limited()))
def test_the_form_refuses_a_value_past_its_limit_and_names_it(builder, f):
    limit = f.bound.form_high
    value = above(limit)
    typed = repr(value) if f.type == "float" else str(int(value))
    if f.type == "int_list":
        typed = f"16, {int(value)}"
    before = builder.plan
    edit(builder, f.path, typed)
    assert builder.plan is before  # the plan keeps its last valid value
    assert builder.drafts[f.path] == typed  # the text stays in the field
    error = builder.errors[f.path]
    assert f"at most {shown(limit)} in this form" in error, error
    assert "not of NNx" in error
    assert f"with_value({f.path!r}" in error  # how to go past it in code
    assert "each value" in error if f.type == "int_list" else True


@pytest.mark.parametrize("f", list(form_limited()))
def test_the_form_takes_a_value_at_its_limit(builder, f):
    limit = f.bound.form_high
    if f.path == "net.hidden_dims":
        value = [int(limit)]
    elif f.type == "int":
        value = int(limit)
    else:
        value = limit
    if f.path in ("net.input_dim", "net.output_dim"):
        builder.set_value("net.hidden_dims", [])  # keep the network under the form's size
    if f.toggle:
        builder.set_value(f.toggle, True)
    assert not builder.set_value(f.path, value), builder.errors
    assert builder.plan.value(f.path) in (value, tuple(value) if isinstance(value, list) else ())


@pytest.mark.parametrize("f", list(plan_limited()))
def test_a_count_past_what_any_run_takes_is_refused_by_the_plan_itself(base, f):
    value = [10**30] if f.type == "int_list" else 10**30
    plan = base if f.toggle is None else base.with_value(f.toggle, True)
    problems = plan.check(f.path, value)
    assert problems.fields == (f.path,)
    assert "at most 2**53 - 1" in str(problems)
    # wherever the plan comes from: code, or a plan file read back. A file's
    # integer past any setting is refused as it is read, naming where it sits;
    # one past 2**53 - 1 but still an integer JSON keeps reads, and validate names it
    data = plan.to_json()
    with pytest.raises(PlanSchemaError, match=re.escape(f"values['{f.path}']")):
        ExperimentPlan.from_json({**data, "values": {**data["values"], f.path: value}})
    past = [SAFE_INT + 1] if f.type == "int_list" else SAFE_INT + 1
    loaded = ExperimentPlan.from_json({**data, "values": {**data["values"], f.path: past}})
    assert "at most 2**53 - 1" in str(loaded.validate())
    at_limit = [SAFE_INT] if f.type == "int_list" else SAFE_INT
    assert not [p for p in plan.check(f.path, at_limit) if "2**53" in p.fix]


def test_the_issue_values_are_refused_in_the_form(builder):
    for path, typed, bound in (
        ("net.hidden_dims", "30000000", "each value at most 65,536 in this form"),
        ("train.n_epochs", str(10**30), "at most 100,000 in this form"),
        ("train.log_every", str(10**30), "at most 100,000 in this form"),
        ("net.hidden_dims", ", ".join(["8"] * 65), "at most 64 items in this form"),
    ):
        edit(builder, path, typed)
        assert bound in builder.errors[path], (path, builder.errors[path])
    assert builder.plan.value("net.hidden_dims") == (16,)


def test_a_network_too_large_for_the_form_is_refused_before_anything_is_built(builder, monkeypatch):
    built = record_builds(monkeypatch)
    edit(builder, "net.hidden_dims", "60000, 60000")  # each width within the form's limit
    error = builder.errors["net.hidden_dims"]
    assert "parameters: at most 100,000,000 in this form" in error, error
    assert f"{(8 + 1) * 60000 + 60001 * 60000 + 60001 * 3:,} parameters" in error
    assert builder.plan.value("net.hidden_dims") == (16,)
    assert built
    assert set(built) == {"meta"}


def record_builds(monkeypatch) -> list[str]:
    """Patch the net builder where the engine and the form call it: the device of every
    network built (a real build would be "cpu")."""
    devices: list[str] = []
    real = engine_nets.build_net

    def recording(kind, params):
        net = real(kind, params)
        devices.extend({p.device.type for p in net.parameters()})
        return net

    monkeypatch.setattr(engine_nets, "build_net", recording)
    monkeypatch.setattr(engine_network_source, "build_net", recording)  # NNModel's builder
    return devices


def test_the_preview_of_a_large_network_allocates_nothing(base, monkeypatch):
    devices = record_builds(monkeypatch)
    models: list[object] = []
    real_init = engine_model.NNModel.__init__

    def counting_init(self, *args, **kwargs):
        models.append(self)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(engine_model.NNModel, "__init__", counting_init)
    big = base.with_net(hidden_dims=[30_000_000])  # from code: past the form's limit
    assert network_parameters(big) == 9 * 30_000_000 + 30_000_001 * 3
    builder = PlanBuilder(big)
    try:
        builder.refresh_run_id()
        assert builder.run_state == "large", builder.run_note
        assert builder.run_id == ""
        assert f"{network_parameters(big):,} parameters" in builder.run_note
        assert f"{PREVIEW_MAX_PARAMETERS:,}" in builder.run_note
        assert models == []  # no model was made
        assert set(devices) == {"meta"}  # and the only network built had no storage
        # a small network is still previewed exactly (and built, on the CPU)
        builder.plan = base
        assert builder.refresh_run_id() == base.expected_run_id()
        assert builder.run_state == "ready"
        assert "cpu" in devices
    finally:
        builder.close()


def test_the_form_limits_sit_between_the_preview_and_nnx():
    assert PREVIEW_MAX_PARAMETERS < FORM_MAX_PARAMETERS


@pytest.mark.parametrize(
    ("kind", "name"), [("fit", "Fit"), ("fit_branches", "Fit branches"), ("branch", "Branch")]
)
def test_a_button_that_takes_the_form_is_refused_while_a_field_is_refused(builder, kind, name):
    builder.branch("kept")
    edit(builder, "train.optim.max_lr", "-1")
    assert "train.optim.max_lr" in builder.errors
    click(builder, kind)
    assert builder.error.startswith(f"ValueError: {name}: max lr (train.optim.max_lr) shows"), (
        builder.error
    )
    assert "last valid one" in builder.error
    assert builder.monitor is None  # nothing trained
    assert list(builder.branches) == ["kept"]
    # fixed: the button works again
    edit(builder, "train.optim.max_lr", "0.01")
    click(builder, "branch", name="after")
    assert builder.error == ""
    assert list(builder.branches) == ["kept", "after"]


def test_a_refused_processes_box_refuses_fit_too(builder):
    click(builder, "set_processes", text="many")
    assert builder.processes_error
    click(builder, "fit")
    assert "Fit: processes shows a refused value" in builder.error
    assert builder.monitor is None


def test_typing_the_kept_value_again_clears_the_refusal(builder):
    """The plan it makes equals the current one (no trait changes): the refusal goes
    all the same, and Fit is free again."""
    edit(builder, "net.hidden_dims", "30000000")
    assert "net.hidden_dims" in builder.errors
    edit(builder, "net.hidden_dims", "16")  # what the plan holds already
    assert builder.errors == {}
    assert builder.drafts == {}
    click(builder, "branch", name="again")
    assert builder.error == ""
