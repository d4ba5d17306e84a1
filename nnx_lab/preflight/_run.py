"""``preflight(model, params)``: the checks in order, on copies, writing nothing."""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from typing import Any

from ..engine.fast_batches import batches
from ..engine.optim import build_optimizer
from ..engine.param_groups import optimizer_groups
from ..engine.training_state import preserved_rng
from ..errors import ConfigError
from ._checks import check_data, check_gradients, check_lr, check_overfit
from ._report import PreflightCheck, PreflightReport

__all__ = ["preflight"]

CHECKS = ("data", "gradients", "overfit", "lr")


def preflight(
    model: Any,
    params: Any,
    *,
    checks: Sequence[str] = CHECKS,
    steps: int = 100,
    factor: float = 4.0,
    lr_iter: int = 60,
    allow_frozen: Sequence[str] = (),
) -> PreflightReport:
    """Run ``checks`` on ``model`` (an ``NNModel``) with ``params``' training loader
    and optimizer settings (an ``NNTrainParams``); see the package. The overfit check
    passes when ``steps`` updates on the first batch bring its loss to ``first /
    factor`` or below; ``lr_iter`` is the sweep's length; ``allow_frozen`` globs name
    tensors frozen on purpose."""
    unknown = [c for c in checks if c not in CHECKS]
    if unknown or not checks:
        raise ConfigError("preflight.checks", list(checks), f"pass names among {list(CHECKS)}")
    for name, value, low in (("steps", steps, 1), ("lr_iter", lr_iter, 5)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"preflight.{name}", value, f"pass a whole number >= {low}")
    if not isinstance(factor, (int, float)) or not factor > 1:
        raise ConfigError("preflight.factor", factor, "pass a number > 1 (e.g. 4.0)")
    if isinstance(allow_frozen, str):
        allow_frozen = [allow_frozen]
    loader = getattr(params, "train_loader", None)
    if loader is None:
        raise ConfigError("NNTrainParams.train_loader", None, "pass the training loader")
    t0 = time.perf_counter()
    device, loss_fn = model.device, model.loss_fn
    classification = getattr(loss_fn, "per", None) == "target"
    done: list[PreflightCheck] = []
    with preserved_rng([loader]):
        X, y = next(iter(batches(loader)))
        batch = (X.to(device), y.to(device))
        for name in checks:
            net = copy.deepcopy(model.net)  # each check its own copy: the model is untouched
            if name == "data":
                done.append(check_data(loader, net, classification))
            elif name == "gradients":
                done.append(check_gradients(net, loss_fn, batch, allow_frozen))
            elif name == "overfit":
                optimizer = build_optimizer(optimizer_groups(net, params.optim), params.optim)
                done.append(
                    check_overfit(net, loss_fn, batch, optimizer, steps=steps, factor=factor)
                )
            else:
                done.append(check_lr(net, loader, loss_fn, params.optim, num_iter=lr_iter))
    return PreflightReport(tuple(done), time.perf_counter() - t0)
