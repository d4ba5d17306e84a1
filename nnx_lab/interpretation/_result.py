"""What ``interpret`` returns: plain data (NumPy arrays and JSON values), and the one
payload the widget sends to the page."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError

__all__ = ["InterpretationResult", "Mistake"]


@dataclass(frozen=True)
class Mistake:
    """One row of the top losses (classification) or the largest errors (regression).

    Classification: ``target`` and ``prediction`` are class indices, ``probability`` the
    predicted class's (calibrated when a calibrator was given), ``true_probability`` the
    true class's, ``loss`` the row's cross-entropy of the raw logits, ``declined`` whether
    the abstention policy abstains on it (None without a policy). Regression:
    ``target``/``prediction`` are values, ``loss`` is ``|residual|``."""

    sample_id: int
    target: Any
    prediction: Any
    loss: float
    probability: float | None = None
    true_probability: float | None = None
    declined: bool | None = None
    display: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.sample_id,
            "target": self.target,
            "prediction": self.prediction,
            "loss": self.loss,
            "probability": self.probability,
            "true_probability": self.true_probability,
            "declined": self.declined,
            "display": self.display,
        }


@dataclass(frozen=True)
class InterpretationResult:
    """``task`` is ``"classification"`` or ``"regression"``; ``source`` says what was
    interpreted (``{"kind": "run", "run_id", "checkpoint": "best", "epoch", "step"}`` or
    ``{"kind": "model"}``); ``rows`` counts the rows scored; ``metrics`` are the
    ``StreamingMetrics`` values of the split.

    Classification: ``confusion`` (rows = truth, columns = prediction, counts),
    ``confusion_normalized`` (each row divided by its count; an empty row stays 0),
    ``cell_ids[(t, p)]`` every sample id of a cell, ``cell_samples[(t, p)]`` the first
    ``samples_per_cell`` of them as ``Mistake`` rows, ``top_losses`` the ``top_k``
    highest-loss rows. Regression: ``targets``, ``predictions``, ``residuals``
    (prediction − target) per row, ``sample_ids``, and ``largest_errors``."""

    task: str
    split: str
    source: dict[str, Any]
    rows: int
    metrics: dict[str, float | None]
    show: str
    labels: tuple[str, ...] | None = None
    confusion: np.ndarray | None = None
    cell_ids: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)
    cell_samples: dict[tuple[int, int], list[Mistake]] = field(default_factory=dict)
    top_losses: list[Mistake] = field(default_factory=list)
    calibrated: bool = False
    temperature: float | None = None
    policy: dict[str, Any] | None = None
    sample_ids: np.ndarray | None = None
    targets: np.ndarray | None = None
    predictions: np.ndarray | None = None
    residuals: np.ndarray | None = None
    largest_errors: list[Mistake] = field(default_factory=list)

    @property
    def confusion_normalized(self) -> np.ndarray | None:
        if self.confusion is None:
            return None
        totals = self.confusion.sum(axis=1, keepdims=True).astype(np.float64)
        return np.divide(
            self.confusion, totals, out=np.zeros(self.confusion.shape), where=totals > 0
        )

    def samples(self, target: int, prediction: int) -> list[Mistake]:
        """The kept samples of one confusion cell (``cell_ids`` has them all)."""
        if self.confusion is None:
            raise ConfigError("samples", (target, prediction), "a regression has no cells")
        k = self.confusion.shape[0]
        if not (0 <= target < k and 0 <= prediction < k):
            raise ConfigError("samples", (target, prediction), f"pass class indices in [0, {k})")
        return list(self.cell_samples.get((target, prediction), []))

    def summary(self) -> str:
        where = (
            f"run {self.source['run_id'][:8]} ({self.source['checkpoint']})"
            if self.source.get("kind") == "run"
            else "a model"
        )
        if self.task == "regression":
            mae = self.metrics.get("mae")
            return f"{where} on '{self.split}': {self.rows:,} rows, MAE {mae:.4g}"
        assert self.confusion is not None
        wrong = int(self.confusion.sum() - np.trace(self.confusion))
        return f"{where} on '{self.split}': {self.rows:,} rows, {wrong:,} mistakes"

    def to_json(self, max_points: int = 10_000) -> dict[str, Any]:
        """The widget's payload, sent once: every cell's kept samples, the top losses, and
        (regression) at most ``max_points`` scatter points, evenly strided."""
        out: dict[str, Any] = {
            "task": self.task,
            "split": self.split,
            "source": self.source,
            "rows": self.rows,
            "metrics": self.metrics,
            "show": self.show,
            "calibrated": self.calibrated,
            "temperature": self.temperature,
            "policy": self.policy,
            "summary": self.summary(),
        }
        if self.task == "classification":
            assert self.confusion is not None
            out["labels"] = list(self.labels or ())
            out["confusion"] = self.confusion.astype(int).tolist()
            out["confusion_normalized"] = self.confusion_normalized.tolist()  # type: ignore[union-attr]
            out["cells"] = {
                f"{t},{p}": {
                    "count": len(self.cell_ids.get((t, p), ())),
                    "samples": [m.to_json() for m in kept],
                }
                for (t, p), kept in sorted(self.cell_samples.items())
            }
            out["top_losses"] = [m.to_json() for m in self.top_losses]
            return out
        assert self.residuals is not None
        assert self.sample_ids is not None
        n = len(self.residuals)
        pick = np.arange(n) if n <= max_points else np.linspace(0, n - 1, max_points).astype(int)
        out["points"] = {
            "ids": self.sample_ids[pick].tolist(),
            "targets": self.targets[pick].tolist(),  # type: ignore[index]
            "residuals": self.residuals[pick].tolist(),
            "total": n,
        }
        out["largest_errors"] = [m.to_json() for m in self.largest_errors]
        return out
