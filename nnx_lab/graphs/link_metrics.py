"""``link_metrics`` (§3.9): AUROC, average precision and BCE of link scores, in float64.

AUROC and AP rank the logits themselves (a monotone map of the probabilities), so a
confident model whose sigmoid saturates to 1.0 in float32 keeps its exact ranking; BCE
is ``log(1 + e^z) - y·z``, stable at any logit. AUROC counts ties one half (Mann-Whitney
U); AP is scikit-learn's ``average_precision_score`` (no interpolation).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..errors import DataError

__all__ = ["average_precision", "binary_auroc", "link_metrics"]


def _array(value: Any, field: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().double().numpy()
    out = np.asarray(value, dtype=np.float64).reshape(-1)
    if not np.isfinite(out).all():
        raise DataError(field, "holds NaN/inf values", "score finite logits")
    return out


def binary_auroc(scores: np.ndarray, targets: np.ndarray) -> float:
    pos, neg = int(targets.sum()), int((1 - targets).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="stable")
    s = scores[order]
    # average ranks over ties (1-based)
    _, first, counts = np.unique(s, return_index=True, return_counts=True)
    mean_rank = first + (counts + 1) / 2.0
    ranks = np.repeat(mean_rank, counts)
    r = np.empty_like(ranks)
    r[order] = ranks
    u = r[targets == 1].sum() - pos * (pos + 1) / 2.0
    return float(u / (pos * neg))


def average_precision(scores: np.ndarray, targets: np.ndarray) -> float:
    total = targets.sum()
    if total == 0:
        return float("nan")
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], targets[order]
    last = np.r_[np.nonzero(np.diff(s))[0], s.size - 1]  # the end of each tie group
    tps = np.cumsum(y)[last]
    fps = (last + 1) - tps
    precision = tps / (tps + fps)
    recall = tps / total
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def link_metrics(logits: Any, targets: Any, from_logits: bool = True) -> dict[str, float]:
    """``{"auroc", "average_precision", "bce", "samples"}`` of the candidates' scores
    (logits, or probabilities with ``from_logits=False``) against 0/1 targets."""
    z = _array(logits, "logits")
    y = _array(targets, "targets")
    if z.shape != y.shape:
        raise DataError("targets", f"has {y.size} values for {z.size} logits", "pass one per pair")
    if not np.isin(y, (0.0, 1.0)).all():
        raise DataError("targets", "holds values other than 0 and 1", "pass link labels 0/1")
    if from_logits:
        bce = np.logaddexp(0.0, z) - y * z
    else:
        if (z < 0).any() or (z > 1).any():
            raise DataError("logits", "are not probabilities in [0, 1]", "pass from_logits=True")
        eps = np.finfo(np.float64).tiny
        bce = -(y * np.log(np.maximum(z, eps)) + (1 - y) * np.log(np.maximum(1 - z, eps)))
    return {
        "auroc": binary_auroc(z, y),
        "average_precision": average_precision(z, y),
        "bce": float(bce.mean()) if z.size else float("nan"),
        "samples": int(z.size),
    }
