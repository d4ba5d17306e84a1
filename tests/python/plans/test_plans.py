"""ExperimentPlan (§2.20): immutability and branching, validate() / check() without
touching a loader, the field descriptions, the JSON round trip and its refusals, probe,
fit (the imperative script's run id and loop), resume, and the binding report."""

from __future__ import annotations

import json
import random
import types

import numpy as np
import plan_factories as pf
import pytest
import torch

from nnx_lab import (
    ConfigError,
    DataError,
    ExperimentPlan,
    FitResult,
    MetricSpec,
    MonitorSpec,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNRun,
    NNSchedulerParams,
    NNTrainParams,
    PrecisionPolicy,
)
from nnx_lab.plans import PlanError, Problems, plan_fields, set_config_report

NET = pf.NET


@pytest.fixture(autouse=True)
def _quiet():
    before = set_config_report(False)
    yield
    set_config_report(before)


@pytest.fixture
def base(runs_root):
    return pf.toy_plan(runs_root, n_epochs=2)


class Untouchable:
    """A borrowed loader that must not be read."""

    def __iter__(self):
        raise AssertionError("validate() must not iterate a loader")


# -- immutability and branching -----------------------------------------------------------
def test_with_returns_a_new_plan_and_leaves_the_old_one_unchanged(base):
    short, long = base.with_epochs(2), base.with_epochs(10)
    assert base.value("train.n_epochs") == 2
    assert short.value("train.n_epochs") == 2
    assert long.value("train.n_epochs") == 10
    assert short is not base
    assert long is not base
    assert long != base
    assert short == base
    wide = base.with_net(hidden_dims=[64, 32])
    assert wide.value("net.hidden_dims") == (64, 32)
    assert wide.value("net.input_dim") == 8  # the other net fields are kept
    assert base.value("net.hidden_dims") == (16,)


def test_a_plan_cannot_be_changed_in_place(base):
    with pytest.raises(AttributeError, match="immutable"):
        base.seed = 3
    with pytest.raises(TypeError):
        base._values["train.seed"] = 3  # read-only mapping
    hidden = [16, 8]
    plan = base.with_net(hidden_dims=hidden)
    hidden.append(4)  # the caller's list is not the plan's
    assert plan.value("net.hidden_dims") == (16, 8)


def test_with_train_keeps_what_its_params_leave_unset(base, runs_root):
    plan = base.with_train(NNTrainParams(n_epochs=3))
    assert plan.value("train.runs_root") == str(runs_root)  # None there: kept
    assert plan.value("train.data_id") == "toy"
    assert plan.value("train.optim.max_lr") == NNOptimParams().max_lr  # set: replaced
    loaders = base.with_train(NNTrainParams(train_loader=pf.make_train_loader()))
    assert loaders.binding_report().objects[0][1].startswith("borrowed DataLoader")


def test_sections_branch_field_by_field(base):
    sgd = base.with_optim(name="sgd", momentum=0.5)
    assert sgd.value("train.optim.max_lr") == 1e-2  # kept from with_train
    assert sgd.validate().ok
    on = base.with_scheduler(patience=2)
    assert on.value("train.scheduler") is True
    assert on.value("train.scheduler.patience") == 2
    assert on.with_scheduler(None).value("train.scheduler") is False
    obj = base.with_scheduler(NNSchedulerParams(factor=0.5))
    assert obj.value("train.scheduler.factor") == 0.5
    es = base.with_early_stopping(3)
    assert es.value("early_stopping") is True
    assert es.value("early_stopping.patience") == 3
    assert es.with_early_stopping(None).value("early_stopping") is False


def test_unknown_names_are_refused_with_the_spelling(base, runs_root):
    with pytest.raises(ConfigError, match="hidden_dims"):
        base.with_net(hiden_dims=[3])
    with pytest.raises(ConfigError, match=r"did you mean train\.optim\.max_lr"):
        base.with_value("train.optim.max_lrr", 1e-3)
    with pytest.raises(ConfigError, match="check the spelling"):
        base.fit(sed=3)
    with pytest.raises(ConfigError, match="with_data"):
        base.with_train(train_loader=[])
    assert not runs_root.exists()


# -- validate() -----------------------------------------------------------------------------
def test_validate_collects_every_problem_without_touching_a_loader(base, runs_root):
    before = dict(pf.CALLS)
    bad = (
        base.with_data(pf.exploding_factory, val=Untouchable())
        .with_epochs(0)
        .with_lr(-1)
        .with_net(dropout_prob=2.0, hidden_dims=[16, 0])
        .with_early_stopping(0)
        .with_value("train.optim.weight_decay", "a lot")
    )
    problems = bad.validate()
    assert set(problems.fields) == {
        "net.hidden_dims",
        "net.dropout_prob",
        "train.optim.max_lr",
        "train.optim.weight_decay",
        "train.n_epochs",
        "early_stopping.patience",
    }
    assert problems.get("train.n_epochs").value == 0
    assert "integer >= 1" in problems.get("train.n_epochs").fix
    assert problems.get("train.optim.max_lr").value == -1
    assert problems.get("net.dropout_prob").fix.startswith("pass a probability")
    assert not problems.ok
    assert before == pf.CALLS  # no factory was called
    with pytest.raises(PlanError) as raised:
        bad.fit()
    assert set(raised.value.problems.fields) == set(problems.fields)
    assert isinstance(raised.value, ConfigError)
    for field in problems.fields:
        assert field in str(raised.value)
    assert before == pf.CALLS
    assert not runs_root.exists()


def test_a_valid_plan_has_no_problems(base):
    problems = base.validate()
    assert isinstance(problems, Problems)
    assert problems.ok
    assert problems.raise_for_errors() is problems


def test_missing_parts_are_named():
    problems = ExperimentPlan().validate()
    assert set(problems.fields) == {"net.input_dim", "net.output_dim", "data.train"}
    assert "with_data" in problems.get("data.train").fix


def test_bad_sources_callbacks_devices_and_resumes_are_problems(base):
    problems = (
        base.with_data(pf.needs_arguments, val=iter([(torch.zeros(1, 8), torch.zeros(1))]))
        .with_callbacks(object())
        .with_device("cuda" if not torch.cuda.is_available() else "mps")
        .resuming("0" * 32)
        .validate()
    )
    assert {"data.train", "data.val", "callbacks[0]", "model.device"} <= set(problems.fields)
    assert "called with no argument" in problems.get("data.train").fix
    assert "one-shot" in problems.get("data.val").fix
    assert "no known hook" in problems.get("callbacks[0]").fix
    assert "no such run" in problems.get("train.resume_from_run_id").fix
    assert base.resuming("not-an-id").validate().fields == ("train.resume_from_run_id",)
    if not torch.cuda.is_available():
        fp16 = base.with_precision("fp16").validate()
        assert fp16.fields == ("model.precision",)
        assert "fallback='fp32'" in fp16.get("model.precision").fix
        assert base.with_precision(PrecisionPolicy("fp16", fallback="fp32")).validate().ok


def test_check_reports_a_candidate_without_changing_the_plan(base):
    problems = base.check("train.optim.max_lr", -1)
    assert problems.fields == ("train.optim.max_lr",)
    assert base.value("train.optim.max_lr") == 1e-2
    assert base.check("train.optim.max_lr", 3e-4).ok
    # a field the candidate makes invalid is reported too: SGD takes one momentum
    paired = base.with_optim(momentum=(0.8, 0.99))
    assert paired.validate().ok
    assert paired.check("train.optim.name", "sgd").fields == ("train.optim.momentum",)
    # a problem the plan already has is not blamed on the candidate
    no_data = ExperimentPlan().with_net(NET)
    assert no_data.check("train.seed", 3).ok
    with pytest.raises(ConfigError, match="no plan field"):
        base.check("train.nope", 1)


# -- fields ---------------------------------------------------------------------------------
def test_fields_are_generated_from_the_params_dataclasses():
    import dataclasses

    paths = {f.path for f in plan_fields()}
    for prefix, cls in (
        ("net", NNParams),
        ("model", NNModelParams),
        ("train.optim", NNOptimParams),
        ("train.scheduler", NNSchedulerParams),
    ):
        for f in dataclasses.fields(cls):
            assert f"{prefix}.{f.name}" in paths
    skipped = {"train_loader", "val_loader", "optim"}  # data and the optim section
    for f in dataclasses.fields(NNTrainParams):
        assert (f"train.{f.name}" in paths) is (f.name not in skipped)
    index = {f.path: f for f in plan_fields()}
    assert index["net.activation"].type == "choice"
    assert "gelu" in index["net.activation"].choices
    assert index["net.hidden_dims"].type == "int_list"
    assert index["net.input_dim"].required
    assert index["net.input_dim"].default is None
    assert index["train.optim.max_lr"].default == NNOptimParams().max_lr
    assert index["train.optim.grad_clip_norm"].nullable
    assert index["model.loss"].custom_allowed
    assert "cross_entropy" in index["model.loss"].choices
    assert index["train.resume_mode"].choices == ("stateful", "weights_only")
    assert index["train.scheduler"].type == "bool"  # the switch of its section
    assert index["train.scheduler.patience"].toggle == "train.scheduler"
    assert index["early_stopping.patience"].toggle == "early_stopping"
    identity = NNTrainParams().identity()
    assert index["train.n_epochs"].in_run_id
    assert "n_epochs" in identity
    assert not index["train.log_every"].in_run_id
    assert "log_every" not in identity
    assert not index["early_stopping.patience"].in_run_id
    assert ExperimentPlan.fields() == plan_fields()
    json.dumps([f.to_json() for f in plan_fields()])


def test_values_give_every_field_as_json(base):
    values = base.values()
    assert list(values) == [f.path for f in plan_fields()]
    assert values["train.seed"] == 7
    assert values["model.loss"] == "cross_entropy"
    assert values["net.hidden_dims"] == [16]
    json.dumps(values)
    assert base.is_set("train.seed")
    assert not base.is_set("early_stopping")
    assert base.is_set("train.scheduler")  # with_train(NNTrainParams(scheduler=None)) set it


# -- JSON -----------------------------------------------------------------------------------
def _rich(base):
    return (
        base.with_loss(pf.smooth_loss)
        .with_precision(PrecisionPolicy("bf16"))
        .with_scheduler(patience=2)
        .with_early_stopping(3, min_delta=0.01)
        .with_callbacks(pf.EpochCounter, pf.make_counter)
        .with_optim(momentum=(0.8, 0.99))
    )


def test_json_round_trip(base):
    plan = _rich(base)
    data = json.loads(json.dumps(plan.to_json()))
    assert data["data"]["train"]["factory"] == "plan_factories:make_train_loader"
    assert data["values"]["model.loss"] == {"ref": "plan_factories:smooth_loss"}
    loaded = ExperimentPlan.from_json(data)  # inspect-only: its references are text
    assert str(loaded.value("model.loss")) == "plan_factories:smooth_loss"
    assert loaded.to_json() == plan.to_json()
    assert loaded.validate().ok
    back = loaded.resolve()
    assert back == plan
    assert back.to_json() == plan.to_json()
    assert back.value("model.loss") is pf.smooth_loss
    assert back.binding_report()["train.seed"].via == "plan: with_seed"
    assert back.validate().ok
    assert back.expected_run_id() == plan.expected_run_id()


def test_declared_metrics_monitor_and_extra_metrics_travel_as_json(base):
    """A launched plan is rebuilt from its JSON in every worker: the declared metrics, the
    monitor and extra_metrics must come back as what they were, not as their repr."""
    plan = base.with_train(
        metrics=[MetricSpec("accuracy"), MetricSpec("ece", bins=10)],
        monitor=MonitorSpec("ece(bins=10)", mode="min"),
        extra_metrics={"rows": pf.rows_seen},
    )
    data = json.loads(json.dumps(plan.to_json()))
    assert data["values"]["train.metrics"][1] == {"name": "ece", "options": {"bins": 10}}
    assert data["values"]["train.extra_metrics"] == {"refs": {"rows": "plan_factories:rows_seen"}}
    back = ExperimentPlan.from_json(data).resolve()
    assert list(back.value("train.metrics")) == [MetricSpec("accuracy"), MetricSpec("ece", bins=10)]
    assert back.value("train.monitor") == MonitorSpec("ece(bins=10)", mode="min")
    assert back.value("train.extra_metrics")["rows"] is pf.rows_seen
    assert back.expected_run_id() == plan.expected_run_id()
    result = back.fit()
    last = result.run.epochs[-1]
    assert set(last["val"]["metrics"]) >= {"accuracy", "ece(bins=10)"}
    assert last["selection"]["metric"] == "ece(bins=10)"
    with pytest.raises(PlanError, match="pass MetricSpec objects"):
        base.with_value("train.metrics", ["nll"]).to_json()
    in_main = base.with_train(extra_metrics={"rows": lambda y_true, y_pred: 1.0})
    with pytest.raises(PlanError) as raised:
        in_main.to_json()
    assert list(raised.value.problems.fields) == ["train.extra_metrics"]


def test_non_importable_objects_are_refused_with_the_fix(base):
    def nested():
        return pf.make_train_loader()

    in_main = types.FunctionType(pf.make_val_loader.__code__, {}, "make_val_loader")
    in_main.__module__ = "__main__"  # as a function typed in a notebook is
    plan = (
        base.with_data(lambda: pf.make_train_loader(), val=in_main)
        .with_callbacks(nested, pf.EpochCounter())
        .with_loss(torch.nn.CrossEntropyLoss())
    )
    with pytest.raises(PlanError) as raised:
        plan.to_json()
    problems = raised.value.problems
    assert set(problems.fields) == {
        "data.train",
        "data.val",
        "callbacks[0]",
        "callbacks[1]",
        "model.loss",
    }
    assert "lambda" in problems.get("data.train").fix
    assert "__main__" in problems.get("data.val").fix
    assert "move it into a module" in problems.get("data.val").fix
    assert "inside another function" in problems.get("callbacks[0]").fix
    assert "factory" in problems.get("callbacks[1]").fix
    assert "cannot travel" in problems.get("model.loss").fix
    borrowed = base.with_data(pf.make_train_loader(), val=pf.make_val_loader)
    with pytest.raises(PlanError, match="pass a factory"):
        borrowed.to_json()
    assert plan.validate().ok  # in this process the plan is fine: only shipping is refused


def test_from_json_names_what_cannot_be_resolved(base):
    data = base.to_json()
    data["data"]["train"]["factory"] = "no_such_module_xyz:make"
    loaded = ExperimentPlan.from_json(data)  # reading imports nothing: validate() names it
    assert loaded.validate().fields == ("data.train",)
    assert "cannot be imported" in loaded.validate().get("data.train").fix
    with pytest.raises(ConfigError, match="cannot be imported") as raised:
        loaded.resolve()
    assert raised.value.field == "data.train"
    data["data"]["train"]["factory"] = "plan_factories:no_such_factory"
    with pytest.raises(ConfigError, match="has no 'no_such_factory'"):
        ExperimentPlan.from_json(data).resolve()
    with pytest.raises(ConfigError, match="format"):
        ExperimentPlan.from_json({"values": {}})


# -- probe ----------------------------------------------------------------------------------
def test_probe_runs_a_temporary_model_and_writes_nothing(base, tmp_path, monkeypatch, runs_root):
    monkeypatch.chdir(tmp_path)
    batch = next(iter(pf.make_train_loader()))
    calls = dict(pf.CALLS)
    rng = torch.random.get_rng_state()
    py, npy = random.getstate(), np.random.get_state()[1].copy()
    report = base.probe(batch)
    assert torch.equal(torch.random.get_rng_state(), rng)
    assert random.getstate() == py
    assert np.array_equal(np.random.get_state()[1], npy)
    assert list(tmp_path.iterdir()) == []
    assert not runs_root.exists()
    assert calls == pf.CALLS
    assert report.input_shape == (32, 8)
    assert report.output_shape == (32, 3)
    assert report.target_shape == (32,)
    assert report.finite
    # the eval pass scores the initial weights fit() would start from
    model = NNModel(NET, NNModelParams(), init_seed=7)
    assert report.eval_loss == pytest.approx(model.evaluate([batch]).loss)
    assert report.train_loss is not None
    assert np.isfinite(report.train_loss)
    assert "(32, 8) -> (32, 3)" in str(report)
    features = base.probe(batch[0])
    assert features.target_shape is None
    assert features.train_loss is None
    assert features.eval_loss is None
    assert features.output_shape == (32, 3)


def test_probe_refuses_a_bad_batch_or_plan(base):
    with pytest.raises(DataError, match="8 columns") as raised:
        base.probe(torch.zeros(4, 5))
    assert raised.value.field == "batch"
    with pytest.raises(DataError, match="class targets span"):
        base.probe((torch.zeros(4, 8), torch.tensor([0, 1, 2, 7])))
    with pytest.raises(PlanError, match=r"train\.n_epochs"):
        base.with_epochs(0).probe(torch.zeros(4, 8))
    # data problems do not stop a probe: it needs no data source
    assert ExperimentPlan().with_net(NET).probe(torch.zeros(2, 8)).output_shape == (2, 3)


# -- fit ------------------------------------------------------------------------------------
def test_fit_is_the_equally_seeded_imperative_script(base, tmp_path):
    result = base.fit()
    assert isinstance(result, FitResult)
    assert isinstance(result.run, NNRun)
    # the imperative script, seeded the same way
    torch.manual_seed(7)
    random.seed(7)
    np.random.seed(7)
    train_loader, val_loader = pf.make_train_loader(), pf.make_val_loader()
    model = NNModel(NET, NNModelParams(), init_seed=7)
    run = model.train(
        NNTrainParams(
            n_epochs=2,
            seed=7,
            optim=NNOptimParams(max_lr=1e-2),
            train_loader=train_loader,
            val_loader=val_loader,
            data_id="toy",
            runs_root=str(tmp_path / "imperative"),
        )
    )
    assert result.run.id == run.id
    assert [i.train_edp.loss for i in result.run.idps] == [i.train_edp.loss for i in run.idps]
    for a, b in zip(result.model.net.parameters(), model.net.parameters(), strict=True):
        assert torch.equal(a, b)
    assert base.expected_run_id() == run.id


def test_fit_calls_each_factory_once_and_reads_metrics_from_the_run(base):
    before = dict(pf.CALLS)
    result = base.fit()
    assert {"train": before["train"] + 1, "val": before["val"] + 1} == pf.CALLS
    last = result.run.epochs[-1]
    assert result.metrics["val"].values["loss"] == last["val"]["loss"]
    assert result.metrics["train"].values["loss"] == last["train"]["loss"]
    assert result.metrics["val"].epoch == 2
    assert result.metrics["val"].samples == 64
    again = base.fit(overwrite_existing=True)
    assert again.run.id == result.run.id
    assert again.attempt_id != result.attempt_id
    assert len(result.attempt_id) == 32


def test_fit_writes_the_plan_and_binding_report_and_prints_it_once(base, capsys):
    set_config_report(True)
    result = base.fit(seed=9)
    out = capsys.readouterr().out
    assert out.count("nnx_lab binding report") == 1
    assert "train.seed" in out
    assert "fit(seed=...)" in out
    folder = result.run.run_dir
    planned = json.loads((folder / "plan.json").read_text())
    assert planned["attempt_id"] == result.attempt_id
    assert planned["run_id"] == result.run.id
    assert planned["plan"]["values"]["train.seed"] == 9
    assert ExperimentPlan.from_json(planned["plan"]).value("train.seed") == 9
    binding = json.loads((folder / "binding.json").read_text())
    seed = next(r for r in binding["rows"] if r["path"] == "train.seed")
    assert (seed["value"], seed["source"], seed["plan"]) == (9, "call", 7)
    assert "fit(seed=...)" in binding["text"]
    base.with_epochs(3).fit(report=False)  # this fit only
    assert capsys.readouterr().out == ""
    set_config_report(False)
    quiet = base.with_epochs(1).fit()
    assert capsys.readouterr().out == ""
    assert (quiet.run.run_dir / "binding.json").is_file()
    base.with_epochs(4).fit(report=True)
    assert capsys.readouterr().out.count("nnx_lab binding report") == 1


def test_resuming_fits_a_child_run_and_leaves_the_parent(base):
    parent = base.fit()
    parent_meta = (parent.run.run_dir / "metadata.yaml").read_text()
    child = base.with_epochs(1).resuming(parent).fit()
    assert child.run.id != parent.run.id
    assert child.run.parent_run_id == parent.run.id
    assert child.run.epochs[-1]["epoch"] == 3  # continues the parent's two epochs
    assert (parent.run.run_dir / "metadata.yaml").read_text() == parent_meta
    assert base.with_epochs(1).resuming(parent.run.id) == base.with_epochs(1).resuming(parent)


def test_callback_factories_are_fresh_per_fit_and_instances_are_borrowed(base):
    shared = pf.EpochCounter()
    plan = base.with_callbacks(pf.EpochCounter, shared)
    first = plan.fit()
    second = plan.with_seed(8).fit()
    assert first.run.id != second.run.id
    assert shared.epochs == 4  # the borrowed instance saw both fits
    report = plan.binding_report()
    described = [d for w, d, _ in report.objects if w == "callbacks"]
    assert any("fresh one per fit" in d for d in described)
    assert any("borrowed" in d for d in described)


def test_early_stopping_is_built_for_every_fit(base):
    plan = base.with_epochs(6).with_early_stopping(1, min_delta=10.0)
    result = plan.fit()  # no epoch improves by 10: the run stops after patience
    assert len(result.run.epochs) == 2
    assert result.run.status.value == "finished"


def test_a_factory_that_returns_no_loader_is_named(base, runs_root):
    with pytest.raises(DataError, match=r"returned None") as raised:
        base.with_data(pf.returns_nothing).fit()
    assert raised.value.field == "data.train"
    assert not runs_root.exists()


def test_expected_run_id_and_existing_run(base):
    assert base.existing_run() is None
    run_id = base.expected_run_id()
    assert base.fit().run.id == run_id
    assert base.existing_run() == "finished"
    assert base.with_epochs(3).expected_run_id() != run_id


# -- the binding report ---------------------------------------------------------------------
def test_the_binding_report_names_the_winning_source(base):
    report = base.binding_report()
    seed = report["train.seed"]
    assert (seed.value, seed.source, seed.via) == (7, "plan", "plan: with_seed")
    assert report["train.n_epochs"].via == "plan: with_train"
    assert report["train.resume_mode"].source == "default"
    assert report["train.resume_mode"].via == "library default"
    assert report["train.scheduler"].value is False
    assert "train.scheduler.patience" not in [r.path for r in report.rows]  # switched off
    overridden = base.binding_report(seed=43)["train.seed"]
    assert (overridden.value, overridden.source) == (43, "call")
    assert overridden.overridden == [("plan", 7), ("default", 0)]
    later = base.with_epochs(5).binding_report()["train.n_epochs"]
    assert (later.value, later.via) == (5, "plan: with_epochs")
    text = str(base.binding_report(seed=43))
    assert "fit(seed=...)" in text
    assert "over plan: 7" in text
    assert "data.train" in text
    assert "make_train_loader" in text
    json.dumps(report.to_json())
