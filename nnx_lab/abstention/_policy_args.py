"""The arguments an ``AbstentionPolicy`` is built from, checked and normalized: nnx-lab's
fields (what ``select_threshold(...).require()`` and ``load`` pass) and NNx's form,
``AbstentionPolicy(kind, threshold, labels, model_id, tuning_split_id,
input_field="probabilities", calibrator_id=None)``.

A policy built directly has no validation record and no risk ceiling (None): it was not
chosen here. nnx-lab checks calibrated probabilities by their calibrator's temperature, so
a policy on ``"calibrated_probabilities"`` needs ``temperature=`` (``calibrator_id`` is
recorded beside it; docs/nnx_differences.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..errors import AbstentionSchemaError
from ._inputs import check_kind

__all__ = ["INPUT_FIELDS", "policy_fields"]

INPUT_FIELDS = ("probabilities", "calibrated_probabilities")
_VALIDATION = ("coverage", "risk", "accepted", "errors", "total")


def _refuse(field: str, value: Any, fix: str) -> AbstentionSchemaError:
    return AbstentionSchemaError(f"AbstentionPolicy.{field}", value, fix)


def _unit(value: Any, field: str, fix: str, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= 1
    ):
        raise _refuse(field, value, fix)
    return float(value)


def _text(value: Any, field: str, *, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _refuse(field, value, "pass a non-empty string" + (", or None" if optional else ""))
    return value


def _labels(labels: Any) -> tuple[str | int, ...] | None:
    if labels is None:
        return None
    fix = "pass the class labels in the probabilities' column order, each once, e.g. ('a', 'b')"
    if isinstance(labels, str) or not isinstance(labels, tuple | list):
        raise _refuse("labels", labels, fix)
    for label in labels:
        if not (isinstance(label, str) and label.strip()) and (
            isinstance(label, bool) or not isinstance(label, int)
        ):
            raise _refuse("labels", label, fix)
    if len(set(labels)) != len(labels):
        raise _refuse("labels", list(labels), fix)
    return tuple(labels)


def policy_fields(
    kind: Any,
    threshold: Any,
    labels: Any,
    model_id: Any,
    tuning_split_id: Any,
    input_field: Any,
    calibrator_id: Any,
    ours: dict[str, Any],
) -> dict[str, Any]:
    """Every field of the policy, checked (an ``AbstentionSchemaError``, a ``ValueError``,
    naming the argument); ``ours`` holds nnx-lab's keyword fields as given."""
    out: dict[str, Any] = {"kind": check_kind(kind)}
    out["threshold"] = _unit(threshold, "threshold", "pass a score threshold in [0, 1]")
    out["labels"] = _labels(labels)
    n = ours.get("n_classes")
    n = len(out["labels"]) if n is None and out["labels"] is not None else n
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise _refuse("n_classes", n, "pass the class labels (at least 2), or n_classes >= 2")
    if out["labels"] is not None and len(out["labels"]) != n:
        raise _refuse("n_classes", n, f"one class per label: {len(out['labels'])} labels")
    out["n_classes"] = n
    out["model_id"] = _text(model_id, "model_id", optional=True)
    split = ours.get("split_id")
    if split is not None and tuning_split_id is not None and split != tuning_split_id:
        raise _refuse("tuning_split_id", tuning_split_id, f"it names split_id={split!r} twice")
    out["split_id"] = _text(
        split if split is not None else tuning_split_id, "split_id", optional=False
    )
    out["test_split_id"] = _text(ours.get("test_split_id"), "test_split_id", optional=True)
    if out["test_split_id"] == out["split_id"]:
        raise _refuse("test_split_id", out["test_split_id"], "name the test split by its own id")
    if input_field not in INPUT_FIELDS:
        raise _refuse(
            "input_field", input_field, "use 'probabilities' or 'calibrated_probabilities'"
        )
    calibrated = ours.get("calibrated")
    calibrated = input_field == INPUT_FIELDS[1] if calibrated is None else calibrated
    if not isinstance(calibrated, bool):
        raise _refuse("calibrated", calibrated, "pass True or False")
    out["calibrated"] = calibrated
    out["calibrator_id"] = _text(calibrator_id, "calibrator_id", optional=True)
    t = ours.get("temperature")
    if calibrated:
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t <= 0:
            raise _refuse(
                "temperature",
                t,
                "a policy on calibrated probabilities is checked by its calibrator's "
                "temperature in nnx-lab: pass temperature=calibrator.temperature "
                "(docs/nnx_differences.md)",
            )
        t = float(t)
    elif t is not None or out["calibrator_id"] is not None:
        raise _refuse(
            "temperature" if t is not None else "calibrator_id",
            t if t is not None else out["calibrator_id"],
            "a policy on raw probabilities has no calibrator; use "
            "input_field='calibrated_probabilities'",
        )
    out["temperature"] = t
    out["risk_ceiling"] = _unit(
        ours.get("risk_ceiling"),
        "risk_ceiling",
        "pass an error rate in [0, 1], or None",
        optional=True,
    )
    validation = ours.get("validation")
    if validation is not None and (
        not isinstance(validation, Mapping) or set(validation) != set(_VALIDATION)
    ):
        raise _refuse(
            "validation", validation, f"pass a mapping of {', '.join(_VALIDATION)}, or None"
        )
    out["validation"] = None if validation is None else dict(validation)
    guarantee, bound = ours.get("guarantee"), ours.get("risk_bound")
    if (guarantee is None) != (bound is None):
        raise _refuse(
            "guarantee", guarantee, "pass guarantee= and risk_bound= together, or neither"
        )
    if guarantee is not None and (
        isinstance(guarantee, bool)
        or not isinstance(guarantee, int | float)
        or not 0 < guarantee < 1
    ):
        raise _refuse("guarantee", guarantee, "pass a confidence level in (0, 1)")
    out["guarantee"] = None if guarantee is None else float(guarantee)
    out["risk_bound"] = _unit(bound, "risk_bound", "pass a risk bound in [0, 1]", optional=True)
    return out
