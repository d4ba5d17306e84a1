"""Every refusal of ``NNModel.train`` that comes before its run directory exists, in one
call: the arguments, the objective and the step, the preflight (data, metrics, precision,
resume), the components a resume restores, the manifest, and a run of the same id on
disk. ``NNModel.train`` runs it first; a ``TrainJob`` runs the same call so that a race
refuses a job before any of its runs starts (the checks are written once, here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..runs import check_manifest
from .components import check_components
from .drift import print_model_banner
from .network_source import adapt_train_params
from .optim import check_optimizer
from .params import NNTrainParams
from .run_assembly import Preflight, check_existing, own_state
from .step_batches import own_batches
from .train_checks import check_objective, check_step_fn, check_train_args

__all__ = ["TrainGate", "check_train"]


@dataclass(frozen=True)
class TrainGate:
    """What the checks settled, as ``train`` goes on with it."""

    params: NNTrainParams  # adapted to the model's batches
    callbacks: list[Any]
    components: list[Any]
    pre: Preflight
    existing: Any  # the run of the same id on disk (allowed by overwrite_existing), or None


def check_train(
    model: Any,
    params: Any,
    callbacks: Sequence[Any] = (),
    components: Sequence[Any] = (),
    *,
    distributed: Any = None,
    provenance: Any = None,
    eval_step_fn: Any = None,
    salt: str | None = None,
    objective: Any = None,
    train_step_fn: Any = None,
    banner: bool = True,
) -> TrainGate:
    """Run ``model.train``'s checks with these arguments; no side effect (no run
    directory, no file, no training). Raises the first refusal, as ``train`` would.
    ``banner``: print the model's drift banner where ``train`` prints it (a race checks
    its jobs silently; each prints its banner when it trains)."""
    params = own_batches(adapt_train_params(params, model.batch_adapter), objective, train_step_fn)
    callbacks, components = check_train_args(
        params, callbacks, components, distributed, eval_step_fn
    )
    check_objective(objective, distributed, params, eval_step_fn)
    check_step_fn(train_step_fn, objective, distributed, model.trained_params().compile)
    check_optimizer(model.net, params.optim)
    if banner:
        print_model_banner(model)
    pre = model.preflight(
        params,
        distributed,
        eval_step_fn,
        salt=salt,
        objective=objective,
        train_step_fn=train_step_fn,
    )
    if pre.resume is not None and pre.resume.state is not None:
        # every component problem at once, before the run directory exists
        own = own_state(objective, train_step_fn)
        check_components([*callbacks, *components, *own], pre.resume.state.callbacks)
    if provenance is not None:
        check_manifest(provenance, pre.config)
    existing = check_existing(pre, params, distributed)
    return TrainGate(params, callbacks, components, pre, existing)
