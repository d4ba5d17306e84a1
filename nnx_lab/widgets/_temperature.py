"""NLL, Brier, ECE and the reliability bins of one prediction at any temperature, fast
enough for a slider.

``nnx_lab.calibration.calibration_metrics(prediction, y, temperature=T)`` is the
definition (the metric registry's). It checks its inputs and builds every intermediate
anew on each call: about 60 ms for 100,000 x 10 logits and 400 ms for 100,000 x 100
on one core. A slider asks the same question of the same logits at many temperatures,
so ``TemperatureSweep`` checks and prepares the rows once (the logits shifted by their
row maximum, the true class's shifted logit, whether the argmax is right: a positive
temperature never changes it) and then each temperature costs one exponential over the
logits and a few reductions, in float64: about 10 ms and 40 ms for those sizes.
``tests/python/widgets/test_calibration_explorer.py`` checks it against the registry at
many temperatures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..calibration import prediction_rows
from ..errors import ConfigError

__all__ = ["SweepPoint", "TemperatureSweep"]


@dataclass(frozen=True)
class SweepPoint:
    """What the explorer shows at one temperature. Per bin: ``counts``, the summed
    ``confidence`` and the summed ``correct`` (divide by the count for the means)."""

    temperature: float
    nll: float
    brier: float
    ece: float
    counts: list[int]
    confidence: list[float]
    correct: list[float]

    def means(self) -> tuple[list[float | None], list[float | None]]:
        """Mean confidence and accuracy per bin (None for an empty bin)."""
        conf = [s / c if c else None for s, c in zip(self.confidence, self.counts, strict=True)]
        acc = [s / c if c else None for s, c in zip(self.correct, self.counts, strict=True)]
        return conf, acc


class TemperatureSweep:
    """The valid rows of ``prediction`` against ``y``, prepared once; ``at(T)`` measures
    them with the logits divided by ``T`` (bins: equal width over [0, 1], bin m holds
    ((m - 1) / bins, m / bins], as the metric registry's ECE).

    NumPy, one thread: a slider's question must not wait for torch's intra-op threads,
    which a training run in the same kernel (or a busy machine) may be holding.

    ``float32=True`` rounds the shifted logits to float32 first: the values a browser
    measures when the explorer sends it the logits (``buffers()``), so both sides
    compute from the same numbers.
    """

    def __init__(self, prediction: Any, y: Any, bins: int, *, float32: bool = False) -> None:
        rows = prediction_rows(prediction, y)  # the engine's checks, with its messages
        self.kind = rows.kind
        self.bins = int(bins)
        self._edges = np.arange(1, self.bins, dtype=np.float64) / self.bins
        z = rows.z.detach().cpu().numpy().astype(np.float64)
        if self.kind == "categorical":
            t = rows.y.detach().cpu().numpy()
            self._d = z - z.max(axis=1, keepdims=True)  # <= 0; the top class is at 0
            if float32:
                self._d = self._d.astype(np.float32).astype(np.float64)
            self._t = t.astype(np.int32)
            self._dy = self._d[np.arange(t.shape[0]), t]
            self._correct = (z.argmax(axis=1) == t).astype(np.float64)
            self._buffer = np.empty_like(self._d)
        else:
            self._z = z.reshape(-1)
            self._y = rows.y.detach().cpu().numpy().astype(np.float64).reshape(-1)
            self._correct = ((self._z >= 0).astype(np.float64) == self._y).astype(np.float64)
        self.rows = int(self._correct.shape[0])
        self.accuracy = float(self._correct.mean())

    def buffers(self) -> tuple[np.ndarray, np.ndarray]:
        """Categorical only: the shifted logits as float32, row-major (each row's top
        class at 0), and the targets as int32: what a browser needs to measure."""
        if self.kind != "categorical":
            raise ConfigError("kind", self.kind, "only categorical rows are sent to a browser")
        return self._d.astype(np.float32).reshape(-1), self._t

    def at(self, temperature: float) -> SweepPoint:
        t = float(temperature)
        if not math.isfinite(t) or t <= 0:
            raise ConfigError("temperature", temperature, "pass a finite temperature > 0")
        beta = 1.0 / t
        if self.kind == "categorical":
            e = np.multiply(self._d, beta, out=self._buffer)
            np.exp(e, out=e)
            total = e.sum(axis=1)  # in [1, C]: the top class contributes exp(0)
            squares = np.einsum("ij,ij->i", e, e)
            confidence = 1.0 / total
            p_true = np.exp(self._dy * beta) / total
            nll = float((np.log(total) - self._dy * beta).mean())
            brier = float((squares / (total * total) - 2 * p_true + 1).mean())
        else:
            a = self._z * beta
            p = 1.0 / (1.0 + np.exp(-a))
            confidence = np.maximum(p, 1 - p)
            nll = float((np.logaddexp(0.0, a) - self._y * a).mean())
            brier = float(((p - self._y) ** 2).mean())
        # bin m holds ((m-1)/M, m/M]: the edges below a confidence count its bin
        index = np.searchsorted(self._edges, confidence, side="left")
        counts = np.bincount(index, minlength=self.bins)
        conf_sum = np.bincount(index, weights=confidence, minlength=self.bins)
        correct_sum = np.bincount(index, weights=self._correct, minlength=self.bins)
        ece = float(np.abs(conf_sum - correct_sum).sum() / self.rows)
        return SweepPoint(
            temperature=t,
            nll=nll,
            brier=brier,
            ece=ece,
            counts=counts.tolist(),
            confidence=conf_sum.tolist(),
            correct=correct_sum.tolist(),
        )
