"""Metrics over whole splits, per-step records, losses and §2.11's selection rules."""

from __future__ import annotations

import math

import engine_factories as f
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import EDP, Losses, NNOptimParams, NNSchedulerParams, Optims
from nnx_lab.engine.events import StepRecord
from nnx_lab.engine.selection import selection_signal


def macro(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """A plain-numpy reference: sklearn's macro average with zero_division=0."""
    labels = np.union1d(y_true, y_pred)
    p, r, f1 = [], [], []
    for c in labels:
        tp = np.sum((y_pred == c) & (y_true == c))
        pp, sup = np.sum(y_pred == c), np.sum(y_true == c)
        pc = tp / pp if pp else 0.0
        rc = tp / sup if sup else 0.0
        p.append(pc)
        r.append(rc)
        f1.append(2 * pc * rc / (pc + rc) if pc + rc else 0.0)
    acc = float(np.mean(y_true == y_pred))
    return {
        "accuracy": acc,
        "error": 1 - acc,
        "precision": float(np.mean(p)),
        "recall": float(np.mean(r)),
        "f1": float(np.mean(f1)),
    }


@pytest.mark.parametrize("classes", [3, 40])  # 40: most classes absent from a batch
def test_validation_metrics_cover_the_whole_split_with_a_partial_last_batch(runs_root, classes):
    X, y, _, _ = f.data(classes=classes)
    Xv, yv = torch.randn(70, 8), torch.randint(0, classes, (70,))  # batches of 32, 32 and 6
    model = f.model(net={"output_dim": classes})
    run = model.train(
        f.train_params(
            runs_root,
            n_epochs=2,
            train_loader=DataLoader(TensorDataset(X, y), batch_size=32),
            val_loader=DataLoader(TensorDataset(Xv, yv), batch_size=32),
        )
    )
    val = run.idps[-1].val_edp
    logits = model.predict(Xv).logits
    ref = macro(yv.numpy(), logits.argmax(1).numpy())
    assert val.samples == 70
    assert val.loss == pytest.approx(float(F.cross_entropy(logits, yv)), rel=1e-5)
    for k, v in ref.items():
        assert getattr(val, k) == pytest.approx(v, abs=1e-9), k
    other = model.evaluate(DataLoader(TensorDataset(Xv, yv), batch_size=7))
    assert other.loss == pytest.approx(val.loss, rel=1e-6)  # batching changes sum order only
    assert (other.accuracy, other.f1, other.samples) == (val.accuracy, val.f1, val.samples)


@pytest.mark.parametrize("classes", [3, 40])  # 40: most classes absent from a step
def test_per_step_training_records_match_a_reference(runs_root, classes):
    class Spy:
        """Keeps each step's logits and targets (a forward hook, no engine internals)."""

        def __init__(self, net):
            self.out = []
            net.register_forward_hook(lambda m, i, o: self.out.append(o.detach().clone()))

    X, y, _, _ = f.data(n_train=100, classes=classes)
    loader = DataLoader(TensorDataset(X, y), batch_size=32)  # 32, 32, 32, 4
    model = f.model(net={"dropout_prob": 0.0, "output_dim": classes})
    spy = Spy(model.net)
    run = model.train(f.train_params(runs_root, n_epochs=1, train_loader=loader, log_every=3))
    assert [p.train_edp.samples for p in run.idps] == [32, 32, 32, 4]
    forwards = spy.out[:4]  # the training forwards come first; validation is off
    for i, idp in enumerate(run.idps):
        yb = y[i * 32 : (i + 1) * 32]
        ref = macro(yb.numpy(), forwards[i].argmax(1).numpy())
        assert idp.train_edp.loss == pytest.approx(
            float(F.cross_entropy(forwards[i], yb)), rel=1e-6
        )
        for k, v in ref.items():
            assert getattr(idp.train_edp, k) == pytest.approx(v, abs=1e-9), (i, k)


def test_nll_reports_the_cross_entropy_of_the_same_weights(runs_root):
    """§2.10: native NLL applies log_softmax first; logits stay raw."""
    train, val = f.loaders()
    ce = f.model(net={"dropout_prob": 0.0})
    nll = f.model(net={"dropout_prob": 0.0}, loss=Losses.NEGATIVE_LOG_LIKELIHOOD)
    nll.net.load_state_dict(ce.net.state_dict())
    a, b = ce.evaluate(val), nll.evaluate(val)
    assert a.loss == pytest.approx(b.loss, rel=1e-6)
    assert a.accuracy == b.accuracy
    assert torch.equal(ce.predict(f.data()[2]).logits, nll.predict(f.data()[2]).logits)
    run = nll.train(f.train_params(runs_root, n_epochs=2, train_loader=train, val_loader=val))
    assert math.isfinite(run.idps[-1].train_edp.loss)


@pytest.mark.parametrize("optim", list(Optims))
def test_every_optimizer_trains_the_loss_down(runs_root, optim):
    X = torch.randn(256, 8)
    y = (X[:, 0] > 0).long() + (X[:, 1] > 0).long()  # learnable
    loader = DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True)
    lr = {Optims.SGD: 0.1, Optims.RMSPROP: 3e-3}.get(optim, 1e-2)
    run = f.model(net={"dropout_prob": 0.0}).train(
        f.train_params(
            runs_root,
            n_epochs=8,
            train_loader=loader,
            val_loader=None,
            optim=NNOptimParams(name=optim, max_lr=lr),
        )
    )
    first = np.mean([p.train_edp.loss for p in run.idps[:8]])
    last = np.mean([p.train_edp.loss for p in run.idps[-8:]])
    assert last < 0.8 * first


def test_regression_and_binary_losses_train(runs_root):
    X = torch.randn(128, 8)
    yr = X[:, :1] * 2.0
    run = f.model(net={"output_dim": 1, "dropout_prob": 0.0}, loss=Losses.MEAN_SQUARED_ERROR).train(
        f.train_params(
            runs_root / "r",
            n_epochs=3,
            val_loader=None,
            train_loader=DataLoader(TensorDataset(X, yr), batch_size=32),
        )
    )
    rec = run.idps[-1].train_edp
    assert rec.error is None
    assert rec.accuracy is None
    assert math.isfinite(rec.loss)
    yb = (X[:, :2] > 0).float()
    model = f.model(net={"output_dim": 2}, loss=Losses.BINARY_CROSS_ENTROPY)
    run = model.train(
        f.train_params(
            runs_root / "b",
            n_epochs=3,
            train_loader=DataLoader(TensorDataset(X, yb), batch_size=32),
            val_loader=DataLoader(TensorDataset(X, yb), batch_size=50),
        )
    )
    val = run.idps[-1].val_edp
    pred = model.predict(X)
    assert set(pred.classes.unique().tolist()) <= {0, 1}
    assert val.accuracy == pytest.approx(float((pred.classes == yb).float().mean()), abs=1e-9)


def _rec(loss, error):
    return StepRecord(step=1, epoch=1, batch=0, lr=0.1, samples=1, loss=loss, error=error)


NAN = float("nan")


@pytest.mark.parametrize(
    ("val", "train", "expected"),
    [
        (EDP(loss=0.9, error=0.3, samples=5), _rec(0.5, 0.2), (0.3, "val_edp.error")),
        (EDP(loss=0.9, error=NAN, samples=5), _rec(0.5, 0.2), (0.9, "val_edp.loss")),
        (EDP(loss=NAN, error=NAN, samples=5), _rec(0.5, 0.2), (0.2, "train_edp.error")),
        (EDP(loss=NAN, error=None, samples=5), _rec(0.5, None), (0.5, "train_edp.loss")),
        (EDP(loss=NAN, error=NAN, samples=5), _rec(float("inf"), NAN), (None, None)),
        (None, _rec(0.5, 0.25), (0.25, "train_edp.error")),
        # an unavailable validation record ends the walk: training values do not stand in
        (EDP(loss=NAN, error=None, samples=0), _rec(0.5, 0.2), (None, None)),
        (EDP(loss=None, error=None, samples=4), _rec(0.5, 0.2), (None, None)),
    ],
)
def test_selection_walks_val_error_val_loss_train_error_train_loss(val, train, expected):
    assert selection_signal(val, train) == expected


class Poisoned:
    """A re-iterable loader whose epochs after the first check yield NaN features."""

    def __init__(self, X, y, clean_iters=1):
        self.X, self.y, self.calls, self.clean = X, y, 0, clean_iters

    def __iter__(self):
        self.calls += 1
        X = self.X if self.calls <= self.clean else torch.full_like(self.X, NAN)
        return iter([(X[i : i + 32], self.y[i : i + 32]) for i in range(0, len(X), 32)])


def test_epochs_without_a_finite_signal_skip_the_plateau_step(runs_root):
    X, _, _, _ = f.data(n_train=64)
    y = X[:, :1]
    sched = NNSchedulerParams(min_lr=1e-7, factor=0.5, patience=0, cooldown=0, threshold=0.0)
    model = f.model(net={"output_dim": 1}, loss=Losses.MEAN_SQUARED_ERROR)
    run = model.train(
        f.train_params(
            runs_root,
            n_epochs=4,
            train_loader=Poisoned(X, y),
            val_loader=Poisoned(X, y),
            data_id="poisoned",
            scheduler=sched,
            stop_on_nonfinite=False,  # the history of a NaN run is the point here
        )
    )
    assert all(e["signal"] is None for e in run.epochs)
    assert [e["lr"] for e in run.epochs] == [1e-2] * 4  # patience 0 would have halved it
    assert all(math.isnan(p.train_edp.loss) for p in run.idps)  # raw NaN kept as history
    best = __import__("nnx_lab").NNCheckpoint.load(run=run, type="best")
    assert best.sidecar["signal_unavailable"] is True
    assert best.epoch == 1


def test_a_finite_epoch_replaces_an_unavailable_best_baseline(runs_root):
    X, _, _, _ = f.data(n_train=64)
    y = X[:, :1]

    class Late(Poisoned):
        def __iter__(self):  # check pass clean, epoch 1 NaN, later epochs clean
            self.calls += 1
            X = torch.full_like(self.X, NAN) if self.calls == 2 else self.X
            return iter([(X[i : i + 32], self.y[i : i + 32]) for i in range(0, len(X), 32)])

    train = DataLoader(TensorDataset(X, y), batch_size=32)
    run = f.model(net={"output_dim": 1}, loss=Losses.MEAN_SQUARED_ERROR).train(
        f.train_params(
            runs_root, n_epochs=3, train_loader=train, val_loader=Late(X, y), data_id="late"
        )
    )
    signals = [(e["signal"], e["signal_source"]) for e in run.epochs]
    assert math.isnan(run.epochs[0]["val"]["loss"])  # the raw NaN stays in history
    assert signals[0][1] == "train_edp.loss"  # the NaN val loss is skipped, not the walk
    assert signals[1][1] == "val_edp.loss"
    assert signals[2][1] == "val_edp.loss"
