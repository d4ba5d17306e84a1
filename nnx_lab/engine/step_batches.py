"""Batches that belong to the step: under ``objective=`` or ``train_step_fn=`` a batch may
be any structure (one tensor, a tuple of any length, a dict, paired views).

The loop, the accumulation windows and the records all speak ``(X, y)``: rows are read
from ``y``. Rather than teaching each of them a second batch shape, a step-owned batch is
read through an adapter into ``(StepBatch, rows)``: ``StepBatch`` moves to the device like
a tensor (every tensor inside it, recursively) and the step hands its ``batch`` back to
the objective or the ``train_step_fn`` exactly as the loader gave it; ``rows`` is a
placeholder of one zero per row, so the records count samples. A loader whose batches
are already ``(X, y)`` tensor pairs is left alone, so such runs are unchanged bit for bit.

A step or an objective may define ``check(model, params)``: the engine calls it while it
checks the request, before any run directory exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..errors import ConfigError, DataError
from .adapters import AdaptedBatches, BatchAdapter, Inputs
from .data import check_loader, first_batch
from .fast_batches import batches
from .tasks import Task

__all__ = [
    "StepBatch",
    "check_batches",
    "own_batches",
    "owned_task",
    "owns_batches",
    "refuse_unscored_validation",
    "run_step_checks",
    "step_batch",
]


def _move(value: Any, device: Any, non_blocking: bool) -> Any:
    if isinstance(value, torch.Tensor):
        # a tensor already there is returned as it is, which is what .to does, without
        # the dispatch (the loop moves every step-owned batch, mostly already in place)
        if value.device == device:
            return value
        return value.to(device, non_blocking=non_blocking)
    if isinstance(value, Mapping):
        return type(value)({k: _move(v, device, non_blocking) for k, v in value.items()})
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*(_move(v, device, non_blocking) for v in value))
    if isinstance(value, tuple | list):
        return type(value)(_move(v, device, non_blocking) for v in value)
    return value


def _first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, tuple | list):
        for item in value:
            found = _first_tensor(item)
            if found is not None:
                return found
    return None


class StepBatch:
    """One step-owned batch, as the loader gave it; moves like a tensor."""

    __slots__ = ("batch",)

    def __init__(self, batch: Any) -> None:
        self.batch = batch

    def to(self, device: Any, non_blocking: bool = False) -> StepBatch:
        return StepBatch(_move(self.batch, device, non_blocking))

    @property
    def shape(self) -> torch.Size:
        """The first tensor's shape: its rows are the batch's rows."""
        found = _first_tensor(self.batch)
        return found.shape if found is not None else torch.Size([0])


class _StepBatches(BatchAdapter):
    """Reads any batch as ``(StepBatch(batch), one zero per row)``."""

    def split(self, batch: Any) -> tuple[tuple[Any, ...], dict[str, Any], Any]:
        found = _first_tensor(batch)
        if found is None or found.ndim == 0:
            raise DataError(
                "NNTrainParams.train_loader",
                f"a batch of type {type(batch).__name__} holds no tensor with a row axis",
                "yield tensors (or tuples / dicts of tensors) whose first axis is the rows",
            )
        n = int(found.shape[0])
        rows = self._rows
        if rows is None or rows.shape[0] != n:
            # the placeholder is only read (its length), so one of each length serves
            # every batch of that size: a tensor less to build per step
            rows = self._rows = torch.zeros(n)
        return (batch,), {}, rows

    _rows: torch.Tensor | None = None

    def identity(self) -> dict[str, Any]:
        return {"type": "step-owned batches"}


class _OwnedBatches(AdaptedBatches):
    def __iter__(self):  # type: ignore[override]
        adapter = self.adapter
        # the source's own batches, through the fast path for tensor data where it applies
        for batch in batches(self.source):
            (inner,), _, rows = adapter.split(batch)
            yield StepBatch(inner), rows


def step_batch(X: Any, y: Any) -> Any:
    """The batch a step or an objective receives for the loop's ``(X, y)``."""
    return X.batch if type(X) is StepBatch else (X, y)


def _is_pair(batch: Any) -> bool:
    return (
        isinstance(batch, tuple | list)
        and len(batch) == 2
        and isinstance(batch[0], torch.Tensor | Inputs)
        and isinstance(batch[1], torch.Tensor)
    )


def owns_batches(params: Any) -> bool:
    """True when ``params.train_loader`` is read as step-owned batches."""
    return isinstance(params.train_loader, _OwnedBatches)


def own_batches(params: Any, objective: Any, train_step_fn: Any) -> Any:
    """``params`` with a train loader read as step-owned batches, when a step or an
    objective is given and the loader's batches are not ``(X, y)`` tensor pairs, or the
    hook says ``owns_batches = True`` (its pairs are not the model's inputs and targets:
    a language model's ``(inputs, next tokens)``)."""
    loader = params.train_loader
    if objective is None and train_step_fn is None:
        return params
    if isinstance(loader, AdaptedBatches) or loader is None:
        return params  # a batch adapter (or this function) has spoken already
    if isinstance(loader, torch.Tensor) or not hasattr(loader, "__iter__"):
        return params  # the ordinary checks refuse it with their message
    claimed = any(getattr(h, "owns_batches", False) is True for h in (objective, train_step_fn))
    if not claimed and _is_pair(first_batch(loader, "NNTrainParams.train_loader")):
        return params
    return params.replace(train_loader=_OwnedBatches(loader, _StepBatches()))


def refuse_unscored_validation(params: Any, eval_step_fn: Any) -> None:
    """Step-owned validation batches need an ``eval_step_fn``: the default pass scores
    ``(X, y)`` pairs."""
    val = params.val_loader
    if val is None or eval_step_fn is not None:
        return
    if isinstance(val, AdaptedBatches):
        return
    if _is_pair(first_batch(val, "NNTrainParams.val_loader")):
        return
    raise ConfigError(
        "eval_step_fn",
        None,
        "the validation batches are not (X, y) pairs, so the default validation cannot "
        "score them: pass eval_step_fn=fn(ctx) -> EDP (docs/custom_training.md), or "
        "val_loader=None",
    )


def owned_task(model: Any) -> Task:
    """The task of a run whose batches are the step's: they carry no targets the engine
    reads, so a known output width keeps the model's task and an unknown one records
    losses only."""
    if model._shape.output_dim is None:
        return Task("regression", 1, shaped=False)
    return model.task()


def check_batches(params: Any, net_params: Any, task: Task, eval_step_fn: Any, owned: bool):
    """The first-batch checks that apply: none for step-owned training batches, and
    validation batches are checked unless an ``eval_step_fn`` reads them."""
    if owned:
        refuse_unscored_validation(params, eval_step_fn)
    else:
        check_loader(params.train_loader, "NNTrainParams.train_loader", net_params, task)
    if params.val_loader is not None and not (owned and eval_step_fn is not None):
        check_loader(params.val_loader, "NNTrainParams.val_loader", net_params, task)


def run_step_checks(model: Any, params: Any, *hooks: Any) -> None:
    """Each hook's own ``check(model, params)``, before any side effect. The params
    handed over read the loaders as the user passed them."""
    plain = params
    if isinstance(params.train_loader, _OwnedBatches):
        plain = params.replace(train_loader=params.train_loader.source)
    for hook in hooks:
        check = getattr(hook, "check", None)
        if hook is not None and callable(check):
            check(model, plain)
