"""TrainingMonitor with declared tasks, declared metrics and a monitor (§2.5, §2.6): the
epoch series holds the declared metrics as columns and the monitor's value per epoch,
and the traits tell the view the task and the monitored metric, live and from a log."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    Losses,
    MetricSpec,
    MonitorSpec,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
    TaskSpec,
)
from nnx_lab.widgets import TrainingMonitor

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _regression_run(root, monitor, min_delta=0.01):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(64, 4, generator=g)
    y = (X @ torch.tensor([1.0, -1.0, 0.5, 2.0])).unsqueeze(1)
    y[5] = math.nan
    model = NNModel(
        NNParams(input_dim=4, output_dim=1, hidden_dims=[8]),
        NNModelParams(loss=Losses.MEAN_SQUARED_ERROR, task=TaskSpec.regression(1)),
    )
    params = NNTrainParams(
        n_epochs=3,
        train_loader=DataLoader(TensorDataset(X, y), batch_size=16),
        val_loader=DataLoader(TensorDataset(X[:32], y[:32]), batch_size=16),
        optim=NNOptimParams(max_lr=1e-2),
        metrics=[MetricSpec("mae")],
        monitor=MonitorSpec("mae", min_delta=min_delta),
        runs_root=str(root),
        progress=False,
    )
    return model.train(params, callbacks=[monitor])


def test_the_monitor_shows_task_metrics_and_the_decision_per_epoch(tmp_path):
    monitor = TrainingMonitor()
    try:
        run = _regression_run(tmp_path, monitor)
        assert (monitor.task_kind, monitor.monitor_metric, monitor.monitor_mode) == (
            "regression",
            "val.mae",
            "min",
        )
        rows = monitor.epoch_rows
        assert len(rows) == 3
        for row, epoch in zip(rows, run.epochs, strict=True):
            assert row["val"]["mse"] == pytest.approx(epoch["val"]["metrics"]["mse"], rel=1e-6)
            assert row["val"]["mae"] == pytest.approx(epoch["val"]["metrics"]["mae"], rel=1e-6)
            assert row["train"]["mse"] == pytest.approx(epoch["train"]["metrics"]["mse"], rel=1e-6)
            assert "valid" not in row["val"]
            assert "accuracy" not in row["val"]  # None is never shown as a value
            assert row["monitor"] == pytest.approx(epoch["selection"]["value"], rel=1e-6)
            assert row["improved"] == epoch["selection"]["improved"]
    finally:
        monitor.close()
    # the same from the log, as a reopened notebook shows it
    replay = TrainingMonitor.from_run(run.id, runs_root=tmp_path, follow=False)
    try:
        assert replay.task_kind == "regression"
        assert replay.monitor_metric == "val.mae"
        assert replay.epoch_rows == rows
    finally:
        replay.close()


def test_a_run_without_a_task_or_monitor_has_empty_labels(tmp_path):
    X = torch.randn(32, 4)
    y = torch.randint(0, 3, (32,))
    model = NNModel(NNParams(input_dim=4, output_dim=3))
    monitor = TrainingMonitor()
    try:
        model.train(
            NNTrainParams(
                train_loader=DataLoader(TensorDataset(X, y), batch_size=16),
                runs_root=str(tmp_path),
                progress=False,
            ),
            callbacks=[monitor],
        )
        assert (monitor.task_kind, monitor.monitor_metric, monitor.monitor_mode) == ("", "", "")
        assert "monitor" not in monitor.epoch_rows[0]
    finally:
        monitor.close()


def test_compared_runs_hold_their_declared_metrics_and_decisions(tmp_path):
    """A comparison's lanes are filled as the single-run monitor is: declared metrics
    are flattened into their own columns and the monitor's value has its column."""
    runs = []
    for min_delta in (0.01, 0.5):  # two runs: the monitor enters the run id
        m = TrainingMonitor()
        try:
            runs.append(_regression_run(tmp_path, m, min_delta))
        finally:
            m.close()
    cmp = TrainingMonitor.compare([r.id for r in runs], runs_root=tmp_path)
    try:
        for lane, run in zip(cmp._lanes, runs, strict=True):
            assert lane.epochs.has("val.mae")
            assert "val.valid" not in lane.epochs.values  # a count, not a metric
            mae = [e["val"]["metrics"]["mae"] for e in run.epochs]
            assert lane.epochs.column("val.mae").tolist() == pytest.approx(mae, rel=1e-6)
            picked = [e["selection"]["value"] for e in run.epochs]
            assert lane.epochs.column("monitor").tolist() == pytest.approx(picked, rel=1e-6)
    finally:
        cmp.close()
