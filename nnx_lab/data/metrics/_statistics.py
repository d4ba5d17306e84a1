"""The built-in statistics: what one batch adds to a metric's accumulation (counts and
sums that add up across batches, shards and processes; AUROC's scores, concatenated)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ._batch import MetricBatch
from ._registry import Statistic

__all__ = ["STATISTICS", "reliability_edges"]


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


STATISTICS = (
    Statistic("confusion", "sum", frozenset({"labels"}), _confusion),
    Statistic("subsets", "sum", frozenset({"labels"}), _subsets),
    Statistic("nll", "sum", frozenset({"log_probs"}), _nll),
    Statistic("brier", "sum", frozenset({"probs"}), _brier),
    Statistic("reliability", "sum", frozenset({"probs", "labels"}), _reliability),
    Statistic("ranks", "cat", frozenset({"scores"}), _ranks),
    Statistic("errors", "sum", frozenset({"values"}), _errors),
)
