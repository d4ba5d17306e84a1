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
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    TensorDataset,
)
from torch.utils.data._utils.collate import default_collate, default_convert

from ..errors import DataError, InputTypeError
from .adapters import Inputs, unwrap_source
from .fast_batches import batches
from .fingerprint import callable_identity
from .net_shape import NetShape, shape_of
from .tasks import Task
from .training_state import preserved_rng

__all__ = [
    "batch_problem",
    "check_batch",
    "check_inputs",
    "check_loader",
    "data_identity",
    "first_batch",
    "first_targets",
    "iter_inputs",
    "shuffles",
    "tensor_digest",
]


def _check_source(loader: Any, field: str) -> None:
    if loader is None:
        raise DataError(field, "is None", "pass a DataLoader (or a list) of (X, y) batches")
    if not isinstance(loader, Iterable) or isinstance(loader, str | bytes | torch.Tensor):
        raise DataError(
            field,
            f"a {type(loader).__name__} is not a batch source",
            "pass a DataLoader (or a list) of (X, y) batches",
        )
    if isinstance(loader, Iterator):
        # A one-shot iterator: the check would consume its first batch, and the second
        # epoch would find it empty.
        raise DataError(
            field,
            f"a {type(loader).__name__} is a one-shot iterator, not a re-iterable batch source",
            "pass a DataLoader or a list of batches (list(generator) if it fits in memory)",
        )


def first_batch(loader: Any, field: str) -> Any:
    """The loader's first batch, taken under a saved-and-restored RNG."""
    _check_source(loader, field)
    with preserved_rng([loader]):
        # the fast path's first batch is the loader's, bit for bit, without fetching and
        # stacking its rows one by one (every train() call takes this batch)
        iterator = batches(loader)
        try:
            return next(iterator)
        except StopIteration:
            raise DataError(
                field,
                "yields no batch (the loader is empty)",
                "pass a loader with at least one batch",
            ) from None
        finally:
            del iterator  # shuts down worker processes of a DataLoader early


def first_targets(loader: Any, field: str) -> torch.Tensor:
    return _pair(first_batch(loader, field), field, "the first batch")[1]


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, tuple | list):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"a {type(value).__name__}"


def _pair(batch: Any, field: str, where: str) -> tuple[Any, torch.Tensor]:
    if not isinstance(batch, tuple | list) or len(batch) != 2:
        raise DataError(
            field,
            f"{where} is {_describe(batch)}, not an (X, y) pair",
            "make the loader yield (features, targets) pairs, e.g. DataLoader(TensorDataset(X, y))",
        )
    X, y = batch
    if not isinstance(X, torch.Tensor | Inputs) or not isinstance(y, torch.Tensor):
        raise DataError(
            field, f"{where} is ({_describe(X)}, {_describe(y)})", "both X and y must be tensors"
        )
    return X, y


def _check_features(X: torch.Tensor, field: str, shape: NetShape, where: str) -> None:
    if shape.check is not None:
        shape.check(X, field, where)
    if shape.tabular:  # the MLP's contract: 2-D rows of input_dim columns
        n, owner = shape.input_dim, shape.owner
        if X.ndim != 2 or X.shape[-1] != n:
            raise DataError(
                field,
                f"{where}'s features have shape {tuple(X.shape)} but the network takes "
                f"(rows, {n}) ({owner}.input_dim={n})",
                f"yield 2-D features with {n} columns, or set "
                f"{owner}(input_dim={X.shape[-1] if X.ndim else '?'})",
            )
    elif shape.sample_shape is not None and tuple(X.shape[1:]) != shape.sample_shape:
        want = ", ".join(map(str, shape.sample_shape))
        raise DataError(
            field,
            f"{where}'s inputs have shape {tuple(X.shape)} but the network takes "
            f"(rows, {want}) ({shape.owner})",
            f"yield inputs of shape (rows, {want}), or change {shape.owner}",
        )
    if shape.float_inputs and X.dtype != torch.float32:
        raise DataError(
            field,
            f"{where}'s features have dtype {X.dtype}, the network's weights float32",
            "pass float32 features, e.g. X.float() (precision policies are set on "
            "NNModelParams(precision=...), not by the data's dtype)",
        )


def check_batch(batch: Any, field: str, net: Any, task: Task, where: str) -> None:
    """Refuse a batch this model cannot train on, saying which and why. ``net`` is the
    network's ``NNParams`` or its ``NetShape``."""
    shape = shape_of(net)
    X, y = _pair(batch, field, where)
    inputs = X.tensors() if isinstance(X, Inputs) else [X]
    if not isinstance(X, Inputs):
        _check_features(X, field, shape, where)
    for t in inputs:
        if not t.is_floating_point():
            continue
        finite = torch.isfinite(t)
        if not bool(finite.all()):
            bad = int((~finite).sum())
            raise DataError(
                field,
                f"{where}'s features hold {bad} NaN/inf values",
                "clean or impute the features before training",
            )
    rows = int(X.shape[0]) if len(X.shape) else 0
    for t in inputs:
        if t.ndim == 0 or t.shape[0] != rows:
            raise DataError(
                field,
                f"{where}'s inputs have {rows} and {t.shape[0] if t.ndim else 0} rows",
                "yield inputs with the same number of rows",
            )
    if y.ndim == 0 or y.shape[0] != rows:
        raise DataError(
            field,
            f"{where} has {rows} feature rows but targets of shape {tuple(y.shape)}",
            "yield X and y with the same number of rows",
        )
    if shape.output_dim is None:
        return  # an own module before its first forward: the probe checks the rest
    if task.kind == "categorical":
        _check_classes(y, field, shape, task, where)
    elif task.masks_nan:
        _check_masked(y, field, task, where)
    elif y.is_floating_point() and not bool(torch.isfinite(y).all()):
        raise DataError(
            field, f"{where}'s targets hold NaN/inf values", "clean the targets before training"
        )
    k = shape.output_dim
    if (
        task.kind in ("binary", "regression", "multilabel")
        and task.shaped
        and y.numel() != rows * k
    ):
        raise DataError(
            field,
            f"{where}'s targets have shape {tuple(y.shape)}, the outputs ({rows}, {k})",
            f"yield one target per output: shape ({rows}, {k})"
            + (f" or ({rows},)" if k == 1 else ""),
        )


def _check_classes(y: torch.Tensor, field: str, net: NetShape, task: Task, where: str) -> None:
    if y.is_floating_point() or y.dtype == torch.bool or y.is_complex():
        raise DataError(
            field,
            f"{where}'s class targets have dtype {y.dtype}",
            "pass integer class indices (torch.long), e.g. y.long()",
        )
    if task.shaped and y.ndim != 1:
        raise DataError(
            field,
            f"{where}'s class targets have shape {tuple(y.shape)}",
            "pass a 1-D tensor of class indices, one per row"
            + (", e.g. y.squeeze(1)" if y.ndim == 2 and y.shape[1] == 1 else ""),
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
                f"{where}'s class targets span [{lo}, {hi}] but "
                f"{'NNParams.output_dim is' if net.owner == 'NNParams' else 'the network has'}"
                f" {net.output_dim}{'' if net.owner == 'NNParams' else ' outputs'}{ignored}",
                f"use targets in [0, {net.output_dim}) or "
                + (
                    f"set NNParams(output_dim={hi + 1})"
                    if net.owner == "NNParams"
                    else f"give the network {hi + 1} outputs"
                ),
            )


def _check_masked(y: torch.Tensor, field: str, task: Task, where: str) -> None:
    """A declared regression or multilabel task: NaN marks a missing target (masked out
    of the loss and the metrics); ±inf is refused, and multilabel targets are 0 or 1."""
    if not y.is_floating_point():
        raise DataError(
            field,
            f"{where}'s {task.kind} targets have dtype {y.dtype}",
            "pass float targets, e.g. y.float() (NaN marks a missing target)",
        )
    if bool(torch.isinf(y).any()):
        raise DataError(
            field,
            f"{where}'s targets hold ±inf values",
            "clean the targets; mark a missing target with NaN, which is masked out",
        )
    if task.kind == "multilabel":
        known = y[~torch.isnan(y)]
        if bool(((known != 0) & (known != 1)).any()):
            raise DataError(
                field,
                f"{where}'s multilabel targets hold values other than 0, 1 and NaN",
                "pass one 0/1 indicator per label (NaN for a missing label)",
            )


def check_loader(loader: Any, field: str, net: Any, task: Task) -> None:
    """Refuse a loader whose first batch cannot train this model."""
    check_batch(first_batch(loader, field), field, net, task, "the first batch")


def batch_problem(batch: Any, field: str, net: Any, task: Task, where: str) -> DataError | None:
    """Why ``batch`` cannot train this model, if a check can tell (after a failure)."""
    try:
        check_batch(batch, field, net, task, where)
    except DataError as problem:
        return problem
    return None


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


def _generator_digest(gen: Any) -> str | None:
    """Where a generator stands now (its state's SHA-256); None without one."""
    if not isinstance(gen, torch.Generator):
        return None
    return hashlib.sha256(gen.get_state().numpy().tobytes()).hexdigest()


def _sampler_identity(sampler: Any) -> tuple[dict[str, Any], list[str]]:
    """(identity, what could not be fingerprinted)."""
    if type(sampler) is SequentialSampler:
        return {"type": "sequential"}, []
    if type(sampler) is RandomSampler:
        return {
            "type": "random",
            "replacement": sampler.replacement,
            "num_samples": sampler.num_samples,
            "generator": _generator_digest(sampler.generator),  # None: the seeded global RNG
        }, []
    ident = callable_identity(sampler)
    ident["generator"] = _generator_digest(getattr(sampler, "generator", None))
    return ident, [] if ident["code"] else [f"the sampler {ident['name']}"]


def _pipeline_identity(loader: DataLoader) -> tuple[dict[str, Any], list[str]]:
    """How a DataLoader turns its dataset into batches: order, batching, collation."""
    sampler, unknown = _sampler_identity(loader.sampler)
    ident: dict[str, Any] = {
        "batch_size": loader.batch_size,
        "drop_last": loader.drop_last,
        "sampler": sampler,
    }
    if type(loader.batch_sampler) not in (BatchSampler, type(None)):
        ident["batch_sampler"] = callable_identity(loader.batch_sampler)
        if ident["batch_sampler"]["code"] is None:
            unknown.append(f"the batch sampler {ident['batch_sampler']['name']}")
    if loader.collate_fn not in (default_collate, default_convert):
        ident["collate_fn"] = callable_identity(loader.collate_fn)
        if ident["collate_fn"]["code"] is None:
            unknown.append(f"the collate_fn {ident['collate_fn']['name']}")
    return ident, unknown


def _loader_identity(loader: Any, with_content: bool) -> tuple[dict[str, Any], list[str]]:
    """(identity, what could not be fingerprinted). ``with_content=False`` leaves the
    data set itself out (an explicit ``data_id`` names it)."""
    if isinstance(loader, DataLoader):
        ident, unknown = _pipeline_identity(loader)
        declared = getattr(loader, "nnx_identity", None)  # e.g. a replayed split's digest
        if isinstance(declared, dict):
            ident["declared"] = declared
        if with_content:
            ident["dataset"], exact = _dataset_identity(loader.dataset)
            if not exact:
                unknown.append(f"the data set ({ident['dataset']['type']})")
        return ident, unknown
    if not with_content:
        return {"kind": type(loader).__qualname__}, []
    declared = getattr(loader, "nnx_identity", None)
    if isinstance(declared, dict):  # a batch source that fingerprints its own content
        return {"kind": "declared", "type": type(loader).__qualname__, **declared}, []
    if isinstance(loader, list | tuple):
        h = _new_digest()
        for batch in loader:
            # a dict batch (KeywordInputs) by its keys in order, then its tensors
            parts = [batch[k] for k in sorted(batch)] if isinstance(batch, dict) else batch
            if isinstance(batch, dict):
                h.update(repr(sorted(batch)).encode())
            for part in parts:
                if isinstance(part, torch.Tensor):
                    tensor_digest(h, part)
                else:
                    return {"kind": "opaque-list", "len": len(loader)}, ["a list of non-tensors"]
        return {"kind": "batches", "n": len(loader), "digest": h.hexdigest()}, []
    name = f"{type(loader).__module__}.{type(loader).__qualname__}"
    return {"kind": "opaque", "type": name}, [f"the batch source {name}"]


def data_identity(train_loader: Any, val_loader: Any, data_id: str | None) -> dict[str, Any]:
    """What enters the run id for the data.

    Tensor datasets and lists of tensor batches are hashed by content (shape, dtype and
    bytes); a DataLoader adds how it batches: batch size, its sampler (and where the
    sampler's or the loader's own generator stands at the start of training), a custom
    batch sampler, and a custom ``collate_fn`` (by its code). An explicit ``data_id``
    names the data set itself; the loading pipeline still enters. What cannot be
    fingerprinted (another dataset type, code with no source) is described instead, and
    a warning asks for ``data_id``: two different inputs must never share a run id.
    """
    with_content = data_id is None
    train_loader, val_loader = unwrap_source(train_loader), unwrap_source(val_loader)
    identity: dict[str, Any] = {} if with_content else {"data_id": data_id}
    identity["train"], unknown = _loader_identity(train_loader, with_content)
    if val_loader is not None:
        identity["val"], val_unknown = _loader_identity(val_loader, with_content)
        unknown += val_unknown
    if unknown and with_content:
        warnings.warn(
            f"nnx_lab cannot fingerprint {', '.join(dict.fromkeys(unknown))}, so runs on "
            "other data could get this run's id; pass NNTrainParams(data_id='name-and-"
            "version') naming the data and how it is loaded",
            UserWarning,
            stacklevel=3,
        )
    return identity


def check_inputs(X: Any) -> None:
    """Refuse what ``iter_inputs`` cannot read, before anything is iterated."""
    if isinstance(X, np.ndarray | torch.Tensor) or (
        isinstance(X, Iterable) and not isinstance(X, str | bytes)  # a str would recurse
    ):
        return
    raise InputTypeError(
        "X",
        f"a {type(X).__name__} is not a supported input",
        "pass a tensor, a NumPy array, an (X, y) tuple or a loader of batches",
    )


def iter_inputs(X: Any, batch_size: int = 4096, *, cast: bool = True) -> Iterator[Any]:
    """Feature batches from a tensor, an array, an ``(X, y)`` tuple, or a loader.
    ``cast``: integer features become float32 (the MLP's inputs; an own module may take
    token ids as they are)."""
    if isinstance(X, Inputs):  # an adapted batch (or a graph batch): it goes through whole
        yield X
        return
    if isinstance(X, np.ndarray):
        X = torch.from_numpy(X)
    if isinstance(X, torch.Tensor):
        if cast and not X.is_floating_point():
            X = X.float()
        for start in range(0, X.shape[0], batch_size):
            yield X[start : start + batch_size]
        return
    if isinstance(X, tuple) and X and isinstance(X[0], torch.Tensor | np.ndarray):
        yield from iter_inputs(X[0], batch_size, cast=cast)
        return
    if isinstance(X, Iterable):
        for batch in batches(X):
            xb = batch[0] if isinstance(batch, tuple | list) else batch
            yield from iter_inputs(xb, batch_size, cast=cast)
        return
    raise InputTypeError(
        "X",
        f"a {type(X).__name__} is not a supported input",
        "pass a tensor, a NumPy array, an (X, y) tuple or a loader of batches",
    )


def shuffles(X: Any) -> bool:
    """Whether ``X`` is a DataLoader whose order is not its dataset's: a sampler (or
    batch sampler) other than the sequential one. Its rows' positions are then not
    dataset indices."""
    if not isinstance(X, DataLoader) or isinstance(X.dataset, IterableDataset):
        return False  # an iterable dataset has an order of its own, and no indices
    batch_sampler = X.batch_sampler
    if batch_sampler is not None and type(batch_sampler) is not BatchSampler:
        return True
    return type(X.sampler) is not SequentialSampler
