"""Data factories for examples and notebooks: data sets that ship inside scikit-learn.

A plan holds data factories, functions that take no argument and return a fresh loader,
and saves them by reference (``nnx_lab.example_data:wine_train_loader``), so a plan
built from these is portable (``plan.to_json()``) and every fit gets loaders of its own
(the training loader's shuffling starts from its seed again). No download: scikit-learn's
bundled wine and digits data (``pip install "nnx-lab[examples]"``).

* wine: 178 wines, 13 measurements, 3 cultivars (``WINE_DIMS``), batches of 16;
* digits: 1,797 8x8 images of handwritten digits, 64 pixels, 10 classes
  (``DIGITS_DIMS``), batches of 32.

Both are split 70 / 15 / 15 (seed 0) and standardized with statistics of the training
rows only (``NNTabularDataset(standardize=True)``).
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = [
    "DIGITS_DIMS",
    "WINE_DIMS",
    "digits_dataset",
    "digits_train_loader",
    "digits_val_loader",
    "wine_dataset",
    "wine_train_loader",
    "wine_val_loader",
]

WINE_DIMS = {"input_dim": 13, "output_dim": 3}
DIGITS_DIMS = {"input_dim": 64, "output_dim": 10}


@functools.cache
def _frame(name: str) -> Any:
    try:
        from sklearn import datasets
    except ImportError:  # pragma: no cover - the examples extra installs it
        raise ImportError(
            "the example data sets ship with scikit-learn: pip install 'nnx-lab[examples]' "
            "(or pip install scikit-learn)"
        ) from None
    return getattr(datasets, f"load_{name}")(as_frame=True).frame


def _dataset(name: str, batch: int) -> Any:
    from .data import NNTabularDataset

    frame = _frame(name)
    features = [c for c in frame.columns if c != "target"]
    # A new dataset per call: its loaders shuffle from their seed again, so every fit
    # of a plan sees the same batches.
    return NNTabularDataset(
        frame, features, "target", batch_sizes=(batch, None, None), seed=0, standardize=True
    )


def wine_dataset() -> Any:
    """The wine data as an ``NNTabularDataset`` (train / val / test loaders)."""
    return _dataset("wine", 16)


def wine_train_loader() -> Any:
    """A fresh training loader of the wine data (batches of 16, shuffled, seed 0)."""
    return wine_dataset().train_loader


def wine_val_loader() -> Any:
    """The wine data's validation split, one batch."""
    return wine_dataset().val_loader


def digits_dataset() -> Any:
    """The digits data as an ``NNTabularDataset`` (train / val / test loaders)."""
    return _dataset("digits", 32)


def digits_train_loader() -> Any:
    """A fresh training loader of the digits data (batches of 32, shuffled, seed 0)."""
    return digits_dataset().train_loader


def digits_val_loader() -> Any:
    """The digits data's validation split, one batch."""
    return digits_dataset().val_loader
