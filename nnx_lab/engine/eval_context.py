"""``eval_step_fn(ctx) -> EDP``: the validation pass as one call per epoch (§3).

Two forms are accepted, told apart by the signature: a function that can be called
with one positional argument and not with the four of the legacy form is given an
``EvalStepContext`` (NNx's form); one that takes ``(net, loader, loss, task, *,
device, precision)`` is the legacy evaluator form (``streaming_eval_step``). The
context form runs under ``torch.no_grad()`` with the network in eval mode; its EDP is
the epoch's ``val_edp``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["EvalStepContext", "takes_context"]


@dataclass(frozen=True)
class EvalStepContext:
    """What a context-form ``eval_step_fn`` is given once per epoch."""

    model: torch.nn.Module
    val_loader: Any
    extra_metrics: dict[str, Callable[..., Any]] | None
    epoch_idx: int
    metrics: Any  # NNTrainParams.metrics (None: none declared)
    loss_fn: Any = None  # the model's LossFn
    device: torch.device | None = None
    precision: Any = None  # the run's ResolvedPrecision
    state: dict[str, Any] = field(default_factory=dict)


def takes_context(fn: Any) -> bool:
    """Whether ``fn`` is the context form: callable with one positional argument and
    not with the legacy form's four."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    try:
        sig.bind(None, None, None, None, device=None, precision=None)
        return False
    except TypeError:
        pass
    try:
        sig.bind(None)
    except TypeError:
        return False
    return True
