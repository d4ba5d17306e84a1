"""Importable factories for plan tests: plans travel as JSON, so what they hold must be
importable by name (``plan_factories:make_train_loader``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import ExperimentPlan, NNModelParams, NNOptimParams, NNParams, NNTrainParams

CALLS = {"train": 0, "val": 0}
NET = NNParams(input_dim=8, output_dim=3, hidden_dims=[16])


def toy_plan(runs_root, n_epochs: int) -> ExperimentPlan:
    """The plan tests branch from: the toy data, seed 7, ``max_lr=1e-2``."""
    return (
        ExperimentPlan()
        .with_net(NET)
        .with_model(NNModelParams())
        .with_train(NNTrainParams(n_epochs=n_epochs, optim=NNOptimParams(max_lr=1e-2)))
        .with_data(make_train_loader, val=make_val_loader, identity="toy")
        .with_seed(7)
        .with_runs_root(runs_root)
    )


def _tensors(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 8, generator=g), torch.randint(0, 3, (n,), generator=g)


def make_train_loader() -> DataLoader:
    CALLS["train"] += 1
    return DataLoader(TensorDataset(*_tensors(128, 0)), batch_size=32, shuffle=True)


def make_val_loader() -> DataLoader:
    CALLS["val"] += 1
    return DataLoader(TensorDataset(*_tensors(64, 1)), batch_size=32)


def make_other_train_loader() -> DataLoader:
    return DataLoader(TensorDataset(*_tensors(128, 5)), batch_size=16, shuffle=True)


def exploding_factory() -> DataLoader:
    raise AssertionError("validate() must not call a data factory")


def returns_nothing():  # forgot the return
    make_train_loader()


def needs_arguments(path: str) -> DataLoader:  # a factory is called with no argument
    raise AssertionError("never called")


def smooth_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out, y, label_smoothing=0.1)


class EpochCounter:
    """A callback with a class a factory can build afresh for every fit."""

    def __init__(self) -> None:
        self.epochs = 0

    def on_epoch_ended(self, event) -> None:
        self.epochs += 1


def make_counter() -> EpochCounter:
    return EpochCounter()


def rows_seen(y_true, y_pred) -> float:  # an extra metric a plan can ship by reference
    return float(len(y_true))
