"""Evaluation data points and confusion metrics.

Classification metrics come from per-class counts (true positives, targets and
predictions: what they read of a confusion matrix) accumulated over a whole split, an
epoch or each step, which cross to the host once and are finalized there with NumPy,
never as a mean of per-batch ratios.
Precision, recall and F1 are macro averages over the classes that occur in the targets
or the predictions (sklearn's ``average="macro", zero_division=0``); for a binary (BCE)
model they are the positive class's, over every output element.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = ["EDP", "METRIC_NAMES", "finalize"]

METRIC_NAMES = ("loss", "error", "accuracy", "precision", "recall", "f1")


@dataclass(frozen=True)
class EDP:
    """Evaluation data point: the metrics of one step, epoch or split.

    ``metrics`` holds registry metrics by key (a declared task's, e.g. mse / mae, and
    the metrics declared in ``NNTrainParams(metrics=...)``), ``extra`` the values of
    ``extra_metrics`` callables, ``valid`` the targets scored (a declared task's
    records; None otherwise). A value that is undefined is None, never made up.
    """

    loss: float
    error: float | None = None
    accuracy: float | None = None
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None
    samples: int = 0
    valid: int | None = None
    metrics: dict[str, float | None] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        # absent when unused: a record without them reads as it always did
        for key in ("valid", "metrics", "extra"):
            if not data[key] and data[key] != 0:
                del data[key]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> EDP | None:
        if data is None:
            return None
        return cls(
            **{k: data.get(k) for k in (*METRIC_NAMES, "samples")},
            valid=data.get("valid"),
            metrics=dict(data.get("metrics") or {}),
            extra=dict(data.get("extra") or {}),
        )


def _macro(tp: np.ndarray, support: np.ndarray, predicted: np.ndarray) -> dict[str, np.ndarray]:
    """Macro metrics from per-class counts (``[..., k]`` each)."""
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


def _positive_class(
    hits: np.ndarray, support: np.ndarray, predicted: np.ndarray
) -> dict[str, np.ndarray]:
    """Positive-class precision/recall/F1 from the two classes' counts (BCE models)."""
    tp, tn = hits[..., 1], hits[..., 0]
    fp, fn = predicted[..., 1] - tp, support[..., 1] - tp
    accuracy = (tn + tp) / np.maximum(support.sum(-1), 1.0)
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


def finalize(counts: np.ndarray, task_kind: str) -> dict[str, np.ndarray]:
    """Accuracy, error, precision, recall and F1 from per-class counts (``[..., 3, k]``:
    true positives, targets and predictions, as ``Task.step_counts`` and ``Task.counts``
    give them): the diagonal, row sums and column sums of a confusion matrix, which is
    all its metrics read.

    Finalized on the host: the arrays are tiny, and NumPy's per-call cost is a fraction
    of a device op's.
    """
    counts = np.asarray(counts, dtype=np.float64)
    tp, support, predicted = counts[..., 0, :], counts[..., 1, :], counts[..., 2, :]
    if task_kind == "binary":
        return _positive_class(tp, support, predicted)
    return _macro(tp, support, predicted)
