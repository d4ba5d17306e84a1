"""summarize_model: the module tree, counts, states, output shapes and memory, as data."""

from __future__ import annotations

import torch
from torch import nn

from nnx_lab import Losses, Nets, NNConvParams, NNModel, NNModelParams, NNOptimParams, Optims
from nnx_lab.engine.model_summary import optimizer_state_slots, summarize_model

CONV = NNConvParams(output_dim=10, in_channels=1, image_size=8, conv_channels=(4, 8))


def _cnn():
    return NNModel(CONV, NNModelParams(net=Nets.CONV, loss=Losses.CROSS_ENTROPY))


def test_the_tree_counts_and_states():
    model = _cnn()
    model.net.features[0].weight.requires_grad_(False)
    data = summarize_model(model)
    by = {r.path: r for r in data.rows}
    total = sum(p.numel() for p in model.net.parameters())
    assert by[""].params == total
    assert by[""].depth == 0
    assert by["features.0"].depth == 2
    assert by["features.0"].type == "Conv2d"
    assert by["features.0"].frozen == 4 * 1 * 3 * 3
    assert by["features.0"].state == "mixed"  # its bias still trains
    assert by["features"].has_children
    assert not by["features.0"].has_children
    assert by["features.1"].state == ""  # ReLU: no parameters
    assert by["head.1"].state == "trainable"
    assert by["head.1"].dtypes == ["float32"]
    assert by["head.1"].devices == ["cpu"]
    t = data.totals
    assert t["params"] == total
    assert t["frozen"] == 36
    assert t["trainable"] == total - 36
    assert t["param_bytes"] == 4 * total
    assert t["grad_bytes"] == 4 * (total - 36)
    assert t["optimizer_bytes"] == 2 * t["grad_bytes"]  # Adam: two moments
    assert [r.path for r in data.find("conv2d")] == ["features.0", "features.3"]
    assert [r.path for r in data.find("head.")] == ["head.0", "head.1", "head.2", "head.3"]


def test_output_shapes_come_from_a_copy_and_leave_everything_untouched():
    model = _cnn()
    model.net.train()
    state = {k: v.clone() for k, v in model.net.state_dict().items()}
    X = torch.rand(5, 1, 8, 8)
    rng = torch.get_rng_state()
    data = summarize_model(model, (X, torch.zeros(5, dtype=torch.long)))
    by = {r.path: r for r in data.rows}
    assert by[""].output_shape == [5, 10]
    assert by["features.0"].output_shape == [5, 4, 8, 8]
    assert by["features.2"].output_shape == [5, 4, 4, 4]
    assert by["head.0"].output_shape == [5, 8 * 2 * 2]
    assert data.input_shape == [5, 1, 8, 8]
    assert model.net.training  # its mode is its own
    assert all(p.grad is None for p in model.net.parameters())
    assert torch.equal(torch.get_rng_state(), rng)
    for k, v in model.net.state_dict().items():
        assert torch.equal(v, state[k])
    text = data.text()
    assert "(5, 4, 8, 8)" in text
    assert "parameters:" in text
    assert "optimizer state" in text


def test_the_optimizer_state_follows_the_configured_optimizer():
    assert optimizer_state_slots(NNOptimParams(name=Optims.ADAMW)) == 2
    assert optimizer_state_slots(NNOptimParams(name=Optims.SGD)) == 1  # momentum 0.9
    assert optimizer_state_slots(NNOptimParams(name=Optims.SGD, momentum=0.0)) == 0
    net = nn.Linear(3, 2)
    data = summarize_model(net, optim=NNOptimParams(name=Optims.SGD, momentum=0.0))
    assert data.totals["optimizer_bytes"] == 0
    assert data.totals["optimizer"] == "sgd"


def test_a_dict_output_and_an_adapter(tmp_path):
    from nnx_lab import PositionalInputs

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(3, 2), nn.Linear(2, 2)

        def forward(self, x, z):
            return {"logits": self.a(x) + self.b(z)}

    model = NNModel(module=Two(), batch_adapter=PositionalInputs(2, output="logits"))
    data = summarize_model(model, (torch.zeros(4, 3), torch.zeros(4, 2), torch.zeros(4)))
    by = {r.path: r for r in data.rows}
    assert by["a"].output_shape == [4, 2]
    assert by[""].output_shape == [[4, 2]]
    assert data.input_shape == [[4, 3], [4, 2]]


def test_the_rule_columns_show_each_parameters_rule_rate_decay_and_frozen_state():
    from nnx_lab import NNParamGroupSpec, freeze

    model = _cnn()
    freeze(model, "features.0.*")
    optim = NNOptimParams(
        max_lr=1e-3,
        weight_decay=1e-2,
        param_groups=[
            NNParamGroupSpec("features.*", lr_multiplier=0.1),
            NNParamGroupSpec("*.bias", weight_decay=0.0),
        ],
    )
    data = summarize_model(model, optim=optim)
    by = {r.path: r.columns for r in data.rows}
    assert by["features.0"] == {"rule": "-", "lr": "-", "weight decay": "-", "frozen": "yes"}
    assert by["features.3"] == {
        "rule": "features.*",
        "lr": "0.0001",
        "weight decay": "0.01",
        "frozen": "no",
    }
    assert by["head.1"] == {
        "rule": "weight: default; bias: *.bias",
        "lr": "0.001",
        "weight decay": "weight: 0.01; bias: 0",
        "frozen": "no",
    }
    assert by["features"] == {}
    assert by[""] == {}
    per = {p.name: p for p in data.parameters}
    assert per["head.3.bias"].rule == "*.bias"
    assert per["head.3.bias"].weight_decay == 0.0
    assert per["features.0.weight"].frozen
    assert per["features.0.weight"].lr is None
    assert data.to_json()["parameters"][2]["rule"] == "features.*"
    text = data.text()
    assert "weight: default; bias: *.bias" in text
    assert "rule" in text.splitlines()[0]
    # without optim= the table has no rule columns
    assert all(r.columns == {} for r in summarize_model(model).rows)


def test_the_summary_refuses_a_rule_with_no_parameter():
    import pytest

    from nnx_lab import ConfigError, NNParamGroupSpec

    optim = NNOptimParams(param_groups=[NNParamGroupSpec("encoder.*")])
    with pytest.raises(ConfigError, match=r"matches no parameter.*names: head\."):
        summarize_model(_cnn(), optim=optim)
