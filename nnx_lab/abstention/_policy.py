"""The abstention policy (§2.19): a threshold chosen on validation
(``select_threshold``), saved as JSON, and applied to new rows (``apply``, whose result
and report are in ``_result``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import AbstentionError, AbstentionSchemaError, ConfigError
from ..runs import DocumentType, PolicyFile
from ._bound import guaranteed_threshold
from ._curve import RiskCoverageCurve, curve_from
from ._inputs import check_kind, distribution, scores, targets, unique_ids
from ._policy_args import policy_fields

# the package reads every name of abstention from this module
from ._result import AbstentionReport, AbstentionResult, most_confident_mistakes
from ._status import SelectionStatus

__all__ = [
    "AbstentionError",
    "AbstentionPolicy",
    "AbstentionReport",
    "AbstentionResult",
    "ThresholdSelection",
    "most_confident_mistakes",
    "select_threshold",
]

FILE = DocumentType("nnx_lab.abstention_policy", 1, noun="a policy", redo="select and save again")
EMPIRICAL_NOTE = (
    "the risk ceiling was met on the validation split; it is not guaranteed on new data"
)


def _check_ceiling(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ConfigError(
            "risk_ceiling",
            value,
            "pass the highest error rate you accept among answered rows, in [0, 1] (e.g. 0.05)",
        )
    return float(value)


def _check_guarantee(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise ConfigError(
            "guarantee",
            value,
            "pass the confidence level of the risk bound in (0, 1), e.g. 0.95, or None for "
            "the validation-only threshold",
        )
    return float(value)


def _check_id(value: Any, name: str, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(name, value, "pass a non-empty string")
    return value


@dataclass(frozen=True)
class ThresholdSelection:
    """What ``select_threshold`` found on the validation split; ``require()`` gives the
    policy or raises ``AbstentionError`` with the reason."""

    status: str  # "selected" | "no_threshold", equal to NNx's "ok" / "no_feasible_policy"
    reason: str | None
    kind: str
    threshold: float | None
    risk_ceiling: float
    coverage: float | None
    risk: float | None
    accepted: int
    errors: int
    total: int
    n_classes: int
    labels: tuple[str | int, ...] | None
    model_id: str | None
    split_id: str
    test_split_id: str | None
    calibrated: bool
    temperature: float | None
    guarantee: float | None
    risk_bound: float | None
    tests: int
    curve: RiskCoverageCurve = field(repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", SelectionStatus(self.status))

    @property
    def ok(self) -> bool:
        return self.status == "selected"

    def require(self) -> AbstentionPolicy:
        if not self.ok:
            raise AbstentionError(self.reason or "unknown", self)
        assert self.threshold is not None
        return AbstentionPolicy(
            kind=self.kind,
            threshold=self.threshold,
            risk_ceiling=self.risk_ceiling,
            n_classes=self.n_classes,
            labels=self.labels,
            model_id=self.model_id,
            split_id=self.split_id,
            test_split_id=self.test_split_id,
            calibrated=self.calibrated,
            temperature=self.temperature,
            validation={
                "coverage": self.coverage,
                "risk": self.risk,
                "accepted": self.accepted,
                "errors": self.errors,
                "total": self.total,
            },
            guarantee=self.guarantee,
            risk_bound=self.risk_bound,
        )


def select_threshold(
    probabilities: Any,
    y: Any,
    *,
    kind: str = "max_probability",
    risk_ceiling: float,
    split_id: str,
    test_split_id: str | None = None,
    labels: Any = None,
    model_id: str | None = None,
    guarantee: float | None = None,
) -> ThresholdSelection:
    """The lowest threshold (the most coverage) whose risk on this validation split is at
    most ``risk_ceiling``.

    A row is accepted when its score (``kind="max_probability"``: its top probability;
    ``"margin"``: the gap between its top two) is at or above the threshold. With
    ``guarantee=0.95`` the choice is instead by selection with guaranteed risk: the
    threshold's one-sided Clopper-Pearson upper bound on the risk, at that confidence
    level (union-bounded over the thresholds tested), is at most the ceiling, so the
    risk on new rows from the same distribution exceeds the ceiling with probability
    at most 1 - guarantee. ``probabilities`` may be an array, a ``PredictionResult`` or a
    ``CalibratedPrediction`` (the policy then applies to calibrated probabilities).
    """
    kind = check_kind(kind)
    ceiling = _check_ceiling(risk_ceiling)
    level = _check_guarantee(guarantee)
    split_id = _check_id(split_id, "split_id", optional=False)  # type: ignore[assignment]
    test_split_id = _check_id(test_split_id, "test_split_id", optional=True)
    if test_split_id == split_id:
        raise ConfigError(
            "test_split_id",
            test_split_id,
            f"it equals split_id={split_id!r}; choose the threshold on a validation split and "
            "test it on another",
        )
    model_id = _check_id(model_id, "model_id", optional=True)
    dist = distribution(probabilities, labels)
    p = dist.probabilities
    t = targets(y, p.shape[0], p.shape[1])
    curve = curve_from(scores(p, kind), p.argmax(1) != t, kind)
    risk = curve.risk
    tests = 0
    bound: float | None = None
    if level is None:
        feasible = np.flatnonzero(risk <= ceiling)
        chosen = int(feasible[np.argmax(curve.accepted[feasible])]) if feasible.size else None
        if chosen is None:
            best = int(np.argmin(risk))
            reason = (
                f"no threshold keeps the validation risk at or below {ceiling:g}: the lowest "
                f"is {risk[best]:.4g} (coverage {curve.coverage[best]:.4g}, threshold "
                f"{curve.thresholds[best]:.6g}); raise risk_ceiling or improve the model"
            )
    else:
        # candidates from the lowest threshold up, as the guaranteed-risk search orders them
        up = slice(None, None, -1)
        index, bound, tests, tested = guaranteed_threshold(
            curve.accepted[up], curve.errors[up], ceiling, level
        )
        chosen = None if index is None else len(curve) - 1 - index
        if chosen is None:
            lowest = min(b for _, b in tested)
            reason = (
                f"no tested threshold has a {level:g}-confidence risk bound at or below "
                f"{ceiling:g}: the lowest of the {tests} tested is {lowest:.4g}; raise "
                "risk_ceiling, lower guarantee, or use more validation rows"
            )
    common = {
        "kind": kind,
        "risk_ceiling": ceiling,
        "total": curve.total,
        "n_classes": int(p.shape[1]),
        "labels": dist.labels,
        "model_id": model_id,
        "split_id": split_id,
        "test_split_id": test_split_id,
        "calibrated": dist.calibrated,
        "temperature": dist.temperature,
        "guarantee": level,
        "tests": tests,
        "curve": curve,
    }
    if chosen is None:
        return ThresholdSelection(
            status="no_threshold",
            reason=reason,
            threshold=None,
            coverage=None,
            risk=None,
            accepted=0,
            errors=0,
            risk_bound=None,
            **common,
        )
    return ThresholdSelection(
        status="selected",
        reason=None,
        threshold=float(curve.thresholds[chosen]),
        coverage=float(curve.coverage[chosen]),
        risk=float(risk[chosen]),
        accepted=int(curve.accepted[chosen]),
        errors=int(curve.errors[chosen]),
        risk_bound=bound,
        **common,
    )


@dataclass(frozen=True, init=False)
class AbstentionPolicy:
    """A threshold on a confidence score, with what it was chosen on.

    ``select_threshold(...).require()`` builds one; so does NNx's form,
    ``AbstentionPolicy(kind, threshold, labels, model_id, tuning_split_id,
    input_field="probabilities", calibrator_id=None)`` (no risk ceiling or validation
    record: it was not chosen here; a calibrated one also needs ``temperature=``:
    ``_policy_args``). Every argument is checked as it is built."""

    kind: str
    threshold: float
    risk_ceiling: float | None
    n_classes: int
    labels: tuple[str | int, ...] | None
    model_id: str | None
    split_id: str
    test_split_id: str | None
    calibrated: bool
    temperature: float | None
    validation: dict[str, Any] | None
    guarantee: float | None = None
    risk_bound: float | None = None
    calibrator_id: str | None = None

    def __init__(
        self,
        kind: str,
        threshold: float,
        labels: Any = None,
        model_id: str | None = None,
        tuning_split_id: str | None = None,
        input_field: str = "probabilities",
        calibrator_id: str | None = None,
        **ours: Any,
    ) -> None:
        unknown = sorted(set(ours) - _OUR_FIELDS)
        if unknown:
            raise ConfigError(
                "AbstentionPolicy", unknown[0], "check the spelling of the argument's name"
            )
        checked = policy_fields(
            kind, threshold, labels, model_id, tuning_split_id, input_field, calibrator_id, ours
        )
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @property
    def tuning_split_id(self) -> str:
        """NNx's name for ``split_id``: the validation split the threshold was chosen on."""
        return self.split_id

    @property
    def input_field(self) -> str:
        """NNx's name of the probabilities the policy reads."""
        return "calibrated_probabilities" if self.calibrated else "probabilities"

    def state(self) -> dict[str, Any]:
        """NNx's name for the saved form: ``to_json()``; ``from_state`` reads it back."""
        return self.to_json()

    @classmethod
    def from_state(cls, state: Any) -> AbstentionPolicy:
        """The policy ``state()`` gave, checked as strictly as a saved file."""
        return _from_doc(cls, FILE.from_state(state, PolicyFile, "AbstentionPolicy"))

    @property
    def note(self) -> str:
        if self.guarantee is None:
            return EMPIRICAL_NOTE
        return (
            f"with probability at least {self.guarantee:g}, the risk on new rows from the "
            f"validation split's distribution is at most {self.risk_bound:.4g} (one-sided "
            "Clopper-Pearson bound, selection with guaranteed risk)"
        )

    # -- files --------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            **FILE.header(),
            "kind": self.kind,
            "threshold": self.threshold,
            "risk_ceiling": self.risk_ceiling,
            "n_classes": self.n_classes,
            "labels": None if self.labels is None else list(self.labels),
            "model_id": self.model_id,
            "splits": {"validation": self.split_id, "test": self.test_split_id},
            "calibration": {
                "calibrated": self.calibrated,
                "temperature": self.temperature,
                # written only when given, so older files keep their bytes
                **({"calibrator_id": self.calibrator_id} if self.calibrator_id else {}),
            },
            "validation": None if self.validation is None else dict(self.validation),
            "guarantee": None
            if self.guarantee is None
            else {"level": self.guarantee, "risk_bound": self.risk_bound},
            "note": self.note,
        }

    def save(self, path: str | Path) -> Path:
        """Write the policy as JSON, atomically."""
        return FILE.save(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> AbstentionPolicy:
        """Read a saved policy. The file passes its one strict shape first
        (``PolicyFile``): a tampered or hostile file is refused with a
        ``DocumentFileError`` (a ``ConfigError``) naming the file and the field."""
        return _from_doc(cls, FILE.load(path, PolicyFile))

    # -- applying -----------------------------------------------------------------------------
    def apply(
        self,
        probabilities: Any,
        *,
        labels: Any = None,
        model_id: str | None = None,
        sample_ids: Any = None,
    ) -> AbstentionResult:
        """Accept the rows whose score is at or above the threshold; abstain on the rest.

        Refuses probabilities with another class count or label order, from another model
        than the one the policy names, or calibrated differently from the probabilities
        the threshold was chosen on.
        """
        dist = distribution(probabilities, labels)
        p = dist.probabilities
        if p.shape[1] != self.n_classes:
            raise AbstentionSchemaError(
                "probabilities",
                f"{p.shape[1]} classes",
                f"this policy was chosen on {self.n_classes} classes",
            )
        if self.labels is not None and dist.labels != self.labels:
            raise AbstentionSchemaError(
                "labels",
                dist.labels,
                f"this policy was chosen with labels {self.labels}; pass labels= in that "
                "order (or a prediction whose spec has them)",
            )
        if self.model_id is not None and model_id != self.model_id:
            raise AbstentionSchemaError(
                "model_id",
                model_id,
                f"this policy was chosen on model {self.model_id!r}; choose a threshold for "
                "this model with select_threshold",
            )
        if self.calibrated and not dist.calibrated:
            raise AbstentionSchemaError(
                "probabilities",
                "uncalibrated probabilities",
                f"this policy was chosen on calibrated probabilities (T = {self.temperature:.6g}"
                "); pass calibrator.transform(prediction, model_id=...)",
            )
        if not self.calibrated and dist.calibrated:
            raise AbstentionSchemaError(
                "probabilities",
                "a CalibratedPrediction",
                "this policy was chosen on uncalibrated probabilities; pass the raw "
                "prediction, or choose a threshold on calibrated validation probabilities",
            )
        if dist.calibrated:
            assert self.temperature is not None
            assert dist.temperature is not None
            if not math.isclose(dist.temperature, self.temperature, rel_tol=1e-12):
                raise AbstentionSchemaError(
                    "probabilities",
                    f"calibrated at T = {dist.temperature:.6g}",
                    f"this policy was chosen at T = {self.temperature:.6g}; use that calibrator",
                )
        ids = unique_ids(sample_ids, dist)
        score = scores(p, self.kind)
        accepted = score >= self.threshold
        reasons = tuple(
            None if ok else f"{self.kind} {s:.6g} < threshold {self.threshold:.6g}"
            for ok, s in zip(accepted.tolist(), score.tolist(), strict=True)
        )
        return AbstentionResult(
            sample_ids=ids,
            accepted=accepted,
            scores=score,
            predictions=p.argmax(1),
            probabilities=p,
            reasons=reasons,
            labels=self.labels if self.labels is not None else dist.labels,
            kind=self.kind,
            threshold=self.threshold,
            risk_ceiling=self.risk_ceiling,
        )


_OUR_FIELDS = {
    "risk_ceiling",
    "n_classes",
    "split_id",
    "test_split_id",
    "calibrated",
    "temperature",
    "validation",
    "guarantee",
    "risk_bound",
}


def _from_doc(cls: type[AbstentionPolicy], doc: Any) -> AbstentionPolicy:
    val = doc.validation
    return cls(
        kind=doc.kind,
        threshold=doc.threshold,
        risk_ceiling=doc.risk_ceiling,
        n_classes=doc.n_classes,
        labels=None if doc.labels is None else tuple(doc.labels),
        model_id=doc.model_id,
        split_id=doc.splits.validation,
        test_split_id=doc.splits.test,
        calibrated=doc.calibration.calibrated,
        temperature=doc.calibration.temperature,
        calibrator_id=doc.calibration.calibrator_id,
        validation=None
        if val is None
        else {
            "coverage": val.coverage,
            "risk": val.risk,
            "accepted": val.accepted,
            "errors": val.errors,
            "total": val.total,
        },
        guarantee=None if doc.guarantee is None else doc.guarantee.level,
        risk_bound=None if doc.guarantee is None else doc.guarantee.risk_bound,
    )
