"""Your own nn.Module (§2.14): the registry, ModelSpec, wrapped instances, adapters."""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    Checkpoints,
    ConfigError,
    DataError,
    KeywordInputs,
    Losses,
    MissingModelFactoryError,
    ModelSpec,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNTrainParams,
    PositionalInputs,
    ProbabilitySpec,
    register_model_factory,
    registered_model_factories,
    unregister_model_factory,
)
from nnx_lab.errors import FileError


class Encoder(nn.Module):
    def __init__(self, width: int = 16, inputs: int = 6, classes: int = 3) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(inputs, width), nn.ReLU(), nn.Linear(width, classes))

    def forward(self, x):
        return self.body(x)


class DictOut(Encoder):
    def forward(self, x):
        return {"logits": self.body(x), "hidden": x}


class TwoInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 3), nn.Linear(2, 3)

    def forward(self, x, z):
        return self.a(x) + self.b(z)


class Keyworded(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, input_ids, attention_mask):
        h = (self.emb(input_ids) * attention_mask.unsqueeze(-1)).sum(1)
        return _Out(self.head(h))


@dataclass
class _Out:
    logits: torch.Tensor


@pytest.fixture
def registered():
    register_model_factory("test.encoder", 1, lambda config: Encoder(**config), replace=True)
    yield
    for key in list(registered_model_factories()):
        if key[0].startswith("test."):
            unregister_model_factory(*key)


def _data(n=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 6, generator=g)
    y = (X[:, 0] > 0).long() + (X[:, 1] > 0.5).long()
    return X, y


def _params(root, n_epochs=1, **kw):
    X, y = _data()
    loader = DataLoader(TensorDataset(X, y), batch_size=16, shuffle=False)
    return NNTrainParams(
        n_epochs=n_epochs,
        train_loader=loader,
        val_loader=loader,
        optim=NNOptimParams(max_lr=0.01),
        runs_root=root,
        checkpoint_every_s=0,
        **kw,
    )


def _spec_model(config=None, seed=0):
    spec = ModelSpec("test.encoder", 1, {"width": 8} if config is None else config, seed=seed)
    return NNModel(params=NNModelParams(net=spec, loss=Losses.CROSS_ENTROPY))


# -- the registry ---------------------------------------------------------------------------


def test_a_duplicate_registration_is_refused_unless_replaced(registered):
    with pytest.raises(ConfigError, match="registered already"):
        register_model_factory("test.encoder", 1, lambda config: Encoder())
    other = lambda config: Encoder(width=4)  # noqa: E731
    register_model_factory("test.encoder", 1, other, replace=True)
    assert registered_model_factories()[("test.encoder", 1)] is other
    unregister_model_factory("test.encoder", 1)
    assert ("test.encoder", 1) not in registered_model_factories()
    with pytest.raises(MissingModelFactoryError):
        unregister_model_factory("test.encoder", 1)


@pytest.mark.parametrize(
    ("args", "field"),
    [(("", 1), "id"), (("a", 0), "version"), (("a", True), "version"), (("a", 1, 3), "factory")],
)
def test_registration_arguments_are_checked(args, field):
    factory = args[2] if len(args) > 2 else (lambda c: Encoder())
    with pytest.raises(ConfigError) as info:
        register_model_factory(args[0], args[1], factory)
    assert info.value.field == field


def test_a_spec_is_immutable_json_data():
    spec = ModelSpec("test.encoder", 2, {"width": 8, "dims": (1, 2)}, seed=5)
    spec.config["width"] = 99  # a copy: the spec is unchanged
    assert spec.config == {"width": 8, "dims": [1, 2]}
    with pytest.raises(AttributeError):
        spec.id = "other"  # type: ignore[misc]
    assert ModelSpec.from_state(spec.state()) == spec
    assert hash(ModelSpec.from_state(spec.state())) == hash(spec)
    with pytest.raises(ConfigError, match="JSON-like"):
        ModelSpec("x", 1, {"act": nn.ReLU})
    with pytest.raises(ConfigError, match="finite"):
        ModelSpec("x", 1, {"p": float("nan")})
    with pytest.raises(ConfigError, match="keys id, version"):
        ModelSpec.from_state({"id": "x", "version": 1, "extra": 1})
    with pytest.raises(ConfigError) as info:
        ModelSpec("x", 1, seed=-1)
    assert info.value.field == "ModelSpec.seed"


# -- a registered network -------------------------------------------------------------------


def test_a_spec_builds_under_its_seed_and_leaves_the_callers_rng_alone(registered):
    torch.manual_seed(123)
    random.seed(7)
    np.random.seed(7)
    before = (torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy())
    a, b = _spec_model(), _spec_model()
    assert torch.equal(torch.get_rng_state(), before[0])
    assert random.getstate() == before[1]
    assert (np.random.get_state()[1] == before[2]).all()
    for pa, pb in zip(a.net.parameters(), b.net.parameters(), strict=True):
        assert torch.equal(pa, pb)
    c = _spec_model(seed=1)
    assert not torch.equal(next(a.net.parameters()), next(c.net.parameters()))


def test_the_spec_enters_the_run_id(registered, runs_root):
    ids = {
        _spec_model().expected_run_id(_params(runs_root)),
        _spec_model({"width": 12}).expected_run_id(_params(runs_root)),
        _spec_model(seed=3).expected_run_id(_params(runs_root)),
    }
    assert len(ids) == 3
    assert _spec_model().expected_run_id(_params(runs_root)) in ids


def test_a_spec_trains_saves_and_rebuilds_through_the_registry(registered, runs_root):
    model = _spec_model()
    run = model.train(_params(runs_root, n_epochs=2))
    assert run.config["model"]["net"] == model.params.net.state()
    ckpt = NNCheckpoint.load(run, Checkpoints.LAST, runs_root)
    rebuilt = NNModel.from_checkpoint(ckpt)
    X, _ = _data()
    assert torch.equal(rebuilt.predict(X).logits, model.predict(X).logits)
    assert rebuilt.params.net == model.params.net


def test_an_unregistered_spec_is_refused_listing_what_is_registered(registered, runs_root):
    model = _spec_model()
    run = model.train(_params(runs_root))
    ckpt = NNCheckpoint.load(run, Checkpoints.LAST, runs_root)
    unregister_model_factory("test.encoder", 1)
    register_model_factory("test.other", 1, lambda config: Encoder())
    with pytest.raises(MissingModelFactoryError) as info:
        NNModel.from_checkpoint(ckpt)
    assert ("test.other", 1) in info.value.registered
    assert "'test.other' v1" in str(info.value)


def test_keys_that_do_not_fit_are_refused_before_any_weight_loads(registered, runs_root):
    run = _spec_model().train(_params(runs_root))
    ckpt = NNCheckpoint.load(run, Checkpoints.LAST, runs_root)
    # the same spec now builds another network (a changed factory, same version)
    register_model_factory("test.encoder", 1, lambda c: Encoder(width=5), replace=True)
    with pytest.raises(FileError, match=r"body\.0\.weight\.shape"):
        NNModel.from_checkpoint(ckpt)
    register_model_factory("test.encoder", 1, lambda c: DictOut(width=8), replace=True)
    NNModel.from_checkpoint(ckpt)  # the same keys and shapes: loads

    class Extra(Encoder):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.more = nn.Linear(2, 2)

    register_model_factory("test.encoder", 1, lambda c: Extra(width=8), replace=True)
    with pytest.raises(FileError, match=r"more\.(weight|bias)"):
        NNModel.from_checkpoint(ckpt)


def test_a_factory_that_returns_no_module_is_refused(registered):
    register_model_factory("test.bad", 1, lambda config: "not a module")
    with pytest.raises(ConfigError, match=r"not an nn\.Module"):
        NNModel(params=NNModelParams(net=ModelSpec("test.bad")))


def test_a_spec_refuses_net_params_and_init_seed(registered):
    import engine_factories as f

    spec = ModelSpec("test.encoder", 1)
    with pytest.raises(ConfigError) as info:
        NNModel(f.net_params(), NNModelParams(net=spec))
    assert info.value.field == "net_params"
    with pytest.raises(ConfigError) as info:
        NNModel(params=NNModelParams(net=spec), init_seed=3)
    assert info.value.field == "init_seed"


# -- a wrapped instance ---------------------------------------------------------------------


def test_a_wrapped_module_trains_in_place(runs_root):
    encoder = Encoder()
    before = encoder.body[0].weight.detach().clone()
    model = NNModel(module=encoder, params=NNModelParams(loss=Losses.CROSS_ENTROPY))
    assert model.net is encoder
    run = model.train(_params(runs_root))
    assert not torch.equal(encoder.body[0].weight, before)
    assert run.config["initial_weights"] is None
    assert run.config["net"]["runtime_module"]["type"].endswith("Encoder")


def test_a_wrapped_modules_run_id_is_its_topology_never_its_weights(runs_root):
    def run_id(module):
        return NNModel(module=module).expected_run_id(_params(runs_root))

    torch.manual_seed(0)
    a = Encoder()
    torch.manual_seed(1)
    b = Encoder()
    assert run_id(a) == run_id(b)
    assert run_id(Encoder(width=17)) != run_id(a)
    frozen = Encoder()
    frozen.body[0].weight.requires_grad_(False)
    assert run_id(frozen) != run_id(a)


def test_a_wrapped_modules_weights_reload_only_into_a_module_passed_again(runs_root):
    model = NNModel(module=Encoder())
    run = model.train(_params(runs_root))
    ckpt = NNCheckpoint.load(run, Checkpoints.LAST, runs_root)
    with pytest.raises(ConfigError, match="register a factory and use ModelSpec"):
        NNModel.from_checkpoint(ckpt)
    again = Encoder()
    rebuilt = NNModel.from_checkpoint(ckpt, module=again)
    assert rebuilt.net is again
    X, _ = _data()
    assert torch.equal(rebuilt.predict(X).logits, model.predict(X).logits)
    with pytest.raises(FileError):
        NNModel.from_checkpoint(ckpt, module=Encoder(width=3))


def test_a_wrapped_module_refuses_net_params_and_a_spec(registered):
    import engine_factories as f

    with pytest.raises(ConfigError) as info:
        NNModel(f.net_params(), module=Encoder())
    assert info.value.field == "net_params"
    with pytest.raises(ConfigError, match="not both"):
        NNModel(params=NNModelParams(net=ModelSpec("test.encoder")), module=Encoder())
    with pytest.raises(ConfigError) as info:
        NNModel(module="encoder")
    assert info.value.field == "module"


# -- adapters and outputs -------------------------------------------------------------------


def test_a_non_tensor_output_is_refused_at_the_first_batch_naming_it(runs_root):
    model = NNModel(module=DictOut())
    with pytest.raises(DataError, match=r"keys \['hidden', 'logits'\]"):
        model.train(_params(runs_root))
    assert not runs_root.exists() or not any(runs_root.iterdir())


def test_an_adapters_output_picks_the_tensor(runs_root):
    model = NNModel(module=DictOut(), batch_adapter=PositionalInputs(output="logits"))
    run = model.train(_params(runs_root))
    assert run.status.value == "finished"
    X, _ = _data()
    assert model.predict(X).logits.shape == (64, 3)
    spec = ProbabilitySpec(kind="categorical", labels=("a", "b", "c"))
    assert model.predict_proba(X, spec).probabilities.shape == (64, 3)
    with model.iter_predict(_params(runs_root).val_loader) as stream:
        assert sum(len(b.logits) for b in stream) == 64
    assert model.evaluate(_params(runs_root).val_loader).loss > 0


def test_positional_inputs_feed_several_tensors(runs_root):
    g = torch.Generator().manual_seed(0)
    X, Z = torch.randn(32, 4, generator=g), torch.randn(32, 2, generator=g)
    y = (X[:, 0] > 0).long()
    loader = DataLoader(TensorDataset(X, Z, y), batch_size=8)
    model = NNModel(module=TwoInputs(), batch_adapter=PositionalInputs(2))
    run = model.train(NNTrainParams(n_epochs=1, train_loader=loader, runs_root=runs_root))
    assert run.status.value == "finished"
    assert model.predict(loader).logits.shape == (32, 3)
    with pytest.raises(DataError, match="not 3 inputs and a target"):
        NNModel(module=TwoInputs(), batch_adapter=PositionalInputs(3)).train(
            NNTrainParams(n_epochs=1, train_loader=loader, runs_root=runs_root)
        )


def test_keyword_inputs_read_dict_batches(runs_root):
    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(4):
        ids = torch.randint(0, 10, (8, 5), generator=g)
        batches.append(
            {"input_ids": ids, "attention_mask": torch.ones(8, 5), "labels": (ids[:, 0] > 4).long()}
        )
    model = NNModel(
        module=Keyworded(),
        params=NNModelParams(loss=Losses.CROSS_ENTROPY),
        batch_adapter=KeywordInputs(
            ("input_ids", "attention_mask"), target="labels", output="logits"
        ),
    )
    params = NNTrainParams(
        n_epochs=2, train_loader=batches, val_loader=batches, runs_root=runs_root
    )
    run = model.train(params)
    assert run.status.value == "finished"
    assert run.idps[-1].val_edp.metrics is not None
    assert run.config["data"]["train"]["kind"] == "batches"  # dict batches hashed by content
    assert model.predict(batches).logits.shape == (32, 2)
    with pytest.raises(DataError, match=r"but not \['labels'\]"):
        model.train(
            NNTrainParams(
                n_epochs=1,
                train_loader=[{"input_ids": ids, "attention_mask": torch.ones(8, 5)}],
                runs_root=runs_root,
            )
        )


def test_adapters_check_their_settings():
    with pytest.raises(ConfigError):
        PositionalInputs(0)
    with pytest.raises(ConfigError):
        KeywordInputs("input_ids")
    with pytest.raises(ConfigError):
        KeywordInputs(("labels",), target="labels")
    with pytest.raises(ConfigError):
        PositionalInputs(output=1.5)
    with pytest.raises(ConfigError) as info:
        NNModel(module=Encoder(), batch_adapter=object())
    assert info.value.field == "batch_adapter"


def test_the_quickstart_snippet_runs(registered, runs_root):
    register_model_factory("acme.encoder", 1, lambda config: Encoder(**config), replace=True)
    try:
        model = NNModel(
            params=NNModelParams(
                net=ModelSpec("acme.encoder", 1, {"width": 64}), loss=Losses.CROSS_ENTROPY
            )
        )
        run = model.train(params=_params(runs_root))
        checkpoint = NNCheckpoint.load(run, Checkpoints.BEST, runs_root)
        rebuilt = NNModel.from_checkpoint(checkpoint)
        assert rebuilt.params.net == model.params.net
        encoder = Encoder()
        wrapped = NNModel(module=encoder, params=NNModelParams(loss=Losses.CROSS_ENTROPY))
        assert wrapped.net is encoder
    finally:
        unregister_model_factory("acme.encoder", 1)
