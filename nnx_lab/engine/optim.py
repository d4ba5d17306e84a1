"""The optimizer and plateau scheduler a run builds from its parameters."""

from __future__ import annotations

from typing import Any

import torch

from .enums import Optims
from .param_groups import optimizer_groups

__all__ = [
    "build_optimizer",
    "build_scheduler",
    "optimizer_groups",
    "optimizer_topology",
    "trainable_groups",
]


def trainable_groups(net: torch.nn.Module) -> list[list[torch.nn.Parameter]]:
    """One group of the trainable parameters (the LR finder's: it sweeps one rate)."""
    return [[p for p in net.parameters() if p.requires_grad]]


def _params_of(group: Any) -> Any:
    return group["params"] if isinstance(group, dict) else group


def optimizer_topology(groups: list[Any]) -> list[list[list[int]]]:
    """Per group, the shapes of its parameters: what a resumed optimizer must match."""
    return [[list(p.shape) for p in _params_of(group)] for group in groups]


def build_optimizer(groups: list[Any], optim: Any) -> torch.optim.Optimizer:
    """The optimizer over ``groups``: lists of parameters, or ``optimizer_groups``'
    dicts, whose own ``lr`` / ``weight_decay`` override ``optim``'s."""
    params = [dict(g) if isinstance(g, dict) else {"params": g} for g in groups]
    kw: dict[str, Any] = {"lr": optim.max_lr, "weight_decay": optim.weight_decay}
    if optim.name is Optims.ADAM:
        return torch.optim.Adam(params, betas=optim.momentum, **kw)
    if optim.name is Optims.ADAMW:
        return torch.optim.AdamW(params, betas=optim.momentum, **kw)
    if optim.name is Optims.SGD:
        return torch.optim.SGD(params, momentum=optim.momentum, **kw)
    return torch.optim.RMSprop(params, momentum=optim.momentum, **kw)


def build_scheduler(optimizer: torch.optim.Optimizer, sched: Any, monitored: bool = False) -> Any:
    """ReduceLROnPlateau on the §2.11 signal, lower is better with the relative
    ``threshold``; or, under a declared monitor (``monitored``), on the monitor's count
    of improvements (negated): with an absolute threshold of 0 the scheduler then sees
    an improvement exactly when the monitor decided one (its ``min_delta`` and direction
    already applied), and patience, cooldown, factor and min_lr act as configured."""
    if sched is None:
        return None
    return torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer,
        mode="min",
        factor=sched.factor,
        patience=sched.patience,
        threshold=0.0 if monitored else sched.threshold,
        threshold_mode="abs" if monitored else "rel",
        cooldown=sched.cooldown,
        min_lr=sched.min_lr,
    )
