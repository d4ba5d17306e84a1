"""``NNModelParams(compile=...)``: torch.compile on request.

The tests compile with the ``aot_eager`` backend (the graph is captured and run through
AOTAutograd, the arithmetic is eager's), which takes seconds on the CPU; inductor's C++
build takes a minute on the development machine and is measured in benchmarks/step_cost.py
instead."""

from __future__ import annotations

import json

import pytest
import torch
from plan_factories import toy_plan
from safetensors.torch import load_file
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    ConfigError,
    ExperimentPlan,
    NNModel,
    NNModelParams,
    NNParams,
    NNTrainParams,
    PlanError,
)

AOT = {"backend": "aot_eager"}


def _loader() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    X = torch.randn(64, 4, generator=g)
    y = torch.randint(0, 3, (64,), generator=g)
    return DataLoader(TensorDataset(X, y), batch_size=16, shuffle=True)


def _model(compile_options) -> NNModel:
    torch.manual_seed(0)
    return NNModel(
        net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=[8]),
        params=NNModelParams(compile=compile_options),
    )


def _train(root, **changes) -> NNTrainParams:
    values = {"n_epochs": 2, "seed": 0, "progress": False, **changes}
    return NNTrainParams(train_loader=_loader(), runs_root=str(root), **values)


def test_a_same_numbers_compile_trains_the_eager_runs_weights_under_its_id(tmp_path):
    eager, compiled = _model(False), _model(AOT)
    run_e = eager.train(_train(tmp_path / "eager"))
    run_c = compiled.train(_train(tmp_path / "compiled"))
    assert run_c.id == run_e.id  # the options say the numbers are eager's
    for (name, a), (name_c, b) in zip(
        eager.net.state_dict().items(), compiled.net.state_dict().items(), strict=True
    ):
        assert name == name_c
        assert torch.equal(a, b), name
    # the checkpoint holds the eager module's weights: no "_orig_mod." anywhere
    saved = sorted((tmp_path / "compiled").rglob("*.safetensors"))
    assert saved
    for path in saved:
        keys = list(load_file(str(path)))
        assert keys
        assert not any("_orig_mod" in k for k in keys), keys
    # ... and they load into an eager model and a compiled one alike
    for target in (_model(False), _model(AOT)):
        target.net.load_state_dict(compiled.net.state_dict())
        assert torch.equal(target.net(torch.ones(2, 4)), eager.net(torch.ones(2, 4)))


def test_other_compile_options_enter_the_run_id(tmp_path):
    train = _train(tmp_path)
    eager = _model(False).expected_run_id(train)
    assert _model({"backend": "aot_eager", "fullgraph": True}).expected_run_id(train) == eager
    assert _model({"disable": True}).expected_run_id(train) == eager
    default = _model(True).expected_run_id(train)  # inductor: fused kernels, own rounding
    tuned = _model({"mode": "max-autotune"}).expected_run_id(train)
    assert len({eager, default, tuned}) == 3
    assert _model({}).expected_run_id(train) == default  # True means {}: the defaults


def test_the_network_is_compiled_once_per_model_and_trains_each_step(tmp_path, monkeypatch):
    calls, forwards = [], []
    real = torch.compile

    class Counted(torch.nn.Module):  # the compiled network, counting the steps it runs
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, X):
            forwards.append(X.shape[0])
            return self.inner(X)

    def counting(*args, **kwargs):
        calls.append(kwargs)
        return Counted(real(*args, **kwargs))

    monkeypatch.setattr(torch, "compile", counting)
    model = _model(AOT)
    model.train(_train(tmp_path / "a"))
    model.train(_train(tmp_path / "b", n_epochs=1))
    assert calls == [AOT]
    assert len(forwards) == 3 * 4  # three epochs of four batches, all through it
    _model(False).train(_train(tmp_path / "c"))
    assert calls == [AOT]  # eager never compiles
    assert len(forwards) == 12


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        ("yes", "NNModelParams.compile", "pass True, False, or a dict"),
        ({"mode": "fast"}, "NNModelParams.compile['mode']", "'max-autotune'"),
        ({"fullgraph": 1}, "NNModelParams.compile['fullgraph']", "fullgraph (bool)"),
        ({"backnd": "eager"}, "NNModelParams.compile", "'backnd' is not a torch.compile option"),
        ({"mode": "max-autotune", "options": {"x": 1}}, "NNModelParams.compile", "not both"),
    ],
)
def test_bad_compile_options_are_refused_where_they_enter(value, field, words):
    with pytest.raises(ConfigError) as err:
        NNModelParams(compile=value)
    assert err.value.field == field
    assert words in str(err.value)


def test_an_unknown_backend_is_refused_before_any_run(tmp_path):
    model = _model({"backend": "no-such-backend"})
    root = tmp_path / "runs"
    with pytest.raises(ConfigError) as err:
        model.train(_train(root))
    assert err.value.field == "NNModelParams.compile['backend']"
    assert "aot_eager" in str(err.value)  # the backends this torch has
    assert not root.exists() or not any(root.iterdir())


def test_an_unsupported_platform_is_refused_before_any_run(tmp_path, monkeypatch):
    monkeypatch.setattr(torch._dynamo, "is_dynamo_supported", lambda: False)
    root = tmp_path / "runs"
    with pytest.raises(ConfigError, match="pass compile=False"):
        _model(True).train(_train(root))
    assert not root.exists() or not any(root.iterdir())
    _model(False).train(_train(root))  # eager needs no compiler


def test_compile_round_trips_through_plan_json_and_keys_its_run_id(tmp_path):
    eager = toy_plan(tmp_path, n_epochs=1)
    options = {"mode": "max-autotune-no-cudagraphs", "dynamic": False}
    plan = eager.with_model(compile=options)
    assert not plan.validate()
    back = ExperimentPlan.from_json(json.dumps(plan.to_json()))
    assert back.value("model.compile") == options
    assert back.to_json() == plan.to_json()
    assert back.expected_run_id() == plan.expected_run_id() != eager.expected_run_id()
    same = ExperimentPlan.from_json(json.dumps(eager.with_model(compile=AOT).to_json()))
    assert same.value("model.compile") == AOT
    assert same.expected_run_id() == eager.expected_run_id()
    bad = plan.to_json()
    bad["values"]["model.compile"] = "fast"  # the strict schema refuses it
    with pytest.raises(ConfigError, match=r"model\.compile"):
        ExperimentPlan.from_json(json.dumps(bad))
    bad["values"]["model.compile"] = {"mode": "fast"}  # the field's own check names it
    problems = ExperimentPlan.from_json(json.dumps(bad)).validate()
    assert [p.field for p in problems] == ["model.compile"]
    with pytest.raises(PlanError, match="max-autotune"):
        ExperimentPlan.from_json(json.dumps(bad)).fit(report=False)


def test_your_own_module_trains_compiled_with_the_eager_weights(tmp_path):
    def module():
        torch.manual_seed(1)
        return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))

    eager = NNModel(module=module())
    compiled = NNModel(module=module(), params=NNModelParams(compile=AOT))
    run_e = eager.train(_train(tmp_path / "eager"))
    run_c = compiled.train(_train(tmp_path / "compiled"))
    assert run_c.id == run_e.id
    assert compiled.net.state_dict().keys() == eager.net.state_dict().keys()
    for a, b in zip(eager.net.parameters(), compiled.net.parameters(), strict=True):
        assert torch.equal(a, b)
