"""PlanBuilder with another network than the MLP: the Network section shows the fields
of the plan's params class (NNConvParams) or its spec's config keys, an edit there is
``plan.with_net(name=value)`` (refused values never reach the plan), and switching back
to the MLP gives its fields back."""

from __future__ import annotations

import pytest
from model_factories import CNN_ID, register_small_cnn

from nnx_lab import ExperimentPlan, ModelSpec, Nets, NNConvParams, NNParams
from nnx_lab.example_data import digits_image_train_loader, digits_image_val_loader
from nnx_lab.widgets import PlanBuilder

CONV = NNConvParams(output_dim=10, image_size=8, conv_channels=(4,), hidden_dims=(16,))


def _plan(net, tmp_path) -> ExperimentPlan:
    return (
        ExperimentPlan()
        .with_net(net)
        .with_data(digits_image_train_loader, val=digits_image_val_loader, identity="d8")
        .with_runs_root(str(tmp_path / "runs"))
    )


def edit(builder, path, text=None, **content):
    msg = {"kind": "edit", "path": path, **content}
    if text is not None:
        msg["text"] = text
    builder._dispatch_frontend_msg(builder, msg, [])


@pytest.fixture
def conv_builder(tmp_path):
    b = PlanBuilder(_plan(CONV, tmp_path), run_id=False)
    yield b
    b.close()


def test_the_network_section_shows_the_params_class_fields(conv_builder):
    b = conv_builder
    net = [f for f in b.fields if f["section"] == "net"]
    assert [f["name"] for f in net] == [
        "output_dim", "in_channels", "image_size", "conv_channels", "kernel_size", "stride",
        "padding", "pool_size", "hidden_dims", "dropout_prob", "activation",
    ]  # fmt: skip
    by_name = {f["name"]: f for f in net}
    assert by_name["conv_channels"]["type"] == "int_list"
    assert by_name["activation"]["type"] == "choice"
    assert b.values["net.params.conv_channels"] == [4]
    assert b.values["model.net"] == "conv"
    assert "net.input_dim" not in b.values
    assert not b.problems

    edit(b, "net.params.conv_channels", "4, 8")
    assert b.plan.value("model.net") == CONV.replace(conv_channels=(4, 8))
    assert b.values["net.params.conv_channels"] == [4, 8]
    edit(b, "net.params.kernel_size", "0")  # refused by NNConvParams, the plan unchanged
    assert "net.params.kernel_size" in b.errors
    assert b.plan.value("model.net").kernel_size == 3
    edit(b, "model.net", value="conv")  # the member it holds, chosen again: no change
    assert b.plan.value("model.net") == CONV.replace(conv_channels=(4, 8))


def test_a_spec_shows_its_config_keys_and_the_mlp_comes_back(tmp_path):
    register_small_cnn()
    b = PlanBuilder(_plan(ModelSpec(*CNN_ID, {"width": 4}, seed=2), tmp_path), run_id=False)
    try:
        assert [f["path"] for f in b.fields if f["section"] == "net"] == ["net.config.width"]
        label = b.values["model.net"]
        assert label == "ModelSpec('tests.small_cnn', 1, seed=2)"
        assert label in next(f for f in b.fields if f["path"] == "model.net")["choices"]
        edit(b, "net.config.width", "8")
        assert b.plan.value("model.net").config == {"width": 8}
        b.plan = b.plan.with_net(NNParams(input_dim=64, output_dim=10))
        assert b.plan.value("model.net") is Nets.FEED_FWD
        paths = [f["path"] for f in b.fields]
        assert paths == [f.path for f in ExperimentPlan.fields()]
    finally:
        b.close()
