"""Streaming prediction and validation from counts and sums (§2.21).

``PredictionStream`` is what ``model.iter_predict`` returns: one batch result at a time,
in the loader's order, each computed under the same inference context as ``predict()``
(eval mode, no grad, the precision policy) and with every module's own mode restored
before the batch is handed over. ``streaming_eval_step`` is a validation pass for
``model.train(params, eval_step_fn=...)`` built on the metric registry.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..data.metrics import MetricSpec
from ..data.streaming import StreamingMetrics
from .data import iter_inputs
from .edp import EDP
from .evaluate import inference
from .losses import LossFn
from .precision import ResolvedPrecision
from .probabilities import PredictionBatch, PredictionResult, prediction_from_logits
from .scoring import call_extra, scored_pairs, scorer_specs
from .tasks import Task

if TYPE_CHECKING:
    from .model import NNModel

__all__ = ["PredictionStream", "streaming_eval_step"]


class PredictionStream:
    """``with model.iter_predict(loader) as stream: for batch in stream: ...``

    One pass: a ``PredictionBatch`` (``rich=False``) or a ``PredictionResult``
    (``rich=True``) per loader batch. Closing the stream (leaving the ``with`` block)
    drops its references to the model, the loader and the loader's iterator; the loader
    itself stays yours.
    """

    def __init__(
        self,
        model: NNModel,
        X: Any,
        make: Callable[[torch.Tensor, np.ndarray], Any],
        surface: str,
    ) -> None:
        self._model: NNModel | None = model
        self._X: Any = X
        self._make: Callable[[torch.Tensor, np.ndarray], Any] | None = make
        self._surface = surface
        self._state = "new"
        self._batches: Iterator[Any] | None = None

    @property
    def closed(self) -> bool:
        return self._state == "closed"

    def __enter__(self) -> PredictionStream:
        if self._state != "new":
            raise RuntimeError(
                "this prediction stream was already opened; call model.iter_predict(...) "
                "again for another pass"
            )
        self._state = "open"
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._batches is not None:
            self._batches.close()  # type: ignore[attr-defined]
        self._batches = None
        self._model = self._X = self._make = None
        self._state = "closed"

    def __iter__(self) -> Iterator[Any]:
        if self._state != "open":
            raise RuntimeError(
                "a prediction stream is read inside its with block: "
                "`with model.iter_predict(loader) as stream: for batch in stream: ...`"
                + (" (this one is closed)" if self._state == "closed" else "")
            )
        if self._batches is not None:
            raise RuntimeError(
                "a prediction stream is one pass; call model.iter_predict(...) again"
            )
        self._batches = self._generate()
        return self._batches

    def _generate(self) -> Iterator[Any]:
        model, make = self._model, self._make
        assert model is not None
        assert make is not None
        offset = 0
        for xb in iter_inputs(self._X):
            model._check_features(xb)
            # Entered per batch: the caller's code between batches sees the network in
            # its own modes, with grad as it had it.
            with inference(model.net, model.precision, self._surface):
                logits = model.net(xb.to(model.device)).float().cpu()
            n = int(logits.shape[0])
            ids = np.arange(offset, offset + n, dtype=np.int64)
            offset += n
            yield make(logits, ids)


def plain_batch(task: Task) -> Callable[[torch.Tensor, np.ndarray], PredictionBatch]:
    return lambda logits, ids: PredictionBatch(logits, task.decode(logits), ids)


def rich_batch(spec: Any, task: Task) -> Callable[[torch.Tensor, np.ndarray], PredictionResult]:
    if spec is None:  # a regression task: continuous values, no probabilities
        return lambda logits, ids: PredictionResult(logits, None, task.decode(logits), None, ids)
    return lambda logits, ids: prediction_from_logits(logits, spec, sample_ids=ids)


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
        for X, y in loader:
            X, y = X.to(device, non_blocking=True), y.to(device, non_blocking=True)
            out = net(X).float()
            loss_sum += loss.total(out, y).detach().to(torch.float64)
            rows += int(y.shape[0])
            elements += int(out.numel())
            if fields is not None:
                fields.update(y, logits=out)
            if declared is not None:
                if task.kind == "regression":
                    declared.update(y, values=out)
                else:
                    declared.update(y, logits=out, decoded=task.decode(out))
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
