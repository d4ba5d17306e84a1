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
