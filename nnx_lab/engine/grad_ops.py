"""Gradient chores of every update, the same numbers as torch's for less host time.

A small step spends as long in ``clip_grad_norm_``'s grouping of tensors by device and
dtype, and in ``zero_grad``'s profiler scope, as in the arithmetic itself. When the
gradients are plain tensors of one device and dtype (a network as nnx-lab builds it),
these run torch's own ops in torch's own order, so every gradient is bit for bit what
torch's functions give; anything else (several dtypes or devices, tensor subclasses, a
device without foreach kernels, a user's optimizer class) goes through torch's.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["clip_grad_norm", "zero_grad"]

_FOREACH_DEVICES = frozenset({"cpu", "cuda"})
_torch_zero_grad = torch.optim.Optimizer.zero_grad


def clip_grad_norm(params: Iterable[torch.Tensor], max_norm: float) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_(params, max_norm)`` (the 2-norm), same result."""
    params = list(params)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads or not _one_plain_group(grads):
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    with torch.no_grad():
        norms = torch._foreach_norm(grads, 2.0)
        total = torch.linalg.vector_norm(torch.stack(norms), 2.0)
        coef = torch.clamp(float(max_norm) / (total + 1e-6), max=1.0)
        torch._foreach_mul_(grads, coef)
    return total


def zero_grad(optimizer: torch.optim.Optimizer) -> None:
    """``optimizer.zero_grad(set_to_none=True)``; torch's own classes skip the
    profiler scope it opens (their ``zero_grad`` sets each ``grad`` to None, no more)."""
    if type(optimizer).zero_grad is not _torch_zero_grad:
        optimizer.zero_grad(set_to_none=True)
        return
    for group in optimizer.param_groups:
        for p in group["params"]:
            p.grad = None


def _one_plain_group(grads: list[torch.Tensor]) -> bool:
    first = grads[0]
    device, dtype = first.device, first.dtype
    if device.type not in _FOREACH_DEVICES:
        return False
    return all(type(g) is torch.Tensor and g.device == device and g.dtype == dtype for g in grads)
