"""The report's calibration and abstention section: ``calibrators=`` / ``policies=``.

What a user passes is turned into plain data first, each part through a strict shape,
before anything is written:

- a calibrator: a ``TemperatureCalibrator`` (its ``to_json()``) or the path of a saved
  one (read through ``CalibratorFile``; a file is data: nothing it names is imported);
- a ``CalibrationReport`` (``calibrator.report(prediction, y, ...)``): the held-out
  NLL / Brier / ECE before and after and both reliability diagrams. The report draws
  what it records; it never needs the model (a calibrator file records no bins: pass the
  CalibrationReport to get the diagram);
- a policy: an ``AbstentionPolicy`` or the path of a saved one (``PolicyFile``), or a
  selected ``ThresholdSelection`` (``select_threshold(...)``), which adds its
  risk-coverage curve on the validation split.

Objects are recognised by what they give (``to_json()``, ``curve``), not by importing
their classes: this package is torch-free (the runs panel's server builds reports).
Each document's ``model_id`` (the fingerprint of the weights it was fitted on) is then
checked against the run: ``_identity.py``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec

from ..errors import ConfigError
from ..runs import (
    CalibratorFile,
    DocumentFileError,
    DocumentType,
    PolicyFile,
    check_shape,
)
from ..runs._schemas.reading import Problem

__all__ = ["Documents", "documents"]

CALIBRATOR = DocumentType(
    "nnx_lab.temperature_calibrator", 1, noun="a calibrator", redo="fit and save again"
)
POLICY = DocumentType(
    "nnx_lab.abstention_policy", 1, noun="an abstention policy", redo="select and save again"
)
_MAX_BINS = 10_000
_MAX_CURVE = 10_000_000

Finite = Annotated[float, msgspec.Meta(ge=-1.7976931348623157e308, le=1.7976931348623157e308)]
Unit = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
Count = Annotated[int, msgspec.Meta(ge=0, le=2**62)]


class _Metrics(msgspec.Struct, forbid_unknown_fields=True):
    nll: Finite | None
    brier: Finite | None
    ece: Finite | None


class _Diagram(msgspec.Struct, forbid_unknown_fields=True):
    edges: Annotated[list[Unit], msgspec.Meta(min_length=2, max_length=_MAX_BINS + 1)]
    counts: list[Count]
    confidence: list[Unit | None]
    accuracy: list[Unit | None]
    ece: Finite | None
    rows: Count

    def rules(self):  # type: ignore[no-untyped-def]
        n = len(self.edges) - 1
        for name in ("counts", "confidence", "accuracy"):
            if len(getattr(self, name)) != n:
                yield _problem(name, f"has {len(getattr(self, name))} bins; edges make {n}")
        if any(b <= a for a, b in zip(self.edges, self.edges[1:], strict=False)):
            yield _problem("edges", "must increase")


class _CalibrationReport(msgspec.Struct, forbid_unknown_fields=True):
    """``CalibrationReport.to_json()``."""

    split_id: str
    rows: Count
    temperature: Annotated[float, msgspec.Meta(gt=0.0, le=1.7976931348623157e308)]
    model_id: str
    overrides: list[str]
    bins: Annotated[int, msgspec.Meta(ge=1, le=_MAX_BINS)]
    before: _Metrics
    after: _Metrics
    reliability_before: _Diagram
    reliability_after: _Diagram
    calibration_split_id: str
    improved: bool

    def rules(self):  # type: ignore[no-untyped-def]
        for name in ("reliability_before", "reliability_after"):
            for p in getattr(self, name).rules():
                yield p._replace(field=f"{name}.{p.field}")


class _Curve(msgspec.Struct, forbid_unknown_fields=True):
    """``RiskCoverageCurve.to_json()``."""

    kind: str
    thresholds: Annotated[list[Finite], msgspec.Meta(max_length=_MAX_CURVE)]
    coverage: list[Unit]
    risk: list[Unit]
    accepted: list[Count]
    errors: list[Count]
    total: Annotated[int, msgspec.Meta(ge=1, le=2**62)]
    aurc: Finite
    optimal_aurc: Finite

    def rules(self):  # type: ignore[no-untyped-def]
        n = len(self.thresholds)
        for name in ("coverage", "risk", "accepted", "errors"):
            if len(getattr(self, name)) != n:
                yield _problem(name, f"has {len(getattr(self, name))} points; thresholds {n}")


def _problem(field_: str, reason: str) -> Problem:
    return Problem(field_, reason, None, "pass what calibrator.report(...) / the curve gave")


@dataclass
class Documents:
    """What the section shows, checked: calibrators (name, CalibratorFile), calibration
    reports (name, shape), policies (name, PolicyFile, curve or None)."""

    calibrators: list[tuple[str, CalibratorFile]] = field(default_factory=list)
    reports: list[tuple[str, _CalibrationReport]] = field(default_factory=list)
    policies: list[tuple[str, PolicyFile, _Curve | None]] = field(default_factory=list)

    def model_ids(self) -> list[tuple[str, str]]:
        """(the argument it came from, the model_id it records), for the run check."""
        out = [(n, c.model_id) for n, c in self.calibrators]
        out += [(n, r.model_id) for n, r in self.reports]
        out += [(n, p.model_id) for n, p, _ in self.policies if p.model_id is not None]
        return out

    def __bool__(self) -> bool:
        return bool(self.calibrators or self.reports or self.policies)


def _items(values: Any, field_: str) -> list[Any]:
    if values is None:
        return []
    if isinstance(values, str | os.PathLike) or not isinstance(values, list | tuple):
        values = [values]
    return list(values)


def _plain(obj: Any, name: str, fix: str) -> dict[str, Any]:
    """``obj.to_json()`` as plain data (an object gives its own record; nothing else of
    it is called)."""
    to_json = getattr(obj, "to_json", None)
    value = to_json() if callable(to_json) else None
    if not isinstance(value, dict):
        raise ConfigError(name, obj, fix)
    # the numbers must be data: a non-finite one is refused by the shapes below
    return msgspec.json.decode(msgspec.json.encode(value, enc_hook=_refuse(name, obj, fix)))


def _refuse(name: str, obj: Any, fix: str) -> Any:
    def hook(value: Any) -> Any:
        raise ConfigError(name, obj, fix)

    return hook


def _document(
    value: Any,
    name: str,
    fix: str,
    kind: DocumentType,
    shape: Any,
    noun: str,
    plain: dict[str, Any] | None = None,
) -> tuple[str, Any]:
    """``(label, document)`` of a saved document passed as the path of its file (read
    strictly through ``kind``: a file is data) or as an object whose ``to_json()`` record
    (``plain``, where the caller has made it already) has ``kind``'s format; anything
    else is refused with ``fix``."""
    if isinstance(value, str | os.PathLike):
        if not os.path.isfile(value):
            raise ConfigError(name, str(value), f"no such {noun} file; {fix}")
        return f"{name} ({os.path.basename(value)})", kind.load(value, shape)
    if plain is None:
        plain = _plain(value, name, fix)
    if plain.get("format") != kind.format:
        raise ConfigError(name, value, fix)
    return name, check_shape(plain, shape, name, DocumentFileError)


def _calibrator(i: int, value: Any, docs: Documents) -> None:
    name = f"calibrators[{i}]"
    fix = (
        "pass a TemperatureCalibrator, the path of one saved with .save(), or the "
        "CalibrationReport of calibrator.report(prediction, y, ...)"
    )
    plain = None if isinstance(value, str | os.PathLike) else _plain(value, name, fix)
    if plain is not None and "reliability_before" in plain:
        docs.reports.append((name, check_shape(plain, _CalibrationReport, name, DocumentFileError)))
        return
    docs.calibrators.append(
        _document(value, name, fix, CALIBRATOR, CalibratorFile, "calibrator", plain)
    )


def _policy(i: int, value: Any, docs: Documents) -> None:
    name = f"policies[{i}]"
    fix = (
        "pass an AbstentionPolicy, the path of one saved with .save(), or the "
        "ThresholdSelection of select_threshold(...) (it adds the risk-coverage curve)"
    )
    curve = None if isinstance(value, str | os.PathLike) else getattr(value, "curve", None)
    if curve is not None and callable(getattr(value, "require", None)):
        if not getattr(value, "ok", False):
            raise ConfigError(
                name,
                getattr(value, "reason", value),
                "this selection found no threshold; pass a selection that did",
            )
        policy = check_shape(
            _plain(value.require(), name, fix), PolicyFile, name, DocumentFileError
        )
        shape = check_shape(
            _plain(curve, f"{name}.curve", fix), _Curve, f"{name}.curve", DocumentFileError
        )
        docs.policies.append((name, policy, shape))
        return
    label, policy = _document(value, name, fix, POLICY, PolicyFile, "policy")
    docs.policies.append((label, policy, None))


def documents(calibrators: Any, policies: Any) -> Documents:
    """``calibrators=`` and ``policies=`` checked and as plain data (``ConfigError`` /
    ``DocumentFileError`` naming the argument, before anything is written)."""
    docs = Documents()
    for i, value in enumerate(_items(calibrators, "calibrators")):
        _calibrator(i, value, docs)
    for i, value in enumerate(_items(policies, "policies")):
        _policy(i, value, docs)
    return docs


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
