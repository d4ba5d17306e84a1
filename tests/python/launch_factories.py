"""Importable factories for nnx_lab.launch tests: the launched processes import them by
name from the plan's JSON (``launch_factories:make_train_loader``)."""

from __future__ import annotations

import os

import torch
from torch.utils.data import DataLoader, TensorDataset


def _tensors(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    return x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long()


def make_train_loader() -> DataLoader:
    return DataLoader(TensorDataset(*_tensors(256, 0)), batch_size=32)


def make_val_loader() -> DataLoader:
    return DataLoader(TensorDataset(*_tensors(66, 1)), batch_size=32)


def make_long_train_loader() -> DataLoader:
    return DataLoader(TensorDataset(*_tensors(8192, 2)), batch_size=32, shuffle=True)


def make_odd_batch_loader() -> DataLoader:
    return DataLoader(TensorDataset(*_tensors(64, 3)), batch_size=15)


def fails_on_rank_one() -> DataLoader:
    if os.environ.get("RANK") == "1":
        raise ValueError("rank 1 could not read its shard (a test failure on purpose)")
    return make_train_loader()
