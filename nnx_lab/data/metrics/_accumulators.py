"""NNx's registry functions: ``register_metric(id, version, factory, *, input, mode)``
with NNx's accumulator protocol (``factory(config)`` -> an object with
``update(target, prediction)`` on NumPy arrays and ``result() -> float | None``),
adapted onto nnx-lab's registry, plus ``unregister_metric`` and ``registered_metrics``.

An accumulator is opaque: nothing says it only keeps sums, so its statistic keeps the
valid targets and the declared input whole (``reduce="cat"``, like AUROC's), and its
finalize builds ``factory(config)``, feeds it everything in one update and reads
``result()``. One update over the whole split equals NNx's many for any accumulator
that does not depend on how the rows were batched, and it makes the order of shards
and processes irrelevant, which a concatenated statistic's finalize must guarantee.
"""

from __future__ import annotations

import math
import numbers
import types
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from ...errors import ConfigError
from . import _registry as registry
from ._batch import MetricBatch

__all__ = [
    "METRIC_INPUTS",
    "MetricAccumulator",
    "register_metric",
    "registered_metrics",
    "unregister_metric",
]

METRIC_INPUTS = ("labels", "probabilities", "continuous")
# NNx's input -> (nnx-lab's input, the MetricBatch view, the kinds that provide it)
_INPUTS = {
    "labels": ("labels", "labels", ("categorical", "bernoulli")),
    "probabilities": ("probabilities", "probs", ("categorical", "bernoulli")),
    "continuous": ("values", "values", ("regression",)),
}
_MODES = {"min": "lower", "max": "higher"}
# the built-ins stay: tasks record them, so removing one would break every run
_BUILT_IN: set[str] = set()


@runtime_checkable
class MetricAccumulator(Protocol):
    """NNx's protocol of what ``factory(config)`` returns: ``update`` gets one call's
    valid targets and declared input as NumPy arrays (sample axis first); ``result``
    returns the metric over everything seen, or None when nothing was. (NNx's optional
    ``merge`` and ``stores_scores`` are not needed here: see the module docstring.)"""

    def update(self, target: np.ndarray, prediction: np.ndarray) -> None: ...

    def result(self) -> float | None: ...


def _config(options: Mapping[str, Any]) -> Mapping[str, Any]:
    """The spec's config as NNx hands it to a metric: read-only, lists as lists."""
    return types.MappingProxyType({k: registry.thawed(v) for k, v in options.items()})


def _statistic(name: str, view: str) -> registry.Statistic:
    def compute(b: MetricBatch, _: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        # element-wise for bernoulli / regression, row-wise for categorical (as NNx)
        prediction = getattr(b, view)
        return {"targets": b.targets[b.valid], "prediction": prediction[b.valid]}

    return registry.Statistic(name, "cat", frozenset({view}), compute)


def _finalize(
    metric_id: str, factory: Callable[[Mapping[str, Any]], Any], nnx_input: str
) -> Callable[[dict[str, torch.Tensor], registry.FinalizeContext], torch.Tensor]:
    def finalize(t: dict[str, torch.Tensor], ctx: registry.FinalizeContext) -> torch.Tensor:
        targets, prediction = t["targets"], t["prediction"]
        nan = torch.full((), math.nan, dtype=torch.float64, device=targets.device)
        if targets.shape[0] == 0:
            return nan  # NNx's "nothing seen": no value, and no accumulator to ask
        target_np = targets.detach().cpu().numpy()
        if ctx.kind != "regression":
            target_np = target_np.astype(np.int64)  # class indices / 0-1 labels, as NNx
        pred_np = prediction.detach().cpu().numpy()
        if nnx_input == "labels":
            pred_np = pred_np.astype(np.int64)
        accumulator = factory(_config(ctx.options))
        accumulator.update(target_np, pred_np)
        value = accumulator.result()
        if value is None:
            return nan
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ConfigError(
                f"metric {metric_id!r} result()",
                value,
                "return a float, or None when the metric has no value",
            )
        return torch.tensor(float(value), dtype=torch.float64, device=targets.device)

    return finalize


def _check_id(metric_id: Any, version: Any) -> None:
    if not isinstance(metric_id, str) or not metric_id.strip() or "@" in metric_id:
        raise ConfigError(
            "register_metric.id", metric_id, "pass a non-empty name without '@', e.g. 'my_mae'"
        )
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ConfigError("register_metric.version", version, "pass an int >= 1, e.g. 1")


def register_metric(
    id: Any,
    version: int | None = None,
    factory: Callable[[Mapping[str, Any]], Any] | None = None,
    *,
    input: str | None = None,
    mode: str | None = None,
    check_config: Callable[[Mapping[str, Any]], None] | None = None,
    replace: bool = False,
) -> Any:
    """Register a metric: nnx-lab's ``register_metric(MetricDef(...))``, or NNx's
    ``register_metric(id, version, factory, *, input, mode, check_config=None,
    replace=False)``, told apart by the first argument.

    NNx's form: ``factory(config)`` returns a fresh accumulator for one split of one
    epoch; ``input`` is one of ``METRIC_INPUTS``; ``mode`` ``"min"`` (lower is better)
    or ``"max"``; ``check_config(config)`` judges a ``MetricSpec``'s config when the
    spec is built (before any run, so before any batch). An existing ``(id, version)``
    is refused unless ``replace=True``. Returns None, as NNx's does.
    """
    if isinstance(id, registry.MetricDef):
        given = [version, factory, input, mode, check_config]
        if any(v is not None for v in given) or replace:
            raise ConfigError(
                "register_metric",
                id.name,
                "pass a MetricDef alone, or NNx's (id, version, factory, input=, mode=)",
            )
        return registry.register_metric(id)
    _check_id(id, version)
    assert version is not None
    if not callable(factory):
        raise ConfigError(
            "register_metric.factory", factory, "pass a callable: factory(config) -> accumulator"
        )
    if input not in _INPUTS:
        raise ConfigError("register_metric.input", input, f"use one of {', '.join(METRIC_INPUTS)}")
    if mode not in _MODES:
        raise ConfigError("register_metric.mode", mode, "use 'min' (lower is better) or 'max'")
    if check_config is not None and not callable(check_config):
        raise ConfigError(
            "register_metric.check_config", check_config, "pass a callable(config), or None"
        )
    if not isinstance(replace, bool):
        raise ConfigError("register_metric.replace", replace, "pass True or False")
    name = registry.registry_name(id, version)
    if name in _BUILT_IN:
        raise ConfigError(
            "register_metric.id",
            id,
            "that is a built-in metric, kept by nnx-lab (docs/nnx_differences.md); pick "
            "another id, or bump the version",
        )
    if name in registry.metric_names() and not replace:
        raise ConfigError(
            "register_metric.id",
            f"{id}@v{version}",
            "that metric is registered: pass replace=True, or bump the version",
        )
    ours, view, kinds = _INPUTS[input]

    def check(options: Mapping[str, Any]) -> None:
        if check_config is not None:
            check_config(_config(options))

    metric = registry.MetricDef(
        name,
        ours,
        _MODES[mode],
        kinds,
        f"accumulator.{name}",
        _finalize(id, factory, input),
        f"registered with NNx's register_metric ({getattr(factory, '__name__', 'factory')})",
        check_options=check,
        open_options=True,
    )
    registry.remove_metric(name)
    registry.register_statistic(_statistic(metric.statistic, view))
    registry.register_metric(metric)
    return None


def unregister_metric(id: str, version: int) -> bool:
    """Remove a registration; True when one existed. A built-in stays (refused)."""
    _check_id(id, version)
    name = registry.registry_name(id, version)
    if name in _BUILT_IN:
        raise ConfigError(
            "unregister_metric.id",
            id,
            "the built-in metrics stay registered in nnx-lab (docs/nnx_differences.md)",
        )
    return registry.remove_metric(name) is not None


def registered_metrics() -> tuple[tuple[str, int], ...]:
    """Every registered ``(id, version)``, sorted (built-ins and yours)."""
    return tuple(sorted(registry.split_name(n) for n in registry.metric_names()))


def mark_built_in() -> None:
    """Called once the built-ins are in: they can be neither replaced nor removed."""
    _BUILT_IN.update(registry.metric_names())
