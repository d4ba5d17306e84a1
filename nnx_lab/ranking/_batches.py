"""What a ranking batch is: ``(features, query_ids, candidate_ids, relevance)``.

``features`` is ``[N, F]`` (floating), the three others ``[N]`` integers; relevance is
in ``[0, max_relevance]``. ``check_structure`` runs on every batch and reads nothing
back from the device; ``check_values`` reads the relevance range (one host transfer),
so it runs on the first batches before a run and on the gathered validation rows.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import DataError

__all__ = ["check_structure", "check_values", "scores_of"]

_FIELDS = ("features", "query_ids", "candidate_ids", "relevance")
_SHAPE = "(features [N, F], query_ids [N], candidate_ids [N], relevance [N])"


def check_structure(batch: Any, where: str) -> tuple[torch.Tensor, ...]:
    """The batch's four tensors, or a ``DataError`` naming what is wrong and where."""
    if not isinstance(batch, tuple | list) or len(batch) != 4:
        got = f"a {len(batch)}-tuple" if isinstance(batch, tuple | list) else type(batch).__name__
        raise DataError(where, f"a ranking batch is {_SHAPE}, got {got}", "yield four tensors")
    for name, value in zip(_FIELDS, batch, strict=True):
        if not isinstance(value, torch.Tensor):
            raise DataError(f"{where}.{name}", f"a {type(value).__name__}", "pass a torch.Tensor")
    features, qids, cids, rel = batch
    if features.ndim != 2 or not features.is_floating_point():
        raise DataError(
            f"{where}.features",
            f"shape {tuple(features.shape)}, dtype {features.dtype}",
            "pass a floating [N, F] tensor, one row per (query, candidate)",
        )
    n = features.shape[0]
    for name, value in zip(_FIELDS[1:], (qids, cids, rel), strict=True):
        if value.ndim != 1 or value.shape[0] != n:
            raise DataError(
                f"{where}.{name}",
                f"shape {tuple(value.shape)} beside features of {n} rows",
                f"pass a 1-D tensor of {n} entries, one per row",
            )
        if value.is_floating_point() or value.dtype == torch.bool:
            raise DataError(f"{where}.{name}", f"dtype {value.dtype}", "pass integers (torch.long)")
    return features, qids, cids, rel


def check_values(relevance: Any, max_relevance: int, where: str) -> None:
    """Relevance in ``[0, max_relevance]`` (a tensor or an array)."""
    rel = torch.as_tensor(relevance)
    if rel.numel() == 0:
        return
    low, high = int(rel.min()), int(rel.max())
    if low < 0 or high > max_relevance:
        bad = low if low < 0 else high
        raise DataError(
            f"{where}.relevance",
            f"a relevance of {bad} outside [0, {max_relevance}]",
            f"grade relevance 0..{max_relevance}, or pass RankingTask(max_relevance=...) "
            "of your grades",
        )


def scores_of(output: Any, where: str) -> torch.Tensor:
    """One score per row from the network's output (``[N]`` or ``[N, 1]``)."""
    if isinstance(output, torch.Tensor):
        if output.ndim == 1:
            return output
        if output.ndim == 2 and output.shape[1] == 1:
            return output[:, 0]
        shape = tuple(output.shape)
    else:
        shape = type(output).__name__
    raise DataError(
        where,
        f"the network returned {shape}",
        "a ranking scorer returns one score per row: build it with output_dim=1",
    )
