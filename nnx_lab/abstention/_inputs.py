"""What abstention reads: one predicted distribution per row, its labels and ids, the
targets, and the confidence score a threshold is set on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..engine.probabilities import PredictionResult, as_sample_ids
from ..errors import ConfigError, DataError

KINDS = ("max_probability", "margin")
_SUM_TOLERANCE = 1e-3  # float32 softmax rows sum to 1 within ~1e-6; rounded input a bit less


@dataclass(frozen=True)
class Distribution:
    """``probabilities``: float64 ``(N, C)``; ``calibrated``: from a CalibratedPrediction
    (with its ``temperature``)."""

    probabilities: np.ndarray
    labels: tuple[str | int, ...] | None
    sample_ids: np.ndarray | None
    calibrated: bool
    temperature: float | None


def _host(value: Any, field: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, np.ndarray | list | tuple):
        return np.asarray(value)
    raise ConfigError(
        field,
        type(value).__name__,
        "pass probabilities (an (N, C) array or tensor), model.predict_proba(...) or "
        "calibrator.transform(...)",
    )


def _from_prediction(prediction: PredictionResult, probs: Any, field: str) -> np.ndarray:
    spec = prediction.spec
    if spec is None:
        raise ConfigError(
            field, "a regression prediction", "abstention needs predicted class probabilities"
        )
    p = _host(probs, field)
    axis = spec.axis_for(p.shape)
    if spec.kind == "bernoulli":
        if p.ndim != 2 or p.shape[1] != 1:
            raise ConfigError(
                field,
                f"'bernoulli' probabilities of shape {p.shape}",
                "abstention decides on one distribution per row: a single binary output "
                "(N, 1) or categorical (N, C) probabilities",
            )
        p = p.astype(np.float64)
        return np.concatenate([1.0 - p, p], axis=1)
    if p.ndim != 2:
        raise ConfigError(
            field,
            f"probabilities of shape {p.shape}",
            "abstention decides on one distribution per row: pass (N, C) probabilities",
        )
    return np.moveaxis(p, axis, -1).astype(np.float64)


def distribution(probabilities: Any, labels: Any, field: str = "probabilities") -> Distribution:
    """Normalize an array, a ``PredictionResult`` or a ``CalibratedPrediction``."""
    calibrated, temperature, ids, spec_labels = False, None, None, None
    if hasattr(probabilities, "calibrated_probabilities"):
        calibrated, temperature = True, float(probabilities.temperature)
        ids, spec_labels = probabilities.sample_ids, probabilities.spec.labels
        p = _from_prediction(probabilities.raw, probabilities.calibrated_probabilities, field)
    elif isinstance(probabilities, PredictionResult):
        ids = probabilities.sample_ids
        spec_labels = None if probabilities.spec is None else probabilities.spec.labels
        p = _from_prediction(probabilities, probabilities.probabilities, field)
    else:
        p = _host(probabilities, field).astype(np.float64)
        if p.ndim != 2 or p.shape[1] < 2:
            raise DataError(
                field,
                f"has shape {p.shape}",
                "pass (N, C) class probabilities, C >= 2 (each row sums to 1)",
            )
        if p.shape[0] and not np.isfinite(p).all():
            raise DataError(field, "holds NaN/inf values", "pass finite probabilities")
        if p.shape[0] and ((p < 0).any() or (p > 1).any()):
            raise DataError(
                field,
                "holds values outside [0, 1]",
                "pass probabilities, not logits (result.probabilities)",
            )
        sums = p.sum(1)
        off = np.flatnonzero(np.abs(sums - 1) > _SUM_TOLERANCE)
        if off.size:
            raise DataError(
                field,
                f"{off.size} rows do not sum to 1 (row {off[0]} sums to {sums[off[0]]:.6g})",
                "pass one distribution per row, e.g. result.probabilities of a categorical "
                "prediction, not logits",
            )
    if p.shape[0] == 0:
        raise DataError(field, "has no rows", "pass at least one row")
    if labels is not None:
        labels = tuple(labels)
        if len(labels) != p.shape[1]:
            raise ConfigError(
                "labels",
                labels,
                f"give one label per class: {p.shape[1]} labels for {p.shape[1]} classes",
            )
        if spec_labels is not None and tuple(spec_labels) != labels:
            raise ConfigError(
                "labels",
                labels,
                f"the prediction's spec has labels {tuple(spec_labels)}; pass the same, in "
                "the same order (or omit labels=)",
            )
    else:
        labels = None if spec_labels is None else tuple(spec_labels)
    return Distribution(p, labels, ids, calibrated, temperature)


def check_kind(kind: Any) -> str:
    if kind not in KINDS:
        raise ConfigError(
            "kind",
            kind,
            "use 'max_probability' (the top probability) or 'margin' (top-two gap)",
        )
    return kind


def scores(p: np.ndarray, kind: str) -> np.ndarray:
    """The confidence of each row: its top probability, or the gap between its top two."""
    if kind == "max_probability":
        return p.max(axis=1)
    top2 = -np.partition(-p, 1, axis=1)[:, :2]
    return top2[:, 0] - top2[:, 1]


def targets(y: Any, rows: int, classes: int, field: str = "y") -> np.ndarray:
    t = _host(y, field) if not isinstance(y, np.ndarray) else y
    if t.ndim != 1 or t.shape[0] != rows:
        raise DataError(
            field, f"has shape {t.shape} for {rows} rows", f"pass {rows} class indices, one per row"
        )
    if not np.issubdtype(t.dtype, np.integer):
        raise DataError(field, f"has dtype {t.dtype}", "pass integer class indices")
    bad = np.flatnonzero((t < 0) | (t >= classes))
    if bad.size:
        raise DataError(
            field,
            f"{bad.size} targets are outside [0, {classes}) (first: row {bad[0]}, value "
            f"{t[bad[0]]})",
            f"pass class indices in [0, {classes}) in the probabilities' class order",
        )
    return t.astype(np.int64)


def unique_ids(sample_ids: Any, dist: Distribution) -> np.ndarray:
    rows = dist.probabilities.shape[0]
    ids = as_sample_ids(sample_ids if sample_ids is not None else dist.sample_ids, rows)
    if np.unique(ids).size != rows:
        raise DataError(
            "sample_ids",
            "repeat some ids",
            "pass one distinct id per row, so accepted and abstained ids partition the rows",
        )
    return ids
