"""One ``StreamingMetrics.update``'s inputs, checked and shaped into a ``MetricBatch``.

The checks that need no host sync are made here (shapes, dtypes, the class count kept
from batch to batch); targets out of range are counted on the device and reported by
``finalize``, so an update never waits for the device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..errors import DataError
from .metrics import MetricBatch, MetricSpec

__all__ = ["Declared", "Shaped", "accumulator_dtype", "as_tensor", "shape_batch"]


@dataclass(frozen=True)
class Declared:
    """What the inputs are checked against: the declaration and the class count so far."""

    kind: str
    specs: Sequence[MetricSpec]
    needs: frozenset[str]
    class_axis: int
    ignore_index: int | None
    n_classes: int | None


@dataclass(frozen=True)
class Shaped:
    """A shaped batch, its class (or output) count, and its out-of-range targets (a 0-d
    count on the device; None for regression, whose targets are all in range)."""

    batch: MetricBatch
    n_classes: int
    bad_targets: torch.Tensor | None


def accumulator_dtype(device: torch.device) -> torch.dtype:
    return torch.float32 if device.type == "mps" else torch.float64  # MPS has no float64


def as_tensor(value: Any, field: str, device: torch.device | None) -> torch.Tensor:
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    elif isinstance(value, list | tuple):
        value = torch.as_tensor(value)
    if not isinstance(value, torch.Tensor):
        raise DataError(
            field, f"a {type(value).__name__} is not a tensor", "pass a tensor or a NumPy array"
        )
    value = value.detach()
    return value if device is None else value.to(device, non_blocking=True)


def valid_mask(valid: Any, y: torch.Tensor, device: torch.device | None) -> torch.Tensor:
    """NNx's ``valid=``: a boolean mask shaped like the targets (True: scored)."""
    mask = as_tensor(valid, "valid", device)
    if mask.dtype is not torch.bool or tuple(mask.shape) != tuple(y.shape):
        raise DataError(
            "valid",
            f"is {mask.dtype} of shape {tuple(mask.shape)}",
            f"pass a boolean mask shaped like the targets {tuple(y.shape)} (True: score it)",
        )
    return mask


def shape_batch(d: Declared, y: torch.Tensor, given: dict[str, torch.Tensor]) -> Shaped:
    """``y`` (the targets) and the ``given`` predictions (by name: logits,
    probabilities, decoded, values) as one ``MetricBatch``."""
    if d.kind == "regression":
        return _regression(d, y, given)
    return _labeled(d, y, given)


def _targets_count(y: torch.Tensor, expected: int, what: str, fix: str) -> None:
    if y.numel() != expected:
        raise DataError("targets", f"have {y.numel()} elements for {what}", fix)


def _rows_of(d: Declared, t: torch.Tensor, name: str) -> torch.Tensor:
    """Move the class axis last and flatten to ``(M, K)``."""
    ndim = t.ndim
    axis = d.class_axis + ndim if d.class_axis < 0 else d.class_axis
    if ndim < 2 or not 0 < axis < ndim:
        raise DataError(
            name,
            f"has shape {tuple(t.shape)}, with no class axis {d.class_axis}",
            "pass (rows, classes) outputs, or set class_axis",
        )
    return torch.movedim(t, axis, -1).reshape(-1, t.shape[axis])


def _regression(d: Declared, y: torch.Tensor, given: dict[str, torch.Tensor]) -> Shaped:
    dtype = accumulator_dtype(y.device)
    v = given.get("values", given.get("logits"))
    if v is None:
        raise DataError(
            "StreamingMetrics.update",
            "no values= (or logits=) for regression metrics",
            "pass the model's continuous outputs as values=",
        )
    width = v.shape[-1] if v.ndim > 1 else 1
    _targets_count(
        y, v.numel(), f"values of shape {tuple(v.shape)}", "pass one target per predicted value"
    )
    if d.n_classes is not None and width != d.n_classes:
        raise DataError(
            "values",
            f"a batch with {width} outputs after batches with {d.n_classes}",
            "keep the outputs the same width in every batch",
        )
    v = v.reshape(-1, width)
    yf = y.reshape(-1, width).to(dtype)
    valid = torch.isfinite(yf)
    targets = torch.where(valid, yf, torch.zeros_like(yf))
    return Shaped(MetricBatch(d.kind, targets, valid, width, values=v, dtype=dtype), width, None)


def _labeled(d: Declared, y: torch.Tensor, given: dict[str, torch.Tensor]) -> Shaped:
    kind = d.kind
    dtype = accumulator_dtype(y.device)
    scored = given.get("logits", given.get("probabilities"))
    if d.needs - {"labels"} and scored is None:
        wanting = [s.name for s in d.specs if s.info.input == "probabilities"]
        raise DataError(
            "StreamingMetrics.update",
            f"{', '.join(wanting)} need probabilities, and neither logits= nor "
            "probabilities= was passed",
            "pass logits= (preferred) or probabilities=",
        )
    if scored is None and "decoded" not in given:
        raise DataError(
            "StreamingMetrics.update",
            "no predictions were passed",
            "pass logits=, probabilities= or decoded=",
        )
    flat: dict[str, torch.Tensor] = {}
    for name in ("logits", "probabilities"):
        if name in given:
            if not given[name].is_floating_point():
                raise DataError(name, f"has dtype {given[name].dtype}", "pass float outputs")
            flat[name] = _rows_of(d, given[name], name)
    k = next(iter(flat.values())).shape[1] if flat else None
    if "decoded" in given:
        dec = given["decoded"]
        if kind == "categorical":
            flat["decoded"] = dec.reshape(-1)
        else:
            flat["decoded"] = _rows_of(d, dec, "decoded") if dec.ndim > 1 else dec.reshape(-1, 1)
            k = flat["decoded"].shape[1] if k is None else k
    if k is None:
        k = d.n_classes
        if k is None:
            raise DataError(
                "StreamingMetrics.update",
                "decoded labels alone do not say how many classes there are",
                "pass logits= or probabilities= too, or build the metrics from a "
                "ProbabilitySpec with labels",
            )
    if d.n_classes is not None and k != d.n_classes:
        raise DataError(
            "StreamingMetrics.update",
            f"a batch with {k} classes after batches (or labels) with {d.n_classes}",
            "keep the class axis the same size in every batch",
        )
    rows = next(iter(flat.values())).shape[0]
    for name, t in flat.items():
        if t.shape[0] != rows:
            raise DataError(name, f"has {t.shape[0]} rows, not {rows}", "align the inputs")
    if kind == "categorical":
        if y.is_floating_point() or y.dtype == torch.bool:
            raise DataError(
                "targets", f"have dtype {y.dtype}", "pass integer class indices (torch.long)"
            )
        _targets_count(
            y,
            rows,
            f"{rows} predicted rows",
            "pass one class index per row (the outputs' shape without the class axis)",
        )
        yl = y.reshape(-1).long()
        valid = yl != (d.ignore_index if d.ignore_index is not None else -(2**62))
        in_range = (yl >= 0) & (yl < k)
        bad = valid & ~in_range
        valid = valid & in_range
        targets = torch.where(valid, yl, torch.zeros_like(yl))
    else:
        _targets_count(y, rows * k, f"{rows} rows of {k} outputs", "pass one 0/1 target per output")
        yf = _rows_of(d, y, "targets") if y.ndim > 1 and y.shape != (rows, k) else y
        yf = yf.reshape(rows, k).to(dtype)
        valid = torch.isfinite(yf)
        bad = valid & (yf != 0) & (yf != 1)
        valid = valid & ~bad
        targets = torch.where(valid, yf, torch.zeros_like(yf))
    batch = MetricBatch(
        kind,
        targets,
        valid,
        k,
        logits=flat.get("logits"),
        probabilities=flat.get("probabilities"),
        decoded=flat.get("decoded"),
        dtype=dtype,
    )
    return Shaped(batch, k, bad.sum(dtype=dtype))
