"""``eval_step_fn(ctx) -> EDP``: the context form, called once per epoch under
no_grad with the network in eval mode; its EDP is the epoch's ``val_edp``. The legacy
form ``fn(net, loader, loss, task, *, device, precision)`` keeps working."""

from __future__ import annotations

import pytest
import torch

from nnx_lab import (
    EDP,
    EvalStepContext,
    NNModel,
    NNParams,
    NNTrainParams,
    streaming_eval_step,
)
from nnx_lab.errors import ConfigError


def _data(n=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 6, generator=g)
    y = (X @ torch.randn(6, 3, generator=g)).argmax(1)
    return [(X[i : i + 8], y[i : i + 8]) for i in range(0, n, 8)]


def _model():
    return NNModel(net_params=NNParams(input_dim=6, output_dim=3, hidden_dims=[8]))


def test_the_context_form_is_the_epochs_val_edp(runs_root):
    calls = []

    def by_rows(ctx: EvalStepContext) -> EDP:
        assert isinstance(ctx, EvalStepContext)
        assert not torch.is_grad_enabled()
        assert not ctx.model.training
        total = rows = 0
        for X, y in ctx.val_loader:
            total += float(ctx.loss_fn(ctx.model(X), y)) * len(y)
            rows += len(y)
        calls.append(ctx.epoch_idx)
        return EDP(loss=total / rows, samples=rows, metrics={"epoch_seen": ctx.epoch_idx})

    val = _data(seed=1)
    model = _model()
    run = model.train(
        NNTrainParams(n_epochs=2, train_loader=_data(), val_loader=val), eval_step_fn=by_rows
    )
    assert calls == [1, 2]
    assert [e["val"]["metrics"]["epoch_seen"] for e in run.epochs] == [1, 2]
    # the last epoch's val loss is the trained network's, row-weighted over the loader
    assert run.epochs[-1]["val"]["loss"] == pytest.approx(model.evaluate(val).loss, rel=1e-6)


def test_the_legacy_form_still_works(runs_root):
    run = _model().train(
        NNTrainParams(n_epochs=1, train_loader=_data(), val_loader=_data(seed=1)),
        eval_step_fn=streaming_eval_step,
    )
    assert run.epochs[0]["val"]["samples"] == 24


def test_a_function_of_neither_form_is_refused(runs_root):
    with pytest.raises(ConfigError, match="EvalStepContext"):
        _model().train(
            NNTrainParams(n_epochs=1, train_loader=_data(), val_loader=_data()),
            eval_step_fn=lambda a, b: None,
        )
