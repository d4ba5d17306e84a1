"""What the AbstentionExplorer derives from one set of probabilities (a *side*:
calibrated or not): the scores, the risk-coverage curve, the slider's stops on it and
the readouts at a threshold; and the checks of the explorer's settings. The numbers are
``nnx_lab.abstention``'s; this module only arranges them for the widget."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..abstention import (
    RiskCoverageCurve,
    distribution,
    most_confident_mistakes,
    risk_coverage_curve,
    scores,
    targets,
)
from ..errors import ConfigError

__all__ = [
    "CALIBRATED",
    "CEILING_FIX",
    "SLIDER_STOPS",
    "THRESHOLD_FIX",
    "UNCALIBRATED",
    "Side",
    "check_guarantee",
    "check_unit",
    "declined_row",
    "side_of",
]

CALIBRATED = "calibrated"
UNCALIBRATED = "uncalibrated"
SLIDER_STOPS = 1000  # the curve's exact points the slider can stop at (evenly in coverage)


@dataclass
class Side:
    """One set of probabilities (calibrated or not) and what the explorer derives."""

    source: Any
    probabilities: np.ndarray
    score: np.ndarray
    prediction: np.ndarray
    order: np.ndarray  # rows by score, highest first (stable)
    curve: RiskCoverageCurve
    stops: np.ndarray  # indices of the curve's points the slider stops at (ascending coverage)
    calibrated: bool
    temperature: float | None
    mistakes: list[dict[str, Any]]

    def at(self, threshold: float) -> dict[str, Any]:
        """Coverage and risk of ``score >= threshold`` (a lookup in the curve)."""
        c = self.curve
        k = int(np.searchsorted(-c.thresholds, -threshold, side="right"))  # points >= threshold
        accepted = int(c.accepted[k - 1]) if k else 0
        errors = int(c.errors[k - 1]) if k else 0
        return {
            "threshold": threshold,
            "accepted": accepted,
            "abstained": c.total - accepted,
            "errors": errors,
            "coverage": accepted / c.total,
            "risk": errors / accepted if accepted else None,
            "status": "ok" if accepted else "no_accepted",
        }


def _stops(curve: RiskCoverageCurve, count: int) -> np.ndarray:
    """Indices of about ``count + 1`` of the curve's points, evenly spread in coverage,
    the first and the last included: exact operating points for a slider."""
    coverage = curve.coverage
    wanted = np.linspace(0.0, 1.0, count + 1)
    idx = np.searchsorted(coverage, wanted, side="left")
    idx = np.clip(idx, 0, len(curve) - 1)
    return np.unique(np.concatenate([[0, len(curve) - 1], idx]))


def side_of(source: Any, y: Any, kind: str, labels: Any, ids: Any, top_k: int) -> Side:
    dist = distribution(source, labels)
    p = dist.probabilities
    t_ = targets(y, p.shape[0], p.shape[1])
    score = scores(p, kind)
    prediction = p.argmax(1)
    curve = risk_coverage_curve(source, y, kind=kind, labels=labels)
    mistakes = most_confident_mistakes(
        source, t_, k=top_k, kind=kind, sample_ids=ids, labels=dist.labels
    )
    return Side(
        source=source,
        probabilities=p,
        score=score,
        prediction=prediction,
        order=np.argsort(-score, kind="stable"),
        curve=curve,
        stops=_stops(curve, SLIDER_STOPS),
        calibrated=dist.calibrated,
        temperature=dist.temperature,
        mistakes=mistakes,
    )


def check_unit(value: Any, name: str, fix: str) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not 0 <= value <= 1:
        raise ConfigError(name, value, fix)
    return float(value)


def check_guarantee(value: Any) -> float | None:
    if value is None:
        return None
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not 0 < value < 1:
        raise ConfigError(
            "guarantee",
            value,
            "pass a confidence level in (0, 1) such as 0.95, or None for the validation-only "
            "threshold",
        )
    return float(value)


THRESHOLD_FIX = "pass a score threshold in [0, 1]: rows scoring at or above it are answered"
CEILING_FIX = "pass the highest error rate you accept among answered rows, in [0, 1] (e.g. 0.05)"


def declined_row(side: Side, i: int, y: Any, ids: Any, labels: Any) -> dict[str, Any]:
    """Row ``i`` of the declined table, as one side scores it."""
    target, pred = int(y[i]), int(side.prediction[i])
    row: dict[str, Any] = {
        "sample_id": int(ids[i]),
        "target": target,
        "prediction": pred,
        "score": float(side.score[i]),
        "probability_of_target": float(side.probabilities[i, target]),
        "correct": target == pred,
    }
    if labels is not None:
        row["target_label"] = labels[target]
        row["predicted_label"] = labels[pred]
    return row
