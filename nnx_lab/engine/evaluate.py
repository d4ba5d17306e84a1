"""Evaluation as a free function: a network, a loader, a loss and a task in; an EDP out.

The model's ``evaluate()``, the training loop's validation pass and the coming tools
(plan probes, calibration) all call :func:`evaluate`. Sums and per-class counts stay
on the device for the whole split and cross to the host once.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..data.metrics import MetricSpec
from .adapters import forward
from .edp import EDP, finalize
from .fast_batches import batches
from .losses import LossFn
from .modes import preserved_modes
from .precision import ResolvedPrecision
from .scoring import Accumulation, Scorer, call_extra, scored_pairs, scorer_specs
from .staging import device_hook, staged
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
    metrics: Sequence[MetricSpec] = (),
    extra_metrics: dict[str, Callable[[Any, Any], Any]] | None = None,
    gather: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> EDP:
    """Metrics of ``net`` over every batch of ``loader``: the split's mean loss, and for
    classification its accuracy, error, precision, recall and F1.

    The loss is averaged over what the loss averages over (valid targets, output
    elements, or rows for a custom loss), so the value equals one pass of the loss over
    the whole split. Outputs are scored in float32 whatever the precision policy.
    ``reduce`` sums the split's statistics across ranks (a data-parallel run, where each
    rank evaluates its shard): every rank then gets the metrics of the whole split;
    ``gather`` concatenates rows across ranks (exact AUROC, ``extra_metrics``).

    A declared task's metrics (mse / mae, the multilabel set) and the ``metrics``
    declared here go to ``EDP.metrics``, computed by the registry's accumulators on the
    device and read back once; ``extra_metrics`` are called once, on the split's
    aggregate predictions (``EDP.extra``).
    """
    if device is None:
        device = next(net.parameters()).device
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    # A custom torch loss module is combined by its own reduction (losses.split_parts);
    # ``by_parts`` is None until the first batch says whether it applies.
    weight_sum = torch.zeros((), dtype=torch.float64, device=device)
    by_parts: bool | None = None
    summed = False
    rows = elements = 0
    k = task.k
    # true positives, targets and predictions per class: what the metrics read of a
    # confusion matrix, without its k * k cells (a 1000-class head's would be a million)
    per_class = torch.zeros((3, k), dtype=torch.long, device=device) if k else None
    specs = scorer_specs(task, metrics)
    acc = Accumulation(Scorer(task, specs, device)) if specs else None
    kept: list[tuple[torch.Tensor, torch.Tensor]] | None = [] if extra_metrics else None
    with inference(net, precision, "evaluate"):
        for X, y in staged(batches(loader), device_hook(device)):
            X, y = X.to(device, non_blocking=True), y.to(device, non_blocking=True)
            out = forward(net, X).float()
            parts = loss.split_parts(out, y) if by_parts is not False else None
            by_parts = parts is not None
            if parts is None:
                loss_sum += loss.total(out, y).detach().to(torch.float64)
            else:
                loss_sum += parts[0].detach().to(torch.float64)
                summed = parts[1] is None
                if parts[1] is not None:
                    weight_sum += parts[1].to(device)
            rows += int(y.shape[0])
            elements += int(out.numel())
            if per_class is not None:
                per_class += task.counts(task.decode(out), y)
            if acc is not None:
                acc.add(out, y)
            if kept is not None:
                kept.append((y, task.decode(out)))
    if reduce is not None:
        counts = torch.tensor([rows, elements], dtype=torch.float64, device=device)
        parts = [loss_sum.reshape(1), counts, weight_sum.reshape(1)]
        if per_class is not None:
            parts.append(per_class.reshape(-1).to(torch.float64))
        packed = reduce(torch.cat(parts))
        loss_sum, rows, elements = packed[0], int(packed[1]), int(packed[2])
        weight_sum = packed[3]
        if per_class is not None:
            per_class = packed[4:].reshape(3, k).round().long()  # type: ignore[arg-type]
        if acc is not None:
            acc.union(reduce, gather)
    if rows == 0:
        return EDP(loss=math.nan, samples=0)
    valid = None
    scored: dict[str, float | None] = {}
    if acc is not None:
        finals = acc.finalize()
        if finals is not None:
            valid, scored = acc.scorer.read(finals.tolist(), "evaluate: targets")
    host = None if per_class is None else per_class.cpu().numpy()
    denominator = {"target": None, "element": elements, "row": rows}[loss.per]
    if denominator is None:  # valid targets: the counts', or the registry's count
        counted = valid if valid is not None else rows
        denominator = int(host[1].sum()) if host is not None else counted
    mean = float(loss_sum) / denominator if denominator else math.nan
    if by_parts:
        if summed:
            mean = float(loss_sum)
        else:
            weight = float(weight_sum)
            mean = float(loss_sum) / weight if weight else math.nan
    extra = _extra(task, kept, extra_metrics, gather) if kept is not None else {}
    if not task.declared:
        valid = None  # a task-less record keeps its fields as they were
    elif host is not None:
        valid = int(host[1].sum())
    if valid == 0:  # every target masked: no loss and no metric to report (§2.11)
        mean = math.nan
    record = {"valid": valid, "metrics": scored, "extra": extra or {}}
    if host is None or task.kind == "multilabel":
        return EDP(loss=mean, samples=rows, **record)
    values = {name: float(v) for name, v in finalize(host, task.kind).items()}
    if valid == 0:
        values = {}
    return EDP(loss=mean, samples=rows, **values, **record)


def _extra(
    task: Task,
    kept: list[tuple[torch.Tensor, torch.Tensor]],
    fns: dict[str, Callable[[Any, Any], Any]] | None,
    gather: Callable[[torch.Tensor], torch.Tensor] | None,
) -> dict[str, float | None]:
    """``extra_metrics`` once, on the split's aggregate (every rank's rows, under DDP)."""
    if not kept or not fns:
        return {}
    y = torch.cat([t for t, _ in kept])
    pred = torch.cat([p for _, p in kept])
    if gather is not None:
        y, pred = gather(y), gather(pred)
    return call_extra(fns, *scored_pairs(task, y, pred)) or {}
