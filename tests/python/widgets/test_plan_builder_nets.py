"""PlanBuilder with another network than the MLP: the Network section shows the fields
of the plan's params class (NNConvParams) or its spec's config keys, an edit there is
``plan.with_net(name=value)`` (refused values never reach the plan), and switching back
to the MLP gives its fields back."""

from __future__ import annotations

import pytest
from model_factories import CNN_ID, register_small_cnn

from nnx_lab import (
    ExperimentPlan,
    ModelSpec,
    Nets,
    NNConvParams,
    NNParams,
    NNTransformerParams,
    NNViTParams,
)
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
    edit(b, "net.params.image_size", "6")  # one number in the (height, width) field: a square
    assert b.plan.value("model.net").image_size == (6, 6)
    assert b.values["net.params.image_size"] == [6, 6]
    edit(b, "net.params.image_size", "0")
    assert "pass a positive integer or (height, width)" in b.errors["net.params.image_size"]
    edit(b, "net.params.image_size", "8, 8")
    assert "net.params.image_size" not in b.errors
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


# -- choosing the network kind in the form ------------------------------------------------
def _mlp_builder(tmp_path, **net):
    base = {"input_dim": 64, "output_dim": 10, "hidden_dims": [32], "dropout_prob": 0.1}
    plan = _plan(NNParams(**{**base, **net}), tmp_path)
    return PlanBuilder(plan, run_id=False)


def _net_names(b):
    return [f["name"] for f in b.fields if f["section"] == "net"]


def test_choosing_a_kind_swaps_the_fields_and_keeps_the_values_sharing_a_name(tmp_path):
    b = _mlp_builder(tmp_path, activation="gelu")
    try:
        edit(b, "model.net", value="conv")
        conv = b.plan.value("model.net")
        assert conv == NNConvParams(
            output_dim=10, hidden_dims=(32,), dropout_prob=0.1, activation="gelu"
        )  # the shared names carried, the rest NNConvParams' defaults
        assert _net_names(b)[:3] == ["output_dim", "in_channels", "image_size"]
        assert b.values["model.net"] == "conv"
        assert b.values["net.params.dropout_prob"] == 0.1
        assert not b.errors
        edit(b, "net.params.conv_channels", "4, 8")
        edit(b, "model.net", value="vit")
        vit = b.plan.value("model.net")
        assert (type(vit), vit.output_dim, vit.dropout_prob) == (NNViTParams, 10, 0.1)
        assert "conv_channels" not in _net_names(b)
        edit(b, "model.net", value="conv")  # what was typed for the conv comes back
        assert b.plan.value("model.net").conv_channels == (4, 8)
        edit(b, "model.net", value="transformer")  # a field no kind shares: its starter
        lm = b.plan.value("model.net")
        assert (type(lm), lm.vocab_size, lm.dropout_prob) == (NNTransformerParams, 256, 0.1)
        edit(b, "model.net", value="feed_fwd_moe")
        moe = b.plan.value("model.net")
        assert (moe.input_dim, moe.output_dim, moe.activation.value) == (64, 10, "gelu")
        edit(b, "model.net", value="feed_fwd")  # the MLP's own fields, as they were
        assert b.plan.value("model.net") is Nets.FEED_FWD
        assert _net_names(b) == [f.name for f in ExperimentPlan.fields() if f.section == "net"]
        assert (b.values["net.input_dim"], b.values["net.hidden_dims"]) == (64, [32])
        assert not b.problems
    finally:
        b.close()


def test_a_kind_that_cannot_be_built_from_the_form_is_refused_before_the_plan_changes(
    tmp_path,
):
    empty = PlanBuilder(ExperimentPlan(), run_id=False)
    try:
        edit(empty, "model.net", value="conv")  # no output_dim anywhere
        assert empty.plan.value("model.net") is Nets.FEED_FWD
        assert "NNConvParams needs output_dim" in empty.errors["model.net"]
        edit(empty, "model.net", value="resnet")
        assert "choose one of" in empty.errors["model.net"]
    finally:
        empty.close()
    b = _mlp_builder(tmp_path, input_dim=2_000_000, hidden_dims=[])  # 20M parameters
    try:
        before = b.plan
        edit(b, "model.net", value="feed_fwd_moe")  # 2M x 64 into the experts: too large
        assert "parameters: at most" in b.errors["model.net"]
        assert b.plan is before
    finally:
        b.close()


def test_a_carried_value_the_new_kind_refuses_gives_way_to_its_default(tmp_path):
    vit = NNViTParams(output_dim=3, image_size=8, patch_size=4, d_model=36, n_heads=4)
    b = PlanBuilder(_plan(vit, tmp_path), run_id=False)
    try:
        edit(b, "net.params.patch_size", "0")  # refused: the draft shows next to the field
        assert "net.params.patch_size" in b.errors
        edit(b, "model.net", value="transformer")  # d_model=36 / 4 heads: odd head width
        lm = b.plan.value("model.net")
        assert (lm.d_model, lm.n_heads) == (64, 4)
        assert "net.params.patch_size" not in b.errors  # gone with the ViT's fields
        assert "net.params.patch_size" not in b.drafts
    finally:
        b.close()
