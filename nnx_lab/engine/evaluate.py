"""Evaluation as a free function: a network, a loader, a loss and a task in; an EDP out.

The model's ``evaluate()``, the training loop's validation pass and the coming tools
(plan probes, calibration) all call :func:`evaluate`. Sums and a confusion matrix stay
on the device for the whole split and cross to the host once.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any

import torch

from ._modes import preserved_modes
from .losses import LossFn
from .metrics import EDP, finalize
from .precision import ResolvedPrecision
from .tasks import Task

__all__ = ["evaluate", "inference"]


def inference(net: torch.nn.Module, precision: ResolvedPrecision | None, surface: str) -> Any:
    """Eval mode (each module's own mode restored after), no grad, and the policy's
    autocast where it covers ``surface``."""
    stack = contextlib.ExitStack()
    stack.enter_context(preserved_modes(net))
    net.eval()
    stack.enter_context(torch.no_grad())
    if precision is not None and surface in precision.covers():
        stack.enter_context(precision.autocast())
    return stack


def evaluate(
    net: torch.nn.Module,
    loader: Any,
    loss: LossFn,
    task: Task,
    *,
    device: torch.device | None = None,
    precision: ResolvedPrecision | None = None,
    reduce: Callable[[torch.Tensor], Any] | None = None,
) -> EDP:
    """Metrics of ``net`` over every batch of ``loader``: the split's mean loss, and for
    classification its accuracy, error, precision, recall and F1.

    The loss is averaged over what the loss averages over (valid targets, output
    elements, or rows for a custom loss), so the value equals one pass of the loss over
    the whole split. Outputs are scored in float32 whatever the precision policy.
    ``reduce`` sums the split's statistics across ranks (a data-parallel run, where each
    rank evaluates its shard): every rank then gets the metrics of the whole split.
    """
    if device is None:
        device = next(net.parameters()).device
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    rows = elements = 0
    k = task.k
    conf = torch.zeros((k + 1, k), dtype=torch.long, device=device) if k else None
    with inference(net, precision, "evaluate"):
        for X, y in loader:
            X, y = X.to(device, non_blocking=True), y.to(device, non_blocking=True)
            out = net(X).float()
            loss_sum += loss.total(out, y).detach().to(torch.float64)
            rows += int(y.shape[0])
            elements += int(out.numel())
            if conf is not None:
                conf += task.confusion(task.decode(out), y)
    if reduce is not None:
        counts = torch.tensor([rows, elements], dtype=torch.float64, device=device)
        parts = [loss_sum.reshape(1), counts]
        if conf is not None:
            parts.append(conf.reshape(-1).to(torch.float64))
        packed = reduce(torch.cat(parts))
        loss_sum, rows, elements = packed[0], int(packed[1]), int(packed[2])
        if conf is not None:
            conf = packed[3:].reshape(k + 1, k).round().long()  # type: ignore[operator]
    if rows == 0:
        return EDP(loss=math.nan, samples=0)
    host = None if conf is None else conf[:k].cpu().numpy()
    denominator = {"target": None, "element": elements, "row": rows}[loss.per]
    if denominator is None:
        denominator = int(host.sum()) if host is not None else rows
    mean = float(loss_sum) / denominator if denominator else math.nan
    if host is None:
        return EDP(loss=mean, samples=rows)
    values = {name: float(v) for name, v in finalize(host, task.kind).items()}
    return EDP(loss=mean, samples=rows, **values)
