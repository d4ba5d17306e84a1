"""Losses, decoding and metrics.

Losses and predictions stay on the model's device. Classification metrics come from
confusion matrices accumulated over a whole split (or one per step, built for many steps
at once with a single ``bincount``), which cross to the host once and are finalized there
with NumPy, never as a mean of per-batch ratios. Precision, recall and F1 are macro
averages over the classes that occur in the targets or the predictions (sklearn's
``average="macro", zero_division=0``); for a binary-cross-entropy model they are the
positive class's, over every output element.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .enums import Losses

__all__ = ["EDP", "ConfusionAccumulator", "decode", "loss_function", "metrics_from_confusion"]

METRIC_NAMES = ("loss", "error", "accuracy", "precision", "recall", "f1")


@dataclass(frozen=True)
class EDP:
    """Evaluation data point: the metrics of one step, epoch or split."""

    loss: float
    error: float | None = None
    accuracy: float | None = None
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None
    samples: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> EDP | None:
        if data is None:
            return None
        return cls(**{k: data.get(k) for k in (*METRIC_NAMES, "samples")})


def _at_least_fp32(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.promote_types(t.dtype, torch.float32)) if t.is_floating_point() else t.float()


def loss_function(loss: Losses) -> Callable[..., torch.Tensor]:
    """``fn(logits, y, reduction)`` for a loss enum. NLL applies log_softmax first (§2.10)."""
    if loss is Losses.CROSS_ENTROPY:
        return lambda logits, y, reduction="mean": F.cross_entropy(logits, y, reduction=reduction)
    if loss is Losses.NEGATIVE_LOG_LIKELIHOOD:
        return lambda logits, y, reduction="mean": F.nll_loss(
            F.log_softmax(logits, dim=-1), y, reduction=reduction
        )
    # Regression and binary losses compare in at least float32: under bf16 autocast a
    # target cast to the output's dtype would be rounded before the loss sees it.
    if loss is Losses.MEAN_SQUARED_ERROR:
        return lambda out, y, reduction="mean": F.mse_loss(
            _at_least_fp32(out), _at_least_fp32(y.reshape(out.shape)), reduction=reduction
        )
    if loss is Losses.BINARY_CROSS_ENTROPY:
        return lambda logits, y, reduction="mean": F.binary_cross_entropy_with_logits(
            _at_least_fp32(logits), _at_least_fp32(y.reshape(logits.shape)), reduction=reduction
        )
    raise NotImplementedError(loss)


def decode(outputs: torch.Tensor, loss: Losses) -> torch.Tensor:
    """Decoded predictions: class indices, 0/1 indicators (logit >= 0), or the values."""
    if loss.is_classification:
        return outputs.argmax(dim=-1)
    if loss is Losses.BINARY_CROSS_ENTROPY:
        return (outputs >= 0).long()
    return outputs.squeeze(-1) if outputs.ndim > 1 and outputs.shape[-1] == 1 else outputs


def n_classes(loss: Losses, output_dim: int) -> int | None:
    if loss.is_classification:
        return output_dim
    if loss is Losses.BINARY_CROSS_ENTROPY:
        return 2
    return None


def confusion_index(pred: torch.Tensor, y: torch.Tensor, loss: Losses, k: int) -> torch.Tensor:
    """Flat ``true * k + pred`` indices, one per scored element."""
    if loss is Losses.BINARY_CROSS_ENTROPY:
        y = y.reshape(pred.shape).long()
    return y.reshape(-1).long() * k + pred.reshape(-1)


def metrics_from_confusion(conf: np.ndarray) -> dict[str, np.ndarray]:
    """Macro metrics of one or many confusion matrices (``[..., k, k]``, rows = truth).

    Finalized on the host with NumPy: the matrices are tiny, and NumPy's per-call cost is
    a fraction of a device op's.
    """
    conf = np.asarray(conf, dtype=np.float64)
    tp = np.diagonal(conf, axis1=-2, axis2=-1)
    support = conf.sum(-1)
    predicted = conf.sum(-2)
    accuracy = tp.sum(-1) / np.maximum(support.sum(-1), 1.0)
    precision_c = np.divide(tp, predicted, out=np.zeros_like(tp), where=predicted > 0)
    recall_c = np.divide(tp, support, out=np.zeros_like(tp), where=support > 0)
    denom = precision_c + recall_c
    f1_c = np.divide(2 * precision_c * recall_c, denom, out=np.zeros_like(tp), where=denom > 0)
    present = (support > 0) | (predicted > 0)
    n_present = np.maximum(present.sum(-1), 1)
    return {
        "accuracy": accuracy,
        "error": 1.0 - accuracy,
        "precision": (precision_c * present).sum(-1) / n_present,
        "recall": (recall_c * present).sum(-1) / n_present,
        "f1": (f1_c * present).sum(-1) / n_present,
    }


def binary_metrics_from_confusion(conf: np.ndarray) -> dict[str, np.ndarray]:
    """Positive-class precision/recall/F1 of ``[..., 2, 2]`` matrices (BCE models)."""
    conf = np.asarray(conf, dtype=np.float64)
    tp, fp, fn = conf[..., 1, 1], conf[..., 0, 1], conf[..., 1, 0]
    accuracy = (conf[..., 0, 0] + tp) / np.maximum(conf.sum((-1, -2)), 1.0)
    precision = np.divide(tp, tp + fp, out=np.zeros_like(tp), where=tp + fp > 0)
    recall = np.divide(tp, tp + fn, out=np.zeros_like(tp), where=tp + fn > 0)
    denom = precision + recall
    f1 = np.divide(2 * precision * recall, denom, out=np.zeros_like(tp), where=denom > 0)
    return {
        "accuracy": accuracy,
        "error": 1.0 - accuracy,
        "precision": precision,
        "recall": recall,
        "f1": f1,
    }


def finalize(conf: np.ndarray, loss: Losses) -> dict[str, np.ndarray]:
    if loss is Losses.BINARY_CROSS_ENTROPY:
        return binary_metrics_from_confusion(conf)
    return metrics_from_confusion(conf)


class ConfusionAccumulator:
    """Sums of loss and a confusion matrix over a split; one host sync in ``result()``."""

    def __init__(self, loss: Losses, output_dim: int, device: torch.device) -> None:
        self.loss = loss
        self.k = n_classes(loss, output_dim)
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        self.count = 0
        self.elements = 0
        self.conf = (
            torch.zeros(self.k * self.k, dtype=torch.long, device=device) if self.k else None
        )

    def update(self, outputs: torch.Tensor, y: torch.Tensor, loss_sum: torch.Tensor) -> None:
        self.loss_sum += loss_sum.detach().to(torch.float64)
        self.count += int(y.shape[0])
        self.elements += int(y.shape[0]) if self.loss.is_classification else int(outputs.numel())
        if self.conf is not None:
            idx = confusion_index(decode(outputs, self.loss), y, self.loss, self.k)
            self.conf += torch.bincount(idx, minlength=self.k * self.k)

    def result(self) -> EDP:
        if self.count == 0:
            return EDP(loss=math.nan, samples=0)
        loss = float(self.loss_sum) / max(self.elements, 1)
        if self.conf is None:
            return EDP(loss=loss, samples=self.count)
        values = finalize(self.conf.view(self.k, self.k).cpu().numpy(), self.loss)
        host = {k: float(v) for k, v in values.items()}
        return EDP(loss=loss, samples=self.count, **host)
