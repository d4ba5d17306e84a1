"""The refusals of ``NNModel.train`` that need no data: the arguments' types, a
distributed run's loaders, a custom evaluator's signature, the declared metrics and the
monitor. They run first, before any batch is read and before anything exists on disk;
each error names the field, the value and the fix.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError
from .collective import Collective
from .components import check_unique, is_component
from .custom_step import is_full_precision_only
from .eval_context import takes_context
from .objective import Objective
from .params import NNTrainParams
from .scoring import check_declared
from .sinks import check_callback
from .tasks import Task
from .training_state import is_stateful

__all__ = [
    "check_metric_params",
    "check_objective",
    "check_step_fn",
    "check_step_precision",
    "check_train_args",
]


def check_train_args(
    params: Any,
    callbacks: Sequence[Any],
    components: Sequence[Any],
    distributed: Any,
    eval_step_fn: Any,
) -> tuple[list[Any], list[Any]]:
    """Refuse what ``train()`` cannot use; returns the callbacks and components as lists."""
    if not isinstance(params, NNTrainParams):
        raise ConfigError("params", params, "pass an NNTrainParams(...)")
    if distributed is not None:
        _check_distributed(distributed, params)
    if eval_step_fn is not None:
        _check_eval_step(eval_step_fn)
        if distributed is not None and takes_context(eval_step_fn):
            raise ConfigError(
                "eval_step_fn",
                getattr(eval_step_fn, "__qualname__", eval_step_fn),
                "under distributed= a context-form eval_step_fn(ctx) would see only its "
                "rank's shard; use the legacy form fn(net, loader, loss, task, *, device, "
                "precision, reduce) that sums its statistics with reduce=",
            )
    callbacks, components = list(callbacks), list(components)
    for cb in callbacks:
        check_callback(cb)
    for comp in components:
        if not is_stateful(comp) and not is_component(comp):
            raise ConfigError(
                "components",
                comp,
                "each component must define component_spec(), component_state() and "
                "load_component_state(state, version=...) (or state_dict() and "
                "load_state_dict())",
            )
    check_unique(components)
    return callbacks, components


def check_objective(
    objective: Any, distributed: Any, params: NNTrainParams, eval_step_fn: Any = None
) -> None:
    """Refuse an ``objective=`` that is not an ``Objective`` before any run exists.
    Declared metrics need outputs to score, unless an ``eval_step_fn`` reports them
    (validation's metrics are then the evaluator's; the training records hold the loss
    and the terms)."""
    if objective is None:
        return
    if not isinstance(objective, Objective):
        raise ConfigError(
            "objective",
            objective,
            "pass an nnx_lab.Objective: subclass it with compute(net, batch, ctx), or wrap "
            "a function as Objective(fn); a function that owns the update is a train_step_fn",
        )
    if eval_step_fn is not None and not params.extra_metrics:
        return
    scored = [m for m in params.metrics or [] if not m.info.reported]
    if not objective.scores_outputs and (scored or params.extra_metrics):
        raise ConfigError(
            "NNTrainParams.metrics",
            scored + list(params.extra_metrics or {}),
            f"objective {objective.name} returns no outputs to score: leave metrics and "
            "extra_metrics unset, or return ObjectiveResult(..., outputs=net_outputs) "
            "with Objective(..., scores_outputs=True)",
        )


def check_step_fn(step_fn: Any, objective: Any, distributed: Any, compile_options: Any) -> None:
    """Refuse a ``train_step_fn=`` that cannot run as asked, before any run exists."""
    if step_fn is None:
        return
    if objective is not None:
        raise ConfigError(
            "train_step_fn",
            getattr(step_fn, "__qualname__", type(step_fn).__name__),
            "pass a train_step_fn or an objective, not both: a step owns the update, an "
            "objective leaves it to the engine",
        )
    if isinstance(step_fn, Objective):
        raise ConfigError(
            "train_step_fn",
            step_fn.name,
            "this is an Objective (the loss as terms, the update the engine's): pass it "
            "as objective=",
        )
    if not callable(step_fn):
        raise ConfigError("train_step_fn", step_fn, "a callable (ctx: TrainStepContext) -> EDP")
    if distributed is not None:
        raise ConfigError(
            "train_step_fn",
            getattr(step_fn, "__qualname__", type(step_fn).__name__),
            "a train_step_fn owns the update, so the engine cannot apply the data-parallel "
            "gradient all-reduce to it; under distributed= describe the loss as an "
            "objective= instead",
        )
    if compile_options is not False and not compile_options.get("disable"):
        raise ConfigError(
            "NNModelParams.compile",
            dict(compile_options),
            "a train_step_fn calls the network itself, outside the engine's compiled "
            "forward; pass compile=False with train_step_fn=",
        )


def check_step_precision(step_fn: Any, precision: Any) -> None:
    """A step marked ``@full_precision_only`` refuses a reduced precision policy."""
    if step_fn is not None and is_full_precision_only(step_fn) and precision.reduced:
        raise ConfigError(
            "NNModelParams.precision",
            precision.effective,
            f"train_step_fn {getattr(step_fn, '__qualname__', step_fn)} is marked "
            "full_precision_only: train it with precision='fp32'",
        )


def _check_distributed(distributed: Any, params: NNTrainParams) -> None:
    if not isinstance(distributed, Collective):
        raise ConfigError(
            "distributed", distributed, "pass nnx_lab.distributed.DDP() (after init_process_group)"
        )
    for name, maker in (("train_loader", "train_loader"), ("val_loader", "validation_loader")):
        loader = getattr(params, name)
        if loader is not None and not getattr(loader, "nnx_distributed", False):
            raise ConfigError(
                f"NNTrainParams.{name}",
                type(loader).__name__,
                f"under distributed= every rank needs its share of the data: use "
                f"nnx_lab.distributed.{maker}(dataset, batch_size)",
            )


def _check_eval_step(fn: Any) -> None:
    """Refuse an ``eval_step_fn`` that cannot be called as the loop calls it."""
    fix = (
        "pass a function fn(ctx: EvalStepContext) -> EDP, or the legacy form "
        "fn(net, loader, loss, task, *, device, precision) -> EDP (nnx_lab.streaming_eval_step)"
    )
    if not callable(fn):
        raise ConfigError("eval_step_fn", fn, fix)
    if takes_context(fn):
        return  # the context form: fn(ctx: EvalStepContext) -> EDP
    try:
        inspect.signature(fn).bind(None, None, None, None, device=None, precision=None)
    except TypeError as exc:
        raise ConfigError(
            "eval_step_fn", fn, f"its signature does not fit ({exc}); {fix}"
        ) from None
    except ValueError:  # a builtin with no signature: let the call decide
        pass


def check_metric_params(params: NNTrainParams, task: Task, eval_step_fn: Any) -> None:
    """Declared metrics must fit the task's outputs, and a monitor must name a value the
    run records (refused before any side effect)."""
    check_declared(params.metrics, task, "NNTrainParams.metrics", eval_step_fn)
    monitor = params.monitor
    if monitor is None:
        return
    if monitor.split == "val" and params.val_loader is None:
        raise ConfigError(
            "NNTrainParams.monitor",
            monitor,
            "it monitors the validation split and val_loader is None: pass a val_loader, "
            "or MonitorSpec(..., split='train') for the whole training epoch",
        )
    fields = ["loss"]
    if task.k is not None:
        fields += ["error", "accuracy", "precision", "recall", "f1"]
    keys = [*task.record_metrics, *(m.key for m in params.metrics)]
    for m in params.metrics:  # a label (MetricSpec name=) was not checked by the spec
        natural = "min" if m.info.direction == "lower" else "max"
        if m.key == monitor.metric and monitor.mode != natural:
            raise ConfigError(
                "MonitorSpec.mode",
                monitor.mode,
                f"{m.key} ({m.name}) is {m.info.direction}-is-better: pass mode={natural!r}",
            )
    if monitor.metric in fields or monitor.metric in keys:
        return
    if monitor.split == "val" and eval_step_fn is not None:
        return  # a custom evaluator may report it in EDP.metrics itself
    names = ", ".join(repr(n) for n in dict.fromkeys([*fields, *keys]))
    raise ConfigError(
        "NNTrainParams.monitor",
        monitor.metric,
        f"this run records {names}; declare the metric "
        f"(NNTrainParams(metrics=[MetricSpec({monitor.metric.split('(')[0]!r}), ...])) or "
        "monitor one of those",
    )
