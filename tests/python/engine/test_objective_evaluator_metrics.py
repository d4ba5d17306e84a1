"""Under objective= with an eval_step_fn=, declared metrics are the evaluator's to report
(widened for link prediction, §3.9): the run selects BEST on them, and the training
records hold the loss and the terms. Without the evaluator they stay refused."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    EDP,
    Checkpoints,
    Losses,
    LossTerm,
    MetricSpec,
    MonitorSpec,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNParams,
    NNTrainParams,
    Objective,
    ObjectiveResult,
)
from nnx_lab.errors import ConfigError


class BCE(Objective):
    def compute(self, net, batch, ctx):
        X, y = batch
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            net(X).squeeze(1), y, reduction="sum"
        )
        return ObjectiveResult([LossTerm("bce", loss, y.shape[0])])


def _data():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(96, 4, generator=g)
    y = (X[:, 0] > 0).float()
    return DataLoader(TensorDataset(X, y), batch_size=32), DataLoader(
        TensorDataset(X, y), batch_size=96
    )


def _model():
    return NNModel(
        net_params=NNParams(input_dim=4, output_dim=1, hidden_dims=[8]),
        params=NNModelParams(loss=Losses.BINARY_CROSS_ENTROPY),
    )


def test_an_evaluator_reports_the_declared_metric_and_best_follows_it(runs_root):
    train, val = _data()
    reported = iter([0.6, 0.9, 0.7])

    def evaluator(ctx):
        return EDP(loss=1.0, samples=96, metrics={"auroc": next(reported)})

    run = _model().train(
        params=NNTrainParams(
            n_epochs=3,
            train_loader=train,
            val_loader=val,
            metrics=[MetricSpec("auroc")],
            monitor=MonitorSpec("auroc"),
            runs_root=runs_root,
        ),
        objective=BCE(),
        eval_step_fn=evaluator,
    )
    vals = [idp.val_edp for idp in run.idps if idp.val_edp is not None]
    assert [v.metrics["auroc"] for v in vals] == [0.6, 0.9, 0.7]
    best = NNCheckpoint.load(run, Checkpoints.BEST, runs_root)
    assert best.sidecar["best_epoch"] == 2


def test_without_an_evaluator_declared_metrics_stay_refused(runs_root):
    train, val = _data()
    with pytest.raises(ConfigError, match="returns no outputs to score"):
        _model().train(
            params=NNTrainParams(
                n_epochs=1,
                train_loader=train,
                val_loader=val,
                metrics=[MetricSpec("auroc")],
                runs_root=runs_root,
            ),
            objective=BCE(),
        )
    assert not runs_root.exists() or not any(runs_root.iterdir())
