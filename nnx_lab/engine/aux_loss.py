"""A network's auxiliary training term (a mixture of experts' load-balancing term).

A network may define ``auxiliary_loss(self) -> AuxTerm | None``: its last training
forward's term, with its graph, under a name and a weight. The training step adds
``weight * value`` to the task loss before the backward pass, so the gradient scaler,
accumulation (each micro-batch's term weighted as its loss is), clipping and DDP see one
loss. The task loss is what the log calls ``loss`` (a MoE's and an MLP's stay
comparable); the term, unweighted, is logged beside it under ``aux``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

__all__ = ["AuxTerm", "aux_source", "detached", "with_term"]


class AuxTerm(NamedTuple):
    name: str  # the key of the term in the step and epoch records' ``aux``
    value: torch.Tensor  # the last forward's term, unweighted, with its graph
    weight: float  # 0: reported, not trained on


def aux_source(net: torch.nn.Module) -> Callable[[], AuxTerm | None] | None:
    """The network's ``auxiliary_loss`` method, or None for a network without one."""
    method = getattr(net, "auxiliary_loss", None)
    return method if callable(method) else None


def with_term(loss: torch.Tensor, term: AuxTerm | None, scale: float | torch.Tensor = 1.0):
    """``loss`` plus the weighted term, the term scaled as the loss is (``scale``: the
    micro-batch's weight when ``loss`` is a sum over it)."""
    if term is None or not term.weight:
        return loss
    return loss + term.value * (term.weight * scale)


def detached(term: AuxTerm | None) -> dict[str, torch.Tensor] | None:
    """The term as a step's record carries it: unweighted, detached, float32."""
    return None if term is None else {term.name: term.value.detach().float()}
