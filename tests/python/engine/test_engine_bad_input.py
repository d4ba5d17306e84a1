"""Bad input gets a clear error naming the field, the value and the fix, before any run."""

from __future__ import annotations

import re

import engine_factories as f
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    ConfigError,
    DataError,
    EarlyStopping,
    Losses,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNSchedulerParams,
    NNTrainParams,
)


@pytest.mark.parametrize(
    ("build", "field", "value"),
    [
        (lambda: NNOptimParams(name="adamx"), "NNOptimParams.name", "adamx"),
        (lambda: NNModelParams(loss="hinge"), "NNModelParams.loss", "hinge"),
        (lambda: NNModelParams(net="resnet"), "NNModelParams.net", "resnet"),
        (lambda: NNModelParams(device="tpu"), "NNModelParams.device", "tpu"),
        (
            lambda: NNParams(input_dim=8, output_dim=3, activation="swish"),
            "NNParams.activation",
            "swish",
        ),
        (lambda: NNTrainParams(n_epochs=0), "NNTrainParams.n_epochs", "0"),
        (lambda: NNTrainParams(n_epochs=2.5), "NNTrainParams.n_epochs", "2.5"),
        (lambda: NNOptimParams(max_lr=0), "NNOptimParams.max_lr", "0"),
        (lambda: NNOptimParams(max_lr=-1e-3), "NNOptimParams.max_lr", "-0.001"),
        (lambda: NNOptimParams(max_lr=float("nan")), "NNOptimParams.max_lr", "nan"),
        (
            lambda: NNParams(input_dim=8, output_dim=3, dropout_prob=1.0),
            "NNParams.dropout_prob",
            "1.0",
        ),
        (
            lambda: NNParams(input_dim=8, output_dim=3, dropout_prob=-0.1),
            "NNParams.dropout_prob",
            "-0.1",
        ),
        (
            lambda: NNParams(input_dim=8, output_dim=3, hidden_dims=[32, 0]),
            "NNParams.hidden_dims",
            "0",
        ),
        (
            lambda: NNParams(input_dim=8, output_dim=3, hidden_dims=[3.5]),
            "NNParams.hidden_dims",
            "3.5",
        ),
        (
            lambda: NNParams(input_dim=8, output_dim=3, hidden_dims="32"),
            "NNParams.hidden_dims",
            "'32'",
        ),
        (lambda: NNParams(input_dim=0, output_dim=3), "NNParams.input_dim", "0"),
        (lambda: NNSchedulerParams(factor=1.5), "NNSchedulerParams.factor", "1.5"),
        (lambda: NNSchedulerParams(patience=-1), "NNSchedulerParams.patience", "-1"),
        (lambda: NNOptimParams(momentum=0.9), "NNOptimParams.momentum", "0.9"),
        (lambda: NNTrainParams(resume_mode="hot"), "NNTrainParams.resume_mode", "hot"),
    ],
)
def test_a_bad_parameter_is_refused_naming_field_value_and_fix(build, field, value):
    with pytest.raises(ConfigError) as err:
        build()
    message = str(err.value)
    assert field in message
    assert value in message
    assert ":" in message
    assert len(message.split(":", 1)[1].strip()) > 10


def test_unknown_enum_lists_the_choices():
    with pytest.raises(ConfigError, match=r"Optims\.ADAM.*Optims\.SGD"):
        NNOptimParams(name="adamx")


def test_enum_names_and_values_are_accepted():
    assert NNOptimParams(name="ADAMW").name.value == "adamw"
    assert NNOptimParams(name="sgd").momentum == 0.9


def _loader(X, y, batch=32):
    return DataLoader(TensorDataset(X, y), batch_size=batch)


X, Y, _, _ = f.data()

BAD_DATA = {
    "feature width": (_loader(torch.randn(64, 5), Y[:64]), "NNParams.input_dim=8"),
    "float64 features": (_loader(X[:64].double(), Y[:64]), "dtype torch.float64"),
    "float16 features": (_loader(X[:64].half(), Y[:64]), "dtype torch.float16"),
    "rank-3 features": (_loader(X[:64].reshape(64, 1, 8), Y[:64]), "shape (32, 1, 8)"),
    "(B, 1) class targets": (_loader(X[:64], Y[:64, None]), "y.squeeze(1)"),
    "a one-shot generator": (((X[i : i + 8], Y[i : i + 8]) for i in range(0, 64, 8)), "one-shot"),
    "target above range": (_loader(X[:64], torch.full((64,), 3)), "output_dim is 3"),
    "negative target": (_loader(X[:64], torch.full((64,), -1)), "[0, 3)"),
    "float class targets": (_loader(X[:64], torch.zeros(64)), "integer class indices"),
    "empty loader": (_loader(X[:0], Y[:0]), "yields no batch"),
    "not (X, y)": ([X[:32]], "not an (X, y) pair"),
    "a triple": ([(X[:32], Y[:32], Y[:32])], "not an (X, y) pair"),
    "NaN features": (
        _loader(torch.where(torch.arange(64)[:, None] == 3, float("nan"), X[:64]), Y[:64]),
        "NaN/inf",
    ),
    "inf features": (
        _loader(torch.where(torch.arange(64)[:, None] == 0, float("inf"), X[:64]), Y[:64]),
        "NaN/inf",
    ),
    "not iterable": (42, "not a batch source"),
    "None": (None, "is None"),
}


@pytest.mark.parametrize("case", sorted(BAD_DATA))
def test_bad_training_data_is_refused_before_a_run_directory_exists(runs_root, case):
    loader, text = BAD_DATA[case]
    model = f.model()
    params = f.train_params(runs_root, train_loader=loader, val_loader=None)
    with pytest.raises(DataError, match=r"NNTrainParams\.train_loader") as err:
        model.train(params)
    assert text in str(err.value)
    assert not runs_root.exists()


@pytest.mark.parametrize(
    ("loss", "y", "text"),
    [
        (Losses.BINARY_CROSS_ENTROPY, torch.zeros(64, 2), "shape (32, 2), the outputs (32, 3)"),
        (Losses.MEAN_SQUARED_ERROR, torch.zeros(64), "shape (32,), the outputs (32, 3)"),
        (Losses.MEAN_SQUARED_ERROR, torch.full((64, 3), float("nan")), "NaN/inf"),
    ],
)
def test_bce_and_mse_targets_must_match_the_outputs(runs_root, loss, y, text):
    params = f.train_params(runs_root, train_loader=_loader(X[:64], y), val_loader=None)
    with pytest.raises(DataError, match=re.escape(text)):
        f.model(loss=loss).train(params)
    assert not runs_root.exists()


def test_bad_validation_data_is_refused_too(runs_root):
    train, _ = f.loaders()
    params = f.train_params(
        runs_root, train_loader=train, val_loader=_loader(torch.randn(64, 5), Y[:64])
    )
    with pytest.raises(DataError, match=r"NNTrainParams\.val_loader"):
        f.model().train(params)
    assert not runs_root.exists()


def test_a_callback_that_is_not_a_sink_is_refused_before_a_run(runs_root):
    with pytest.raises(TypeError, match="implements no known hook"):
        f.model().train(f.train_params(runs_root), callbacks=[object()])
    assert not runs_root.exists()


def test_early_stopping_refuses_bad_settings():
    with pytest.raises(ValueError, match="patience"):
        EarlyStopping(patience=0)
    with pytest.raises(ValueError, match="monitor"):
        EarlyStopping(monitor="val_edp.banana")


def test_predict_refuses_the_wrong_width():
    with pytest.raises(ConfigError, match="input_dim"):
        f.model().predict(torch.randn(4, 5))
