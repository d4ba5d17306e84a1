"""The metric registry: named metrics that declare their input and direction, accumulated
on the device as additive statistics and finalized once.

A metric is two parts. Its **statistic** turns one batch into tensors that add up across
batches, shards and processes (counts and sums: a confusion matrix, a summed NLL and
its count, per-bin sums), or, for the exact AUROC, tensors that concatenate. Its
**finalize** turns the accumulated tensors into one number, on the device. Metrics that
read the same statistic share it: accuracy, error, precision, recall and the F1 variants
all read one confusion matrix. See docs/metrics.md for the contract.

Inputs a metric declares:

- ``"labels"``: decoded predictions (argmax classes, or 0/1 indicators at logit >= 0);
- ``"probabilities"``: the predicted distribution (from logits where given, in float64,
  so a saturated probability does not become log(0));
- ``"values"``: continuous outputs (regression).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from ..errors import ConfigError

__all__ = [
    "DIRECTIONS",
    "INPUTS",
    "KINDS",
    "MetricBatch",
    "MetricDef",
    "MetricSpec",
    "Statistic",
    "metric_info",
    "metric_names",
    "register_metric",
    "register_statistic",
]

INPUTS = ("labels", "probabilities", "values")
DIRECTIONS = ("higher", "lower")
KINDS = ("categorical", "bernoulli", "regression")
_NEEDS = ("labels", "log_probs", "probs", "scores", "values")


# -- one batch, as the statistics see it -----------------------------------------------------
class MetricBatch:
    """One batch's targets and predictions, flattened to rows and on one device.

    ``targets``/``valid`` have shape ``(M,)`` (categorical) or ``(M, K)`` (bernoulli,
    regression); an invalid target (``ignore_index``, NaN, out of range) holds 0 and is
    ``False`` in ``valid``. The prediction views are derived on first use from what the
    caller passed (logits preferred), in float64 on the device (float32 on MPS).
    """

    def __init__(
        self,
        kind: str,
        targets: torch.Tensor,
        valid: torch.Tensor,
        n_classes: int,
        *,
        logits: torch.Tensor | None = None,
        probabilities: torch.Tensor | None = None,
        decoded: torch.Tensor | None = None,
        values: torch.Tensor | None = None,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        self.kind, self.targets, self.valid, self.n_classes = kind, targets, valid, n_classes
        self.dtype = dtype
        self._logits, self._probabilities = logits, probabilities
        self._decoded, self._values = decoded, values

    @functools.cached_property
    def labels(self) -> torch.Tensor:
        """Decoded predictions: class indices ``(M,)`` or 0/1 indicators ``(M, K)``."""
        if self._decoded is not None:
            return self._decoded.long()
        if self.kind == "categorical":
            source = self._logits if self._logits is not None else self._probabilities
            assert source is not None
            return source.argmax(dim=-1)
        if self._logits is not None:
            return (self._logits >= 0).long()
        assert self._probabilities is not None
        return (self._probabilities >= 0.5).long()

    @functools.cached_property
    def log_probs(self) -> torch.Tensor:
        """Categorical: log p per class ``(M, C)``. Bernoulli: log p(1) ``(M, K)``."""
        if self._logits is not None:
            z = self._logits.to(self.dtype)
            return F.log_softmax(z, dim=-1) if self.kind == "categorical" else -F.softplus(-z)
        assert self._probabilities is not None
        return torch.log(self._probabilities.to(self.dtype))

    @functools.cached_property
    def log_probs0(self) -> torch.Tensor:
        """Bernoulli only: log p(0) ``(M, K)``."""
        if self._logits is not None:
            return -F.softplus(self._logits.to(self.dtype))
        assert self._probabilities is not None
        return torch.log1p(-self._probabilities.to(self.dtype))

    @functools.cached_property
    def probs(self) -> torch.Tensor:
        """Categorical: p per class ``(M, C)``. Bernoulli: p(1) ``(M, K)``."""
        if self._logits is not None:
            z = self._logits.to(self.dtype)
            return torch.softmax(z, dim=-1) if self.kind == "categorical" else torch.sigmoid(z)
        assert self._probabilities is not None
        return self._probabilities.to(self.dtype)

    @functools.cached_property
    def scores(self) -> torch.Tensor:
        """Ranking scores per class/output for AUROC: the log-odds log p - log(1 - p)
        (categorical, one class against the rest), the logit or p (bernoulli).

        The log-odds order rows as p does, but keep apart what rounds to p = 1 (or to
        log p = 0): only the row's top class can be near 1, and its log(1 - p) is taken
        from the other classes' logits instead of from 1 - p.
        """
        if self.kind == "categorical":
            log_p = self.log_probs
            if self._logits is None:
                return log_p - torch.log1p(-log_p.exp())
            z = self._logits.to(self.dtype)
            top = z.argmax(dim=1, keepdim=True)
            others = z.scatter(1, top, float("-inf"))
            log_rest_top = torch.logsumexp(others, dim=1, keepdim=True) - torch.logsumexp(
                z, dim=1, keepdim=True
            )
            log_rest = torch.log1p(-log_p.exp()).scatter(1, top, log_rest_top)
            return log_p - log_rest
        source = self._logits if self._logits is not None else self._probabilities
        assert source is not None
        return source.to(self.dtype)

    @functools.cached_property
    def values(self) -> torch.Tensor:
        """Regression predictions ``(M, K)``."""
        assert self._values is not None
        return self._values.to(self.dtype)


# -- registry entries ------------------------------------------------------------------------
@dataclass(frozen=True)
class Statistic:
    """What a batch contributes: ``compute(batch, options) -> {name: tensor}``.

    ``reduce="sum"``: the tensors add up (every built-in but AUROC). ``reduce="cat"``:
    they concatenate along dim 0, and the finalize must not depend on the order.
    ``needs`` names the ``MetricBatch`` views it reads (labels, log_probs, probs,
    scores, values).
    """

    name: str
    reduce: str
    needs: frozenset[str]
    compute: Callable[[MetricBatch, Mapping[str, Any]], dict[str, torch.Tensor]]

    def __post_init__(self) -> None:
        if self.reduce not in ("sum", "cat"):
            raise ConfigError("Statistic.reduce", self.reduce, "use 'sum' or 'cat'")
        unknown = set(self.needs) - set(_NEEDS)
        if unknown:
            raise ConfigError(
                "Statistic.needs", sorted(unknown), f"use names from {', '.join(_NEEDS)}"
            )


@dataclass(frozen=True)
class FinalizeContext:
    """What a finalize knows besides the tensors."""

    kind: str
    n_classes: int
    options: Mapping[str, Any]


@dataclass(frozen=True)
class MetricDef:
    """A registered metric. ``finalize(tensors, ctx)`` returns a 0-d tensor on the
    device; NaN means undefined (reported as None), never a fabricated value."""

    name: str
    input: str
    direction: str
    kinds: tuple[str, ...]
    statistic: str
    finalize: Callable[[dict[str, torch.Tensor], FinalizeContext], torch.Tensor]
    description: str
    options: Mapping[str, Any] = field(default_factory=dict)
    check_options: Callable[[Mapping[str, Any]], None] | None = None

    def __post_init__(self) -> None:
        if self.input not in INPUTS:
            raise ConfigError("MetricDef.input", self.input, f"declare one of {', '.join(INPUTS)}")
        if self.direction not in DIRECTIONS:
            raise ConfigError(
                "MetricDef.direction", self.direction, "declare 'higher' or 'lower' (is better)"
            )
        bad = [k for k in self.kinds if k not in KINDS]
        if bad or not self.kinds:
            raise ConfigError(
                "MetricDef.kinds", self.kinds, f"declare kinds among {', '.join(KINDS)}"
            )


_STATISTICS: dict[str, Statistic] = {}
_METRICS: dict[str, MetricDef] = {}


def register_statistic(statistic: Statistic) -> Statistic:
    """Add a statistic to the registry; a name is registered once."""
    if not isinstance(statistic, Statistic):
        raise ConfigError("statistic", statistic, "pass a Statistic(...)")
    if statistic.name in _STATISTICS:
        raise ConfigError(
            "Statistic.name", statistic.name, "that statistic is registered; pick another name"
        )
    _STATISTICS[statistic.name] = statistic
    return statistic


def register_metric(metric: MetricDef) -> MetricDef:
    """Add a metric to the registry; its statistic must be registered first."""
    if not isinstance(metric, MetricDef):
        raise ConfigError("metric", metric, "pass a MetricDef(...)")
    if metric.name in _METRICS:
        raise ConfigError(
            "MetricDef.name", metric.name, "that metric is registered; pick another name"
        )
    if metric.statistic not in _STATISTICS:
        raise ConfigError(
            "MetricDef.statistic",
            metric.statistic,
            "register the statistic first (register_statistic), or use one of "
            + ", ".join(sorted(_STATISTICS)),
        )
    _METRICS[metric.name] = metric
    return metric


def metric_info(name: str) -> MetricDef:
    """The registry entry of ``name``: its input, direction, kinds and options."""
    metric = _METRICS.get(name)
    if metric is None:
        raise ConfigError(
            "MetricSpec.name",
            name,
            f"check the spelling; registered metrics: {', '.join(sorted(_METRICS))}",
        )
    return metric


def metric_names(kind: str | None = None) -> list[str]:
    """The registered metric names (those that apply to ``kind`` when given)."""
    return sorted(n for n, m in _METRICS.items() if kind is None or kind in m.kinds)


def statistic_for(name: str) -> Statistic:
    return _STATISTICS[name]


class MetricSpec:
    """A declared metric: ``MetricSpec("nll")``, ``MetricSpec("ece", bins=10)``.

    The name must be registered and the options those it takes; ``key`` names the value
    in results (the name, with any non-default options).
    """

    __slots__ = ("name", "options")

    def __init__(self, name: str, **options: Any) -> None:
        if not isinstance(name, str):
            raise ConfigError("MetricSpec.name", name, "pass a metric name, e.g. 'nll'")
        metric = metric_info(name)
        unknown = sorted(set(options) - set(metric.options))
        if unknown:
            takes = ", ".join(sorted(metric.options)) or "no options"
            raise ConfigError(
                f"MetricSpec({name!r}).{unknown[0]}",
                options[unknown[0]],
                f"check the spelling; {name} takes {takes}",
            )
        resolved = {**metric.options, **options}
        if metric.check_options is not None:
            metric.check_options(resolved)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "options", tuple(sorted(resolved.items())))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("MetricSpec is immutable")

    @property
    def info(self) -> MetricDef:
        return _METRICS[self.name]

    @property
    def key(self) -> str:
        defaults = self.info.options
        changed = [(k, v) for k, v in self.options if defaults.get(k) != v]
        if not changed:
            return self.name
        return f"{self.name}({', '.join(f'{k}={v!r}' for k, v in changed)})"

    def state(self) -> dict[str, Any]:
        return {"name": self.name, "options": dict(self.options)}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> MetricSpec:
        return cls(state["name"], **dict(state.get("options") or {}))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MetricSpec) and (self.name, self.options) == (
            other.name,
            other.options,
        )

    def __hash__(self) -> int:
        return hash((self.name, self.options))

    def __repr__(self) -> str:
        opts = "".join(f", {k}={v!r}" for k, v in self.options)
        return f"MetricSpec({self.name!r}{opts})"


# -- built-in statistics ---------------------------------------------------------------------
def _masked_sum(values: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    # where(), not a product: 0 * inf would be NaN for an ignored row
    return torch.where(
        valid, values, torch.zeros((), dtype=values.dtype, device=values.device)
    ).sum()


def _count(valid: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return valid.sum(dtype=dtype)


def _confusion(b: MetricBatch, _: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """Categorical: a C x C matrix (rows = truth). Bernoulli: K x 2 x 2, one per output.
    Invalid targets land in a trailing slot that finalize drops; index_add_, not
    bincount, so no host sync on CUDA."""
    k = b.n_classes
    if b.kind == "categorical":
        size = k * k
        idx = b.targets * k + b.labels
    else:
        size = 4 * k
        out = torch.arange(k, device=b.targets.device)
        idx = out * 4 + b.targets.long() * 2 + b.labels
    idx = torch.where(b.valid, idx, torch.full_like(idx, size)).reshape(-1)
    counts = torch.zeros(size + 1, dtype=b.dtype, device=idx.device)
    counts.index_add_(0, idx, torch.ones(idx.shape, dtype=b.dtype, device=idx.device))
    return {"confusion": counts}


def _nll(b: MetricBatch, _: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    if b.kind == "categorical":
        per = -b.log_probs.gather(1, b.targets.unsqueeze(1)).squeeze(1)
    else:
        per = torch.where(b.targets == 1, -b.log_probs, -b.log_probs0)
    return {"sum": _masked_sum(per, b.valid), "count": _count(b.valid, b.dtype)}


def _brier(b: MetricBatch, _: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """Categorical: sum over classes of (p_c - 1[c = y])^2 per row (Brier's multi-class
    score, in [0, 2]). Bernoulli: (p - y)^2 per output."""
    p = b.probs
    if b.kind == "categorical":
        p_true = p.gather(1, b.targets.unsqueeze(1)).squeeze(1)
        per = (p * p).sum(1) - 2 * p_true + 1
    else:
        per = (p - b.targets.to(p.dtype)) ** 2
    return {"sum": _masked_sum(per, b.valid), "count": _count(b.valid, b.dtype)}


def reliability_edges(bins: int, dtype: torch.dtype, device: Any) -> torch.Tensor:
    """The interior edges m / bins of ``bins`` equal-width bins over [0, 1]."""
    return torch.arange(1, bins, dtype=dtype, device=device) / bins


def _reliability(b: MetricBatch, options: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """Per confidence bin: rows, summed confidence, summed correctness.

    Confidence is the top probability (categorical) or max(p, 1 - p) per output
    (bernoulli); bin m holds ((m - 1) / M, m / M] as in Guo et al. (2017).
    """
    bins = int(options["bins"])
    p = b.probs
    conf = p.max(dim=1).values if b.kind == "categorical" else torch.maximum(p, 1 - p)
    correct = (b.labels == b.targets).to(b.dtype)
    valid = b.valid
    idx = torch.bucketize(conf, reliability_edges(bins, conf.dtype, conf.device), right=False)
    idx = torch.where(valid, idx, torch.full_like(idx, bins)).reshape(-1)
    zero = torch.zeros((), dtype=b.dtype, device=conf.device)

    def per_bin(weights: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(bins + 1, dtype=b.dtype, device=conf.device)
        out.index_add_(0, idx, torch.where(valid, weights, zero).reshape(-1))
        return out[:bins]

    return {
        "count": per_bin(torch.ones_like(conf)),
        "confidence": per_bin(conf),
        "correct": per_bin(correct),
    }


def _ranks(b: MetricBatch, _: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """Scores and target codes kept whole (concatenated): 1 positive, 0 negative, -1
    invalid, per class (one-vs-rest) or output."""
    scores = b.scores
    if b.kind == "categorical":
        classes = torch.arange(b.n_classes, device=scores.device)
        codes = (b.targets.unsqueeze(1) == classes).to(torch.int8)
        valid = b.valid.unsqueeze(1).expand_as(codes)
    else:
        codes = b.targets.to(torch.int8)
        valid = b.valid
    codes = torch.where(valid, codes, torch.full_like(codes, -1))
    return {"scores": scores, "codes": codes}


def _errors(b: MetricBatch, _: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    diff = b.values - b.targets.to(b.values.dtype)
    return {
        "squared": _masked_sum(diff * diff, b.valid),
        "absolute": _masked_sum(diff.abs(), b.valid),
        "count": _count(b.valid, b.dtype),
    }


def _subsets(b: MetricBatch, _: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """Bernoulli: rows whose every valid output is decoded right, and rows with at least
    one valid output (an invalid output neither helps nor spoils its row)."""
    valid = b.valid if b.valid.ndim > 1 else b.valid.unsqueeze(1)
    right = (b.labels == b.targets.long()).reshape(valid.shape) | ~valid
    rows = valid.any(dim=1)
    return {
        "exact": (right.all(dim=1) & rows).sum(dtype=b.dtype),
        "rows": rows.sum(dtype=b.dtype),
    }


for _stat in (
    Statistic("confusion", "sum", frozenset({"labels"}), _confusion),
    Statistic("subsets", "sum", frozenset({"labels"}), _subsets),
    Statistic("nll", "sum", frozenset({"log_probs"}), _nll),
    Statistic("brier", "sum", frozenset({"probs"}), _brier),
    Statistic("reliability", "sum", frozenset({"probs", "labels"}), _reliability),
    Statistic("ranks", "cat", frozenset({"scores"}), _ranks),
    Statistic("errors", "sum", frozenset({"values"}), _errors),
):
    register_statistic(_stat)


# -- built-in finalizers ---------------------------------------------------------------------
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
for _metric in (
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
):
    register_metric(_metric)
