"""Fitting one temperature by minimizing the NLL (Guo et al. 2017).

The NLL of ``logits / T`` is minimized over ``s = log T`` (so T stays positive) from
T = 1, in float64. As a function of ``1 / T`` the NLL is convex, so each step is
Newton's step for ``1 / T`` taken in log space, kept inside a bracket of the optimum
(bisection when a step would leave it). The optimum is unique when it exists; it does
not exist (the fit fails, with the reason) when every calibration row is already decoded
right (the NLL keeps falling as T -> 0) or when the logits rank the true class no better
than chance (it keeps falling as T -> infinity).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from ..errors import CalibrationError, CalibrationFitError
from ._calibrator import TemperatureCalibrator
from ._inputs import (
    Rows,
    check_prediction,
    check_split_ids,
    check_text,
    prediction_rows,
    with_labels,
)

__all__ = ["CalibrationFitError", "TemperatureFit", "fit_temperature"]

_MAX_STEP = 4.0  # at most a factor e^4 in T per Newton step
# |step| in log T at which the fit has converged: Newton converges quadratically here,
# so the error left after a step this small is of order 1e-14
_S_TOL = 1e-7


@dataclass(frozen=True)
class TemperatureFit:
    """What ``fit_temperature`` found. ``require()`` gives the calibrator or raises
    ``CalibrationFitError`` with the reason."""

    status: str  # "fitted" | "failed"
    reason: str | None
    temperature: float | None
    nll_before: float
    nll_after: float | None
    iterations: int
    rows: int
    kind: str
    class_axis: int
    labels: tuple[str | int, ...] | None
    n_outputs: int
    model_id: str
    split_id: str
    train_split_id: str | None
    test_split_id: str | None
    trace: tuple[float, ...] = field(default=(), repr=False)  # T after each iteration

    @property
    def ok(self) -> bool:
        return self.status == "fitted"

    def require(self) -> TemperatureCalibrator:
        if not self.ok:
            raise CalibrationFitError(self.reason or "unknown", self)
        return TemperatureCalibrator.from_fit(self)


# -- the objective ---------------------------------------------------------------------------
class _Objective:
    """The mean NLL at ``1 / T = beta`` and its first two derivatives in ``beta``.

    Categorical rows are shifted by their maximum once (``d = z - max z``), so each
    evaluation is one exponential (into a buffer reused across iterations) and three
    reductions over the logits: E[z] and Var[z] under softmax(beta z) are E[d] + max z
    and Var[d].
    """

    def __init__(self, rows: Rows) -> None:
        self.kind = rows.kind
        z, y = rows.z, rows.y
        if self.kind == "categorical":
            self.d = z - z.max(dim=1, keepdim=True).values
            self.d2 = self.d * self.d
            self.dy = self.d.gather(1, y.unsqueeze(1)).squeeze(1)  # <= 0
            self.buffer = torch.empty_like(self.d)
        else:
            self.z, self.y = z, y

    def limits(self) -> tuple[float, bool]:
        """dNLL/dbeta at beta = 0, and whether it stays negative as beta -> infinity
        (every target already decoded right: no finite temperature is optimal)."""
        if self.kind == "categorical":
            slope0 = (self.d.mean(1) - self.dy).mean()
            all_right = (self.dy == 0).all()
        else:
            z, y = self.z, self.y
            slope0 = ((0.5 - y) * z).mean()
            all_right = ~(((z > 0) & (y == 0)) | ((z < 0) & (y == 1))).any()
        return float(slope0), bool(all_right)

    def __call__(self, beta: float) -> tuple[float, float, float]:
        if self.kind == "categorical":
            e = torch.mul(self.d, beta, out=self.buffer).exp_()
            total = e.sum(1)
            ed = torch.einsum("ij,ij->i", e, self.d) / total
            ed2 = torch.einsum("ij,ij->i", e, self.d2) / total
            f = (total.log() - beta * self.dy).mean()
            d1 = (ed - self.dy).mean()
            d2 = (ed2 - ed * ed).clamp_min(0).mean()
        else:
            a = self.z * beta
            sig = torch.sigmoid(a)
            f = (F.softplus(a) - self.y * a).mean()
            d1 = ((sig - self.y) * self.z).mean()
            d2 = (sig * (1 - sig) * self.z * self.z).mean()
        host = torch.stack([f, d1, d2]).tolist()  # one read-back per evaluation
        return host[0], host[1], host[2]


def _solve(
    objective: _Objective, max_iter: int
) -> tuple[float | None, int, str | None, list[float], float | None]:
    """(log T, iterations, failure reason, trace, the NLL at T = 1 if it was evaluated)."""
    slope0, all_right = objective.limits()
    if all_right:
        return (
            None,
            0,
            "every calibration target is already decoded right, so the NLL keeps falling "
            "as T -> 0 and no finite temperature is optimal; calibrate on more (or harder) "
            "held-out rows",
            [],
            None,
        )
    if slope0 >= 0:
        return (
            None,
            0,
            "the logits rank the true class no better than chance on this split, so the NLL "
            "keeps falling as T -> infinity (uniform probabilities); check that y matches "
            "the prediction's rows and label order",
            [],
            None,
        )
    s, lo, hi = 0.0, -math.inf, math.inf
    trace: list[float] = []
    at_one = None
    for it in range(1, max_iter + 1):
        beta = math.exp(-s)
        f, d1, d2 = objective(beta)
        if it == 1:
            at_one = f
        # d1 = dNLL/d(1/T); 1/T falls as s = log T rises
        if d1 > 0:
            lo = s  # the optimum has a smaller 1/T: a larger T
        elif d1 < 0:
            hi = s
        else:
            trace.append(math.exp(s))
            return s, it, None, trace, at_one
        # Newton's step for the NLL as a function of 1/T, where it is convex, taken in
        # log T: the iterate stays a positive temperature.
        new_beta = beta - d1 / d2 if d2 > 0 else 0.0
        step = math.log(beta / new_beta) if new_beta > 0 else _MAX_STEP
        step = max(-_MAX_STEP, min(_MAX_STEP, step))
        new = s + step
        if not lo < new < hi and math.isfinite(lo) and math.isfinite(hi):
            new = 0.5 * (lo + hi)
        converged = abs(new - s) < _S_TOL or (math.isfinite(lo + hi) and hi - lo < _S_TOL)
        s = new
        trace.append(math.exp(s))
        if converged:
            return s, it, None, trace, at_one
    return (
        None,
        max_iter,
        f"no convergence in {max_iter} iterations (last T = {math.exp(s):.6g}); pass a larger "
        "max_iter or check the logits for extreme values",
        trace,
        at_one,
    )


def fit_temperature(
    prediction: Any,
    y: Any,
    *,
    model_id: str,
    split_id: str,
    train_split_id: str | None = None,
    test_split_id: str | None = None,
    max_iter: int = 100,
    labels: Any = None,
    max_iterations: int | None = None,
) -> TemperatureFit:
    """Fit one temperature T on a calibration split by minimizing the NLL of
    ``logits / T`` (float64, on log T, from T = 1).

    ``prediction`` is ``model.predict_proba(X_calib, spec)``; ``y`` its targets
    (categorical: class indices, -100 left out; bernoulli: 0/1, NaN left out). The ids
    name the model (``model_fingerprint(model)``) and the splits; equal split ids are
    refused. The split ids are recorded, but ids cannot prove that the rows are
    disjoint.

    As in NNx, ``prediction`` may also be bare logits (a tensor or an array, classes on
    the last axis) with ``labels=[...]`` naming their columns in order; ``labels`` also
    names the classes of a prediction whose spec has none. ``max_iterations`` is NNx's
    name for ``max_iter``.
    """
    prediction = with_labels(prediction, labels)
    if max_iterations is not None:
        max_iter = max_iterations
    prediction = check_prediction(prediction)
    model_id = check_text(model_id, "model_id")  # type: ignore[assignment]
    split_id = check_text(split_id, "split_id")  # type: ignore[assignment]
    check_text(train_split_id, "train_split_id", optional=True)
    check_text(test_split_id, "test_split_id", optional=True)
    check_split_ids(train_split_id=train_split_id, split_id=split_id, test_split_id=test_split_id)
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise CalibrationError("max_iter", max_iter, "pass a positive number of iterations")
    rows = prediction_rows(prediction, y)
    spec = prediction.spec
    assert spec is not None
    objective = _Objective(rows)
    s, iterations, reason, trace, at_one = _solve(objective, max_iter)
    before = objective(1.0)[0] if at_one is None else at_one
    temperature = None if s is None else math.exp(s)
    return TemperatureFit(
        status="failed" if s is None else "fitted",
        reason=reason,
        temperature=temperature,
        nll_before=before,
        nll_after=None if temperature is None else objective(1.0 / temperature)[0],
        iterations=iterations,
        rows=int(rows.y.shape[0]),
        kind=spec.kind,
        class_axis=spec.class_axis,
        labels=spec.labels,
        n_outputs=int(prediction.logits.shape[spec.axis_for(tuple(prediction.logits.shape))]),
        model_id=model_id,
        split_id=split_id,
        train_split_id=train_split_id,
        test_split_id=test_split_id,
        trace=tuple(trace),
    )
