"""The optimizer and plateau scheduler a run builds from its parameters."""

from __future__ import annotations

from typing import Any

import torch

from .enums import Optims
from .param_groups import optimizer_groups

__all__ = [
    "build_optimizer",
    "build_scheduler",
    "load_optimizer_state",
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
    if optim.name in (Optims.ADAM, Optims.ADAMW):
        # torch's multi-tensor Adam is its single-tensor one batched: the same ops on
        # each tensor in the same order, so the same numbers (tests/python/engine/
        # test_grad_ops.py holds it to that), for a third less host time on a small
        # CPU step, where torch's default is the single-tensor loop
        kw["foreach"] = _foreach_ok(p for g in params for p in g["params"]) or None
        kind = torch.optim.Adam if optim.name is Optims.ADAM else torch.optim.AdamW
        return kind(params, betas=optim.momentum, **kw)
    if optim.name is Optims.SGD:
        return torch.optim.SGD(params, momentum=optim.momentum, **kw)
    return torch.optim.RMSprop(params, momentum=optim.momentum, **kw)


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """``optimizer.load_state_dict(state)`` keeping this optimizer's own ``foreach``
    choice: the state's is the writer's (its device; an older nnx-lab's default)."""
    choice = [group.get("foreach") for group in optimizer.param_groups]
    optimizer.load_state_dict(state)
    for group, foreach in zip(optimizer.param_groups, choice, strict=True):
        group["foreach"] = foreach


def _foreach_ok(params: Any) -> bool:
    """Plain floating tensors on a device with foreach kernels (CUDA's default already)."""
    params = list(params)
    return bool(params) and all(
        type(p) in (torch.Tensor, torch.nn.Parameter)
        and p.device.type in ("cpu", "cuda")
        and torch.is_floating_point(p)
        for p in params
    )


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
