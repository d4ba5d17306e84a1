"""Nets.CONV (ConvNN from NNConvParams) on (N, C, H, W) images: every path of the engine."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    Checkpoints,
    ConfigError,
    DataError,
    Losses,
    Nets,
    NNCheckpoint,
    NNConvParams,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNRun,
    NNTrainParams,
    ProbabilitySpec,
    lr_finder,
)
from nnx_lab.example_data import DIGITS_IMAGE_SHAPE, digits_image_loaders, digits_images

CONV = NNConvParams(output_dim=10, in_channels=1, image_size=8, conv_channels=(4, 8))


def _cnn(**kw):
    return NNModel(CONV, NNModelParams(net=Nets.CONV, loss=Losses.CROSS_ENTROPY), **kw)


def _loaders(n=256, seed=0):
    X, y = digits_images()
    g = torch.Generator().manual_seed(seed)
    ds = TensorDataset(X[:n], y[:n])
    train = DataLoader(ds, batch_size=32, shuffle=True, generator=g)
    val = DataLoader(TensorDataset(X[n : n + 64], y[n : n + 64]), batch_size=64)
    return train, val


def _params(root, n_epochs=2, **kw):
    train, val = _loaders()
    return NNTrainParams(
        n_epochs=n_epochs,
        train_loader=train,
        val_loader=val,
        optim=NNOptimParams(max_lr=0.01),
        runs_root=root,
        checkpoint_every_s=0,
        **kw,
    )


def test_the_digits_ship_as_images():
    X, y = digits_images()
    assert X.shape == (1797, *DIGITS_IMAGE_SHAPE)
    assert X.dtype == torch.float32
    assert float(X.min()) >= 0.0
    assert float(X.max()) <= 1.0
    assert y.dtype == torch.int64
    assert set(y.tolist()) == set(range(10))
    X28, _ = digits_images(28)
    assert X28.shape == (1797, 1, 28, 28)
    train, val, test = digits_image_loaders(28)
    assert len(train.dataset) + len(val.dataset) + len(test.dataset) == 1797
    assert next(iter(train))[0].shape == (32, 1, 28, 28)
    with pytest.raises(ConfigError):
        digits_images(4)


def test_conv_params_are_checked_before_a_network_exists():
    with pytest.raises(ConfigError) as info:
        NNConvParams(output_dim=10, image_size=8, conv_channels=(4, 8, 16, 32))
    assert info.value.field == "NNConvParams.conv_channels"
    assert "leaves no pixel" in info.value.fix
    for field, value in (
        ("kernel_size", 0),
        ("pool_size", -1),
        ("image_size", (8,)),
        ("conv_channels", ()),
        ("padding", -1),
        ("dropout_prob", 1.0),
    ):
        with pytest.raises(ConfigError) as info:
            NNConvParams(output_dim=10, **{field: value})
        assert info.value.field == f"NNConvParams.{field}"
    assert NNConvParams.from_json(CONV.to_json()) == CONV


def test_each_member_takes_its_own_params_class():
    with pytest.raises(ConfigError, match=r"Nets\.CONV takes NNConvParams"):
        NNModel(NNParams(input_dim=64, output_dim=10), NNModelParams(net=Nets.CONV))
    with pytest.raises(ConfigError, match=r"Nets\.FEED_FWD takes NNParams") as info:
        NNModel(CONV, NNModelParams(net=Nets.FEED_FWD))
    assert "NNConvParams is the params of Nets.CONV" in str(info.value)


def test_a_cnn_trains_predicts_and_rebuilds_from_its_checkpoint(runs_root):
    model = _cnn()
    run = model.train(_params(runs_root))
    assert run.status.value == "finished"
    assert run.config["net"] == CONV.to_json()
    assert NNRun.load(run.id, runs_root=runs_root).net_params == CONV
    X, _y = digits_images()
    pred = model.predict(X[:50])
    assert pred.logits.shape == (50, 10)
    assert pred.classes.shape == (50,)
    spec = ProbabilitySpec(kind="categorical", labels=tuple(range(10)))
    proba = model.predict_proba(X[:50], spec)
    assert torch.allclose(proba.probabilities.sum(1), torch.ones(50))
    _, val = _loaders()
    with model.iter_predict(val) as stream:
        streamed = torch.cat([b.logits for b in stream])
    assert torch.equal(streamed, model.predict(val).logits)
    assert model.evaluate(val).loss > 0
    rebuilt = NNModel.from_checkpoint(NNCheckpoint.load(run, Checkpoints.LAST, runs_root))
    assert rebuilt.net_params == CONV
    assert torch.equal(rebuilt.predict(X[:50]).logits, pred.logits)


def test_the_conv_params_enter_the_run_id(runs_root):
    other = NNConvParams(output_dim=10, in_channels=1, image_size=8, conv_channels=(4, 6))
    a = _cnn().expected_run_id(_params(runs_root))
    b = NNModel(other, NNModelParams(net=Nets.CONV)).expected_run_id(_params(runs_root))
    assert a != b


def test_images_of_another_shape_are_refused_before_the_run_exists(runs_root):
    X, y = digits_images(28)
    loader = DataLoader(TensorDataset(X[:64], y[:64]), batch_size=32)
    with pytest.raises(DataError, match=r"\(rows, 1, 8, 8\) \(NNConvParams\)"):
        _cnn().train(NNTrainParams(n_epochs=1, train_loader=loader, runs_root=runs_root))
    assert not runs_root.exists() or not any(runs_root.iterdir())
    with pytest.raises(ConfigError, match=r"\(rows, 1, 8, 8\)"):
        _cnn().predict(X[:4])


def test_four_cnn_epochs_equal_two_plus_two_bit_for_bit(runs_root):
    full_model = _cnn()
    full = full_model.train(_params(runs_root, 4))
    first = _cnn().train(_params(runs_root, 2))
    resumed_model = _cnn()
    resumed = resumed_model.train(_params(runs_root, 2, resume_from_run_id=first.id))
    assert resumed.resume_status["mode"] == "stateful"
    for (name, a), (_, b) in zip(
        full_model.net.state_dict().items(), resumed_model.net.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    assert [p.train_edp.loss for p in full.idps] == [p.train_edp.loss for p in resumed.idps]


def test_a_cnn_accumulates_and_runs_the_lr_finder(runs_root):
    run = _cnn().train(_params(runs_root, 1, accumulation_steps=2))
    assert run.status.value == "finished"
    model = _cnn()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    train, _ = _loaders()
    result = lr_finder(model.net, train, Losses.CROSS_ENTROPY, num_iter=10)
    assert len(result.lrs) > 0
    for k, v in model.net.state_dict().items():
        assert torch.equal(v, before[k]), k  # the sweep restored the network


def test_a_cnns_predictions_calibrate(runs_root):
    from nnx_lab.calibration import fit_temperature

    model = _cnn()
    model.train(_params(runs_root, 2))
    _, val = _loaders()
    spec = ProbabilitySpec(kind="categorical", labels=tuple(range(10)))
    prediction = model.predict_proba(val, spec)
    y = next(iter(val))[1]
    fit = fit_temperature(prediction, y, model_id="cnn", split_id="val")
    assert fit.temperature > 0
