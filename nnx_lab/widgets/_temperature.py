"""NLL, Brier, ECE and the reliability bins of one prediction at any temperature, fast
enough for a slider.

``nnx_lab.calibration.calibration_metrics(prediction, y, temperature=T)`` is the
definition (the metric registry's). It checks its inputs and builds every intermediate
anew on each call: about 60 ms for 100,000 x 10 logits and 400 ms for 100,000 x 100
on one core. A slider asks the same question of the same logits at many temperatures,
so ``TemperatureSweep`` checks and prepares the rows once (the logits shifted by their
row maximum, the true class's shifted logit, whether the argmax is right: a positive
temperature never changes it) and then each temperature costs one exponential over the
logits and a few reductions, in float64: about 4 ms and 33 ms for those sizes.
``tests/python/test_explorers.py`` checks it against the registry at many temperatures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from ..calibration._inputs import prediction_rows
from ..engine.errors import ConfigError

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
    ((m - 1) / bins, m / bins], as the metric registry's ECE)."""

    def __init__(self, prediction: Any, y: Any, bins: int) -> None:
        rows = prediction_rows(prediction, y)  # the engine's checks, with its messages
        self.kind = rows.kind
        self.bins = int(bins)
        z = rows.z.detach().to("cpu", torch.float64)
        if self.kind == "categorical":
            t = rows.y.to("cpu")
            top = z.max(dim=1, keepdim=True).values
            self._d = (z - top).contiguous()  # <= 0; the top class is at 0
            self._dy = self._d.gather(1, t.unsqueeze(1)).squeeze(1)
            self._correct = (z.argmax(dim=1) == t).to(torch.float64)
            self._buffer = torch.empty_like(self._d)
        else:
            self._z = z.reshape(-1)
            self._y = rows.y.to("cpu", torch.float64).reshape(-1)
            self._correct = ((self._z >= 0).to(torch.float64) == self._y).to(torch.float64)
        self.rows = int(self._correct.shape[0])
        self.accuracy = float(self._correct.mean())

    def at(self, temperature: float) -> SweepPoint:
        t = float(temperature)
        if not math.isfinite(t) or t <= 0:
            raise ConfigError("temperature", temperature, "pass a finite temperature > 0")
        beta = 1.0 / t
        if self.kind == "categorical":
            e = torch.mul(self._d, beta, out=self._buffer).exp_()
            total = e.sum(dim=1)  # in [1, C]: the top class contributes exp(0)
            squares = torch.einsum("ij,ij->i", e, e)
            confidence = total.reciprocal()
            p_true = torch.exp(self._dy * beta) / total
            nll = (total.log() - self._dy * beta).mean()
            brier = (squares / (total * total) - 2 * p_true + 1).mean()
        else:
            a = self._z * beta
            p = torch.sigmoid(a)
            confidence = torch.maximum(p, 1 - p)
            nll = (F.softplus(a) - self._y * a).mean()
            brier = ((p - self._y) ** 2).mean()
        # bin m holds ((m-1)/M, m/M]: the registry's bucketize(right=False) on m/M edges
        edges = torch.arange(1, self.bins, dtype=torch.float64) / self.bins
        index = torch.bucketize(confidence, edges, right=False)
        counts = torch.bincount(index, minlength=self.bins)
        conf_sum = torch.bincount(index, weights=confidence, minlength=self.bins)
        correct_sum = torch.bincount(index, weights=self._correct, minlength=self.bins)
        ece = (conf_sum - correct_sum).abs().sum() / self.rows
        host = torch.stack([nll, brier, ece]).tolist()
        return SweepPoint(
            temperature=t,
            nll=host[0],
            brier=host[1],
            ece=host[2],
            counts=counts.tolist(),
            confidence=conf_sum.tolist(),
            correct=correct_sum.tolist(),
        )
