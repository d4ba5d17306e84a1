"""Checks shared by the calibration tools: predictions, targets, ids and split names."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..engine.losses import IGNORE_INDEX
from ..engine.probabilities import PredictionResult, ProbabilitySpec, prediction_from_logits
from ..errors import CalibrationError, CalibrationMismatchError, DataError

OVERRIDES = ("model_id", "labels")


@dataclass(frozen=True)
class Rows:
    """Valid targets only, class axis last: categorical ``z`` float64 ``(M, C)`` and
    ``y`` long ``(M,)``; bernoulli ``z`` and ``y`` float64 ``(E, 1)``, one per valid
    output element."""

    kind: str
    z: torch.Tensor
    y: torch.Tensor


def with_labels(prediction: Any, labels: Any) -> Any:
    """NNx's bare logits with ``labels=``, as the categorical prediction they describe;
    ``labels`` given with a prediction names (or must match) its spec's classes."""
    bare = isinstance(prediction, torch.Tensor | np.ndarray)
    if bare and labels is None:
        raise CalibrationError(
            "labels",
            None,
            "pass labels=[...] naming the logits' columns in order (or a labelled "
            "prediction: model.predict_proba(X, spec))",
        )
    if labels is None:
        return prediction
    names = tuple(labels) if isinstance(labels, list | tuple) else labels
    if bare:
        logits = torch.as_tensor(prediction)
        if logits.ndim != 2 or logits.shape[1] != len(names):
            raise CalibrationError(
                "labels",
                names,
                f"labels must name one label per class: {len(names)} labels for "
                f"{logits.shape[-1] if logits.ndim else 0} classes",
            )
        return prediction_from_logits(logits, ProbabilitySpec(kind="categorical", labels=names))
    spec = getattr(prediction, "spec", None)
    if isinstance(prediction, PredictionResult) and spec is not None:
        if spec.labels is None:
            named = dataclasses.replace(spec, labels=names)
            named.check_shape(tuple(prediction.logits.shape))
            return dataclasses.replace(prediction, spec=named)
        if spec.labels != names:
            raise CalibrationMismatchError(
                "labels",
                names,
                f"the prediction's spec names its classes {spec.labels}; pass the same "
                "labels, or leave labels= out",
            )
    return prediction


def check_prediction(prediction: Any, field: str = "prediction") -> PredictionResult:
    if hasattr(prediction, "calibrated_logits"):
        raise CalibrationError(
            field,
            "a CalibratedPrediction",
            "pass the raw prediction (model.predict_proba(X, spec)); the calibrator applies "
            "its temperature itself",
        )
    if not isinstance(prediction, PredictionResult):
        raise CalibrationError(
            field,
            prediction if not isinstance(prediction, torch.Tensor) else "a tensor",
            "pass model.predict_proba(X, spec) (or prediction_from_logits(logits, spec))",
        )
    if prediction.spec is None:
        raise CalibrationError(
            field,
            "a regression prediction",
            "temperature scaling calibrates probabilities: declare a categorical or "
            "bernoulli ProbabilitySpec",
        )
    return prediction


def check_text(value: Any, field: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise CalibrationError(
            field,
            value,
            "pass a non-empty string"
            + (" (e.g. model_fingerprint(model))" if field.endswith("model_id") else ""),
        )
    return value


def check_split_ids(**ids: str | None) -> None:
    """Refuse two equal split ids: a calibration split must be neither the training nor
    the test split."""
    named = [(k, v) for k, v in ids.items() if v is not None]
    for i, (a, va) in enumerate(named):
        for b, vb in named[i + 1 :]:
            if va == vb:
                raise CalibrationError(
                    b,
                    vb,
                    f"it equals {a}={va!r}; calibrate on a split that is neither the training "
                    "nor the test split, and name each split by its own id",
                )


def check_overrides(override: Any) -> tuple[str, ...]:
    if override is None:
        return ()
    names = (override,) if isinstance(override, str) else override
    if not isinstance(names, Iterable):
        raise CalibrationError("override", override, f"pass one of {OVERRIDES} or a tuple of them")
    names = tuple(names)
    for name in names:
        if name not in OVERRIDES:
            raise CalibrationError(
                "override",
                name,
                f"the overrides are {', '.join(repr(o) for o in OVERRIDES)}",
            )
    return names


def _targets(y: Any) -> torch.Tensor:
    if isinstance(y, np.ndarray):
        return torch.from_numpy(y)
    if isinstance(y, torch.Tensor):
        return y.detach()
    if isinstance(y, list | tuple):
        return torch.as_tensor(y)
    raise DataError("y", f"a {type(y).__name__} is not a target array", "pass a tensor or array")


def prediction_rows(prediction: PredictionResult, y: Any) -> Rows:
    """The prediction's logits and ``y`` as valid rows, class axis last.

    Categorical targets are class indices shaped like the logits without the class axis;
    ``-100`` (ignore_index) rows are left out. Bernoulli targets are 0/1 shaped like the
    logits; NaN elements are left out.
    """
    spec = prediction.spec
    assert spec is not None
    logits = prediction.logits
    axis = spec.axis_for(tuple(logits.shape))
    z = torch.movedim(logits, axis, -1).to(torch.float64)
    k = z.shape[-1]
    t = _targets(y).to(logits.device)
    if spec.kind == "categorical":
        expected = tuple(logits.shape[:axis]) + tuple(logits.shape[axis + 1 :])
        if tuple(t.shape) != expected and not (t.numel() == z[..., 0].numel() and t.ndim == 1):
            raise DataError(
                "y",
                f"has shape {tuple(t.shape)} for logits of shape {tuple(logits.shape)}",
                f"pass one class index per row: shape {expected}",
            )
        if t.is_floating_point() or t.dtype == torch.bool or t.is_complex():
            raise DataError("y", f"has dtype {t.dtype}", "pass integer class indices")
        t = t.reshape(-1).long()
        z = z.reshape(-1, k)
        keep = t != IGNORE_INDEX
        bad = keep & ((t < 0) | (t >= k))
        if bool(bad.any()):
            first = int(bad.nonzero()[0, 0])
            raise DataError(
                "y",
                f"{int(bad.sum())} targets are outside [0, {k}) (first: element {first}, "
                f"value {int(t[first])})",
                f"pass class indices in [0, {k}) (or {IGNORE_INDEX} to leave a row out)",
            )
        if not bool(keep.all()):
            z, t = z[keep], t[keep]
    else:
        if t.numel() != logits.numel():
            raise DataError(
                "y",
                f"has shape {tuple(t.shape)} for logits of shape {tuple(logits.shape)}",
                "pass one 0/1 target per output, shaped like the logits",
            )
        t = t.reshape(logits.shape) if t.shape != logits.shape else t
        t = torch.movedim(t, axis, -1).reshape(-1, k).to(torch.float64)
        z = z.reshape(-1, k)
        finite = torch.isfinite(t)
        bad = finite & (t != 0) & (t != 1)
        if bool(bad.any()):
            raise DataError(
                "y",
                f"{int(bad.sum())} targets are neither 0 nor 1",
                "pass 0/1 targets (NaN leaves an element out)",
            )
        # outputs are independent: an element with a NaN target is left out on its own
        z, t = z.reshape(-1, 1)[finite.reshape(-1)], t.reshape(-1, 1)[finite.reshape(-1)]
    if t.shape[0] == 0:
        raise DataError(
            "y", "has no valid target (every row left out)", "pass rows with known targets"
        )
    return Rows(spec.kind, z, t)
