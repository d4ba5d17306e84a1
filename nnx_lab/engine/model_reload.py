"""What ``NNModel`` hands off whole: an evaluation over a loader, a prediction stream
over a loader, and a model rebuilt from a checkpoint. The facade keeps the signatures
and the documentation."""

from __future__ import annotations

import functools
from typing import Any

from ..errors import ConfigError
from .adapters import adapt_source
from .checkpoint import NNCheckpoint
from .data import check_inputs, check_loader
from .evaluate import evaluate
from .params import NNTrainParams
from .prediction import batch_logits, probability_spec, warn_positions
from .prediction_stream import PredictionStream, plain_batch, rich_batch
from .scoring import check_declared

__all__ = ["evaluate_model", "open_stream", "rebuild"]


def evaluate_model(model: Any, loader: Any, metrics: Any, extra_metrics: Any) -> Any:
    """``NNModel.evaluate``: the same checks as training's, then one pass (``evaluate``)."""
    checked = NNTrainParams(metrics=metrics, extra_metrics=extra_metrics)  # same checks
    loader = adapt_source(loader, model.batch_adapter)
    model._learn_outputs(loader, "loader")
    task = model._task_for_loader(loader, "loader")
    check_declared(checked.metrics, task, "metrics")
    check_loader(loader, "loader", model._shape, task)
    return evaluate(
        model.net,
        loader,
        model._loss,
        task,
        device=model.device,
        precision=model._policy_now(),
        metrics=checked.metrics,
        extra_metrics=checked.extra_metrics,
    )


def open_stream(model: Any, loader: Any, rich: Any, spec: Any) -> PredictionStream:
    """``NNModel.iter_predict``: checked now, streamed one batch at a time later."""
    if not isinstance(rich, bool):
        raise ConfigError("rich", rich, "pass True (PredictionResult) or False")
    if not rich and spec is not None:
        raise ConfigError(
            "spec", spec, "a spec applies to rich=True streams; pass rich=True with it"
        )
    check_inputs(loader)  # refused now, not at the first batch
    loader = model._prediction_inputs(loader)
    task = model.task()
    if rich:
        make = rich_batch(probability_spec(spec, model.params.task, model._output_dim()), task)
    else:
        make = plain_batch(task)
    warn_positions(loader, stacklevel=3)
    logits_of = functools.partial(
        batch_logits,
        model.net,
        device=model.device,
        precision=model._policy_now(),
        input_dim=model._shape,
        surface="predict_proba" if rich else "predict",
    )
    return PredictionStream(logits_of, loader, make)


def rebuild(
    cls: Any,
    checkpoint: Any,
    device: Any,
    precision: Any,
    *,
    loss: Any,
    module: Any,
    batch_adapter: Any,
) -> Any:
    """``NNModel.from_checkpoint``: the recipe of the sidecar, then the checked weights."""
    if not isinstance(checkpoint, NNCheckpoint):
        raise ConfigError(
            "checkpoint",
            checkpoint,
            "pass NNCheckpoint.load(run=..., type=Checkpoints.BEST|LAST)",
        )
    mp = checkpoint.model_params
    changes: dict[str, Any] = {}
    if device is not None:
        changes["device"] = device
    if precision is not None:
        changes["precision"] = precision
        changes["mixed_precision"] = False
    if loss is not None:
        changes["loss"] = loss
    if changes:
        mp = mp.replace(**changes)
    model = cls(
        net_params=checkpoint.net_params,
        params=mp,
        module=module,
        batch_adapter=batch_adapter,
    )
    checkpoint.check_fits(model.net)  # a lying header is refused, naming the tensor
    model.net.load_state_dict(checkpoint.model_state)
    return model
