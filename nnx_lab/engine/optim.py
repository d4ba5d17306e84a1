"""The optimizer and plateau scheduler a run builds from its parameters."""

from __future__ import annotations

from typing import Any

import torch

from ..errors import ConfigError
from .enums import Optims
from .param_groups import optimizer_groups

__all__ = [
    "build_optimizer",
    "build_scheduler",
    "check_optimizer",
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
    if getattr(optim, "fused", False):
        return _fused(params, optim, kw)
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


def _fused(params: list[dict[str, Any]], optim: Any, kw: dict[str, Any]) -> torch.optim.Optimizer:
    """torch's fused Adam, AdamW or SGD; parameters it has no kernel for (a device, an
    integer dtype) are refused with a ConfigError naming the field, here rather than at
    the first step, where torch checks them (a run builds one before its directory
    exists: ``check_optimizer``)."""
    devices = _fused_devices()
    bad = sorted(
        {
            f"{p.dtype} on {p.device.type}"
            for g in params
            for p in g["params"]
            if p.requires_grad and not (p.device.type in devices and p.is_floating_point())
        }
    )
    if bad:
        raise ConfigError(
            "NNOptimParams.fused",
            True,
            f"torch's fused kernels take floating-point tensors on {', '.join(devices)}, "
            f"and this model trains {', '.join(bad)}: leave fused=False",
        )
    if optim.name is Optims.SGD:
        return torch.optim.SGD(params, momentum=optim.momentum, fused=True, **kw)
    kind = torch.optim.Adam if optim.name is Optims.ADAM else torch.optim.AdamW
    return kind(params, betas=optim.momentum, fused=True, **kw)


def _fused_devices() -> list[str]:
    """The device types torch has fused optimizer kernels for."""
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices
    except ImportError:  # a torch without the helper: the devices of torch 2.4-2.13
        return ["cpu", "cuda", "mps", "xpu", "hpu"]
    return list(_get_fused_kernels_supported_devices())


def check_optimizer(net: torch.nn.Module, optim: Any) -> None:
    """Build ``optim``'s optimizer over ``net`` once, when it may be refused for the
    parameters themselves (a fused kernel): the refusal then comes before any side
    effect. Building one allocates no state (torch's state is made at the first step)."""
    if getattr(optim, "fused", False):
        build_optimizer(optimizer_groups(net, optim), optim)


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """``optimizer.load_state_dict(state)`` keeping this optimizer's own ``foreach`` and
    ``fused`` choices: the state's are the writer's (its device; an older nnx-lab's
    default; another run's settings when a state seeds a fine-tune)."""
    keys = ("foreach", "fused")
    choice = [{k: group.get(k) for k in keys if k in group} for group in optimizer.param_groups]
    optimizer.load_state_dict(state)
    for group, own in zip(optimizer.param_groups, choice, strict=True):
        for k in keys:
            if k in own:
                group[k] = own[k]
            else:
                group.pop(k, None)


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
