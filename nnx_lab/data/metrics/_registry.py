"""The metric registry: statistics (what a batch adds), metric definitions (how the
sums become a number, and what the metric reads), and ``MetricSpec``, a declared metric
checked against the registry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from ...errors import ConfigError
from ._batch import MetricBatch

__all__ = [
    "DIRECTIONS",
    "INPUTS",
    "KINDS",
    "FinalizeContext",
    "MetricDef",
    "MetricSpec",
    "Statistic",
    "metric_info",
    "metric_names",
    "register_metric",
    "register_statistic",
    "statistic_for",
]

INPUTS = ("labels", "probabilities", "values")
DIRECTIONS = ("higher", "lower")
KINDS = ("categorical", "bernoulli", "regression")
_NEEDS = ("labels", "log_probs", "probs", "scores", "values")


@dataclass(frozen=True)
class Statistic:
    """What a batch contributes: ``compute(batch, options) -> {name: tensor}``.

    ``reduce="sum"``: the tensors add up (every built-in but AUROC). ``reduce="cat"``:
    they concatenate along dim 0, and the finalize must not depend on the order.
    ``needs`` names the ``MetricBatch`` views it reads (labels, log_probs, probs,
    scores, values).
    """

    name: str
    reduce: str
    needs: frozenset[str]
    compute: Callable[[MetricBatch, Mapping[str, Any]], dict[str, torch.Tensor]]

    def __post_init__(self) -> None:
        if self.reduce not in ("sum", "cat"):
            raise ConfigError("Statistic.reduce", self.reduce, "use 'sum' or 'cat'")
        unknown = set(self.needs) - set(_NEEDS)
        if unknown:
            raise ConfigError(
                "Statistic.needs", sorted(unknown), f"use names from {', '.join(_NEEDS)}"
            )


@dataclass(frozen=True)
class FinalizeContext:
    """What a finalize knows besides the tensors."""

    kind: str
    n_classes: int
    options: Mapping[str, Any]


@dataclass(frozen=True)
class MetricDef:
    """A registered metric. ``finalize(tensors, ctx)`` returns a 0-d tensor on the
    device; NaN means undefined (reported as None), never a fabricated value."""

    name: str
    input: str
    direction: str
    kinds: tuple[str, ...]
    statistic: str
    finalize: Callable[[dict[str, torch.Tensor], FinalizeContext], torch.Tensor]
    description: str
    options: Mapping[str, Any] = field(default_factory=dict)
    check_options: Callable[[Mapping[str, Any]], None] | None = None

    def __post_init__(self) -> None:
        if self.input not in INPUTS:
            raise ConfigError("MetricDef.input", self.input, f"declare one of {', '.join(INPUTS)}")
        if self.direction not in DIRECTIONS:
            raise ConfigError(
                "MetricDef.direction", self.direction, "declare 'higher' or 'lower' (is better)"
            )
        bad = [k for k in self.kinds if k not in KINDS]
        if bad or not self.kinds:
            raise ConfigError(
                "MetricDef.kinds", self.kinds, f"declare kinds among {', '.join(KINDS)}"
            )


_STATISTICS: dict[str, Statistic] = {}
_METRICS: dict[str, MetricDef] = {}


def _check_new(table: Mapping[str, Any], entry: Any, cls: type, noun: str) -> None:
    """``entry`` is a ``cls`` whose name is not registered yet (a name is registered once)."""
    if not isinstance(entry, cls):
        raise ConfigError(noun, entry, f"pass a {cls.__name__}(...)")
    if entry.name in table:
        raise ConfigError(
            f"{cls.__name__}.name", entry.name, f"that {noun} is registered; pick another name"
        )


def register_statistic(statistic: Statistic) -> Statistic:
    """Add a statistic to the registry; a name is registered once."""
    _check_new(_STATISTICS, statistic, Statistic, "statistic")
    _STATISTICS[statistic.name] = statistic
    return statistic


def register_metric(metric: MetricDef) -> MetricDef:
    """Add a metric to the registry; its statistic must be registered first."""
    _check_new(_METRICS, metric, MetricDef, "metric")
    if metric.statistic not in _STATISTICS:
        raise ConfigError(
            "MetricDef.statistic",
            metric.statistic,
            "register the statistic first (register_statistic), or use one of "
            + ", ".join(sorted(_STATISTICS)),
        )
    _METRICS[metric.name] = metric
    return metric


def metric_info(name: str) -> MetricDef:
    """The registry entry of ``name``: its input, direction, kinds and options."""
    metric = _METRICS.get(name)
    if metric is None:
        raise ConfigError(
            "MetricSpec.name",
            name,
            f"check the spelling; registered metrics: {', '.join(sorted(_METRICS))}",
        )
    return metric


def metric_names(kind: str | None = None) -> list[str]:
    """The registered metric names (those that apply to ``kind`` when given)."""
    return sorted(n for n, m in _METRICS.items() if kind is None or kind in m.kinds)


def statistic_for(name: str) -> Statistic:
    return _STATISTICS[name]


class MetricSpec:
    """A declared metric: ``MetricSpec("nll")``, ``MetricSpec("ece", bins=10)``.

    The name must be registered and the options those it takes; ``key`` names the value
    in results (the name, with any non-default options).
    """

    __slots__ = ("label", "name", "options")

    def __init__(
        self,
        name: str,
        /,
        version: int = 1,
        config: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> None:
        """NNx's form is read too: ``MetricSpec(id, version=1, config={...}, name=...)``,
        where ``config`` holds the options and ``name`` is a display label (``label``)."""
        if not isinstance(name, str):
            raise ConfigError("MetricSpec.name", name, "pass a metric name, e.g. 'nll'")
        label = options.pop("name", None)
        if label is not None and (not isinstance(label, str) or not label.strip()):
            raise ConfigError("MetricSpec.name", label, "pass a non-empty display name, or None")
        if isinstance(version, bool) or version != 1:
            raise ConfigError(
                f"MetricSpec({name!r}).version", version, "nnx-lab's metrics are version 1"
            )
        if config is not None:
            if not isinstance(config, Mapping):
                raise ConfigError(
                    f"MetricSpec({name!r}).config", config, "pass a dict of the metric's options"
                )
            both = sorted(set(config) & set(options))
            if both:
                raise ConfigError(
                    f"MetricSpec({name!r}).{both[0]}",
                    options[both[0]],
                    "given in config= and as a keyword; pass it once",
                )
            options = {**config, **options}
        metric = metric_info(name)
        unknown = sorted(set(options) - set(metric.options))
        if unknown:
            takes = ", ".join(sorted(metric.options)) or "no options"
            raise ConfigError(
                f"MetricSpec({name!r}).{unknown[0]}",
                options[unknown[0]],
                f"check the spelling; {name} takes {takes}",
            )
        resolved = {**metric.options, **options}
        if metric.check_options is not None:
            metric.check_options(resolved)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "options", tuple(sorted(resolved.items())))
        object.__setattr__(self, "label", label or name)

    @property
    def id(self) -> str:
        """NNx's name for the registered metric's name."""
        return self.name

    @property
    def version(self) -> int:
        return 1

    @property
    def config(self) -> dict[str, Any]:
        """NNx's name for the options (every option, defaults included)."""
        return dict(self.options)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("MetricSpec is immutable")

    @property
    def info(self) -> MetricDef:
        return _METRICS[self.name]

    @property
    def key(self) -> str:
        defaults = self.info.options
        changed = [(k, v) for k, v in self.options if defaults.get(k) != v]
        if not changed:
            return self.name
        return f"{self.name}({', '.join(f'{k}={v!r}' for k, v in changed)})"

    def state(self) -> dict[str, Any]:
        return {"name": self.name, "options": dict(self.options)}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> MetricSpec:
        return cls(state["name"], **dict(state.get("options") or {}))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MetricSpec) and (self.name, self.options) == (
            other.name,
            other.options,
        )

    def __hash__(self) -> int:
        return hash((self.name, self.options))

    def __repr__(self) -> str:
        opts = "".join(f", {k}={v!r}" for k, v in self.options)
        return f"MetricSpec({self.name!r}{opts})"
