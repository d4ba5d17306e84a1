"""The risk-coverage curve and its area (AURC).

Rows are accepted from the most confident down; rows with equal scores are accepted
together (a threshold cannot split them), so the curve has one point per distinct
score. Coverage is accepted / total and risk is errors / accepted (0-1 loss).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._inputs import check_kind, distribution, scores, targets

__all__ = ["RiskCoverageCurve", "risk_coverage_curve"]


@dataclass(frozen=True)
class RiskCoverageCurve:
    """One point per distinct score, from the highest threshold down.

    ``thresholds[i]`` accepts the rows scoring at or above it: ``accepted[i]`` of
    ``total``, ``errors[i]`` of them wrong. ``aurc`` is the mean selective risk over the
    coverages 1/N .. N/N (tied rows entering in expectation, i.e. their errors spread
    evenly over the tie); ``optimal_aurc`` the same for a ranking that puts every
    correct row first.
    """

    kind: str
    thresholds: np.ndarray
    accepted: np.ndarray
    errors: np.ndarray
    total: int
    aurc: float
    optimal_aurc: float

    @property
    def coverage(self) -> np.ndarray:
        return self.accepted / self.total

    @property
    def risk(self) -> np.ndarray:
        return self.errors / self.accepted

    @property
    def excess_aurc(self) -> float:
        """AURC above the optimal one (E-AURC): what the ranking itself costs."""
        return self.aurc - self.optimal_aurc

    def __len__(self) -> int:
        return int(self.thresholds.shape[0])

    def to_json(self) -> dict[str, Any]:
        """Plain lists, ready to draw."""
        return {
            "kind": self.kind,
            "thresholds": self.thresholds.tolist(),
            "coverage": self.coverage.tolist(),
            "risk": self.risk.tolist(),
            "accepted": self.accepted.tolist(),
            "errors": self.errors.tolist(),
            "total": self.total,
            "aurc": self.aurc,
            "optimal_aurc": self.optimal_aurc,
        }


def _harmonic(n: int) -> np.ndarray:
    """H_0 .. H_n."""
    return np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, n + 1, dtype=np.float64))])


def curve_from(score: np.ndarray, wrong: np.ndarray, kind: str) -> RiskCoverageCurve:
    n = int(score.shape[0])
    order = np.argsort(-score, kind="stable")
    s, e = score[order], wrong[order].astype(np.int64)
    ends = np.flatnonzero(np.r_[s[1:] != s[:-1], True])
    accepted = ends + 1
    errors = np.cumsum(e)[ends]
    # Within a tie spanning positions a+1..b, errors grow linearly from E_a to E_b, so
    # sum_i r(i) = (E_a - a q)(H_b - H_a) + (b - a) q with q = (E_b - E_a) / (b - a).
    h = _harmonic(n)
    a = np.r_[0, accepted[:-1]]
    ea = np.r_[0, errors[:-1]]
    q = (errors - ea) / (accepted - a)
    total_risk = ((ea - a * q) * (h[accepted] - h[a]) + (accepted - a) * q).sum()
    k = int(errors[-1])
    optimal = k - (n - k) * (h[n] - h[n - k])  # every correct row first
    return RiskCoverageCurve(
        kind=kind,
        thresholds=s[ends],
        accepted=accepted,
        errors=errors,
        total=n,
        aurc=float(total_risk / n),
        optimal_aurc=float(optimal / n),
    )


def risk_coverage_curve(
    probabilities: Any, y: Any, *, kind: str = "max_probability", labels: Any = None
) -> RiskCoverageCurve:
    """The risk-coverage curve of ``probabilities`` (an array, a ``PredictionResult`` or a
    ``CalibratedPrediction``) against targets ``y``, scored by ``kind``."""
    kind = check_kind(kind)
    dist = distribution(probabilities, labels)
    p = dist.probabilities
    t = targets(y, p.shape[0], p.shape[1])
    return curve_from(scores(p, kind), p.argmax(1) != t, kind)
