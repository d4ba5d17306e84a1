"""PlanBuilder on the kernel side: the form generated from the plan's fields, live
validation (a refused value never reaches the plan), plan and form in sync both ways,
the run id, branches, Fit and Fit branches into its monitor, Reset."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest
import traitlets
from plan_factories import make_train_loader, make_val_loader

from nnx_lab import ExperimentPlan
from nnx_lab.engine.params import NNOptimParams
from nnx_lab.errors import ConfigError
from nnx_lab.plans import _fields
from nnx_lab.widgets import PlanBuilder, TrainingMonitor
from nnx_lab.widgets._plan_builder import parse_text
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


@pytest.fixture
def builder(base):
    b = PlanBuilder(base)
    yield b
    b.close()


def edit(builder, path, text=None, **content):
    """What the form sends when a field changes (typed text, or a checkbox / select value)."""
    msg = {"kind": "edit", "path": path, **content}
    if text is not None:
        msg["text"] = text
    builder._dispatch_frontend_msg(builder, msg, [])


def click(builder, kind, **content):
    builder._dispatch_frontend_msg(builder, {"kind": kind, **content}, [])


def test_the_form_is_made_from_the_plan_fields(builder):
    paths = [f["path"] for f in builder.fields]
    assert paths == [f.path for f in ExperimentPlan.fields()]
    lr = next(f for f in builder.fields if f["path"] == LR)
    assert lr | {"label": "max lr", "type": "float", "section": "optim", "in_run_id": True} == lr
    sections = [s["id"] for s in builder.sections]
    assert sections[:3] == ["net", "model", "optim"]
    assert {f["section"] for f in builder.fields} == set(sections)
    assert {s["id"]: s["open"] for s in builder.sections}["run"] is False


@pytest.fixture
def optim_with_a_new_field(monkeypatch):
    """NNOptimParams grows a field (as a later version of the engine might)."""

    @dataclasses.dataclass(frozen=True)
    class Optim(NNOptimParams):
        warmup_steps: int = 0

        def __post_init__(self) -> None:
            super().__post_init__()
            if not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
                raise ConfigError(
                    "NNOptimParams.warmup_steps", self.warmup_steps, "pass an integer >= 0"
                )

    Optim.__name__ = "NNOptimParams"
    monkeypatch.setattr(_fields, "NNOptimParams", Optim)
    caches = (_fields.plan_fields, _fields.field_index, _fields.raw_defaults)
    for cache in caches:
        cache.cache_clear()
    yield
    monkeypatch.undo()
    for cache in caches:
        cache.cache_clear()


@pytest.mark.usefixtures("optim_with_a_new_field")
def test_a_field_added_to_a_params_class_appears_in_the_form_and_is_checked(base):
    builder = PlanBuilder(base)
    try:
        new = next(f for f in builder.fields if f["path"] == "train.optim.warmup_steps")
        assert (new["type"], new["section"], new["default"]) == ("int", "optim", 0)
        edit(builder, "train.optim.warmup_steps", "-3")
        assert builder.plan is base
        assert "pass an integer >= 0" in builder.errors["train.optim.warmup_steps"]
        edit(builder, "train.optim.warmup_steps", "100")
        assert builder.plan.value("train.optim.warmup_steps") == 100
        assert builder.values["train.optim.warmup_steps"] == 100
    finally:
        builder.close()


def test_an_invalid_value_never_reaches_the_plan(builder, base):
    fe = FakeFrontend(builder)
    edit(builder, LR, "abc")
    assert builder.plan is base  # the last valid state
    assert builder.plan.value(LR) == 0.001
    # text is refused as not a number, with what to type (not in float32 terms)
    assert builder.errors == {
        LR: "train.optim.max_lr='abc': not a number; type a number > 0, e.g. 1e-3"
    }
    assert builder.drafts == {LR: "abc"}  # the typed text stays in the field
    assert fe.state["errors"] == builder.errors
    assert fe.state["drafts"] == {LR: "abc"}
    edit(builder, LR, "-1")
    assert builder.plan is base
    assert builder.errors[LR].startswith("train.optim.max_lr=-1.0: pass a learning rate > 0")
    # fixing it applies it, and clears the error and the draft
    edit(builder, LR, "0.01")
    assert builder.plan is not base
    assert builder.plan.value(LR) == 0.01
    assert base.value(LR) == 0.001  # plans are immutable: the old one is as it was
    assert builder.errors == {}
    assert builder.drafts == {}
    assert fe.state["values"][LR] == 0.01


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("train.optim.max_lr", "not a number; type a number > 0, e.g. 1e-3"),
        ("train.optim.weight_decay", "not a number; type a number >= 0, e.g. 1e-4"),
        ("net.dropout_prob", "not a number; type a number in [0, 1), e.g. 0.1"),
        ("train.n_epochs", "not a number; type a whole number >= 1"),
        ("net.input_dim", "not a number; type a whole number >= 1"),
    ],
)
def test_text_in_a_number_field_is_refused_as_not_a_number(builder, path, words):
    edit(builder, path, "abc")
    assert builder.errors[path] == f"{path}='abc': {words}"
    assert "3.4e38" not in builder.errors[path]
    assert "float32" not in builder.errors[path]


def test_an_edit_that_would_make_another_field_invalid_is_refused(base):
    builder = PlanBuilder(base.with_optim(momentum=(0.9, 0.999)))
    try:
        before = builder.plan
        edit(builder, "train.optim.name", value="sgd")
        assert builder.plan is before
        assert builder.errors["train.optim.name"] == (
            "makes train.optim.momentum invalid: train.optim.momentum=(0.9, 0.999): SGD takes "
            "one momentum in [0, 1), e.g. 0.9"
        )
        edit(builder, "train.optim.momentum", "")  # back to the optimizer's default
        edit(builder, "train.optim.name", value="sgd")
        assert builder.plan.value("train.optim.name") == "sgd"
        assert builder.errors == {}
    finally:
        builder.close()


def test_a_refused_draft_stays_while_another_field_is_edited(builder):
    edit(builder, LR, "nope")
    edit(builder, "train.n_epochs", "5")
    assert builder.plan.value("train.n_epochs") == 5
    assert builder.drafts == {LR: "nope"}
    assert LR in builder.errors


def test_typed_text_becomes_the_field_type():
    f = {f.path: f for f in ExperimentPlan.fields()}
    assert parse_text(f["net.hidden_dims"], "32, 16") == [32, 16]
    assert parse_text(f["net.hidden_dims"], "[64 32]") == [64, 32]
    assert parse_text(f["net.hidden_dims"], "") == []
    assert parse_text(f["train.n_epochs"], " 7 ") == 7
    assert parse_text(f["train.n_epochs"], "1.5") == "1.5"  # passed on: the plan says why
    assert parse_text(f[LR], "1e-3") == 0.001
    assert parse_text(f["train.optim.grad_clip_norm"], "") is None  # nullable
    assert parse_text(f["train.optim.momentum"], "(0.9, 0.99)") == [0.9, 0.99]
    assert parse_text(f["train.data_id"], "wine-v1") == "wine-v1"


def test_hidden_layers_typed_as_text(builder):
    edit(builder, "net.hidden_dims", "32, 16")
    assert builder.plan.value("net.hidden_dims") == (32, 16)
    assert builder.values["net.hidden_dims"] == [32, 16]
    edit(builder, "net.hidden_dims", "32, -1")
    assert builder.plan.value("net.hidden_dims") == (32, 16)
    assert "every hidden dim must be a positive integer" in builder.errors["net.hidden_dims"]


def test_setting_the_plan_from_python_refreshes_the_form(builder, base):
    fe = FakeFrontend(builder)
    edit(builder, LR, "abc")
    other = base.with_epochs(9).with_lr(0.05)
    builder.plan = other
    assert fe.state["values"]["train.n_epochs"] == 9
    assert fe.state["values"][LR] == 0.05
    # typed text belonged to the old plan
    assert builder.drafts == {}
    assert builder.errors == {}
    assert "train.n_epochs" in builder.set_paths
    with pytest.raises(traitlets.TraitError):
        builder.plan = "not a plan"


def test_plan_and_builder_stay_in_sync_both_ways_through_traitlets(builder, base):
    class Other(traitlets.HasTraits):  # e.g. an LR finder that reads and sets a plan
        plan = traitlets.Instance(ExperimentPlan)

    other = Other(plan=base)
    link = traitlets.link((builder, "plan"), (other, "plan"))
    seen = []
    builder.observe(lambda change: seen.append(change["new"]), names="plan")
    edit(builder, LR, "0.02")  # the form -> the other widget
    assert other.plan.value(LR) == 0.02
    other.plan = other.plan.with_epochs(4)  # the other widget -> the form
    assert builder.values["train.n_epochs"] == 4
    assert builder.plan is other.plan
    assert [p.value("train.n_epochs") for p in seen] == [2, 4]
    link.unlink()


def test_problems_of_the_plan_are_listed_with_their_field(tmp_path):
    builder = PlanBuilder()  # an empty plan: dims and data are missing
    try:
        fields = [p["field"] for p in builder.problems]
        assert fields == ["net.input_dim", "net.output_dim", "data.train"]
        assert builder.run_state == "blocked"
        assert builder.run_id == ""
        assert "fix the problems" in builder.run_note
        click(builder, "fit")
        assert builder.error.startswith("PlanError: the plan was refused; 3 problems")
        assert builder.monitor is None  # nothing started
    finally:
        builder.close()


def test_the_run_id_is_the_one_fit_gives_and_says_when_it_exists(builder, base, tmp_path):
    assert builder.refresh_run_id() == base.expected_run_id()
    assert builder.run_state == "ready"
    assert builder.run_exists == ""
    assert builder.run_note.startswith("new: ")
    edit(builder, LR, "0.02")
    assert builder.run_state == "pending"
    assert builder.refresh_run_id() == base.with_lr(0.02).expected_run_id()
    result = builder.fit().wait(timeout=120)
    assert result.run.id == builder.plan.expected_run_id()
    deadline = time.monotonic() + 30
    while (builder.busy or builder.run_state != "ready") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert builder.run_exists == "finished"
    assert builder.run_id == result.run.id
    # a second Fit of the same plan is refused before anything starts
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    click(builder, "fit")
    assert builder.error.startswith(f"FileExistsError: run {result.run.id} exists already")
    assert "train.overwrite_existing" in builder.error
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == runs
    assert builder.monitor.status == "finished"  # the monitor still shows the first fit


def test_the_run_id_waits_while_a_fit_of_the_builder_runs(builder, base):
    gate = threading.Event()
    release = threading.Event()

    class Hold:
        def on_step_ended(self, event):
            gate.set()
            release.wait(30)

    builder.fit(callbacks=[Hold()])
    assert gate.wait(60)
    assert builder.busy == "fit"
    edit(builder, LR, "0.03")
    assert builder.run_state == "deferred"  # never touches the running fit's randomness
    assert builder.run_id == ""
    release.set()
    builder.wait(timeout=120)
    deadline = time.monotonic() + 30
    while builder.run_state != "ready" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert builder.run_id == base.with_lr(0.03).expected_run_id()


def test_fit_opens_the_builder_monitor(builder):
    fe = FakeFrontend(builder)
    click(builder, "fit")
    assert builder.error == ""
    monitor = builder.monitor
    assert isinstance(monitor, TrainingMonitor)
    assert fe.state["monitor"] == f"anywidget:{monitor.model_id}"  # drawn inside the builder
    result = builder.wait(timeout=120)
    assert monitor.status == "finished"
    assert monitor.run_id == result.run.id
    assert monitor.loss_points == len(result.run.idps)


def test_branches_are_kept_loaded_dropped_and_raced(builder, base):
    edit(builder, LR, "0.01")
    click(builder, "branch", name="fast")
    edit(builder, "net.hidden_dims", "32, 16")
    click(builder, "branch", name=None)  # a default name
    assert list(builder.branches) == ["fast", "branch 2"]
    assert builder.branches["fast"].value(LR) == 0.01
    rows = {b["name"]: b for b in builder.branch_list}
    assert rows["fast"]["changes"] == [{"path": LR, "value": 0.01}]
    assert [c["path"] for c in rows["branch 2"]["changes"]] == ["net.hidden_dims", LR]
    assert rows["branch 2"]["current"] is True
    click(builder, "branch", name="fast")
    assert builder.error.startswith("ValueError: a branch named 'fast' exists already")
    click(builder, "branch", name="a/b")
    assert "use 1 to 40 letters" in builder.error
    click(builder, "load_branch", name="fast")
    assert builder.error == ""
    assert builder.plan is builder.branches["fast"]
    click(builder, "reset")
    assert builder.plan is base
    assert list(builder.branches) == ["fast", "branch 2"]  # Reset keeps them
    click(builder, "fit_branches")
    assert builder.busy == "race"
    results = builder.wait(timeout=180)
    assert list(results) == ["fast", "branch 2"]
    monitor = builder.monitor
    assert [r["name"] for r in monitor.runs] == ["fast", "branch 2"]
    assert [r["status"] for r in monitor.runs] == ["finished", "finished"]
    assert results["fast"].run.id == builder.branches["fast"].expected_run_id()
    click(builder, "drop_branch", name="fast")
    assert list(builder.branches) == ["branch 2"]


def test_fit_branches_without_branches_says_what_to_do(builder):
    click(builder, "fit_branches")
    assert builder.error.startswith("ValueError: no branches yet: Branch keeps the current plan")
    assert builder.monitor is None


def test_an_edit_of_an_unknown_field_is_shown(builder):
    edit(builder, "train.optim.nope", "1")
    assert builder.error.startswith("ValueError: an edit of an unknown field")
    with pytest.raises(ConfigError, match="no plan field has this path"):
        builder.set_value("train.optim.nope", 1)


def test_text_fallback(builder, base):
    assert repr(builder).startswith(f"PlanBuilder({base!r}; valid")
    builder.branch("x")
    builder.refresh_run_id()
    assert f"run {base.expected_run_id()[:8]}" in repr(builder)
    assert repr(builder).endswith("branches: x)")
    bundle = builder._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "application/vnd.jupyter.widget-view+json" in data
    with pytest.raises(TypeError, match="not an ExperimentPlan"):
        PlanBuilder("plan")


def test_a_plan_read_from_a_file_shows_no_run_id_until_resolved(base, tmp_path, monkeypatch):
    """The run id calls the plan's data factories; for a plan read from JSON that would
    import the module it names, which only the user may ask for (Fit, or resolve())."""
    import json
    import sys
    import uuid

    code, marker = tmp_path / "code", tmp_path / "imported.txt"
    code.mkdir()
    name = f"honest_{uuid.uuid4().hex[:8]}"
    (code / f"{name}.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\n"
        "def make(*args, **kwargs):\n"
        "    from plan_factories import make_train_loader\n"
        "    return make_train_loader(*args, **kwargs)\n"
    )
    monkeypatch.syspath_prepend(str(code))
    data = base.to_json()
    data["data"]["train"]["factory"] = f"{name}:make"
    loaded = ExperimentPlan.from_json(json.dumps(data))
    assert not loaded.resolved
    b = PlanBuilder(loaded)
    try:
        edit(b, LR, "0.02")  # a change asks for the run id again
        time.sleep(1.0)  # longer than the builder's debounce: a computation would have run
        assert b.run_state == "blocked"
        assert "plan.resolve()" in b.run_note
        assert not marker.exists()
    finally:
        b.close()
        sys.modules.pop(name, None)
    resolved = loaded.resolve()
    assert resolved.resolved
    assert marker.exists()
    b = PlanBuilder(resolved)
    try:
        deadline = time.monotonic() + 60
        while b.run_state != "ready" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert b.run_id == resolved.expected_run_id()
    finally:
        b.close()
