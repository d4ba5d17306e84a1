"""Importable model factories for plan and launch tests: a plan names a registered
factory by ``(id, version)``, and a launch worker imports ``model_factories:small_cnn``
to register it there."""

from __future__ import annotations

import torch

from nnx_lab import register_model_factory, registered_model_factories

CNN_ID = ("tests.small_cnn", 1)


def small_cnn(config: dict) -> torch.nn.Module:
    """A two-layer CNN on 1x8x8 images: conv, ReLU, pool, a linear head."""
    width = int(config.get("width", 4))
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, width, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(width * 16, int(config.get("classes", 10))),
    )


def register_small_cnn() -> None:
    if CNN_ID not in registered_model_factories():
        register_model_factory(*CNN_ID, small_cnn)


def _digits(rows: slice, batch_size: int, shuffle: bool) -> torch.utils.data.DataLoader:
    from nnx_lab.example_data import digits_images

    X, y = digits_images(8)
    data = torch.utils.data.TensorDataset(X[rows], y[rows])
    return torch.utils.data.DataLoader(data, batch_size=batch_size, shuffle=shuffle)


def few_digits_train_loader() -> torch.utils.data.DataLoader:
    """128 digit images (1x8x8) in batches of 32: a launch of few steps."""
    return _digits(slice(0, 128), 32, True)


def few_digits_val_loader() -> torch.utils.data.DataLoader:
    return _digits(slice(128, 192), 32, False)
