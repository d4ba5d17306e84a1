"""Data and plan factories for benchmarks/ddp.py: importable by name, so a launched plan
can carry them to its processes (``_ddp_data:make_train_loader``)."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

# the overhead benchmark's large case: 784 -> 512 -> 512 -> 10, 20,000 rows, batch 128
D_IN, HIDDEN, D_OUT, N, BATCH = 784, (512, 512), 10, 20_000, 128


def dataset() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    return TensorDataset(
        torch.randn(N, D_IN, generator=g), torch.randint(0, D_OUT, (N,), generator=g)
    )


def make_train_loader() -> DataLoader:
    return DataLoader(dataset(), batch_size=BATCH, shuffle=True)
