"""The shapes of the saved documents: a temperature calibrator and an abstention policy.

Both are files a user names and may receive from someone else; each is read as exactly
what ``to_json`` writes (no unknown field, no missing one), with every number finite and
in range, labels unique and as many as the class axis, and split ids distinct.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

import msgspec

from ...errors import ConfigError
from .._schema import NonNegativeInt, PositiveInt, Probability
from .reading import INT64, Label, Problem, Refusal, Text, found, plain_problem, repeated

__all__ = [
    "CalibratorFile",
    "DocumentFileError",
    "PolicyFile",
]

_MAX = 1.7976931348623157e308

PositiveFinite = Annotated[float, msgspec.Meta(gt=0.0, le=_MAX)]
NonNegativeFinite = Annotated[float, msgspec.Meta(ge=0.0, le=_MAX)]
Labels = Annotated[list[INT64 | Label], msgspec.Meta(min_length=1)]
Note = Annotated[str, msgspec.Meta(max_length=4096)]


class DocumentFileError(Refusal, ConfigError):
    """A saved calibrator or policy that is not one nnx_lab wrote: a ``SchemaError``
    naming the file and the field, and a ``ConfigError`` as it always was."""


def _distinct(named: dict[str, str | None], fix: str) -> Problem | None:
    seen: dict[str, str] = {}
    for field, value in named.items():
        if value is None:
            continue
        if value in seen:
            return Problem(field, f"equals {seen[value]}; each split has its own id", value, fix)
        seen[value] = field
    return None


def _label_count(labels: list | None, field: str, count: int, name: str) -> Problem | None:
    if labels is None:
        return None
    return repeated(labels, field, "label") or (
        Problem(
            name,
            f"the file names {len(labels)} labels ({field}); the class axis has one entry "
            "per label",
            count,
        )
        if len(labels) != count
        else None
    )


# -- the temperature calibrator -----------------------------------------------------------------
class SpecFile(msgspec.Struct, forbid_unknown_fields=True):
    format: Literal["nnx_lab.probability_spec"]
    version: Literal[1]
    kind: Literal["categorical", "bernoulli"]
    class_axis: Annotated[int, msgspec.Meta(ge=-64, le=64)]
    labels: Labels | None


class CalibratorSplits(msgspec.Struct, forbid_unknown_fields=True):
    calibration: Text
    train: Text | None
    test: Text | None
    disjointness: Note


class CalibratorFit(msgspec.Struct, forbid_unknown_fields=True):
    # None for a calibrator built directly from a temperature (NNx's form)
    rows: PositiveInt | None
    nll_before: NonNegativeFinite | None
    nll_after: NonNegativeFinite | None
    iterations: NonNegativeInt
    config: dict[str, Any] | None = None  # NNx's fit_config / fit_result, when given
    result: dict[str, Any] | None = None


class CalibratorFile(msgspec.Struct, forbid_unknown_fields=True):
    """``TemperatureCalibrator.to_json()``."""

    format: Literal["nnx_lab.temperature_calibrator"]
    version: Literal[1]
    temperature: PositiveFinite
    spec: SpecFile
    n_outputs: PositiveInt
    model_id: Text
    splits: CalibratorSplits
    fit: CalibratorFit

    def rules(self) -> Iterator[Problem]:
        least = 2 if self.spec.kind == "categorical" else 1
        redo = "fit the calibrator again and save it"
        return found(
            [
                plain_problem(self.fit.config, "fit.config"),
                plain_problem(self.fit.result, "fit.result"),
                Problem(
                    "n_outputs",
                    f"a {self.spec.kind} calibrator has at least {least} outputs",
                    self.n_outputs,
                )
                if self.n_outputs < least
                else None,
                _label_count(self.spec.labels, "spec.labels", self.n_outputs, "n_outputs"),
                Problem("spec.class_axis", "axis 0 holds the rows, not the classes", 0)
                if self.spec.class_axis == 0
                else None,
                _distinct(
                    {
                        "splits.train": self.splits.train,
                        "splits.calibration": self.splits.calibration,
                        "splits.test": self.splits.test,
                    },
                    redo,
                ),
            ]
        )


# -- the abstention policy ----------------------------------------------------------------------
class PolicySplits(msgspec.Struct, forbid_unknown_fields=True):
    validation: Text
    test: Text | None


class PolicyCalibration(msgspec.Struct, forbid_unknown_fields=True):
    calibrated: bool
    temperature: PositiveFinite | None
    calibrator_id: Text | None = None  # NNx's record of the calibrator, when given


class PolicyValidation(msgspec.Struct, forbid_unknown_fields=True):
    coverage: Probability
    risk: Probability
    accepted: NonNegativeInt
    errors: NonNegativeInt
    total: PositiveInt


class PolicyGuarantee(msgspec.Struct, forbid_unknown_fields=True):
    level: Annotated[float, msgspec.Meta(gt=0.0, lt=1.0)]
    risk_bound: Probability


class PolicyFile(msgspec.Struct, forbid_unknown_fields=True):
    """``AbstentionPolicy.to_json()``."""

    format: Literal["nnx_lab.abstention_policy"]
    version: Literal[1]
    kind: Literal["max_probability", "margin"]
    threshold: Probability
    risk_ceiling: Probability | None  # None: built directly, not chosen by select_threshold
    n_classes: Annotated[int, msgspec.Meta(ge=2, le=2**62)]
    labels: Labels | None
    model_id: Text | None
    splits: PolicySplits
    calibration: PolicyCalibration
    validation: PolicyValidation | None
    guarantee: PolicyGuarantee | None
    note: Note

    def rules(self) -> Iterator[Problem]:
        cal, val, bound = self.calibration, self.validation, self.guarantee
        return found(
            [
                _label_count(self.labels, "labels", self.n_classes, "n_classes"),
                Problem(
                    "calibration.temperature",
                    "a calibrated policy records its calibrator's temperature",
                )
                if cal.calibrated and cal.temperature is None
                else None,
                Problem(
                    "calibration.temperature",
                    "an uncalibrated policy has no temperature",
                    cal.temperature,
                )
                if not cal.calibrated and cal.temperature is not None
                else None,
                _distinct(
                    {"splits.validation": self.splits.validation, "splits.test": self.splits.test},
                    "select the threshold again and save it",
                ),
                Problem(
                    "validation.accepted",
                    f"more rows accepted than the {val.total} validated",
                    val.accepted,
                )
                if val is not None and val.accepted > val.total
                else None,
                Problem(
                    "validation.errors",
                    f"more errors than the {val.accepted} accepted rows",
                    val.errors,
                )
                if val is not None and val.errors > val.accepted
                else None,
                Problem(
                    "guarantee.risk_bound",
                    f"exceeds risk_ceiling={self.risk_ceiling}: this threshold was not "
                    "selected with that guarantee",
                    bound.risk_bound,
                )
                if bound is not None
                and (self.risk_ceiling is None or bound.risk_bound > self.risk_ceiling)
                else None,
            ]
        )
