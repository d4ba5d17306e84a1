"""The LR finder: a sweep that leaves no trace, rules with known answers, divergence and
NaN handling, negative losses, events for a live view, and a suggestion that trains."""

from __future__ import annotations

import math
import random

import engine_factories as f
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

from nnx_lab import (
    ConfigError,
    DataError,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
    TrainingControl,
    lr_finder,
)
from nnx_lab.lr_sweep import suggest


class Mixed(torch.nn.Module):
    """A net with buffers (BatchNorm) and a sub-module left in eval mode on purpose."""

    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(), torch.nn.Dropout(0.3)
        )
        self.head = torch.nn.Linear(16, 3)
        self.frozen = torch.nn.BatchNorm1d(3)

    def forward(self, x):
        return self.frozen(self.head(self.body(x)))


def _loaders():
    X, y, _, _ = f.data(n_train=256)
    ds = TensorDataset(X, y)
    own = DataLoader(ds, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(3))
    sampler = RandomSampler(ds, generator=torch.Generator().manual_seed(4))
    return own, DataLoader(ds, batch_size=32, sampler=sampler)


def _everything(net, opt, loaders):
    """All a sweep could change, captured for comparison."""
    return {
        "weights": {k: v.clone() for k, v in net.state_dict().items()},
        "modes": [m.training for m in net.modules()],
        "opt": opt.state_dict(),
        "python": random.getstate(),
        "numpy": np.random.get_state()[1].copy(),
        "torch": torch.get_rng_state(),
        "loader_gen": loaders[0].generator.get_state(),
        "sampler_gen": loaders[1].sampler.generator.get_state(),
    }


def _assert_same(before, after):
    for k, v in before["weights"].items():
        assert torch.equal(v, after["weights"][k]), k
    assert before["modes"] == after["modes"]
    sa, sb = before["opt"]["state"], after["opt"]["state"]
    assert sa.keys() == sb.keys()
    for i in sa:
        for name, value in sa[i].items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(sb[i][name])), (i, name)
    assert before["python"] == after["python"]
    assert np.array_equal(before["numpy"], after["numpy"])
    for k in ("torch", "loader_gen", "sampler_gen"):
        assert torch.equal(before[k], after[k]), k


@pytest.fixture
def setup():
    net = Mixed()
    net.train()
    net.frozen.eval()  # a deliberate mix of modes
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loaders = _loaders()
    # give the optimizer state worth keeping
    X, y = next(iter(loaders[0]))
    F.cross_entropy(net(X), y).backward()
    opt.step()
    opt.zero_grad()
    return net, opt, loaders


@pytest.mark.parametrize("ending", ["finished", "raised", "stopped"])
def test_a_sweep_leaves_no_trace(setup, ending):
    net, opt, loaders = setup
    before = _everything(net, opt, loaders)
    calls = {"n": 0}

    def loss(out, y):
        calls["n"] += 1
        if ending == "raised" and calls["n"] == 7:
            raise RuntimeError("boom at step 7")
        return F.cross_entropy(out, y)

    control = TrainingControl()

    class StopAfter:
        def on_sweep_points(self, event):
            if ending == "stopped" and event.points[-1][0] >= 9:
                control.request_stop("enough")

    for loader in loaders:
        if ending == "raised":
            with pytest.raises(RuntimeError, match="boom at step 7"):
                lr_finder(net, loader, loss, num_iter=20, optimizer=opt, control=control)
        else:
            result = lr_finder(
                net,
                loader,
                loss,
                num_iter=20,
                optimizer=opt,
                control=control,
                callbacks=[StopAfter()],
            )
            if ending == "stopped":
                assert result.status == "stopped"
                assert result.stopped_early
                assert len(result.lrs) == 10
        _assert_same(before, _everything(net, opt, loaders))
        calls["n"] = 0
        control = TrainingControl()
    assert calls["n"] == 0 or ending != "raised"


def test_refusals_come_before_any_work():
    net = Mixed()
    loader, _ = _loaders()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    cases = [
        ({"start_lr": 1.0, "end_lr": 1e-3}, "start_lr"),
        ({"start_lr": 0.0}, "start_lr"),
        ({"end_lr": -1.0}, "end_lr"),
        ({"num_iter": 1}, "num_iter"),
        ({"mode": "log"}, "mode"),
        ({"rule": "vibes"}, "rule"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ConfigError, match=field):
            lr_finder(net, loader, **kwargs)
    empty = DataLoader(TensorDataset(torch.zeros(0, 8), torch.zeros(0).long()), batch_size=4)
    with pytest.raises(DataError, match="empty"):
        lr_finder(net, empty)
    assert all(torch.equal(v, net.state_dict()[k]) for k, v in before.items())


def test_a_short_loader_is_cycled_and_the_result_says_so():
    X, y, _, _ = f.data(n_train=64)
    loader = DataLoader(TensorDataset(X, y), batch_size=32)  # 2 batches for 10 steps
    result = lr_finder(f.model().net, loader, num_iter=10, end_lr=1e-2)
    assert result.cycled
    assert len(result.lrs) == 10
    longer = lr_finder(f.model().net, loader, num_iter=2, end_lr=1e-2)
    assert not longer.cycled


def test_the_schedule_is_exponential_or_linear():
    X, y, _, _ = f.data()
    loader = DataLoader(TensorDataset(X, y), batch_size=32)
    exp = lr_finder(f.model().net, loader, start_lr=1e-6, end_lr=1e-2, num_iter=5)
    assert exp.lrs == pytest.approx([1e-6, 1e-5, 1e-4, 1e-3, 1e-2])
    lin = lr_finder(f.model().net, loader, start_lr=1e-3, end_lr=5e-3, num_iter=5, mode="linear")
    assert lin.lrs == pytest.approx([1e-3, 2e-3, 3e-3, 4e-3, 5e-3])


# -- reading the curve: rules with known answers -------------------------------------------
def test_the_rules_find_their_points_on_a_known_curve():
    lrs = np.logspace(-6, 0, 61)
    x = np.log10(lrs)
    # a descent centred at 1e-3 (steepest there), flat, then a rise after 1e-1
    loss = 2.0 - np.tanh((x + 3.0) * 1.5) + np.where(x > -1, (x + 1) ** 2 * 5, 0.0)
    s = suggest(lrs, loss)
    assert s["steepest"] == pytest.approx(1e-3, rel=0.13)
    assert s["min_div_10"] == pytest.approx(lrs[int(np.argmin(loss))] / 10)
    # the longest decreasing stretch runs from the start to the minimum; 2/3 along it
    end = int(np.argmin(loss))
    assert s["valley"] == pytest.approx(lrs[(end * 2) // 3])
    linear = suggest(lrs, loss)["linear_slope"]
    slopes = np.gradient(loss, lrs)
    assert linear == pytest.approx(lrs[int(np.argmin(slopes))])


def test_non_finite_points_are_dropped_from_the_suggestion():
    lrs = [1e-5, 1e-4, 1e-3, 1e-2, 1e-1]
    s = suggest(lrs, [3.0, 2.0, 1.0, math.nan, math.inf])
    assert s["min_div_10"] == pytest.approx(1e-4)


class Scripted:
    """A loss that replays given values (with a gradient), to test the sweep's logic."""

    def __init__(self, values):
        self.values, self.i = values, 0

    def __call__(self, out, y):
        v = self.values[min(self.i, len(self.values) - 1)]
        self.i += 1
        return out.sum() * 0.0 + v


def _scripted(values, **kw):
    X, y, _, _ = f.data()
    loader = DataLoader(TensorDataset(X, y), batch_size=32)
    return lr_finder(f.model().net, loader, Scripted(values), smoothing=0.0, **kw)


def test_the_sweep_stops_when_the_smoothed_loss_diverges():
    # the threshold: best 0.4 + 3 x the scale max(|best|, |first|) = 1.0, that is 3.4
    result = _scripted([1.0, 0.8, 0.5, 0.4, 0.6, 3.5, 9.0, 9.0], num_iter=8, diverge_margin=3.0)
    assert result.stopped_early
    assert "diverged at step 6" in result.reason
    assert len(result.losses) == 6


def test_divergence_works_for_negative_losses():
    # a ratio test (loss > 4 x best) would stop at once on negative values
    values = [-1.0, -2.0, -3.0, -4.0, -3.5, -2.0, 20.0]
    result = _scripted(values, num_iter=7, diverge_margin=2.0)
    assert result.stopped_early
    assert "step 7" in result.reason  # -2.0 is within 2 x 4 of -4; 20 is not
    early = _scripted([-1.0, -2.0, -1.5, -1.2], num_iter=4, diverge_margin=2.0)
    assert not early.stopped_early


def test_a_nan_loss_ends_the_sweep_and_is_left_out():
    result = _scripted([1.0, 0.9, 0.7, 0.5, float("nan"), 0.1], num_iter=6)
    assert result.stopped_early
    assert "not finite at step 5" in result.reason
    assert len(result.losses) == 5
    assert math.isnan(result.smoothed[-1])
    assert result.suggestions["min_div_10"] == pytest.approx(result.lrs[3] / 10)


# -- a live view is a sink of the sweep's events ---------------------------------------------
def test_the_sweep_reports_on_its_event_stream():
    seen = []

    class Sink:
        def on_sweep_started(self, e):
            seen.append(("started", e.num_iter))

        def on_sweep_points(self, e):
            seen.append(("points", [p[0] for p in e.points]))

        def on_sweep_finished(self, e):
            seen.append(("finished", e.status, e.suggested_lr))

    X, y, _, _ = f.data()
    result = lr_finder(
        f.model().net,
        DataLoader(TensorDataset(X, y), batch_size=32),
        num_iter=12,
        end_lr=1e-2,
        callbacks=[Sink()],
    )
    assert seen[0] == ("started", 12)
    assert seen[1:-1] == [
        ("points", [0, 1, 2, 3, 4]),
        ("points", [5, 6, 7, 8, 9]),
        ("points", [10, 11]),
    ]
    assert seen[-1] == ("finished", "finished", result.suggested_lr)


def test_the_figure_is_a_plotly_figure_built_on_demand():
    X, y, _, _ = f.data()
    result = lr_finder(f.model().net, DataLoader(TensorDataset(X, y), batch_size=32), num_iter=8)
    assert result._figure is None
    fig = result.figure
    assert fig.layout.xaxis.type == "log"
    assert [t.name for t in fig.data] == ["loss", "smoothed loss"]
    assert result.figure is fig
    frame = result.to_frame()
    assert list(frame.columns) == ["lr", "loss", "smoothed"]
    assert len(frame) == 8


# -- the suggestion is worth using -------------------------------------------------------------
def test_three_epochs_at_the_suggestion_beat_a_hundred_times_more_and_a_thousand_less(tmp_path):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(20, 20, generator=g)
    X = torch.randn(2048, 20, generator=g)
    y = (X @ w).argmax(1)
    Xv = torch.randn(512, 20, generator=g)
    yv = (Xv @ w).argmax(1)
    train = DataLoader(
        TensorDataset(X, y), batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(1)
    )
    val = DataLoader(TensorDataset(Xv, yv), batch_size=256)

    def build():
        return NNModel(NNParams(input_dim=20, output_dim=20, hidden_dims=[64, 64]), NNModelParams())

    model = build()
    suggested = lr_finder(
        model.net, train, model.loss_fn.kind, precision=model.precision
    ).suggested_lr
    assert suggested is not None

    def fit(lr):
        run = build().train(
            NNTrainParams(
                n_epochs=3,
                seed=0,
                train_loader=train,
                val_loader=val,
                optim=NNOptimParams(max_lr=lr),
                runs_root=str(tmp_path),
                overwrite_existing=True,
            )
        )
        return run.epochs[-1]["val"]["accuracy"]

    good = fit(suggested)
    assert good > fit(suggested * 100)
    assert good > fit(suggested / 1000)
    assert good > 0.3  # well above the 5% of chance


def test_lr_finder_sweeps_under_a_models_precision_policy():
    model = f.model(precision="bf16")
    seen = []
    model.net.layers[0].register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    X, y, _, _ = f.data()
    loader = DataLoader(TensorDataset(X, y), batch_size=32)
    lr_finder(model.net, loader, model.loss_fn.kind, num_iter=4, precision=model.precision)
    assert set(seen) == {torch.bfloat16}


def test_plan_lr_finder_sweeps_the_model_fit_would_build_and_feeds_the_plan(tmp_path):
    import plan_factories as pf

    from nnx_lab import ExperimentPlan

    plan = (
        ExperimentPlan()
        .with_net(f.net_params(dropout_prob=0.0))
        .with_model(f.model_params())
        .with_data(pf.make_train_loader, val=pf.make_val_loader, identity="toy")
        .with_seed(7)
        .with_epochs(1)
        .with_runs_root(str(tmp_path))
    )
    before = torch.get_rng_state()
    result = plan.lr_finder(num_iter=12, end_lr=1.0)
    assert torch.equal(torch.get_rng_state(), before)
    assert len(result.lrs) == 12
    assert not any(tmp_path.iterdir())  # a sweep writes nothing
    tuned = plan.with_lr(result.suggested_lr)
    assert tuned.value("train.optim.max_lr") == pytest.approx(result.suggested_lr)
    assert plan.value("train.optim.max_lr") != tuned.value("train.optim.max_lr")  # immutable
    again = plan.lr_finder(num_iter=12, end_lr=1.0)  # the same model, data and order
    assert again.losses == result.losses
