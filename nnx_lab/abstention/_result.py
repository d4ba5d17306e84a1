"""What applying an abstention policy gives, as plain data: every row's decision
(``AbstentionResult``), coverage and risk on labelled rows (``AbstentionReport``), and
the most confident mistakes of a prediction (the rows an explorer lists first)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError
from ._inputs import check_kind, distribution, scores, targets, unique_ids

__all__ = ["AbstentionReport", "AbstentionResult", "most_confident_mistakes"]


@dataclass(frozen=True)
class AbstentionReport:
    """Coverage (accepted / total) and risk (wrong / accepted) on labelled rows.

    With nothing accepted the risk is None and the status ``"no_accepted"``, not 0.
    """

    total: int
    accepted: int
    abstained: int
    errors: int
    coverage: float
    risk: float | None
    status: str  # "ok" | "no_accepted"
    risk_ceiling: float | None  # None: a policy built directly, with no ceiling

    @property
    def within_ceiling(self) -> bool | None:
        if self.risk is None or self.risk_ceiling is None:
            return None
        return self.risk <= self.risk_ceiling


@dataclass(frozen=True)
class AbstentionResult:
    """Every row, accepted or abstained; abstained rows keep their prediction, their
    distribution and the reason."""

    sample_ids: np.ndarray
    accepted: np.ndarray  # bool per row
    scores: np.ndarray
    predictions: np.ndarray  # argmax class index per row
    probabilities: np.ndarray  # (N, C), as applied (calibrated when the policy is)
    reasons: tuple[str | None, ...]
    labels: tuple[str | int, ...] | None
    kind: str
    threshold: float
    risk_ceiling: float | None

    def __len__(self) -> int:
        return int(self.accepted.shape[0])

    @property
    def accepted_ids(self) -> np.ndarray:
        return self.sample_ids[self.accepted]

    @property
    def abstained_ids(self) -> np.ndarray:
        return self.sample_ids[~self.accepted]

    def predicted_labels(self) -> np.ndarray:
        if self.labels is None:
            raise ConfigError(
                "labels", None, "the policy was applied without labels; pass labels=(...)"
            )
        names = np.empty(len(self.labels), dtype=object)
        names[:] = list(self.labels)
        return names[self.predictions]

    def report(self, y: Any) -> AbstentionReport:
        t = targets(y, len(self), self.probabilities.shape[1])
        accepted = int(self.accepted.sum())
        errors = int((self.predictions[self.accepted] != t[self.accepted]).sum())
        return AbstentionReport(
            total=len(self),
            accepted=accepted,
            abstained=len(self) - accepted,
            errors=errors,
            coverage=accepted / len(self),
            risk=errors / accepted if accepted else None,
            status="ok" if accepted else "no_accepted",
            risk_ceiling=self.risk_ceiling,
        )

    def rows(self, y: Any = None, *, which: str = "all") -> list[dict[str, Any]]:
        """Plain records (``which``: "all", "accepted" or "abstained"): id, prediction
        (and its label), score, decision, reason, and the target when ``y`` is given."""
        if which not in ("all", "accepted", "abstained"):
            raise ConfigError("which", which, "use 'all', 'accepted' or 'abstained'")
        t = None if y is None else targets(y, len(self), self.probabilities.shape[1])
        keep = {
            "all": np.ones(len(self), dtype=bool),
            "accepted": self.accepted,
            "abstained": ~self.accepted,
        }[which]
        out = []
        for i in np.flatnonzero(keep):
            row: dict[str, Any] = {
                "sample_id": int(self.sample_ids[i]),
                "prediction": int(self.predictions[i]),
                "score": float(self.scores[i]),
                "accepted": bool(self.accepted[i]),
                "reason": self.reasons[i],
            }
            if self.labels is not None:
                row["predicted_label"] = self.labels[int(self.predictions[i])]
            if t is not None:
                row["target"] = int(t[i])
                row["correct"] = bool(t[i] == self.predictions[i])
                if self.labels is not None:
                    row["target_label"] = self.labels[int(t[i])]
            out.append(row)
        return out


def most_confident_mistakes(
    probabilities: Any,
    y: Any,
    *,
    k: int = 10,
    kind: str = "max_probability",
    sample_ids: Any = None,
    labels: Any = None,
) -> list[dict[str, Any]]:
    """The ``k`` wrong predictions with the highest scores, most confident first."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ConfigError("k", k, "pass a number of rows >= 0")
    kind = check_kind(kind)
    dist = distribution(probabilities, labels)
    p = dist.probabilities
    t = targets(y, p.shape[0], p.shape[1])
    ids = unique_ids(sample_ids, dist)
    score, pred = scores(p, kind), p.argmax(1)
    wrong = np.flatnonzero(pred != t)
    top = wrong[np.argsort(-score[wrong], kind="stable")[:k]]
    out = []
    for i in top:
        row: dict[str, Any] = {
            "sample_id": int(ids[i]),
            "target": int(t[i]),
            "prediction": int(pred[i]),
            "score": float(score[i]),
            "probability_of_target": float(p[i, t[i]]),
        }
        if dist.labels is not None:
            row["target_label"] = dist.labels[int(t[i])]
            row["predicted_label"] = dist.labels[int(pred[i])]
        out.append(row)
    return out
