"""Small builders for engine tests: the §1 quickstart's data, model and params."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    Activations,
    Devices,
    Losses,
    Nets,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNSchedulerParams,
    NNTrainParams,
    Optims,
)


def data(n_train: int = 256, n_val: int = 64, seed: int = 0, dim: int = 8, classes: int = 3):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n_train, dim, generator=g)
    y = torch.randint(0, classes, (n_train,), generator=g)
    Xv = torch.randn(n_val, dim, generator=g)
    yv = torch.randint(0, classes, (n_val,), generator=g)
    return X, y, Xv, yv


def loaders(batch: int = 32, shuffle: bool = True, **kw: Any):
    X, y, Xv, yv = data(**kw)
    return (
        DataLoader(TensorDataset(X, y), batch_size=batch, shuffle=shuffle),
        DataLoader(TensorDataset(Xv, yv), batch_size=batch),
    )


def net_params(**kw: Any) -> NNParams:
    base = {
        "input_dim": 8,
        "output_dim": 3,
        "hidden_dims": [32, 16],
        "dropout_prob": 0.1,
        "activation": Activations.RELU,
    }
    return NNParams(**{**base, **kw})


def model_params(**kw: Any) -> NNModelParams:
    base = {"net": Nets.FEED_FWD, "device": Devices.CPU, "loss": Losses.CROSS_ENTROPY}
    return NNModelParams(**{**base, **kw})


def model(**kw: Any) -> NNModel:
    return NNModel(net_params=net_params(**kw.pop("net", {})), params=model_params(**kw))


_DEFAULT: Any = object()


def train_params(runs_root, train_loader=_DEFAULT, val_loader=_DEFAULT, **kw: Any) -> NNTrainParams:
    if train_loader is _DEFAULT:
        train_loader, default_val = loaders()
        val_loader = default_val if val_loader is _DEFAULT else val_loader
    elif val_loader is _DEFAULT:
        val_loader = None
    base = {
        "n_epochs": 3,
        "seed": 42,
        "train_loader": train_loader,
        "val_loader": val_loader,
        "optim": NNOptimParams(
            name=Optims.ADAM,
            max_lr=1e-2,
            momentum=(0.9, 0.999),
            weight_decay=5e-5,
            grad_clip_norm=1.0,
        ),
        "scheduler": NNSchedulerParams(
            min_lr=1e-7, factor=0.5, patience=3, cooldown=1, threshold=1e-3
        ),
        "runs_root": str(runs_root),
    }
    return NNTrainParams(**{**base, **kw})


def runs_in(root) -> list:
    """Run directories under ``root`` (a missing root has none)."""
    from pathlib import Path

    root = Path(root)
    return [p for p in root.iterdir() if p.is_dir()] if root.exists() else []


def shipped_documents(model):
    """A temperature calibrator and an abstention policy fitted on ``model`` (the
    documents a bundle and a report carry), for three classes a, b, c."""
    cal, selection = fitted_documents(model)
    return cal, selection.require()


def fitted_documents(model, *, risk_ceiling=1.0, rows=data):
    """A temperature calibrator and a threshold selection (``risk_ceiling``) fitted on
    ``model`` for three classes a, b, c, on 256 training and 256 validation rows of
    ``rows`` (``data``'s signature)."""
    from nnx_lab import ProbabilitySpec
    from nnx_lab.abstention import select_threshold
    from nnx_lab.calibration import fit_temperature, model_fingerprint

    X, y, Xv, yv = rows(n_train=256, n_val=256)
    spec = ProbabilitySpec("categorical", labels=("a", "b", "c"))
    mid = model_fingerprint(model)
    cal = fit_temperature(
        model.predict_proba(X, spec),
        y,
        model_id=mid,
        split_id="calibration",
        train_split_id="train",
        test_split_id="test",
    ).require()
    selection = select_threshold(
        model.predict_proba(Xv, spec).probabilities,
        yv,
        risk_ceiling=risk_ceiling,
        split_id="val",
        labels=("a", "b", "c"),
        model_id=mid,
    )
    return cal, selection
