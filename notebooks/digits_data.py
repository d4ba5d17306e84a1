"""Data factories for distributed.ipynb: a launched plan names them
(``digits_data:train_loader``), so the training processes import them from here.

scikit-learn's bundled digits: 1,797 8x8 images of handwritten digits, 64 pixel features,
10 classes; no download. Split 80/20 with a fixed seed, pixels scaled to [0, 1].
"""

from __future__ import annotations

import torch
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset


def _split() -> tuple[TensorDataset, TensorDataset]:
    X, y = load_digits(return_X_y=True)
    X = torch.tensor(X / 16.0, dtype=torch.float32)
    y = torch.tensor(y, dtype=torch.long)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    cut = int(0.8 * len(y))
    train, val = order[:cut], order[cut:]
    return TensorDataset(X[train], y[train]), TensorDataset(X[val], y[val])


def train_loader() -> DataLoader:
    """64 rows a step in all: 32 a process with two processes."""
    return DataLoader(_split()[0], batch_size=64, shuffle=True)


def val_loader() -> DataLoader:
    return DataLoader(_split()[1], batch_size=128)
