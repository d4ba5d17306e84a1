"""Declared tasks (§2.5): ``TaskSpec.regression / multilabel / categorical``.

Regression and multilabel records carry the task's metrics and the count of valid
targets, never fabricated accuracy or F1; a NaN target is masked out of the loss and of
every metric alike (training, accumulation, evaluate); ``predict`` / ``predict_proba``
follow the task; the task enters the run id and the saved model parameters; a wrong
task, loss or output width is refused before anything exists.
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
    DataError,
    Losses,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNRun,
    NNTrainParams,
    Optims,
    TaskSpec,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# -- builders -------------------------------------------------------------------------------
def _regression_data(n=48, nan_rows=(3, 20)):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 4, generator=g)
    y = (X @ torch.tensor([1.0, -2.0, 0.5, 0.0])).unsqueeze(1) + 3.0
    for r in nan_rows:
        y[r] = math.nan
    return X, y


def _multilabel_data(n=48):
    g = torch.Generator().manual_seed(1)
    X = torch.randn(n, 4, generator=g)
    y = torch.stack([X[:, 0] > 0, X[:, 1] + X[:, 2] > 0, X[:, 3] > 0.5], dim=1).float()
    y[5, 1] = math.nan
    y[17, 0] = math.nan
    return X, y


def _model(task, loss, out, hidden=(8,), seed=0):
    return NNModel(
        NNParams(input_dim=4, output_dim=out, hidden_dims=list(hidden)),
        NNModelParams(loss=loss, task=task),
        init_seed=seed,
    )


def _params(root, X, y, val=None, batch=16, **kw):
    base = {
        "n_epochs": 2,
        "seed": 0,
        "train_loader": DataLoader(TensorDataset(X, y), batch_size=batch),
        "val_loader": None if val is None else DataLoader(TensorDataset(*val), batch_size=batch),
        "optim": NNOptimParams(name=Optims.SGD, max_lr=1e-2, momentum=0.0),
        "runs_root": str(root),
        "progress": False,
        "checkpoint_every_s": 0,
    }
    return NNTrainParams(**{**base, **kw})


def _nothing_written(root):
    return not root.exists() or not any(root.iterdir())


# -- TaskSpec itself ------------------------------------------------------------------------
def test_task_specs_say_what_they_declare_and_round_trip():
    cat = TaskSpec.categorical(3, ignore_index=-1)
    reg = TaskSpec.regression(2)
    ml = TaskSpec.multilabel(4, threshold=0.7)
    assert (cat.kind, cat.n_outputs, cat.ignore_index) == ("categorical", 3, -1)
    assert (reg.kind, reg.n_outputs) == ("regression", 2)
    assert (ml.kind, ml.threshold) == ("multilabel", 0.7)
    for spec in (cat, reg, ml):
        assert TaskSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    params = NNModelParams(loss=Losses.BINARY_CROSS_ENTROPY, task=ml)
    again = NNModelParams.from_json(json.loads(json.dumps(params.to_json())))
    assert again == params
    assert again.task == ml
    assert ml.logit_threshold == pytest.approx(math.log(0.7 / 0.3))
    # without a task, the saved parameters have no task key at all (run ids unchanged)
    assert "task" not in NNModelParams().to_json()


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: TaskSpec.categorical(1), "TaskSpec.categorical(n_classes): n"),
        (lambda: TaskSpec.regression(0), "TaskSpec.regression(n_outputs): n"),
        (lambda: TaskSpec.categorical(3, ignore_index=1), "ignore_index"),
        (lambda: TaskSpec.categorical(3, ignore_index=1.5), "ignore_index"),
        (lambda: TaskSpec.multilabel(2, threshold=1.0), "threshold"),
        (lambda: TaskSpec.multilabel(2, threshold=float("nan")), "threshold"),
        (lambda: TaskSpec("ordinal", 3), "TaskSpec.kind"),
        (lambda: TaskSpec("regression", 1, threshold=0.5), "threshold"),
        (lambda: NNModelParams(loss=Losses.CROSS_ENTROPY, task=TaskSpec.regression(1)), "task"),
        (
            lambda: NNModelParams(loss=Losses.MEAN_SQUARED_ERROR, task=TaskSpec.multilabel(2)),
            "task",
        ),
        (lambda: NNModelParams(loss=Losses.BINARY_CROSS_ENTROPY, task="regression"), "task"),
    ],
)
def test_bad_tasks_are_refused_naming_the_field_and_the_fix(make, field):
    with pytest.raises(ConfigError) as err:
        make()
    message = str(err.value)
    assert field in message
    assert message.split(" is invalid: ", 1)[1].strip()  # a fix follows the value


def test_a_task_over_another_output_width_is_refused_before_anything_exists(tmp_path):
    with pytest.raises(
        ConfigError, match=r"NNModelParams.task.*output_dim=2.*TaskSpec.regression\(2"
    ):
        _model(TaskSpec.regression(1), Losses.MEAN_SQUARED_ERROR, out=2)
    model = _model(TaskSpec.regression(1), Losses.MEAN_SQUARED_ERROR, out=1)
    with pytest.raises(ConfigError, match=r"model\.loss_fn"):
        model.loss_fn = Losses.CROSS_ENTROPY  # a categorical loss for a regression task
    assert _nothing_written(tmp_path)


def test_a_custom_loss_may_train_a_declared_task():
    model = _model(TaskSpec.regression(1), torch.nn.L1Loss(), out=1)
    assert model.task().kind == "regression"


# -- regression -----------------------------------------------------------------------------
def test_regression_records_carry_mse_mae_and_valid_counts_never_accuracy(tmp_path):
    X, y = _regression_data()
    model = _model(TaskSpec.regression(1), Losses.MEAN_SQUARED_ERROR, out=1)
    before = model.predict(X[:16]).classes  # the first step scores the initial weights
    run = model.train(_params(tmp_path, X, y, val=(X[:24], y[:24]), log_every=2))
    first = run.idps[0].train_edp
    keep = ~torch.isnan(y[:16, 0])
    diff = (before.double() - y[:16, 0].double())[keep]
    assert first.valid == 15  # row 3 is NaN
    assert first.metrics["mse"] == pytest.approx(float((diff**2).mean()), rel=1e-6)
    assert first.metrics["mae"] == pytest.approx(float(diff.abs().mean()), rel=1e-6)
    assert first.loss == pytest.approx(first.metrics["mse"], rel=1e-5)  # masked like the metric
    for idp in run.idps:
        edp = idp.train_edp
        assert (edp.accuracy, edp.error, edp.f1, edp.precision, edp.recall) == (None,) * 5
        assert set(edp.metrics) == {"mse", "mae"}
    val = run.idps[-1].val_edp
    assert (val.accuracy, val.error, val.f1) == (None, None, None)
    pred = model.predict(X[:24]).classes.double()
    keep = ~torch.isnan(y[:24, 0])
    d = (pred - y[:24, 0].double())[keep]
    assert (val.valid, val.samples) == (22, 24)
    assert val.metrics["mse"] == pytest.approx(float((d**2).mean()), rel=1e-6)
    assert val.metrics["mae"] == pytest.approx(float(d.abs().mean()), rel=1e-6)
    assert val.loss == pytest.approx(val.metrics["mse"], rel=1e-5)
    summary = run.idps[-1].train_summary
    assert (summary.valid, summary.samples) == (46, 48)
    assert summary.accuracy is None
    assert set(summary.metrics) == {"mse", "mae"}
    # the log holds it all and reads back
    assert NNRun.load(run.id, runs_root=tmp_path).idps == run.idps


def test_predict_gives_continuous_values_and_predict_proba_needs_no_spec(tmp_path):
    X, _ = _regression_data()
    model = _model(TaskSpec.regression(1), Losses.MEAN_SQUARED_ERROR, out=1)
    pred = model.predict(X)
    assert pred.classes.dtype.is_floating_point
    assert pred.classes.shape == (48,)
    assert torch.equal(pred.classes, pred.logits[:, 0])
    result = model.predict_proba(X)
    assert result.probabilities is None
    assert result.spec is None
    assert torch.equal(result.decoded, pred.classes)


def test_a_nan_target_trains_exactly_as_if_its_row_were_absent(tmp_path):
    """The masked loss averages over the valid targets: the same gradient as the batch
    without the NaN rows, in training, under accumulation and in evaluate()."""
    X, y = _regression_data(n=32, nan_rows=(2, 9, 30))
    keep = ~torch.isnan(y[:, 0])
    for accumulation in (1, 2):
        # one batch per step, so that the clean batches are the masked ones minus the NaN rows
        masked = _model(TaskSpec.regression(1), Losses.MEAN_SQUARED_ERROR, out=1)
        clean = _model(TaskSpec.regression(1), Losses.MEAN_SQUARED_ERROR, out=1)
        batches = [(X[i : i + 8], y[i : i + 8]) for i in range(0, 32, 8)]
        clean_batches = [
            (xb[~torch.isnan(yb[:, 0])], yb[~torch.isnan(yb[:, 0])]) for xb, yb in batches
        ]
        common = {
            "n_epochs": 2,
            "seed": 0,
            "optim": NNOptimParams(name=Optims.SGD, max_lr=5e-2, momentum=0.0),
            "accumulation_steps": accumulation,
            "progress": False,
        }
        a = masked.train(
            NNTrainParams(
                train_loader=batches,
                runs_root=str(tmp_path / "m"),
                overwrite_existing=True,
                **common,
            )
        )
        b = clean.train(
            NNTrainParams(
                train_loader=clean_batches,
                runs_root=str(tmp_path / "c"),
                overwrite_existing=True,
                **common,
            )
        )
        for (name, p), q in zip(
            masked.net.state_dict().items(), clean.net.state_dict().values(), strict=True
        ):
            assert torch.allclose(p, q, atol=1e-6), (accumulation, name)
        for ia, ib in zip(a.idps, b.idps, strict=True):
            assert ia.train_edp.loss == pytest.approx(ib.train_edp.loss, rel=1e-5)
            assert ia.train_edp.metrics["mse"] == pytest.approx(
                ib.train_edp.metrics["mse"], rel=1e-5
            )
            assert ia.train_edp.valid == ib.train_edp.valid
        assert all(math.isfinite(idp.train_edp.loss) for idp in a.idps)
    ev = masked.evaluate(list(zip(X.split(8), y.split(8), strict=True)))
    ev_clean = masked.evaluate([(X[keep], y[keep])])
    assert ev.valid == 29 == ev_clean.valid
    assert ev.loss == pytest.approx(ev_clean.loss, rel=1e-6)
    assert ev.metrics == pytest.approx(ev_clean.metrics, rel=1e-6)


def test_a_batch_whose_targets_are_all_missing_has_no_loss_and_no_metrics(tmp_path):
    X, y = _regression_data(n=32, nan_rows=range(8, 16))
    model = _model(TaskSpec.regression(1), Losses.MEAN_SQUARED_ERROR, out=1)
    run = model.train(_params(tmp_path, X, y, batch=8, n_epochs=1))
    empty = run.idps[1].train_edp
    assert (empty.loss, empty.valid, empty.metrics) == (None, 0, {})
    assert all(p.isfinite().all() for p in model.net.parameters())
    others = [i.train_edp for i in run.idps if i is not run.idps[1]]
    expected = sum(e.loss * e.valid for e in others) / sum(e.valid for e in others)
    assert run.idps[-1].train_summary.loss == pytest.approx(expected, rel=1e-6)


def test_inf_targets_and_integer_targets_are_refused_up_front(tmp_path):
    X, y = _regression_data()
    y[4] = math.inf
    model = _model(TaskSpec.regression(1), Losses.MEAN_SQUARED_ERROR, out=1)
    with pytest.raises(DataError, match="±inf"):
        model.train(_params(tmp_path, X, y))
    X, y = _multilabel_data()
    y[0, 0] = 2.0
    model = _model(TaskSpec.multilabel(3), Losses.BINARY_CROSS_ENTROPY, out=3)
    with pytest.raises(DataError, match="other than 0, 1 and NaN"):
        model.train(_params(tmp_path, X, y))
    assert _nothing_written(tmp_path)


# -- multilabel -----------------------------------------------------------------------------
def _multilabel_by_hand(pred: np.ndarray, y: np.ndarray) -> dict[str, float]:
    valid = ~np.isnan(y)
    yy = np.where(valid, y, 0).astype(int)
    right = (pred == yy) | ~valid
    rows = valid.any(1)
    tp = ((pred == 1) & (yy == 1) & valid).sum(0)
    fp = ((pred == 1) & (yy == 0) & valid).sum(0)
    fn = ((pred == 0) & (yy == 1) & valid).sum(0)
    f1_per = np.where(2 * tp + fp + fn > 0, 2 * tp / np.maximum(2 * tp + fp + fn, 1), 0.0)
    present = (tp + fp + fn) > 0
    return {
        "subset_accuracy": (right.all(1) & rows).sum() / rows.sum(),
        "hamming_loss": ((pred != yy) & valid).sum() / valid.sum(),
        "f1_micro": 2 * tp.sum() / (2 * tp.sum() + fp.sum() + fn.sum()),
        "f1": (f1_per * present).sum() / present.sum(),
    }


def test_multilabel_metrics_equal_hand_computed_ones_at_the_declared_threshold(tmp_path):
    X, y = _multilabel_data()
    task = TaskSpec.multilabel(3, threshold=0.6)
    model = _model(task, Losses.BINARY_CROSS_ENTROPY, out=3)
    run = model.train(
        _params(tmp_path, X, y, val=(X, y), n_epochs=3, optim=NNOptimParams(max_lr=5e-2))
    )
    logits = model.predict(X).logits
    decoded = model.predict(X).classes
    assert torch.equal(decoded, (torch.sigmoid(logits) >= 0.6).long())  # not 0.5
    val = run.idps[-1].val_edp
    want = _multilabel_by_hand(decoded.numpy(), y.numpy())
    assert set(val.metrics) == set(want)
    for key, value in want.items():
        assert val.metrics[key] == pytest.approx(value, abs=1e-12), key
    assert val.valid == 48 * 3 - 2
    assert (val.accuracy, val.error, val.precision, val.recall, val.f1) == (None,) * 5
    # the masked BCE equals the mean over the valid elements
    bce = torch.nn.functional.binary_cross_entropy_with_logits(
        logits.double(), torch.nan_to_num(y).double(), reduction="none"
    )[~torch.isnan(y)]
    assert val.loss == pytest.approx(float(bce.mean()), rel=1e-5)
    # predict_proba derives a bernoulli spec from the task and decodes at its threshold
    result = model.predict_proba(X)
    assert result.spec.kind == "bernoulli"
    assert torch.equal(result.decoded, decoded)
    assert torch.allclose(result.probabilities, torch.sigmoid(logits))


def test_a_categorical_task_records_valid_counts_and_its_own_ignore_index(tmp_path):
    g = torch.Generator().manual_seed(2)
    X = torch.randn(32, 4, generator=g)
    y = (X[:, 0] > 0).long() + (X[:, 1] > 0).long()
    y[:8] = -1  # the task's ignore_index, not torch's -100
    model = _model(TaskSpec.categorical(3, ignore_index=-1), Losses.CROSS_ENTROPY, out=3)
    run = model.train(_params(tmp_path, X, y, batch=8, n_epochs=1, val=(X, y)))
    first = run.idps[0].train_edp
    assert (first.loss, first.valid, first.accuracy) == (None, 0, None)  # all ignored
    assert [i.train_edp.valid for i in run.idps[1:]] == [8, 8, 8]
    assert run.idps[-1].val_edp.valid == 24
    pred = model.predict(X).classes
    assert run.idps[-1].val_edp.accuracy == pytest.approx(
        float((pred[8:] == y[8:]).double().mean())
    )
    assert model.predict_proba(X).spec.kind == "categorical"


# -- identity and records -------------------------------------------------------------------
def test_the_task_enters_the_run_id_and_a_task_less_id_is_unchanged(tmp_path):
    X, y = _regression_data(nan_rows=())
    plain = NNModel(
        NNParams(input_dim=4, output_dim=1), NNModelParams(loss=Losses.MEAN_SQUARED_ERROR)
    )
    declared = NNModel(
        NNParams(input_dim=4, output_dim=1),
        NNModelParams(loss=Losses.MEAN_SQUARED_ERROR, task=TaskSpec.regression(1)),
    )
    params = _params(tmp_path, X, y)
    config = plain.run_config(params)
    assert "task" not in config["model"]
    assert set(config["train"]) == {
        "n_epochs", "seed", "optim", "scheduler", "accumulation_steps", "resume",
    }  # fmt: skip
    assert set(config["model"]) == {"net", "device", "loss", "precision", "mixed_precision"}
    assert declared.run_config(params)["model"]["task"] == {"kind": "regression", "n_outputs": 1}
    assert plain.expected_run_id(params) != declared.expected_run_id(params)
    other = NNModel(
        NNParams(input_dim=4, output_dim=1),
        NNModelParams(loss=Losses.BINARY_CROSS_ENTROPY, task=TaskSpec.multilabel(1, threshold=0.3)),
    )
    third = NNModel(
        NNParams(input_dim=4, output_dim=1),
        NNModelParams(loss=Losses.BINARY_CROSS_ENTROPY, task=TaskSpec.multilabel(1, threshold=0.4)),
    )
    assert other.expected_run_id(params) != third.expected_run_id(params)


def test_checkpoints_carry_the_task_and_a_reloaded_model_keeps_it(tmp_path):
    X, y = _multilabel_data()
    task = TaskSpec.multilabel(3, threshold=0.6)
    model = _model(task, Losses.BINARY_CROSS_ENTROPY, out=3)
    run = model.train(_params(tmp_path, X, y))
    ckpt = NNCheckpoint.load(run=run.id, type=Checkpoints.LAST, runs_root=tmp_path)
    assert ckpt.model_params.task == task
    again = NNModel.from_checkpoint(ckpt)
    assert again.params.task == task
    assert torch.equal(again.predict(X).classes, model.predict(X).classes)
    assert NNRun.load(run.id, runs_root=tmp_path).model_params.task == task


def test_a_task_less_log_line_is_written_as_before(tmp_path):
    X = torch.randn(16, 4)
    y = torch.randint(0, 3, (16,))
    model = NNModel(NNParams(input_dim=4, output_dim=3))
    run = model.train(_params(tmp_path, X, y, n_epochs=1))
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    step = next(x for x in lines if x["event"] == "step")
    assert list(step) == [
        "event", "step", "epoch", "batch", "lr", "samples", "loss",
        "error", "accuracy", "precision", "recall", "f1",
    ]  # fmt: skip
    epoch = next(x for x in lines if x["event"] == "epoch_ended")
    assert "selection" not in epoch
    assert set(epoch["train"]) == {
        "loss",
        "samples",
        "error",
        "accuracy",
        "precision",
        "recall",
        "f1",
    }


def test_a_run_with_a_task_and_a_monitor_reads_back_without_torch(tmp_path):
    """The Jupyter server reads runs without torch: a declared task, declared metrics and
    a monitor's records must not change that."""
    import subprocess
    import sys
    from pathlib import Path

    from nnx_lab import MetricSpec, MonitorSpec

    X, y = _regression_data()
    model = _model(TaskSpec.regression(1), Losses.MEAN_SQUARED_ERROR, out=1)
    run = model.train(
        _params(
            tmp_path,
            X,
            y,
            val=(X, y),
            metrics=[MetricSpec("mae")],
            monitor=MonitorSpec("mae"),
        )
    )
    code = (
        "import sys\n"
        "from nnx_lab.engine.run_handle import NNRun\n"
        f"run = NNRun.load({run.id!r}, runs_root={str(tmp_path)!r})\n"
        "assert run.model_params.task.kind == 'regression'\n"
        "assert run.idps[-1].selection.metric == 'mae'\n"
        "assert 'mse' in run.idps[-1].val_edp.metrics\n"
        "print('torch' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_the_decode_is_argmax_ties_nans_and_infinities_included(dtype):
    from nnx_lab.engine.tasks import argmax_last

    g = torch.Generator().manual_seed(0)
    # few distinct values: many rows hold their maximum more than once
    x = torch.randint(-3, 4, (16, 9, 7), generator=g).to(dtype)
    x[0, 0, 4] = float("nan")
    x[0, 1, :] = float("nan")
    x[1, 0, 2] = float("inf")
    x[1, 0, 5] = float("inf")
    x[1, 1, :] = float("-inf")
    x[2, 2, 6] = float("nan")
    x[2, 2, 1] = float("inf")
    for view in (x, x.transpose(0, 1), x[:, :, :5], x.reshape(-1, 7)):
        got = argmax_last(view)
        assert got.dtype == torch.int64
        assert torch.equal(got, view.argmax(dim=-1))
    assert torch.equal(argmax_last(x[0, 0]), x[0, 0].argmax(dim=-1))  # one row
