"""Prediction: the one inference path of ``predict``, ``predict_proba`` and
``iter_predict`` (§2.13, §2.21).

Logits are float32 on the host, computed in eval mode, with no grad and under the
precision policy (``evaluate.inference``), every module's own mode restored after. The
probability spec is refused before any inference when it cannot fit the network's
outputs, and the kind of probabilities is declared, never inferred from the loss.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError, DataError, PredictionValidationError
from .adapters import Inputs, forward
from .data import check_inputs, iter_inputs, shuffles
from .evaluate import inference
from .net_shape import NetShape
from .precision import ResolvedPrecision
from .probabilities import (
    PredictionResult,
    ProbabilitySpec,
    as_sample_ids,
    prediction_from_logits,
)
from .task_spec import TaskSpec
from .tasks import Task

__all__ = [
    "Prediction",
    "batch_logits",
    "check_features",
    "predict_logits",
    "probabilities",
    "probability_spec",
    "source_sample_ids",
    "warn_positions",
]


@dataclass(frozen=True)
class Prediction:
    """``predict()``'s result: raw float32 logits and decoded classes (or values).

    Unpacks as NNx's does: ``logits, classes = model.predict(X=X)``.
    """

    logits: torch.Tensor
    classes: torch.Tensor

    def __len__(self) -> int:
        return int(self.logits.shape[0])

    def __iter__(self) -> Iterator[torch.Tensor]:
        return iter((self.logits, self.classes))


def check_features(xb: Any, input_dim: Any) -> None:
    """Refuse a batch the network cannot take: ``input_dim`` is the MLP's width (an
    int) or an own network's ``NetShape`` (its row shape, when it has one). Adapted
    inputs and graph batches go to the network whole: it checks them."""
    if isinstance(xb, Inputs):
        return
    if isinstance(input_dim, NetShape):
        shape = input_dim
        if shape.sample_shape is None:
            return
        if shape.tabular:
            input_dim = shape.input_dim
        else:
            if tuple(xb.shape[1:]) != shape.sample_shape:
                raise ConfigError(
                    "X",
                    f"a batch of shape {tuple(xb.shape)}",
                    f"inputs must have shape (rows, {', '.join(map(str, shape.sample_shape))}) "
                    f"({shape.owner})",
                )
            return
    if xb.ndim < 2 or xb.shape[-1] != input_dim:
        raise ConfigError(
            "X",
            f"a batch of shape {tuple(xb.shape)}",
            f"features must have {input_dim} columns (NNParams.input_dim)",
        )


def predict_logits(
    net: torch.nn.Module,
    X: Any,
    *,
    device: torch.device,
    precision: ResolvedPrecision,
    input_dim: Any,
    output_dim: int,
    surface: str,
) -> torch.Tensor:
    """Float32 logits of every row of ``X`` (a tensor, array, tuple or loader), on the
    host, under one inference context."""
    check_inputs(X)
    outs = []
    cast = not isinstance(input_dim, NetShape) or input_dim.float_inputs
    with inference(net, precision, surface):
        for xb in iter_inputs(X, cast=cast):
            check_features(xb, input_dim)
            outs.append(forward(net, xb.to(device)).float())
    if not outs:
        if not isinstance(X, np.ndarray | torch.Tensor | tuple):
            # NNx's rule: a loader with no batch is a mistake upstream (an empty split, a
            # filter that kept nothing), not an empty answer. An empty tensor is one.
            raise DataError(
                "X",
                f"{surface}() loader produced zero batches",
                "check the loader's dataset and sampler; pass an empty tensor to get an "
                "empty result",
            )
        return torch.empty(0, output_dim)
    return torch.cat(outs).cpu()


def batch_logits(
    net: torch.nn.Module,
    xb: torch.Tensor,
    *,
    device: torch.device,
    precision: ResolvedPrecision,
    input_dim: Any,
    surface: str,
) -> torch.Tensor:
    """One batch's float32 logits on the host. The inference context is entered per
    batch: a stream's caller sees the network in its own modes, with grad as it had it,
    between batches."""
    check_features(xb, input_dim)
    with inference(net, precision, surface):
        return forward(net, xb.to(device)).float().cpu()


def probability_spec(
    spec: ProbabilitySpec | None, declared: TaskSpec | None, output_dim: int
) -> ProbabilitySpec | None:
    """The spec to apply (None: a declared regression task), refused before any
    inference when it cannot fit ``output_dim`` outputs; without one, the declared
    task's."""
    if spec is None:
        if declared is None:
            raise PredictionValidationError(
                "spec",
                "no ProbabilitySpec was passed and the model declares no task",
                "pass one, e.g. model.predict_proba(X, ProbabilitySpec(kind='categorical', "
                "labels=(...))); the kind is declared, never inferred from the loss",
            )
        # Seam for declared tasks (§2.5): a task gives its spec, None for regression.
        spec = declared.probability_spec()
        if spec is None:
            return None
    if not isinstance(spec, ProbabilitySpec):
        raise PredictionValidationError(
            "spec",
            f"a {type(spec).__name__} is not a ProbabilitySpec",
            "pass ProbabilitySpec(kind='categorical' | 'bernoulli', class_axis=..., labels=...)",
        )
    spec.check_shape((0, output_dim))
    return spec


def probabilities(
    logits: torch.Tensor,
    spec: ProbabilitySpec | None,
    task: Task,
    declared: TaskSpec | None,
    derived: bool,
    source: Any = None,
) -> PredictionResult:
    """``predict_proba``'s result from the logits: ``spec`` applied (None: a regression
    task's values, no probabilities); a spec ``derived`` from a declared multilabel task
    decodes with the task's threshold, as ``predict()`` and the records do.
    ``source``: what was predicted on; a source that names its rows (a graph loader's
    ``sample_ids``) gives their ids, else the ids are the rows' positions."""
    sample_ids = source_sample_ids(source)
    if spec is None:
        ids = as_sample_ids(sample_ids, int(logits.shape[0]))
        return PredictionResult(logits, None, task.decode(logits), None, ids)
    result = prediction_from_logits(logits, spec, sample_ids=sample_ids)
    if (
        derived
        and declared is not None
        and declared.kind == "multilabel"
        and declared.threshold != 0.5
    ):
        result = dataclasses.replace(result, decoded=task.decode(logits))
    return result


def source_sample_ids(X: Any) -> Any:
    """The ids a batch source declares for its rows, in iteration order (a graph
    loader's node indices or graph ids), or None: rows are then their positions."""
    ids = getattr(X, "sample_ids", None)
    return None if callable(ids) else ids


def warn_positions(X: Any, stacklevel: int) -> None:
    if shuffles(X):
        warnings.warn(
            "this loader shuffles (or samples), so sample_ids are positions in this "
            "iteration's order, not dataset indices; predict from a loader with "
            "shuffle=False to get dataset indices",
            UserWarning,
            stacklevel=stacklevel + 1,
        )
