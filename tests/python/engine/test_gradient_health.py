"""HealthProbe (issue 28): per-tensor gradient health, its cadence, what it detects,
its lines in the log, and a run with it trains the same numbers as one without."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch
from engine_factories import model, train_params
from torch.utils.data import DataLoader, TensorDataset
from trainer_factories import gan_model, gan_step, trainer_params

from nnx_lab import NNOptimParams, Optims, Trainer
from nnx_lab.engine.handlers.gradient_health import HealthProbe
from nnx_lab.errors import ConfigError
from nnx_lab.runs._events import event_from_line


def _loader(n=32, batch=32, seed=0, nan_batch=None):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 8, generator=g)
    y = torch.randint(0, 3, (n,), generator=g)
    if nan_batch is not None:
        X[nan_batch * batch] = float("nan")
    return DataLoader(TensorDataset(X, y), batch_size=batch, shuffle=False)


def _params(root, loader, **kw):
    sgd = NNOptimParams(name=Optims.SGD, max_lr=0.1, momentum=0.0, weight_decay=0.0)
    base = {"n_epochs": 1, "val_loader": None, "optim": sgd, "scheduler": None, "progress": False}
    return train_params(root, loader, **{**base, **kw})


def _health_lines(run):
    raw = (run.run_dir / "metrics.jsonl").read_bytes().splitlines()
    return [event_from_line(x) for x in raw if b'"event": "health"' in x]


def test_the_numbers_equal_a_hand_computation_on_a_tiny_net(runs_root):
    m = model(net={"dropout_prob": 0.0, "hidden_dims": [6, 5]})
    initial = copy.deepcopy(m.net)
    loader = _loader()  # one batch: step 1 is the run's only update
    probe = HealthProbe(every=1)
    m.train(_params(runs_root, loader), callbacks=[probe])
    (record,) = probe.records

    X, y = next(iter(loader))
    acts = {}
    hooks = [
        mod.register_forward_hook(lambda mod, i, o, n=n: acts.__setitem__(n, i[0].detach()))
        for n, mod in initial.named_modules()
        if isinstance(mod, torch.nn.ReLU)
    ]
    torch.nn.functional.cross_entropy(initial(X), y).backward()
    for h in hooks:
        h.remove()
    before = dict(initial.named_parameters())
    after = dict(m.net.named_parameters())
    assert record.step == 1
    assert record.names == list(before)
    assert record.modules == [n.rpartition(".")[0] for n in before]
    for i, name in enumerate(record.names):
        w0, w1 = before[name], after[name].detach()
        assert record.grad_norm[i] == pytest.approx(float(w0.grad.norm()), rel=1e-5)
        assert record.weight_norm[i] == pytest.approx(float(w1.norm()), rel=1e-5)
        ratio = float((w1 - w0.detach()).norm() / w0.detach().norm())
        assert record.update_ratio[i] == pytest.approx(ratio, rel=1e-4)
        # plain SGD: the update is lr times the gradient
        assert ratio == pytest.approx(0.1 * float(w0.grad.norm() / w0.detach().norm()), rel=1e-4)
    assert set(record.dead) == set(acts)
    for name, x in acts.items():
        assert record.dead[name] == pytest.approx(float((~(x > 0).any(0)).float().mean()))


def test_a_dead_layer_is_measured_dead(runs_root):
    m = model(net={"dropout_prob": 0.0, "hidden_dims": [6, 5]})
    with torch.no_grad():
        m.net.layers[0].bias.fill_(-100.0)  # no row switches any unit of layer 1 on
    probe = HealthProbe(every=1)
    m.train(_params(runs_root, _loader()), callbacks=[probe])
    assert probe.records[0].dead["layers.1"] == 1.0


def test_the_cadence_is_the_first_update_then_every_n(runs_root):
    probe = HealthProbe(every=4)
    run = model().train(_params(runs_root, _loader(n=320, batch=32)), callbacks=[probe])
    assert [r.step for r in probe.records] == [1, 4, 8]
    assert probe.problems == {}  # a healthy net raises nothing
    # the log holds the same records, and replays them as events
    assert [r.step for r in _health_lines(run)] == [1, 4, 8]
    assert _health_lines(run)[1].grad_norm == probe.records[1].grad_norm


def test_a_run_with_the_probe_trains_bitwise_the_same_weights(tmp_path):
    weights = []
    for i, callbacks in enumerate(([], [HealthProbe(every=1)])):
        m = model()
        m.train(train_params(tmp_path / f"r{i}", n_epochs=2, progress=False), callbacks=callbacks)
        weights.append({k: v.clone() for k, v in m.net.state_dict().items()})
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_vanishing_gradients_name_the_first_layer_and_step(runs_root):
    m = model(net={"dropout_prob": 0.0, "hidden_dims": [6, 5]})
    with torch.no_grad():
        m.net.layers[2].weight.mul_(1e-5)
        m.net.layers[4].weight.mul_(1e-5)
    probe = HealthProbe(every=2, vanish=1e-6)
    m.train(_params(runs_root, _loader(n=128)), callbacks=[probe])
    alert = probe.problems["vanishing"]
    assert (alert["layer"], alert["step"]) == ("layers.0.weight", 1)
    assert probe.records[0].alerts[0]["kind"] == "vanishing"
    assert "exploding" not in probe.problems
    assert "nonfinite" not in probe.problems
    assert probe.records[1].alerts is None  # reported once, when first seen


def test_exploding_gradients_are_named(runs_root):
    m = model(net={"dropout_prob": 0.0, "hidden_dims": [6, 5]})
    with torch.no_grad():
        m.net.layers[4].weight.mul_(1e4)
    probe = HealthProbe(every=1, explode=10.0)
    m.train(_params(runs_root, _loader(n=64)), callbacks=[probe])
    alert = probe.problems["exploding"]
    assert alert["step"] == 1
    assert alert["value"] > 10.0
    first = [
        n
        for n, g in zip(probe.records[0].names, probe.records[0].grad_norm, strict=False)
        if g > 10
    ]
    assert alert["layer"] == first[0]


def test_a_nan_that_goes_on_is_named_where_it_started(runs_root):
    probe = HealthProbe(every=1)
    loader = _loader(n=128, nan_batch=2)  # the third step's batch holds a NaN
    model().train(_params(runs_root, loader, stop_on_nonfinite=False), callbacks=[probe])
    alert = probe.problems["nonfinite"]
    assert (alert["layer"], alert["step"]) == ("layers.0.weight", 3)
    assert all(math.isfinite(g) for g in probe.records[1].grad_norm)


def test_a_run_that_fails_on_a_nan_says_where_it_started(runs_root):
    probe = HealthProbe(every=50)
    loader = _loader(n=128, nan_batch=2)
    with pytest.raises(Exception, match="non-finite"):
        model().train(_params(runs_root, loader), callbacks=[probe])
    assert probe.problems["nonfinite"]["step"] == 3
    assert probe.records[-1].update_ratio == [None] * len(probe.records[-1].names)


def test_the_trainer_tags_each_tensor_with_its_optimizer(runs_root):
    probe = HealthProbe(every=4)
    Trainer(gan_model()).train(
        trainer_params(runs_root, n_epochs=1), trainer_step_fn=gan_step, callbacks=[probe]
    )
    # a loop step holds two updates (D's, G's): the steps that reach 1, 4 and 8
    assert [r.step for r in probe.records] == [2, 4, 8]
    record = probe.records[0]
    assert record.optimizers == [n.split(".")[0] for n in record.names]
    assert set(record.optimizers) == {"G", "D"}
    assert all(g is not None and g > 0 for g in record.grad_norm)


def test_a_callback_carries_a_probe_which_joins_the_run(runs_root):
    class Carrier:
        def __init__(self):
            self.health_probe = HealthProbe(every=2)
            self.seen = []

        def on_health(self, event):
            self.seen.append(event.step)

    carrier = Carrier()
    model().train(_params(runs_root, _loader(n=160)), callbacks=[carrier])
    assert carrier.seen == [1, 2, 4]


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"every": 0}, "HealthProbe.every"),
        ({"every": 2.5}, "HealthProbe.every"),
        ({"vanish": -1.0}, "HealthProbe.vanish"),
        ({"explode": math.inf}, "HealthProbe.explode"),
        ({"vanish": 10.0, "explode": 1.0}, "HealthProbe.vanish"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(kw, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        HealthProbe(**kw)


def test_the_health_line_is_json(runs_root):
    probe = HealthProbe(every=1)
    run = model().train(_params(runs_root, _loader()), callbacks=[probe])
    lines = (run.run_dir / "metrics.jsonl").read_text().splitlines()
    health = [json.loads(x) for x in lines if '"health"' in x]
    assert health[0]["event"] == "health"
    assert health[0]["names"] == probe.records[0].names


class _FunctionalNet(torch.nn.Module):
    """Activations called as functions inside forward: no activation module to hook."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 6)
        self.block = _Block()
        self.out = torch.nn.Linear(5, 3)

    def forward(self, x):
        return self.out(self.block(torch.nn.functional.relu(self.fc1(x))))


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 5)

    def forward(self, x):
        return torch.nn.functional.gelu(self.fc(x)).relu()


def test_activations_called_as_functions_are_measured_and_killed_by_a_bad_bias(runs_root):
    from nnx_lab import NNModel

    net = _FunctionalNet()
    with torch.no_grad():
        net.fc1.bias[:4] = -100.0  # 4 of fc1's 6 units never switch on
        net.block.fc.bias.fill_(-100.0)  # every unit of the block is dead
    m = NNModel(module=net)
    probe = HealthProbe(every=1)
    m.train(_params(runs_root, _loader(n=64)), callbacks=[probe])
    first = probe.records[0]
    # attributed to the module whose forward called them, numbered in call order
    assert set(first.dead) == {"<net>.relu()", "block.gelu()", "block.relu()"}
    assert first.dead["<net>.relu()"] == pytest.approx(4 / 6)
    assert first.dead["block.gelu()"] == 1.0
    assert first.dead["block.relu()"] == 1.0
    assert len(probe.records) == 2  # every sampled step measures again


def test_functional_hooks_exist_only_on_sampled_steps(runs_root):
    from nnx_lab import NNModel

    net = _FunctionalNet()
    seen = []

    class Spy:  # counts the hooks on the net at each step's end
        def on_step_ended(self, event):
            seen.append(len(net._forward_pre_hooks))

    probe = HealthProbe(every=4)
    NNModel(module=net).train(
        _params(runs_root, _loader(n=320, batch=32)), callbacks=[probe, Spy()]
    )
    assert [r.step for r in probe.records] == [1, 4, 8]
    assert all("<net>.relu()" in r.dead for r in probe.records)
    # armed (hooked) only before steps 1, 4 and 8: none left after the run
    assert len(net._forward_pre_hooks) == 0
    assert seen.count(0) >= 6
