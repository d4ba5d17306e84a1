"""Objectives: a loss described as named terms, with the update left to the engine (§3).

An ``Objective`` is called once per micro-batch as ``objective(net, batch, ctx)`` and
returns an ``ObjectiveResult`` of ``LossTerm``s. A term is a numerator and a denominator
rather than a ready mean, so that accumulation is exact: over each update's window the
engine trains on ``Σ weight · (Σ numerator / Σ denominator)`` for a ``"mean"`` term and
``Σ weight · Σ numerator`` for a ``"sum"`` one, whatever the micro-batches' sizes or masks.
The engine does the autocast forward, the backward pass, unscale, clip, the step and
the non-finite policy (``nonfinite=``), and logs each term's window value by name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ConfigError
from .adapters import forward

__all__ = [
    "LossTerm",
    "Objective",
    "ObjectiveContext",
    "ObjectiveResult",
    "supervised_objective",
]

_REDUCTIONS = ("mean", "sum")
_NONFINITE = ("fail", "skip")


@dataclass(frozen=True)
class LossTerm:
    """One named part of the loss: ``numerator`` (a tensor with its graph) over
    ``denominator`` (how many items it sums: rows, valid tokens, mask entries)."""

    name: str
    numerator: torch.Tensor
    denominator: torch.Tensor | float | int = 1.0
    reduction: str = "mean"
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "." in self.name:
            raise ConfigError(
                "LossTerm.name", self.name, "a non-empty name without dots (the log's key)"
            )
        if self.reduction not in _REDUCTIONS:
            raise ConfigError("LossTerm.reduction", self.reduction, 'use "mean" or "sum"')
        if not isinstance(self.numerator, torch.Tensor) or self.numerator.numel() != 1:
            raise ConfigError(
                f"LossTerm({self.name!r}).numerator",
                type(self.numerator).__name__,
                "a one-element tensor: the term summed over the micro-batch",
            )
        if not isinstance(self.weight, int | float) or not math.isfinite(self.weight):
            raise ConfigError(f"LossTerm({self.name!r}).weight", self.weight, "a finite number")


@dataclass(frozen=True)
class ObjectiveResult:
    """A micro-batch's terms, and values to log beside them (``record``: not trained
    on; each is logged as the window's row-weighted mean under ``terms``)."""

    terms: Sequence[LossTerm]
    record: Mapping[str, torch.Tensor | float] | None = None
    outputs: torch.Tensor | None = None  # the network's outputs, to score the task's metrics


@dataclass(frozen=True)
class ObjectiveContext:
    """What an objective may read besides the network and the batch."""

    step: int  # the optimizer step this micro-batch belongs to, 1-based
    epoch: int
    micro_batch: int  # its position in the accumulation window, 0-based
    window_size: int  # micro-batches in this update's window (a short last one included)
    precision: Any  # the run's ResolvedPrecision (the forward already runs under it)
    device: torch.device
    loss: Any  # the model's LossFn
    world_size: int = 1  # processes of a data-parallel run


class Objective:
    """A training loss as terms. Subclass it and define ``compute(net, batch, ctx)``,
    or wrap a function: ``Objective(fn)``. ``nonfinite="fail"`` stops the run with
    ``NonFiniteLossError`` before a non-finite update; ``"skip"`` skips that update,
    counts it (the epoch's ``skipped_updates``) and goes on. ``after_update(net, step)``
    runs after each update the engine commits (an EMA, a counter).

    ``scores_outputs``: the results carry the network's outputs, so the task's metrics
    (accuracy, ``metrics=``, ``extra_metrics``) are scored as for the default step.
    An objective with its own state (a generator, an EMA) defines ``state_dict()`` and
    ``load_state_dict()``: it travels with every checkpoint as a component does.
    """

    scores_outputs: bool = False

    def __init__(
        self,
        fn: Callable[..., ObjectiveResult] | None = None,
        *,
        nonfinite: str = "fail",
        after_update: Callable[[torch.nn.Module, int], None] | None = None,
        scores_outputs: bool | None = None,
    ) -> None:
        if fn is not None and not callable(fn):
            raise ConfigError(
                "Objective(fn)", fn, "a callable (net, batch, ctx) -> ObjectiveResult"
            )
        if nonfinite not in _NONFINITE:
            raise ConfigError("Objective.nonfinite", nonfinite, 'use "fail" or "skip"')
        if after_update is not None and not callable(after_update):
            raise ConfigError("Objective.after_update", after_update, "a callable (net, step)")
        self.fn = fn
        self.nonfinite = nonfinite
        self._after = after_update
        if scores_outputs is not None:
            self.scores_outputs = bool(scores_outputs)

    def compute(self, net: torch.nn.Module, batch: Any, ctx: ObjectiveContext) -> ObjectiveResult:
        if self.fn is None:
            raise NotImplementedError(
                f"{type(self).__name__} defines no compute(net, batch, ctx); "
                "subclass Objective with one, or pass Objective(fn)"
            )
        return self.fn(net, batch, ctx)

    def __call__(self, net: torch.nn.Module, batch: Any, ctx: ObjectiveContext) -> ObjectiveResult:
        result = self.compute(net, batch, ctx)
        if not isinstance(result, ObjectiveResult):
            raise TypeError(
                f"objective {self.name} returned {type(result).__name__}; it must return "
                "ObjectiveResult(terms=[LossTerm(...), ...])"
            )
        if not result.terms:
            raise ValueError(f"objective {self.name} returned no LossTerm")
        return result

    def after_update(self, net: torch.nn.Module, step: int) -> None:
        if self._after is not None:
            self._after(net, step)

    @property
    def name(self) -> str:
        target = self.fn if self.fn is not None else self
        return getattr(target, "__qualname__", type(target).__name__)

    def identity_target(self) -> Any:
        """What the run id hashes for this objective (its code)."""
        return self.fn if self.fn is not None else type(self)


class _Supervised(Objective):
    """``loss_fn(net(X), y)`` as one term ``"loss"``: the default step's numbers, bit
    for bit (a lone micro-batch trains on the mean itself; a window on the sums over
    the window's rows or valid targets, as the default step's accumulation does)."""

    scores_outputs = True

    def __init__(self, loss_fn: Any = None) -> None:
        super().__init__()
        self.loss_fn = loss_fn

    def compute(self, net: torch.nn.Module, batch: Any, ctx: ObjectiveContext) -> ObjectiveResult:
        X, y = batch
        out = forward(net, X)
        loss = self.loss_fn if self.loss_fn is not None else ctx.loss
        if ctx.window_size == 1 and ctx.world_size == 1:
            return ObjectiveResult([LossTerm("loss", loss(out, y), 1)], None, out)
        if loss.per == "target":
            term = LossTerm("loss", loss.total(out, y), loss.valid_targets(y))
        else:
            term = LossTerm("loss", loss(out, y) * y.shape[0], int(y.shape[0]))
        return ObjectiveResult([term], None, out)

    @property
    def name(self) -> str:
        return "supervised_objective"

    def identity_target(self) -> Any:
        return "supervised_objective"


def supervised_objective(loss_fn: Any = None) -> Objective:
    """The default step as an objective: the model's loss (or ``loss_fn``, a
    ``LossFn``) on the network's outputs, one term named ``"loss"``."""
    return _Supervised(loss_fn=loss_fn)
