"""``train(objective=)``: the loss as named terms, the update the engine's.

The default step as an objective gives the default step's numbers bit for bit; a
masked two-term objective accumulates exactly (each term Σ numerator / Σ denominator
over its window, a short last window included); ``nonfinite`` fails or skips before
the update; each term is logged by name in the step and epoch records.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from nnx_lab import (
    LossTerm,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
    Objective,
    ObjectiveResult,
    supervised_objective,
)
from nnx_lab.errors import ConfigError, NonFiniteLossError
from nnx_lab.runs import event_from_json

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SGD = NNOptimParams.builder().sgd(max_lr=0.05).build()


def _data(n):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 6, generator=g)
    return X, (X @ torch.randn(6, 3, generator=g)).argmax(1)


def _split(X, y, sizes):
    out, start = [], 0
    for size in sizes:
        out.append((X[start : start + size], y[start : start + size]))
        start += size
    return out


def _model(loss="cross_entropy"):
    return NNModel(
        net_params=NNParams(input_dim=6, output_dim=3, hidden_dims=[8]),
        params=NNModelParams(loss=loss),
    )


def _train(root, batches, accum, objective=None, epochs=2, optim=SGD, **kw):
    model = _model()
    run = model.train(
        NNTrainParams(
            n_epochs=epochs,
            train_loader=batches,
            accumulation_steps=accum,
            optim=optim,
            runs_root=str(root),
            **kw,
        ),
        objective=objective,
    )
    return model, run


def _lines(run):
    return [json.loads(line) for line in (run.run_dir / "metrics.jsonl").read_text().splitlines()]


def _steps(run):
    return [ln for ln in _lines(run) if ln["event"] == "step"]


@pytest.mark.parametrize(("sizes", "accum"), [([8, 8, 8, 5], 1), ([5, 3, 7, 1, 6, 2, 4], 3)])
@pytest.mark.parametrize(
    "optim", [SGD, NNOptimParams(max_lr=1e-2, grad_clip_norm=0.5)], ids=["sgd", "adam+clip"]
)
def test_supervised_objective_is_the_default_step_bit_for_bit(tmp_path, sizes, accum, optim):
    X, y = _data(sum(sizes))
    plain, a = _train(tmp_path / "a", _split(X, y, sizes), accum, optim=optim)
    same, b = _train(
        tmp_path / "b", _split(X, y, sizes), accum, supervised_objective(), optim=optim
    )
    for name, weight in plain.net.state_dict().items():
        assert torch.equal(weight, same.net.state_dict()[name]), name
    assert [s["loss"] for s in _steps(a)] == [s["loss"] for s in _steps(b)]
    assert [s["accuracy"] for s in _steps(a)] == [s["accuracy"] for s in _steps(b)]
    assert [s["terms"]["loss"] for s in _steps(b)] == [s["loss"] for s in _steps(b)]
    assert a.id != b.id  # the objective enters the run id


class Masked(Objective):
    """Two terms with different denominators: a cross entropy over the rows a mask
    keeps, and a squared-output penalty over every output element."""

    def compute(self, net, batch, ctx):
        X, y = batch
        out = net(X)
        keep = (X[:, 0] > -0.3).float()
        ce = torch.nn.functional.cross_entropy(out, y, reduction="none")
        return ObjectiveResult(
            [
                LossTerm("ce", (ce * keep).sum(), keep.sum()),
                LossTerm("l2", (out**2).sum(), out.numel(), weight=0.1),
            ],
            record={"rows_kept": keep.mean()},
        )


def _window_terms(net, window):
    """The hand computation: each term Σ numerator / Σ denominator over the window."""
    ce_num = ce_den = l2_num = l2_den = 0.0
    for X, y in window:
        out = net(X)
        keep = (X[:, 0] > -0.3).float()
        ce_num += float((torch.nn.functional.cross_entropy(out, y, reduction="none") * keep).sum())
        ce_den += float(keep.sum())
        l2_num += float((out**2).sum())
        l2_den += out.numel()
    return ce_num / ce_den, l2_num / l2_den


def test_two_masked_terms_accumulate_exactly(tmp_path):
    micro, union = [3, 5, 2, 4, 1], [8, 6, 1]  # windows of 2, then a short last one
    X, y = _data(sum(micro))
    first = _model()
    with torch.no_grad():
        hand = _window_terms(first.net, _split(X, y, micro)[:2])
    acc_model, acc = _train(tmp_path / "acc", _split(X, y, micro), 2, Masked(), epochs=1)
    one_model, one = _train(tmp_path / "one", _split(X, y, union), 1, Masked(), epochs=1)
    steps_acc, steps_one = _steps(acc), _steps(one)
    assert len(steps_acc) == 3
    assert steps_acc[0]["terms"]["ce"] == pytest.approx(hand[0], rel=1e-6)
    assert steps_acc[0]["terms"]["l2"] == pytest.approx(hand[1], rel=1e-6)
    assert steps_acc[0]["loss"] == pytest.approx(hand[0] + 0.1 * hand[1], rel=1e-6)
    for a, b in zip(steps_acc, steps_one, strict=True):
        assert a["terms"] == pytest.approx(b["terms"], rel=1e-5)
    for name, weight in acc_model.net.state_dict().items():
        torch.testing.assert_close(weight, one_model.net.state_dict()[name], rtol=1e-5, atol=1e-6)
    # the epoch's value of a term is its Σ numerator / Σ denominator over the epoch
    epoch = next(ln for ln in _lines(acc) if ln["event"] == "epoch_ended")
    assert set(epoch["train"]["terms"]) == {"ce", "l2", "rows_kept"}
    # the strict log schema reads the terms back
    replayed = event_from_json(next(ln for ln in _lines(acc) if ln["event"] == "step"))
    assert replayed.records[0].terms == steps_acc[0]["terms"]
    assert "accuracy" not in steps_acc[0] or steps_acc[0]["accuracy"] is None


def test_a_mean_of_means_would_not_pass(tmp_path):
    """The check above tells the exact denominators from a mean of micro-batch means."""
    micro = [3, 5]
    X, y = _data(sum(micro))
    net = _model().net
    with torch.no_grad():
        exact = _window_terms(net, _split(X, y, micro))[0]
        means = [_window_terms(net, [w])[0] for w in _split(X, y, micro)]
    assert abs(exact - sum(means) / 2) > 1e-4


class Exploding(Objective):
    def __init__(self, at, **kw):
        super().__init__(**kw)
        self.at, self.updates, self.calls = at, [], 0

    def compute(self, net, batch, ctx):
        X, y = batch
        loss = torch.nn.functional.cross_entropy(net(X), y)
        self.calls += 1
        if self.calls == self.at:  # the at-th batch
            loss = loss * math.inf
        return ObjectiveResult([LossTerm("ce", loss, 1)])

    def after_update(self, net, step):
        self.updates.append(step)


def test_nonfinite_skip_skips_counts_and_goes_on(tmp_path):
    X, y = _data(32)
    objective = Exploding(at=2, nonfinite="skip")
    _, run = _train(tmp_path, _split(X, y, [8] * 4), 1, objective, epochs=1)
    assert objective.updates == [1, 2, 3]  # the skipped batch took no step number
    epoch = next(ln for ln in _lines(run) if ln["event"] == "epoch_ended")
    assert epoch["train"]["skipped_updates"] == 1
    assert len(_steps(run)) == 3
    assert all(math.isfinite(s["loss"]) for s in _steps(run))


def test_nonfinite_fail_stops_before_the_update(tmp_path):
    X, y = _data(16)
    objective = Exploding(at=2)
    model = _model()
    with pytest.raises(NonFiniteLossError, match="step 2"):
        model.train(
            NNTrainParams(n_epochs=1, train_loader=_split(X, y, [8, 8]), optim=SGD),
            objective=objective,
        )
    assert objective.updates == [1]


def test_a_plain_function_as_objective_is_refused_before_any_run(runs_root):
    X, y = _data(8)

    def fn(net, batch, ctx):
        return ObjectiveResult([LossTerm("a", net(batch[0]).sum())])

    with pytest.raises(ConfigError, match="Objective"):
        _model().train(NNTrainParams(n_epochs=1, train_loader=[(X, y)]), objective=fn)
    assert not any(runs_root.iterdir()) if runs_root.exists() else True
    # wrapped, it trains
    run = _model().train(NNTrainParams(n_epochs=1, train_loader=[(X, y)]), objective=Objective(fn))
    assert _steps(run)[0]["terms"]["a"] == pytest.approx(_steps(run)[0]["loss"])


def test_metrics_without_outputs_are_refused(runs_root):
    X, y = _data(8)
    with pytest.raises(ConfigError, match="no outputs to score"):
        _model().train(
            NNTrainParams(n_epochs=1, train_loader=[(X, y)], metrics=["accuracy"]),
            objective=Masked(),
        )


@pytest.mark.parametrize(
    ("field", "value"), [("reduction", "median"), ("name", "a.b"), ("weight", math.nan)]
)
def test_a_bad_loss_term_names_its_field(field, value):
    kw = {"name": "a", "numerator": torch.tensor(1.0), field: value}
    with pytest.raises(ConfigError, match=field):
        LossTerm(**kw)


def test_an_objective_is_handed_the_compiled_network(tmp_path):
    """compile= with an objective: the objective calls the compiled forward (the eager
    backend keeps eager's numbers, so the weights equal the eager run's)."""
    X, y = _data(16)
    seen = []

    def fn(net, batch, ctx):
        seen.append(type(net).__name__)
        out = net(batch[0])
        return ObjectiveResult([LossTerm("ce", torch.nn.functional.cross_entropy(out, batch[1]))])

    runs = []
    for compile_options in (False, {"backend": "eager"}):
        model = NNModel(
            net_params=NNParams(input_dim=6, output_dim=3, hidden_dims=[8]),
            params=NNModelParams(compile=compile_options),
        )
        model.train(
            NNTrainParams(
                n_epochs=1,
                train_loader=_split(X, y, [8, 8]),
                optim=SGD,
                runs_root=str(tmp_path / str(bool(compile_options))),
            ),
            objective=Objective(fn),
        )
        runs.append(model.net.state_dict())
    assert seen[-1] == "OptimizedModule"
    assert seen[0] != "OptimizedModule"
    for name, weight in runs[0].items():
        assert torch.equal(weight, runs[1][name]), name
