"""``streaming_eval_step``: a validation pass from counts and sums (§2.21).

``model.train(params, eval_step_fn=streaming_eval_step)`` validates with the metric
registry's accumulators (``data.streaming.StreamingMetrics``) on the device, read back
once, instead of ``evaluate()``; the values are ``evaluate()``'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..data.metrics import MetricSpec
from ..data.streaming import StreamingMetrics
from .adapters import forward
from .edp import EDP
from .evaluate import inference
from .fast_batches import batches
from .losses import LossFn
from .precision import ResolvedPrecision
from .scoring import call_extra, scored_pairs, scorer_specs
from .staging import device_hook, staged
from .tasks import Task

__all__ = ["streaming_eval_step"]


# What EDP's classification fields mean, as registry metrics: macro for classes, the
# positive class over every element (pooled) for a binary (BCE) model.
_EDP_FIELDS = ("accuracy", "error", "precision", "recall", "f1")
_EDP_METRICS = {
    "categorical": ("accuracy", "error", "precision", "recall", "f1"),
    "binary": ("accuracy", "error", "precision_micro", "recall_micro", "f1_micro"),
}


def streaming_eval_step(
    net: torch.nn.Module,
    loader: Any,
    loss: LossFn,
    task: Task,
    *,
    device: torch.device | None = None,
    precision: ResolvedPrecision | None = None,
    metrics: Sequence[MetricSpec] = (),
    extra_metrics: dict[str, Callable[[Any, Any], Any]] | None = None,
) -> EDP:
    """The validation record from counts and sums: ``evaluate()``'s values, computed by
    the metric registry's accumulators on the device and read back once.

    Pass it as ``model.train(params, eval_step_fn=streaming_eval_step)``; any function
    with this signature returning an ``EDP`` can stand in its place. A declared task's
    metrics and the run's declared ``metrics`` go to ``EDP.metrics``; ``extra_metrics``
    are called once on the aggregate predictions, as ``evaluate()`` does.
    """
    if device is None:
        device = next(net.parameters()).device
    names = _EDP_METRICS.get(task.kind)
    fields = (
        None
        if names is None
        else StreamingMetrics(
            [MetricSpec(n) for n in names],
            "categorical" if task.kind == "categorical" else "bernoulli",
            ignore_index=task.ignore_index,
            device=device,
        )
    )
    specs = scorer_specs(task, metrics)
    declared = (
        StreamingMetrics(specs, task.metric_kind, ignore_index=task.ignore_index, device=device)
        if specs
        else None
    )
    kept: list[tuple[torch.Tensor, torch.Tensor]] | None = [] if extra_metrics else None
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    rows = elements = 0
    with inference(net, precision, "evaluate"):
        for X, y in staged(batches(loader), device_hook(device)):
            X, y = X.to(device, non_blocking=True), y.to(device, non_blocking=True)
            out = forward(net, X).float()
            loss_sum += loss.total(out, y).detach().to(torch.float64)
            rows += int(y.shape[0])
            elements += int(out.numel())
            if fields is not None:
                fields._update(y, logits=out)  # nothing read back per batch
            if declared is not None:
                if task.kind == "regression":
                    declared._update(y, values=out)
                else:
                    declared._update(y, logits=out, decoded=task.decode(out))
            if kept is not None:
                kept.append((y, task.decode(out)))
    if rows == 0:
        return EDP(loss=math.nan, samples=0)
    result = None if fields is None else fields.finalize()
    scored = None if declared is None else declared.finalize()
    denominator = {"target": None, "element": elements, "row": rows}[loss.per]
    if denominator is None:  # the valid targets, as the registry counted them
        counter = result if result is not None else scored
        denominator = counter.valid if counter is not None else rows
    mean = float(loss_sum) / denominator if denominator else math.nan
    extra = {}
    if kept:
        y_all = torch.cat([t for t, _ in kept])
        pred = torch.cat([p for _, p in kept])
        extra = call_extra(extra_metrics or {}, *scored_pairs(task, y_all, pred)) or {}
    valid = None
    if task.declared:
        valid = result.valid if result is not None else (scored.valid if scored else None)
        if valid == 0:
            mean = math.nan
    record: dict[str, Any] = {
        "valid": valid,
        "metrics": {} if scored is None else dict(scored.values),
        "extra": extra,
    }
    if result is None or names is None or valid == 0:
        return EDP(loss=mean, samples=rows, **record)
    values = {field: result.values[name] for field, name in zip(_EDP_FIELDS, names, strict=True)}
    return EDP(loss=mean, samples=rows, **values, **record)
