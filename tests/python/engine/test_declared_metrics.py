"""Declared metrics, the monitor and extra_metrics in training (§2.6).

``NNTrainParams(metrics=[MetricSpec(...)])`` is computed by the registry's accumulators
over the whole validation set and the whole training epoch; one ``MonitorSpec`` makes
BEST, ReduceLROnPlateau and ``EarlyStopping(monitor=...)`` take the same decision each
epoch; ``extra_metrics`` are called per training batch and once per validation pass;
everything survives ``NNRun.load`` and a stateful resume.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    Checkpoints,
    ConfigError,
    EarlyStopping,
    MetricSpec,
    MonitorRecord,
    MonitorSpec,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNRun,
    NNSchedulerParams,
    NNTrainParams,
    ResumeError,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _data(n=120, n_val=60, seed=4, noise=1.5):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(6, 3, generator=g)
    X = torch.randn(n, 6, generator=g)
    y = (X @ w + noise * torch.randn(n, 3, generator=g)).argmax(1)
    Xv = torch.randn(n_val, 6, generator=g)
    yv = (Xv @ w + noise * torch.randn(n_val, 3, generator=g)).argmax(1)
    return X, y, Xv, yv


def _model(dropout=0.0):
    return NNModel(
        NNParams(input_dim=6, output_dim=3, hidden_dims=[16], dropout_prob=dropout),
        NNModelParams(),
    )


def _params(root, X, y, Xv=None, yv=None, batch=20, shuffle=True, **kw):
    base = {
        "n_epochs": 2,
        "seed": 1,
        "train_loader": DataLoader(TensorDataset(X, y), batch_size=batch, shuffle=shuffle),
        "val_loader": None if Xv is None else DataLoader(TensorDataset(Xv, yv), batch_size=30),
        "optim": NNOptimParams(max_lr=3e-2),
        "runs_root": str(root),
        "progress": False,
        "checkpoint_every_s": 0,
    }
    return NNTrainParams(**{**base, **kw})


def _empty(root):
    return not root.exists() or not any(root.iterdir())


# -- values ---------------------------------------------------------------------------------
def _auroc_by_pairs(scores: np.ndarray, positive: np.ndarray) -> float:
    pos, neg = scores[positive], scores[~positive]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return wins / (len(pos) * len(neg))


def test_declared_validation_metrics_equal_hand_computed_ones(tmp_path):
    X, y, Xv, yv = _data()
    model = _model()
    specs = [
        MetricSpec("nll"),
        MetricSpec("accuracy"),
        MetricSpec("brier"),
        MetricSpec("f1_weighted"),
        MetricSpec("auroc"),
        MetricSpec("ece", bins=5),
    ]
    run = model.train(_params(tmp_path, X, y, Xv, yv, metrics=specs))
    val = run.idps[-1].val_edp  # the last validation pass saw the final weights
    logits = model.predict(Xv).logits.double()
    logp = torch.log_softmax(logits, 1).numpy()
    p = np.exp(logp)
    t = yv.numpy()
    onehot = np.eye(3)[t]
    pred = p.argmax(1)
    by_hand = {
        "nll": -logp[np.arange(len(t)), t].mean(),
        "accuracy": (pred == t).mean(),
        "brier": ((p - onehot) ** 2).sum(1).mean(),
    }
    f1s, support = [], []
    for c in range(3):
        tp = ((pred == c) & (t == c)).sum()
        prec = tp / max((pred == c).sum(), 1)
        rec = tp / max((t == c).sum(), 1)
        f1s.append(0.0 if prec + rec == 0 else 2 * prec * rec / (prec + rec))
        support.append((t == c).sum())
    by_hand["f1_weighted"] = float(np.dot(f1s, support) / sum(support))
    by_hand["auroc"] = np.mean([_auroc_by_pairs(logp[:, c], t == c) for c in range(3)])
    conf = p.max(1)
    bins = np.clip(np.ceil(conf * 5).astype(int) - 1, 0, 4)
    by_hand["ece(bins=5)"] = sum(
        abs((pred[bins == b] == t[bins == b]).sum() - conf[bins == b].sum()) for b in range(5)
    ) / len(t)
    assert set(val.metrics) == set(by_hand)
    for key, value in by_hand.items():
        assert val.metrics[key] == pytest.approx(value, rel=1e-6, abs=1e-9), key
    assert val.accuracy == pytest.approx(val.metrics["accuracy"])
    assert val.loss == pytest.approx(val.metrics["nll"], rel=1e-6)
    # evaluate() computes the same declared metrics: over the validation pass's own
    # batches, to the last bit the float64 sums allow; over other batch shapes, to the
    # float32 logits' precision (a matmul's rounding depends on the batch's shape on
    # some CPUs)
    same = model.evaluate(DataLoader(TensorDataset(Xv, yv), batch_size=30), specs)
    assert same.metrics == pytest.approx(val.metrics, rel=1e-12)
    again = model.evaluate(DataLoader(TensorDataset(Xv, yv), batch_size=7), specs)
    assert again.metrics == pytest.approx(val.metrics, rel=1e-6)


def test_the_training_summary_has_whole_epoch_denominators(tmp_path):
    X, y, Xv, yv = _data(n=70)  # batches of 20, 20, 20 and 10: unequal weights
    model = _model()
    run = model.train(
        _params(
            tmp_path, X, y, Xv, yv, n_epochs=1, metrics=[MetricSpec("accuracy"), MetricSpec("nll")]
        )
    )
    steps = [idp.train_edp for idp in run.idps]
    assert [s.samples for s in steps] == [20, 20, 20, 10]
    summary = run.idps[-1].train_summary
    pooled = sum(s.accuracy * s.samples for s in steps) / 70
    mean_of_ratios = float(np.mean([s.accuracy for s in steps]))
    assert pooled != pytest.approx(mean_of_ratios)  # the fixture can tell them apart
    assert summary.metrics["accuracy"] == pytest.approx(pooled, abs=1e-12)
    assert summary.accuracy == pytest.approx(pooled, abs=1e-12)
    weighted_loss = sum(s.loss * s.samples for s in steps) / 70
    assert summary.metrics["nll"] == pytest.approx(weighted_loss, rel=1e-6)
    assert summary.loss == pytest.approx(weighted_loss, rel=1e-9)
    assert summary.samples == 70
    assert run.idps[0].train_summary is None  # only an epoch's last step holds it


# -- one decision ---------------------------------------------------------------------------
def _decisions(values, min_delta):
    """By hand: the monitor's statuses for these higher-is-better values."""
    best, out = None, []
    for v in values:
        if v is None or not math.isfinite(v):
            out.append("unavailable")
        elif best is None or v > best + min_delta:
            best = v
            out.append("improved")
        else:
            out.append("no_improvement")
    return out


def test_the_decision_rule_lower_or_higher_by_more_than_min_delta():
    from nnx_lab.engine.selection import MonitorState

    lower = MonitorState(MonitorSpec("nll", min_delta=0.1))
    seen = [lower.observe(v) for v in (1.0, 0.95, None, 0.85, float("nan"), 0.9, 0.84)]
    assert [r.status for r in seen] == [
        "improved", "no_improvement", "unavailable", "improved",
        "unavailable", "no_improvement", "no_improvement",
    ]  # fmt: skip
    assert [r.bad_epochs for r in seen] == [0, 1, 1, 0, 0, 1, 2]
    assert [r.best for r in seen] == [1.0, 1.0, 1.0, 0.85, 0.85, 0.85, 0.85]
    higher = MonitorState(MonitorSpec("f1", min_delta=0.05))
    decisions = [higher.observe(v).improved for v in (0.5, 0.54, 0.56, 0.6)]
    assert decisions == [True, False, True, False]
    assert higher.state_dict()["improvements"] == 2


def test_one_monitor_drives_best_the_scheduler_and_early_stopping(tmp_path):
    X, y, Xv, yv = _data()
    monitor = MonitorSpec("accuracy", min_delta=0.02)  # higher is better
    stopper = EarlyStopping(monitor=monitor, patience=3)
    run = _model().train(
        _params(
            tmp_path,
            X,
            y,
            Xv,
            yv,
            n_epochs=15,
            scheduler=NNSchedulerParams(factor=0.5, patience=1),
            monitor=monitor,
        ),
        callbacks=[stopper],
    )
    epochs = run.epochs
    values = [e["val"]["accuracy"] for e in epochs]
    statuses = [e["selection"]["status"] for e in epochs]
    assert statuses == _decisions(values, 0.02)
    assert {"improved", "no_improvement"} <= set(statuses)
    # a gain within min_delta is no improvement (the fixture has one)
    assert any(
        s == "no_improvement" and v > max(values[:i])
        for i, (s, v) in enumerate(zip(statuses, values, strict=True))
        if i
    )
    # BEST: the epochs that became BEST are the improved ones, and the checkpoint is the last
    assert [e["improved"] for e in epochs] == [s == "improved" for s in statuses]
    last_improved = max(i + 1 for i, s in enumerate(statuses) if s == "improved")
    best = NNCheckpoint.load(run=run.id, type=Checkpoints.BEST, runs_root=tmp_path)
    assert best.epoch == last_improved
    assert run.metadata["best"]["value"] == values[last_improved - 1]
    assert run.metadata["best"]["source"] == "val_edp.accuracy"
    # the plateau scheduler: a reduction once more than `patience` epochs in a row did not
    # improve (counted afresh after each reduction), as ReduceLROnPlateau counts
    lr, bad, expected = 3e-2, 0, []
    for s in statuses:
        bad = 0 if s == "improved" else bad + 1
        if bad > 1:
            lr, bad = lr * 0.5, 0
        expected.append(lr)
    assert [e["lr"] for e in epochs] == pytest.approx(expected)
    assert expected[-1] < 3e-2  # the fixture reduces at least once
    # EarlyStopping: `patience` epochs in a row without improvement end the run
    run_of_bad, stop_at = 0, None
    for epoch, s in enumerate(statuses, start=1):
        run_of_bad = 0 if s == "improved" else run_of_bad + 1
        if run_of_bad == 3:
            stop_at = epoch
            break
    assert stopper.stopped_epoch == stop_at == len(epochs) < 15
    assert run.metadata["stop_reason"].startswith("early stopping")
    # and it is not what §2.11's default would have chosen here
    errors = [e["val"]["error"] for e in epochs]
    assert errors.index(min(errors)) + 1 != last_improved


def test_a_monitor_on_the_training_epoch_reads_the_whole_epoch_summary(tmp_path):
    X, y, _, _ = _data()
    monitor = MonitorSpec("nll", split="train")
    run = _model().train(
        _params(tmp_path, X, y, n_epochs=3, metrics=[MetricSpec("nll")], monitor=monitor)
    )
    for idp in run.idps:
        if idp.selection is None:
            continue
        assert isinstance(idp.selection, MonitorRecord)
        assert idp.selection.value == idp.train_summary.metrics["nll"]
        assert (idp.selection.split, idp.selection.mode) == ("train", "min")
    assert sum(i.selection is not None for i in run.idps) == 3


def test_an_undefined_metric_is_unavailable_and_moves_nothing(tmp_path):
    """AUROC of a validation set with one class is undefined: no decision that epoch."""
    X, y, Xv, _ = _data()
    yv = torch.zeros(len(Xv), dtype=torch.long)
    monitor = MonitorSpec("auroc")
    stopper = EarlyStopping(monitor=monitor, patience=1)
    with pytest.warns(RuntimeWarning, match="no finite value"):
        run = _model().train(
            _params(
                tmp_path,
                X,
                y,
                Xv,
                yv,
                n_epochs=3,
                metrics=[MetricSpec("auroc")],
                monitor=monitor,
                scheduler=NNSchedulerParams(patience=0, factor=0.5),
            ),
            callbacks=[stopper],
        )
    assert [e["selection"]["status"] for e in run.epochs] == ["unavailable"] * 3
    assert run.idps[-1].val_edp.metrics["auroc"] is None
    assert [e["lr"] for e in run.epochs] == [3e-2] * 3  # the scheduler skipped every epoch
    assert stopper.stopped_epoch is None
    assert [e["improved"] for e in run.epochs] == [False] * 3
    # the first epoch is kept as BEST's baseline (§2.11)
    best = NNCheckpoint.load(run=run.id, type=Checkpoints.BEST, runs_root=tmp_path)
    assert best.epoch == 1


# -- extra_metrics --------------------------------------------------------------------------
def test_extra_metrics_are_called_per_batch_and_once_per_validation_pass(tmp_path):
    X, y, Xv, yv = _data(n=40, n_val=20)
    y = y.clone()
    y[16:32] = -100  # the second batch: every target ignored
    y[3] = -100  # one ignored target in the first batch
    calls = []

    def spy(y_true, y_pred):
        calls.append((np.array(y_true), np.array(y_pred)))
        return float(len(calls))

    model = _model()
    initial = model.predict(X[:16]).classes.numpy()
    run = model.train(
        _params(tmp_path, X, y, Xv, yv, batch=16, shuffle=False, extra_metrics={"spy": spy})
    )
    # per epoch: batch 1 (15 scored rows), batch 3 (8 rows), then validation (20 rows)
    assert [len(t) for t, _ in calls] == [15, 8, 20, 15, 8, 20]
    keep = np.ones(16, dtype=bool)
    keep[3] = False
    assert np.array_equal(calls[0][0], y[:16].numpy()[keep])  # truth first
    assert np.array_equal(calls[0][1], initial[keep])  # then the decoded predictions
    assert np.array_equal(calls[1][0], y[32:].numpy())
    assert np.array_equal(calls[2][0], yv.numpy())
    assert np.array_equal(calls[5][1], model.predict(Xv).classes.numpy())
    assert calls[0][1].dtype.kind == "i"  # class labels, never probabilities
    steps = [idp.train_edp for idp in run.idps]
    want = [{"spy": 1.0}, {}, {"spy": 2.0}, {"spy": 4.0}, {}, {"spy": 5.0}]
    assert [s.extra for s in steps] == want
    assert steps[1].loss is None  # no metrics at all for the all-ignored batch
    vals = [idp.val_edp for idp in run.idps if idp.val_edp is not None]
    assert [v.extra for v in vals] == [{"spy": 3.0}, {"spy": 6.0}]
    loaded = NNRun.load(run.id, runs_root=tmp_path)
    assert [i.train_edp.extra for i in loaded.idps] == [s.extra for s in steps]
    assert [i.val_edp.extra for i in loaded.idps if i.val_edp] == [v.extra for v in vals]
    # evaluate(): once, on the aggregate
    calls.clear()
    val_loader = DataLoader(TensorDataset(Xv, yv), batch_size=6)
    edp = model.evaluate(val_loader, extra_metrics={"spy": spy})
    assert [len(t) for t, _ in calls] == [20]
    assert edp.extra == {"spy": 1.0}


def test_an_extra_metric_that_returns_no_number_fails_the_run_naming_it(tmp_path):
    X, y, _, _ = _data(n=20)
    with pytest.raises(TypeError, match=r"extra_metrics\['bad'\] returned str"):
        _model().train(_params(tmp_path, X, y, extra_metrics={"bad": lambda a, b: "high"}))


# -- refusals -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"metrics": [MetricSpec("mse")]}, "NNTrainParams.metrics"),
        ({"monitor": MonitorSpec("nll")}, "NNTrainParams.monitor"),
        ({"monitor": MonitorSpec("loss"), "val_loader": None}, "NNTrainParams.monitor"),
    ],
)
def test_metrics_and_monitors_the_run_cannot_record_are_refused_before_any_side_effect(
    tmp_path, change, field
):
    X, y, Xv, yv = _data(n=20, n_val=10)
    params = _params(tmp_path, X, y, Xv, yv).replace(**change)
    with pytest.raises(ConfigError) as err:
        _model().train(params)
    assert field in str(err.value)
    assert " is invalid: " in str(err.value)
    assert _empty(tmp_path)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: MonitorSpec("accuracy", mode="min"), "higher-is-better: pass mode='max'"),
        (lambda: MonitorSpec("nope"), "registered metrics"),
        (lambda: MonitorSpec("nll", min_delta=-1), "MonitorSpec.min_delta"),
        (lambda: MonitorSpec("nll", split="test"), "MonitorSpec.split"),
        (lambda: NNTrainParams(extra_metrics={"x": 3}), r"extra_metrics\['x'\]"),
        (lambda: NNTrainParams(metrics=[MetricSpec("nll"), MetricSpec("nll")]), "once"),
        (lambda: NNTrainParams(metrics=["nll", 3]), "NNTrainParams.metrics"),
        (lambda: NNTrainParams(monitor="nll"), "NNTrainParams.monitor"),
    ],
)
def test_bad_declarations_are_refused_where_they_are_typed(make, match):
    with pytest.raises(ConfigError, match=match):
        make()


def test_early_stopping_takes_the_monitors_min_delta_not_its_own():
    with pytest.raises(ValueError, match="min_delta"):
        EarlyStopping(monitor=MonitorSpec("nll"), min_delta=0.1)


# -- identity, persistence, resume ----------------------------------------------------------
def test_declarations_enter_the_run_id_only_when_made(tmp_path):
    X, y, Xv, yv = _data(n=20, n_val=10)
    model = _model()
    plain = _params(tmp_path, X, y, Xv, yv)
    assert set(model.run_config(plain)["train"]) == {
        "n_epochs", "seed", "optim", "scheduler", "accumulation_steps", "resume",
    }  # fmt: skip
    ids = {
        model.expected_run_id(plain),
        model.expected_run_id(plain.replace(metrics=[MetricSpec("nll")])),
        model.expected_run_id(plain.replace(metrics=[MetricSpec("ece", bins=5)])),
        model.expected_run_id(plain.replace(monitor=MonitorSpec("loss"))),
        model.expected_run_id(plain.replace(monitor=MonitorSpec("loss", min_delta=0.1))),
        model.expected_run_id(plain.replace(extra_metrics={"a": lambda t, p: 0.0})),
    }
    assert len(ids) == 6


def test_everything_is_in_the_log_and_reloads(tmp_path):
    X, y, Xv, yv = _data(n=40, n_val=20)
    run = _model().train(
        _params(
            tmp_path,
            X,
            y,
            Xv,
            yv,
            metrics=[MetricSpec("nll"), MetricSpec("ece", bins=4)],
            monitor=MonitorSpec("nll"),
        )
    )
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    epoch = next(x for x in lines if x["event"] == "epoch_ended")
    assert set(epoch["val"]["metrics"]) == {"nll", "ece(bins=4)"}
    assert set(epoch["train"]["metrics"]) == {"nll", "ece(bins=4)"}
    assert epoch["selection"]["metric"] == "nll"
    loaded = NNRun.load(run.id, runs_root=tmp_path)
    assert loaded.idps == run.idps
    last = loaded.idps[-1]
    assert isinstance(last.selection, MonitorRecord)
    assert last.selection == run.idps[-1].selection
    assert last.selection.value == last.val_edp.metrics["nll"]
    assert last.train_summary.metrics["ece(bins=4)"] is not None
    # a record written without any of it reads as before: empty, None
    plain = _model().train(_params(tmp_path / "plain", X, y, Xv, yv))
    old = NNRun.load(plain.id, runs_root=tmp_path / "plain").idps[-1]
    assert (old.selection, old.val_edp.metrics, old.val_edp.extra) == (None, {}, {})
    assert old.train_summary.metrics == {}


def _resumable(root, n_epochs, **kw):
    X, y, Xv, yv = _data()
    monitor = MonitorSpec("accuracy", min_delta=0.02)
    params = _params(
        root,
        X,
        y,
        Xv,
        yv,
        n_epochs=n_epochs,
        scheduler=NNSchedulerParams(factor=0.5, patience=1),
        metrics=[MetricSpec("nll"), MetricSpec("auroc")],
        monitor=monitor,
        **kw,
    )
    return params, EarlyStopping(monitor=monitor, patience=4)


def test_a_resumed_run_makes_the_uninterrupted_runs_decisions(tmp_path):
    full_params, full_stop = _resumable(tmp_path, 8)
    full_model = _model(dropout=0.1)
    full = full_model.train(full_params, callbacks=[full_stop])
    first_params, first_stop = _resumable(tmp_path, 4)
    first = _model(dropout=0.1).train(first_params, callbacks=[first_stop])
    rest_params, rest_stop = _resumable(tmp_path, 4, resume_from_run_id=first.id)
    model = _model(dropout=0.1)
    resumed = model.train(rest_params, callbacks=[rest_stop])
    strip = ("seconds", "time")
    assert [{k: v for k, v in e.items() if k not in strip} for e in resumed.epochs] == [
        {k: v for k, v in e.items() if k not in strip} for e in full.epochs
    ]
    assert [i.selection for i in resumed.idps] == [i.selection for i in full.idps]
    assert [i.val_edp for i in resumed.idps] == [i.val_edp for i in full.idps]
    assert rest_stop.stopped_epoch == full_stop.stopped_epoch
    assert rest_stop.counter == full_stop.counter
    a = NNCheckpoint.load_training_state(run=full.id, type=Checkpoints.LAST, runs_root=tmp_path)
    b = NNCheckpoint.load_training_state(run=resumed.id, type=Checkpoints.LAST, runs_root=tmp_path)
    assert a["monitor"] == b["monitor"]
    assert a["monitor"]["improvements"] >= 1
    for p, q in zip(full_model.net.parameters(), model.net.parameters(), strict=True):
        assert torch.equal(p, q)
    # a stateful resume under another monitor is refused, before its directory exists
    other, _ = _resumable(tmp_path, 2, resume_from_run_id=first.id)
    other = other.replace(monitor=MonitorSpec("nll"), metrics=[MetricSpec("nll")])
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ResumeError, match="monitor mismatch"):
        _model(dropout=0.1).train(other)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


class _StopAt:
    def __init__(self, step):
        self.step, self.control = step, None

    def on_attach(self, control):
        self.control = control

    def on_step_ended(self, event):
        if event.step == self.step:
            self.control.request_stop("test stop")


def test_a_mid_epoch_resume_continues_the_epochs_sums(tmp_path):
    """Stopped inside an epoch and resumed, the epoch's whole-epoch summary (declared
    metrics, AUROC's rows included) and the decision on it equal the uninterrupted run's."""
    X, y, _, _ = _data(n=100)

    def params(root, n_epochs, **kw):
        return _params(
            root,
            X,
            y,
            batch=20,
            n_epochs=n_epochs,
            metrics=[MetricSpec("nll"), MetricSpec("auroc")],
            monitor=MonitorSpec("auroc", split="train"),
            **kw,
        )

    full = _model().train(params(tmp_path / "full", 3))
    first = _model().train(params(tmp_path, 3), callbacks=[_StopAt(8)])  # epoch 2, batch 3
    assert first.status.value == "stopped"
    resumed = _model().train(params(tmp_path, 2, resume_from_run_id=first.id))
    strip = ("seconds", "time")
    epochs = [{k: v for k, v in e.items() if k not in strip} for e in resumed.epochs]
    assert epochs == [{k: v for k, v in e.items() if k not in strip} for e in full.epochs]
    assert resumed.idps[9].train_summary.samples == 100  # the resumed epoch: all of it


def test_streaming_eval_step_reports_what_evaluate_reports(tmp_path):
    """The built-in evaluator from counts and sums takes declared metrics and
    extra_metrics too, for a declared regression task with missing targets as well."""
    from nnx_lab import Losses, TaskSpec, streaming_eval_step

    X, y, Xv, yv = _data()
    runs = []
    for fn in (None, streaming_eval_step):
        runs.append(
            _model().train(
                _params(
                    tmp_path / str(fn is None),
                    X,
                    y,
                    Xv,
                    yv,
                    metrics=[MetricSpec("nll"), MetricSpec("auroc")],
                    extra_metrics={"n": lambda t, p: float(len(t))},
                ),
                eval_step_fn=fn,
            )
        )
    a, b = (r.idps[-1].val_edp for r in runs)
    assert b.metrics == pytest.approx(a.metrics, rel=1e-9)
    assert b.extra == a.extra == {"n": 60.0}
    assert b.loss == pytest.approx(a.loss, rel=1e-12)
    g = torch.Generator().manual_seed(3)
    Xr = torch.randn(40, 6, generator=g)
    yr = Xr[:, :1] * 2.0
    yr[7] = math.nan
    model = NNModel(
        NNParams(input_dim=6, output_dim=1, hidden_dims=[8]),
        NNModelParams(loss=Losses.MEAN_SQUARED_ERROR, task=TaskSpec.regression(1)),
    )
    loader = DataLoader(TensorDataset(Xr, yr), batch_size=16)
    want = model.evaluate(loader, [MetricSpec("mae")])
    got = streaming_eval_step(
        model.net, loader, model.loss_fn, model.task(), metrics=[MetricSpec("mae")]
    )
    assert (got.valid, got.samples) == (want.valid, want.samples) == (39, 40)
    assert got.metrics == pytest.approx(want.metrics, rel=1e-9)
    assert got.loss == pytest.approx(want.loss, rel=1e-9)
