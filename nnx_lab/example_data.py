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

The digits also come as images for convolutional networks (``Nets.CONV``): float32
tensors shaped ``(N, 1, 8, 8)`` with pixels in [0, 1] (``digits_images()``), or
upsampled bilinearly to ``(N, 1, 28, 28)`` (``size=28``, MNIST's size); loaders of a
70 / 15 / 15 split (seed 0) with ``digits_image_loaders()`` and the plan factories
``digits_image_train_loader`` / ``digits_image_val_loader`` (8x8) and their ``28``
variants.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = [
    "DIGITS_DIMS",
    "DIGITS_IMAGE_SHAPE",
    "WINE_DIMS",
    "digits_dataset",
    "digits_image_loaders",
    "digits_image_train_loader",
    "digits_image_train_loader28",
    "digits_image_val_loader",
    "digits_image_val_loader28",
    "digits_images",
    "digits_train_loader",
    "digits_val_loader",
    "wine_dataset",
    "wine_train_loader",
    "wine_val_loader",
]

WINE_DIMS = {"input_dim": 13, "output_dim": 3}
DIGITS_DIMS = {"input_dim": 64, "output_dim": 10}
DIGITS_IMAGE_SHAPE = (1, 8, 8)  # (channels, height, width); 10 classes


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


def digits_images(size: int = 8) -> tuple[Any, Any]:
    """``(X, y)``: the 1,797 digits as float32 images ``(N, 1, size, size)`` with pixels
    in [0, 1] (``size`` 8, or larger: upsampled bilinearly), and their int64 classes."""
    import torch

    if not isinstance(size, int) or isinstance(size, bool) or size < 8:
        from .errors import ConfigError

        raise ConfigError("size", size, "pass 8 (the digits' own size) or a larger int, e.g. 28")
    frame = _frame("digits")
    pixels = frame.drop(columns="target").to_numpy(dtype="float32", copy=True) / 16.0
    X = torch.from_numpy(pixels).reshape(-1, 1, 8, 8)
    if size != 8:
        X = torch.nn.functional.interpolate(X, size=(size, size), mode="bilinear")
        X = X.clamp_(0.0, 1.0).contiguous()
    y = torch.from_numpy(frame["target"].to_numpy(dtype="int64", copy=True))
    return X, y


def digits_image_loaders(
    size: int = 8, batch_size: int = 32, seed: int = 0
) -> tuple[Any, Any, Any]:
    """``(train, val, test)`` loaders of the digit images: a 70 / 15 / 15 split drawn
    with ``seed``, the training loader shuffled by a generator seeded with ``seed``,
    validation and test as one batch each."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    X, y = digits_images(size)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_train, n_val = int(0.7 * len(y)), int(0.15 * len(y))
    parts = order[:n_train], order[n_train : n_train + n_val], order[n_train + n_val :]
    train, val, test = (TensorDataset(X[i], y[i]) for i in parts)
    return (
        DataLoader(
            train,
            batch_size=batch_size,
            shuffle=True,
            generator=torch.Generator().manual_seed(seed),
        ),
        DataLoader(val, batch_size=len(val)),
        DataLoader(test, batch_size=len(test)),
    )


def digits_image_train_loader() -> Any:
    """A fresh training loader of 1x8x8 digit images (batches of 32, shuffled, seed 0)."""
    return digits_image_loaders(8)[0]


def digits_image_val_loader() -> Any:
    """The 1x8x8 digit images' validation split, one batch."""
    return digits_image_loaders(8)[1]


def digits_image_train_loader28() -> Any:
    """A fresh training loader of the digits upsampled to 1x28x28 (batches of 32)."""
    return digits_image_loaders(28)[0]


def digits_image_val_loader28() -> Any:
    """The 1x28x28 digit images' validation split, one batch."""
    return digits_image_loaders(28)[1]
