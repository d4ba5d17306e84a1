"""The built-in metrics: each one's finalize (accumulated tensors to one number, on the
device; NaN where it is undefined) and its registry entry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ...errors import ConfigError
from ._registry import FinalizeContext, MetricDef

__all__ = ["METRICS", "auroc_per_column"]


def _nan_like(t: torch.Tensor) -> torch.Tensor:
    return torch.full((), float("nan"), dtype=t.dtype, device=t.device)


def _ratio(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """num / den, NaN where den is 0 (undefined, not 0)."""
    return torch.where(den > 0, num / den.clamp_min(1), _nan_like(num))


def _safe_div(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """num / den with 0 where den is 0 (sklearn's zero_division=0, as EDP has it)."""
    return torch.where(den > 0, num / torch.where(den > 0, den, torch.ones_like(den)), 0 * num)


@dataclass(frozen=True)
class _Counts:
    tp: torch.Tensor  # per class / output
    support: torch.Tensor
    predicted: torch.Tensor
    correct: torch.Tensor  # 0-d: rows (categorical) or elements (bernoulli) decoded right
    total: torch.Tensor  # 0-d: valid targets
    present: torch.Tensor  # per class / output: occurs in the targets or the predictions


def _counts(t: dict[str, torch.Tensor], ctx: FinalizeContext) -> _Counts:
    k = ctx.n_classes
    flat = t["confusion"][:-1]
    if ctx.kind == "categorical":
        conf = flat.view(k, k)
        tp = conf.diagonal()
        support, predicted = conf.sum(1), conf.sum(0)
        return _Counts(
            tp, support, predicted, tp.sum(), conf.sum(), (support > 0) | (predicted > 0)
        )
    conf = flat.view(k, 2, 2)
    tp, fp, fn, tn = conf[:, 1, 1], conf[:, 0, 1], conf[:, 1, 0], conf[:, 0, 0]
    return _Counts(tp, tp + fn, tp + fp, (tp + tn).sum(), conf.sum(), (tp + fp + fn) > 0)


def _defined(value: torch.Tensor, c: _Counts) -> torch.Tensor:
    return torch.where(c.total > 0, value, _nan_like(value))


def _accuracy(t: dict[str, torch.Tensor], ctx: FinalizeContext) -> torch.Tensor:
    c = _counts(t, ctx)
    return _ratio(c.correct, c.total)


def _error(t: dict[str, torch.Tensor], ctx: FinalizeContext) -> torch.Tensor:
    return 1 - _accuracy(t, ctx)


def _per_class(c: _Counts) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    precision = _safe_div(c.tp, c.predicted)
    recall = _safe_div(c.tp, c.support)
    f1 = _safe_div(2 * precision * recall, precision + recall)
    return precision, recall, f1


def _macro(which: int) -> Callable[[dict[str, torch.Tensor], FinalizeContext], torch.Tensor]:
    def finalize(t: dict[str, torch.Tensor], ctx: FinalizeContext) -> torch.Tensor:
        c = _counts(t, ctx)
        per = _per_class(c)[which]
        present = c.present.to(per.dtype)
        return _defined((per * present).sum() / present.sum().clamp_min(1), c)

    return finalize


def _micro(which: int) -> Callable[[dict[str, torch.Tensor], FinalizeContext], torch.Tensor]:
    def finalize(t: dict[str, torch.Tensor], ctx: FinalizeContext) -> torch.Tensor:
        c = _counts(t, ctx)
        tp, predicted, support = c.tp.sum(), c.predicted.sum(), c.support.sum()
        precision, recall = _safe_div(tp, predicted), _safe_div(tp, support)
        value = (precision, recall, _safe_div(2 * precision * recall, precision + recall))[which]
        return _defined(value, c)

    return finalize


def _f1_weighted(t: dict[str, torch.Tensor], ctx: FinalizeContext) -> torch.Tensor:
    c = _counts(t, ctx)
    f1 = _per_class(c)[2]
    return _defined(_safe_div((f1 * c.support).sum(), c.support.sum()), c)


def _mean_of(key: str, count: str = "count") -> Callable[..., torch.Tensor]:
    def finalize(t: dict[str, torch.Tensor], ctx: FinalizeContext) -> torch.Tensor:
        return _ratio(t[key], t[count])

    return finalize


def _ece(t: dict[str, torch.Tensor], ctx: FinalizeContext) -> torch.Tensor:
    """sum over bins of (n_m / N) |acc_m - conf_m| = sum |correct_m - confidence_m| / N."""
    n = t["count"].sum()
    return _ratio((t["correct"] - t["confidence"]).abs().sum(), n)


def auroc_per_column(scores: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """Exact AUROC of each column (Mann-Whitney U, ties counted one half).

    ``codes``: 1 positive, 0 negative, -1 left out. NaN for a column without both a
    positive and a negative. Every count is an integer (or a half) in float64, so the
    value is exact and does not depend on the rows' order.
    """
    m, k = scores.shape
    dtype = scores.dtype if scores.dtype == torch.float64 else torch.float32
    if m == 0:
        return torch.full((k,), float("nan"), dtype=dtype, device=scores.device)
    s, order = scores.sort(dim=0)
    c = codes.gather(0, order)
    pos, neg = (c == 1).to(dtype), (c == 0).to(dtype)
    new = torch.ones_like(s, dtype=torch.bool)
    new[1:] = s[1:] != s[:-1]
    group = new.long().cumsum(0) - 1  # tie group of each sorted row, per column
    flat = (group + torch.arange(k, device=s.device) * m).T.reshape(-1)
    neg_in = torch.zeros(k * m, dtype=dtype, device=s.device)
    pos_in = torch.zeros(k * m, dtype=dtype, device=s.device)
    neg_in.index_add_(0, flat, neg.T.reshape(-1))
    pos_in.index_add_(0, flat, pos.T.reshape(-1))
    neg_in, pos_in = neg_in.view(k, m), pos_in.view(k, m)
    neg_below = neg_in.cumsum(1) - neg_in  # negatives in lower tie groups
    u = (pos_in * (neg_below + 0.5 * neg_in)).sum(1)
    n_pos, n_neg = pos.sum(0), neg.sum(0)
    return _ratio(u, n_pos * n_neg)


def _auroc(t: dict[str, torch.Tensor], ctx: FinalizeContext) -> torch.Tensor:
    """Binary: the single output's AUROC. Categorical: one-vs-rest, averaged over the
    classes that have both positives and negatives (macro). Bernoulli with several
    outputs: averaged over the outputs likewise."""
    per = auroc_per_column(t["scores"], t["codes"])
    ok = ~torch.isnan(per)
    return _ratio(torch.where(ok, per, torch.zeros_like(per)).sum(), ok.sum().to(per.dtype))


def _check_bins(options: Mapping[str, Any]) -> None:
    bins = options["bins"]
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= 10_000:
        raise ConfigError(
            "MetricSpec('ece').bins", bins, "pass an integer number of bins in [1, 10000]"
        )


_LABELED = ("categorical", "bernoulli")
METRICS = (
    MetricDef(
        "accuracy",
        "labels",
        "higher",
        _LABELED,
        "confusion",
        _accuracy,
        "decoded predictions that equal the target (bernoulli: per output element)",
    ),
    MetricDef("error", "labels", "lower", _LABELED, "confusion", _error, "1 - accuracy"),
    MetricDef(
        "precision",
        "labels",
        "higher",
        _LABELED,
        "confusion",
        _macro(0),
        "macro precision over the classes (outputs) present in targets or predictions",
    ),
    MetricDef(
        "recall",
        "labels",
        "higher",
        _LABELED,
        "confusion",
        _macro(1),
        "macro recall over the classes (outputs) present in targets or predictions",
    ),
    MetricDef(
        "f1",
        "labels",
        "higher",
        _LABELED,
        "confusion",
        _macro(2),
        "macro F1 over the classes (outputs) present in targets or predictions",
    ),
    MetricDef(
        "precision_micro",
        "labels",
        "higher",
        _LABELED,
        "confusion",
        _micro(0),
        "pooled precision (categorical: equals accuracy; bernoulli: positive class over "
        "every output element)",
    ),
    MetricDef(
        "recall_micro",
        "labels",
        "higher",
        _LABELED,
        "confusion",
        _micro(1),
        "pooled recall (categorical: equals accuracy)",
    ),
    MetricDef(
        "f1_micro",
        "labels",
        "higher",
        _LABELED,
        "confusion",
        _micro(2),
        "F1 of pooled precision and recall (categorical: equals accuracy)",
    ),
    MetricDef(
        "f1_weighted",
        "labels",
        "higher",
        _LABELED,
        "confusion",
        _f1_weighted,
        "per-class F1 weighted by each class's number of targets",
    ),
    MetricDef(
        "subset_accuracy",
        "labels",
        "higher",
        ("bernoulli",),
        "subsets",
        _mean_of("exact", "rows"),
        "rows whose every valid output is decoded right (exact match ratio)",
    ),
    MetricDef(
        "hamming_loss",
        "labels",
        "lower",
        ("bernoulli",),
        "confusion",
        _error,
        "output elements decoded wrong (1 - per-element accuracy)",
    ),
    MetricDef(
        "nll",
        "probabilities",
        "lower",
        _LABELED,
        "nll",
        _mean_of("sum"),
        "mean negative log-likelihood of the targets (natural log)",
    ),
    MetricDef(
        "brier",
        "probabilities",
        "lower",
        _LABELED,
        "brier",
        _mean_of("sum"),
        "categorical: mean over rows of the squared distance to the one-hot target "
        "(range [0, 2]); bernoulli: mean (p - y)^2 per output",
    ),
    MetricDef(
        "ece",
        "probabilities",
        "lower",
        _LABELED,
        "reliability",
        _ece,
        "expected calibration error over equal-width confidence bins (Guo et al. 2017)",
        options={"bins": 15},
        check_options=_check_bins,
    ),
    MetricDef(
        "auroc",
        "probabilities",
        "higher",
        _LABELED,
        "ranks",
        _auroc,
        "exact area under the ROC curve, ties counted one half; one-vs-rest macro for categorical",
    ),
    MetricDef(
        "mse",
        "values",
        "lower",
        ("regression",),
        "errors",
        _mean_of("squared"),
        "mean squared error over valid target elements",
    ),
    MetricDef(
        "mae",
        "values",
        "lower",
        ("regression",),
        "errors",
        _mean_of("absolute"),
        "mean absolute error over valid target elements",
    ),
)
