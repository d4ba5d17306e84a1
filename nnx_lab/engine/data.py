"""Batch sources: admission checks, data identity, and inputs for predict().

A batch source is anything re-iterable that yields ``(X, y)`` pairs: a DataLoader, a
list of batches. The first batch of each loader is checked before a run is reserved,
under a saved-and-restored RNG so the peek changes nothing about training.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Subset, TensorDataset

from .errors import DataError
from .params import NNParams
from .tasks import Task
from .training_state import preserved_rng

__all__ = ["check_loader", "data_identity", "iter_inputs", "tensor_digest"]


def first_batch(loader: Any, field: str) -> tuple[torch.Tensor, torch.Tensor]:
    if loader is None:
        raise DataError(field, "is None", "pass a DataLoader (or a list) of (X, y) batches")
    if not isinstance(loader, Iterable) or isinstance(loader, str | bytes | torch.Tensor):
        raise DataError(
            field,
            f"a {type(loader).__name__} is not a batch source",
            "pass a DataLoader (or a list) of (X, y) batches",
        )
    with preserved_rng([loader]):
        iterator = iter(loader)
        try:
            batch = next(iterator)
        except StopIteration:
            raise DataError(
                field,
                "yields no batch (the loader is empty)",
                "pass a loader with at least one batch",
            ) from None
        finally:
            del iterator  # shuts down worker processes of a DataLoader early
    if not isinstance(batch, tuple | list) or len(batch) != 2:
        raise DataError(
            field,
            f"yields {_describe(batch)}, not an (X, y) pair",
            "make the loader yield (features, targets) pairs, e.g. DataLoader(TensorDataset(X, y))",
        )
    X, y = batch
    if not isinstance(X, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise DataError(
            field, f"yields ({_describe(X)}, {_describe(y)})", "both X and y must be torch tensors"
        )
    return X, y


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, tuple | list):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"a {type(value).__name__}"


def check_loader(loader: Any, field: str, net: NNParams, task: Task) -> torch.Tensor:
    """Refuse a loader whose first batch cannot train this model; returns its targets."""
    X, y = first_batch(loader, field)
    if X.ndim < 2 or X.shape[-1] != net.input_dim:
        raise DataError(
            field,
            f"the first batch's features have shape {tuple(X.shape)} but "
            f"NNParams.input_dim is {net.input_dim}",
            f"make X's last dimension {net.input_dim}, or set "
            f"NNParams(input_dim={X.shape[-1] if X.ndim else '?'})",
        )
    if not X.is_floating_point():
        raise DataError(
            field,
            f"the features have dtype {X.dtype}",
            "pass floating-point features, e.g. X.float()",
        )
    finite = torch.isfinite(X)
    if not bool(finite.all()):
        bad = int((~finite).sum())
        raise DataError(
            field,
            f"the first batch's features hold {bad} NaN/inf values",
            "clean or impute the features before training",
        )
    if X.shape[0] != y.shape[0]:
        raise DataError(
            field,
            f"X has {X.shape[0]} rows but y has {y.shape[0]}",
            "yield X and y with the same number of rows",
        )
    if task.kind == "categorical":
        if y.is_floating_point() or y.dtype == torch.bool:
            raise DataError(
                field,
                f"class targets have dtype {y.dtype}",
                "pass integer class indices (torch.long), e.g. y.long()",
            )
        scored = y if task.ignore_index is None else y[y != task.ignore_index]
        if scored.numel():
            lo, hi = int(scored.min()), int(scored.max())
            if lo < 0 or hi >= net.output_dim:
                ignored = (
                    ""
                    if task.ignore_index is None
                    else f" (targets equal to ignore_index={task.ignore_index} are skipped)"
                )
                raise DataError(
                    field,
                    f"class targets span [{lo}, {hi}] but NNParams.output_dim is "
                    f"{net.output_dim}{ignored}",
                    f"use targets in [0, {net.output_dim}) or set NNParams(output_dim={hi + 1})",
                )
    elif y.is_floating_point() and not bool(torch.isfinite(y).all()):
        raise DataError(
            field,
            "the first batch's targets hold NaN/inf values",
            "clean the targets before training",
        )
    return y


def _new_digest() -> Any:
    # SHA-256 runs on the CPU's hashing instructions where present: ~1.4 GB/s here, three
    # times BLAKE2b, which matters for a data set hashed before every run.
    return hashlib.sha256()


def tensor_digest(h: Any, tensor: torch.Tensor) -> None:
    t = tensor.detach().cpu().contiguous()
    h.update(f"{t.dtype}{tuple(t.shape)}".encode())
    if t.numel():  # the buffer itself: no copy of a large tensor
        h.update(t.reshape(-1).view(torch.uint8).numpy())


def _dataset_identity(dataset: Any) -> tuple[dict[str, Any], bool]:
    """(identity, exact): exact when the content itself was hashed."""
    if isinstance(dataset, TensorDataset):
        h = _new_digest()
        for t in dataset.tensors:
            tensor_digest(h, t)
        return {"kind": "tensors", "digest": h.hexdigest()}, True
    if isinstance(dataset, Subset):
        inner, exact = _dataset_identity(dataset.dataset)
        h = _new_digest()
        h.update(np.asarray(list(dataset.indices), dtype=np.int64).tobytes())
        return {"kind": "subset", "indices": h.hexdigest(), "of": inner}, exact
    size = len(dataset) if hasattr(dataset, "__len__") else None
    return {
        "kind": "opaque",
        "type": f"{type(dataset).__module__}.{type(dataset).__qualname__}",
        "len": size,
    }, False


def _loader_identity(loader: Any) -> tuple[dict[str, Any], bool]:
    if isinstance(loader, DataLoader):
        ds, exact = _dataset_identity(loader.dataset)
        return {
            "dataset": ds,
            "batch_size": loader.batch_size,
            "sampler": type(loader.sampler).__name__,
            "drop_last": loader.drop_last,
        }, exact
    if isinstance(loader, list | tuple):
        h = _new_digest()
        for batch in loader:
            for part in batch:
                if isinstance(part, torch.Tensor):
                    tensor_digest(h, part)
                else:
                    return {"kind": "opaque-list", "len": len(loader)}, False
        return {"kind": "batches", "n": len(loader), "digest": h.hexdigest()}, True
    return {"kind": "opaque", "type": type(loader).__qualname__}, False


def data_identity(train_loader: Any, val_loader: Any, data_id: str | None) -> dict[str, Any]:
    """What enters the run id for the data. An explicit ``data_id`` wins.

    Tensor datasets and lists of tensor batches are hashed by content (shape, dtype and
    bytes); other datasets can only be described (type and length), so a warning asks
    for ``data_id`` there: two different data sets must never share a run id.
    """
    if data_id is not None:
        return {"data_id": data_id}
    train, exact = _loader_identity(train_loader)
    identity: dict[str, Any] = {"train": train}
    if val_loader is not None:
        val, val_exact = _loader_identity(val_loader)
        identity["val"] = val
        exact = exact and val_exact
    if not exact:
        warnings.warn(
            "the training data could not be hashed by content (it is not a TensorDataset or "
            "a list of tensor batches); pass NNTrainParams(data_id='name-and-version') so "
            "runs on different data get different ids",
            UserWarning,
            stacklevel=3,
        )
    return identity


def iter_inputs(X: Any, batch_size: int = 4096) -> Iterator[torch.Tensor]:
    """Feature batches from a tensor, an array, an ``(X, y)`` tuple, or a loader."""
    if isinstance(X, np.ndarray):
        X = torch.from_numpy(X)
    if isinstance(X, torch.Tensor):
        if not X.is_floating_point():
            X = X.float()
        for start in range(0, X.shape[0], batch_size):
            yield X[start : start + batch_size]
        return
    if isinstance(X, tuple) and X and isinstance(X[0], torch.Tensor | np.ndarray):
        yield from iter_inputs(X[0], batch_size)
        return
    if isinstance(X, Iterable):
        for batch in X:
            xb = batch[0] if isinstance(batch, tuple | list) else batch
            yield from iter_inputs(xb, batch_size)
        return
    raise DataError(
        "X",
        f"a {type(X).__name__} is not a supported input",
        "pass a tensor, a NumPy array, an (X, y) tuple or a loader of batches",
    )
