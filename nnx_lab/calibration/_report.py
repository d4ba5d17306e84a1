"""Calibration measured: NLL, Brier, ECE and the reliability diagram's bins, as plain
data (what a report prints and an explorer draws)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch

from ..data.metrics import MetricSpec, reliability_edges
from ..data.streaming import StreamingMetrics
from ..engine.probabilities import PredictionResult, ProbabilitySpec
from ..errors import CalibrationError
from ._inputs import prediction_rows
from ._prediction import CalibratedPrediction

__all__ = [
    "CalibrationReport",
    "ReliabilityDiagram",
    "calibration_metrics",
    "check_bins",
    "reliability_diagram",
    "report_calibrated",
]


@dataclass(frozen=True)
class ReliabilityDiagram:
    """Equal-width confidence bins over [0, 1]: bin m holds ((m-1)/M, m/M].

    Per bin: ``counts`` (the confidence histogram), mean ``confidence`` and
    ``accuracy`` (None for an empty bin). ``ece`` is the count-weighted mean gap.
    """

    edges: tuple[float, ...]
    counts: tuple[int, ...]
    confidence: tuple[float | None, ...]
    accuracy: tuple[float | None, ...]
    ece: float | None
    rows: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _check_temperature(temperature: Any, prediction: Any) -> float:
    ok = isinstance(temperature, int | float) and not isinstance(temperature, bool)
    if not ok or not math.isfinite(temperature) or temperature <= 0:
        raise CalibrationError("temperature", temperature, "pass a finite temperature > 0")
    if temperature != 1 and hasattr(prediction, "calibrated_logits"):
        raise CalibrationError(
            "temperature",
            temperature,
            "a CalibratedPrediction has its temperature; pass the raw prediction to try another",
        )
    return float(temperature)


def check_bins(bins: Any) -> int:
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= 10_000:
        raise CalibrationError("bins", bins, "pass an integer number of bins in [1, 10000]")
    return bins


def _measure(
    spec: ProbabilitySpec, logits: torch.Tensor, y: Any, bins: int
) -> tuple[dict[str, float | None], ReliabilityDiagram]:
    metrics = StreamingMetrics(
        [MetricSpec("nll"), MetricSpec("brier"), MetricSpec("ece", bins=bins)], spec
    )
    target = y if isinstance(y, torch.Tensor) else torch.as_tensor(y)
    metrics.update(target, logits=logits)
    result = metrics.finalize()
    stat = metrics.statistic("reliability", bins=bins)
    assert stat is not None
    count, conf, correct = (stat[k].tolist() for k in ("count", "confidence", "correct"))
    edges = [0.0, *reliability_edges(bins, torch.float64, "cpu").tolist(), 1.0]
    diagram = ReliabilityDiagram(
        edges=tuple(edges),
        counts=tuple(int(c) for c in count),
        confidence=tuple(s / c if c else None for s, c in zip(conf, count, strict=True)),
        accuracy=tuple(s / c if c else None for s, c in zip(correct, count, strict=True)),
        ece=result.values[MetricSpec("ece", bins=bins).key],
        rows=result.valid,
    )
    values = {"nll": result.values["nll"], "brier": result.values["brier"], "ece": diagram.ece}
    return values, diagram


def _source(prediction: Any, calibrated: bool) -> tuple[PredictionResult, torch.Tensor]:
    if hasattr(prediction, "calibrated_logits"):
        raw = prediction.raw
        return raw, prediction.calibrated_logits if calibrated else prediction.logits
    if isinstance(prediction, PredictionResult) and prediction.spec is not None:
        return prediction, prediction.logits
    raise CalibrationError(
        "prediction",
        prediction if not isinstance(prediction, torch.Tensor) else "a tensor",
        "pass model.predict_proba(X, spec) or calibrator.transform(...)",
    )


def _measured(
    prediction: Any, y: Any, bins: Any, calibrated: bool, temperature: Any
) -> tuple[dict[str, float | None], ReliabilityDiagram]:
    bins = check_bins(bins)
    temperature = _check_temperature(temperature, prediction)
    raw, logits = _source(prediction, calibrated)
    prediction_rows(raw, y)  # the targets' checks, with their messages
    assert raw.spec is not None
    return _measure(raw.spec, logits / temperature, y, bins)


def reliability_diagram(
    prediction: Any,
    y: Any,
    *,
    bins: int = 15,
    calibrated: bool = True,
    temperature: float = 1.0,
) -> ReliabilityDiagram:
    """The reliability bins of a prediction: a ``CalibratedPrediction``'s calibrated
    probabilities unless ``calibrated=False``, or a raw prediction's logits divided by
    ``temperature`` (what a temperature slider shows)."""
    return _measured(prediction, y, bins, calibrated, temperature)[1]


def calibration_metrics(
    prediction: Any,
    y: Any,
    *,
    bins: int = 15,
    calibrated: bool = True,
    temperature: float = 1.0,
) -> dict[str, float | None]:
    """``{"nll", "brier", "ece"}`` of a prediction (as ``reliability_diagram``)."""
    return _measured(prediction, y, bins, calibrated, temperature)[0]


@dataclass(frozen=True)
class CalibrationReport:
    """Held-out metrics before and after the temperature, with both reliability
    diagrams. ``improved`` only if neither NLL nor Brier got worse."""

    split_id: str
    rows: int
    temperature: float
    model_id: str
    overrides: tuple[str, ...]
    bins: int
    before: dict[str, float | None]
    after: dict[str, float | None]
    reliability_before: ReliabilityDiagram
    reliability_after: ReliabilityDiagram
    calibration_split_id: str

    @property
    def improved(self) -> bool:
        b, a = self.before, self.after
        return all(
            b[k] is not None and a[k] is not None and a[k] <= b[k]  # type: ignore[operator]
            for k in ("nll", "brier")
        )

    def summary(self) -> str:
        b, a = self.before, self.after

        def pair(key: str) -> str:
            return f"{key.upper() if key != 'brier' else 'Brier'} {_fmt(b[key])} -> {_fmt(a[key])}"

        figures = f"{pair('nll')}, {pair('brier')}, {pair('ece')} ({self.bins} bins)"
        head = (
            f"calibration on {self.split_id!r} ({self.rows:,} targets, T = "
            f"{self.temperature:.4g} fitted on {self.calibration_split_id!r})"
        )
        if self.improved:
            verdict = "improved"
        else:
            worse = [
                k.upper() if k == "nll" else "Brier"
                for k in ("nll", "brier")
                if a[k] is None or b[k] is None or a[k] > b[k]  # type: ignore[operator]
            ]
            verdict = f"not improved: held-out {' and '.join(worse)} got worse"
        text = f"{verdict}: {head}: {figures}"
        if self.overrides:
            text += f"; applied with override {', '.join(self.overrides)}"
        return text

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["improved"] = self.improved
        return data


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def report_calibrated(
    calibrated: CalibratedPrediction,
    y: Any,
    split_id: str,
    calibration_split_id: str,
    bins: int,
) -> CalibrationReport:
    """The report of a calibrator's ``calibrated`` prediction on the held-out split
    ``split_id`` (the calibrator checks that it is one)."""
    rows = prediction_rows(calibrated.raw, y)
    before, diagram_before = _measure(calibrated.spec, calibrated.logits, y, bins)
    after, diagram_after = _measure(calibrated.spec, calibrated.calibrated_logits, y, bins)
    return CalibrationReport(
        split_id=split_id,
        rows=int(rows.y.shape[0]),
        temperature=calibrated.temperature,
        model_id=calibrated.model_id,
        overrides=calibrated.overrides,
        bins=bins,
        before=before,
        after=after,
        reliability_before=diagram_before,
        reliability_after=diagram_after,
        calibration_split_id=calibration_split_id,
    )
