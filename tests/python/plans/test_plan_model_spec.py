"""A plan's ``model.net`` holds a ModelSpec or a built-in network's params as data:
they round-trip through plan JSON (the strict schema), ``plan.fit()`` gives the run id
the imperative ``NNModel`` gives, and a runtime module is refused with the fix."""

from __future__ import annotations

import json

import pytest
import torch
from model_factories import CNN_ID, register_small_cnn, small_cnn
from plan_factories import NET

from nnx_lab import (
    ConfigError,
    ExperimentPlan,
    ModelSpec,
    Nets,
    NNConvParams,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
    PlanError,
    registered_model_factories,
    unregister_model_factory,
)
from nnx_lab.example_data import digits_image_train_loader, digits_image_val_loader

SPEC = ModelSpec(*CNN_ID, {"width": 4}, seed=3)
CONV = NNConvParams(output_dim=10, image_size=8, conv_channels=(4,), hidden_dims=(16,))


@pytest.fixture(autouse=True)
def _registered():
    register_small_cnn()


def _plan(net, runs_root) -> ExperimentPlan:
    return (
        ExperimentPlan()
        .with_net(net)
        .with_train(n_epochs=1, optim=NNOptimParams(max_lr=1e-2))
        .with_data(digits_image_train_loader, val=digits_image_val_loader, identity="digits8")
        .with_seed(5)
        .with_runs_root(runs_root)
    )


def _imperative(net, runs_root):
    train = NNTrainParams(
        n_epochs=1,
        optim=NNOptimParams(max_lr=1e-2),
        seed=5,
        data_id="digits8",
        runs_root=str(runs_root),
        train_loader=digits_image_train_loader(),
        val_loader=digits_image_val_loader(),
    )
    if isinstance(net, ModelSpec):
        return NNModel(params=NNModelParams(net=net)), train
    return NNModel(net, NNModelParams(net=Nets.CONV), init_seed=5), train


@pytest.mark.parametrize("net", [SPEC, CONV], ids=["spec", "conv"])
def test_the_net_round_trips_through_json_and_fits_to_the_imperative_run_id(tmp_path, net):
    plan = _plan(net, tmp_path / "runs")
    assert plan.value("model.net") == net
    assert not plan.validate()
    text = json.dumps(plan.to_json())
    back = ExperimentPlan.from_json(text)
    assert back.resolve().value("model.net") == net
    assert back.to_json() == plan.to_json()
    model, train = _imperative(net, tmp_path / "runs")
    expected = model.expected_run_id(train)
    assert back.expected_run_id() == plan.expected_run_id() == expected
    fitted = back.resolve().fit(report=False)
    assert fitted.run.id == expected


def test_with_net_keywords_edit_the_spec_or_params_and_an_mlp_comes_back(tmp_path):
    plan = ExperimentPlan().with_net(NET).with_net(SPEC)
    assert not any(plan.is_set(f.path) for f in plan.fields() if f.section == "net")
    assert plan.with_net(width=8).value("model.net").config == {"width": 8}
    conv = plan.with_net(CONV).with_net(conv_channels=(2, 4))
    assert conv.value("model.net") == CONV.replace(conv_channels=(2, 4))
    with pytest.raises(ConfigError, match="name fields of"):
        conv.with_net(nope=1)
    mlp = conv.with_net(NET)
    assert mlp.value("model.net") is Nets.FEED_FWD
    assert mlp.value("net.input_dim") == 8


def test_what_no_plan_can_build_is_refused_by_validate(tmp_path):
    unknown = _plan(ModelSpec("nobody.net", 2), tmp_path / "runs")
    [p] = unknown.validate()
    assert p.field == "model.net"
    assert "register_model_factory" in p.fix
    assert "'tests.small_cnn' v1" in p.fix
    bare = _plan(CONV, tmp_path / "runs").with_model(net=Nets.VIT)
    [p] = bare.validate()
    assert p.field == "model.net"
    assert "NNViTParams(" in p.fix
    mixed = _plan(SPEC, tmp_path / "runs").with_value("net.hidden_dims", [8])
    [p] = mixed.validate()
    assert p.field == "net.hidden_dims"
    assert "do not apply" in p.fix
    with pytest.raises(PlanError):
        unknown.fit()
    assert not (tmp_path / "runs").exists()


def test_a_runtime_module_is_refused_in_a_plan_and_in_its_json(tmp_path):
    wrapped = NNModel(module=torch.nn.Linear(4, 2), params=NNModelParams())
    plan = _plan(NET, tmp_path / "runs").with_model(wrapped.params)
    [p] = plan.validate()
    assert p.field == "model.net"
    assert "register a factory and use ModelSpec" in p.fix
    with pytest.raises(PlanError, match="register a factory and use ModelSpec"):
        plan.to_json()
    with pytest.raises(ConfigError, match="register a factory and use ModelSpec"):
        ExperimentPlan().with_net(wrapped.params.net)
    doc = _plan(SPEC, tmp_path / "runs").to_json()
    doc["values"]["model.net"] = {"runtime_module": {"type": "Linear"}}
    with pytest.raises(ConfigError, match="register a factory and use ModelSpec"):
        ExperimentPlan.from_json(doc)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"kind": "spec", "id": "x", "version": 1, "code": "import os"}, "unknown field"),
        ({"kind": "spec", "id": "x", "version": 0}, ">= 1"),
        ({"kind": "spec", "id": "x", "version": 1, "seed": -1}, ">= 0"),
        ({"kind": "pickle", "id": "x"}, "Invalid value"),
        ({"kind": "params", "net": "feed_fwd", "params": {}}, "net.* fields"),
        ({"kind": "params", "net": "conv", "params": {"output_dim": "ten"}}, "cannot be read"),
        ({"kind": "params", "net": "conv", "params": {"output_dim": 3, "evil": 1}}, "evil"),
        ([1, 2], "model.net"),
    ],
)
def test_the_schema_refuses_a_damaged_net(tmp_path, value, words):
    doc = _plan(SPEC, tmp_path / "runs").to_json()
    doc["values"]["model.net"] = value
    with pytest.raises(ConfigError, match=words) as info:
        ExperimentPlan.from_json(json.dumps(doc))
    assert "model.net" in str(info.value)


def test_an_mlp_plan_writes_the_same_json_as_before(tmp_path):
    doc = _plan(NNParams(input_dim=64, output_dim=10), tmp_path / "runs").to_json()
    assert "model.net" not in doc["values"]
    assert doc["values"]["net.input_dim"] == 64


def test_the_spec_carries_its_factory_as_a_reference_resolve_registers(tmp_path):
    doc = _plan(SPEC, tmp_path / "runs").to_json()
    assert doc["values"]["model.net"]["factory"] == "model_factories:small_cnn"
    unregister_model_factory(*CNN_ID)  # a fresh process: nothing registered yet
    back = ExperimentPlan.from_json(doc)
    assert not back.resolved
    assert not back.validate()  # the reference is checked as text; nothing imported
    assert CNN_ID not in registered_model_factories()
    assert back.resolve().value("model.net") == SPEC
    assert registered_model_factories()[CNN_ID] is small_cnn


def test_a_spec_factory_reference_is_checked_like_every_plan_reference(tmp_path):
    doc = _plan(SPEC, tmp_path / "runs").to_json()
    doc["values"]["model.net"]["factory"] = "os:system"
    hostile = ExperimentPlan.from_json(doc)
    [p] = hostile.validate()
    assert p.field == "model.net"
    with pytest.raises(PlanError, match=r"model\.net"):
        hostile.resolve()
    doc["values"]["model.net"]["factory"] = "plan_factories:make_train_loader"
    with pytest.raises(PlanError, match="another factory"):
        ExperimentPlan.from_json(doc).resolve()  # not the one registered for the spec


@pytest.mark.parametrize("net", [SPEC, CONV], ids=["spec", "conv"])
def test_probe_and_repr_know_the_network(tmp_path, net):
    plan = _plan(net, tmp_path / "runs")
    X, y = next(iter(digits_image_train_loader()))
    report = plan.probe((X, y))
    assert report.output_shape == (32, 10)
    assert report.train_loss is not None
    assert ("ModelSpec('tests.small_cnn', 1)" if net is SPEC else "Nets.CONV") in repr(plan)


def test_a_spec_plan_drifts_nowhere_from_its_run_and_resumes(tmp_path):
    from model_factories import few_digits_train_loader, few_digits_val_loader

    from nnx_lab.plans import drift_report

    plan = (
        _plan(SPEC, tmp_path / "runs")
        .with_data(few_digits_train_loader, val=few_digits_val_loader, identity="few")
        .with_train(progress=False)
    )
    run = plan.fit(report=False).run
    assert drift_report(plan, run).changed == ()
    child = plan.resuming(run, epochs="additional").with_epochs(1).fit(report=False).run
    assert child.parent_run_id == run.id


def test_with_model_keeps_the_params_its_member_implies_and_a_spec_drops_the_mlp():
    conv = ExperimentPlan().with_net(CONV).with_model(NNModelParams(net=Nets.CONV))
    assert conv.value("model.net") == CONV
    assert conv.with_model(net="conv").value("model.net") == CONV
    own = ExperimentPlan().with_net(NET).with_model(NNModelParams(net=SPEC))
    assert own.value("model.net") == SPEC
    assert not any(own.is_set(f.path) for f in own.fields() if f.section == "net")
