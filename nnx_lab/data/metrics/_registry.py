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
    "register_reported_metric",
    "register_statistic",
    "statistic_for",
]

# "reported": a value a custom evaluator (an eval_step_fn) puts in EDP.metrics itself,
# e.g. a ranking task's NDCG over whole queries; the engine never computes it from outputs.
INPUTS = ("labels", "probabilities", "values", "reported")
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
    # NNx's registrations take any JSON config (their check_config judges it)
    open_options: bool = False

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

    @property
    def reported(self) -> bool:
        """Whether an evaluator reports it (no statistic, never computed from outputs)."""
        return self.input == "reported"


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
    if not metric.reported and metric.statistic not in _STATISTICS:
        raise ConfigError(
            "MetricDef.statistic",
            metric.statistic,
            "register the statistic first (register_statistic), or use one of "
            + ", ".join(sorted(_STATISTICS)),
        )
    _METRICS[metric.name] = metric
    return metric


def _undefined(tensors: dict[str, torch.Tensor], ctx: FinalizeContext) -> torch.Tensor:
    return torch.tensor(float("nan"), dtype=torch.float64)


def register_reported_metric(name: str, direction: str, description: str) -> MetricDef:
    """Register (once; the same again is a no-op) a metric an evaluator reports in
    ``EDP.metrics`` by itself, so ``MetricSpec(name)`` declares it and
    ``MonitorSpec(name)`` knows its direction. Another definition of the name is refused."""
    metric = MetricDef(
        name=name,
        input="reported",
        direction=direction,
        kinds=KINDS,
        statistic="",
        finalize=_undefined,
        description=description,
    )
    have = _METRICS.get(name)
    if have is not None:
        if have.reported and have.direction == direction:
            return have
        raise ConfigError(
            "MetricDef.name", name, "that metric is registered otherwise; pick another name"
        )
    return register_metric(metric)


def registry_name(metric_id: str, version: int) -> str:
    """The registry's name of NNx's ``(id, version)``: the id at version 1 (every
    built-in), ``id@v2`` past it, so both versions can be registered at once."""
    return metric_id if version == 1 else f"{metric_id}@v{version}"


def split_name(name: str) -> tuple[str, int]:
    """``(id, version)`` of a registry name (the inverse of ``registry_name``)."""
    head, sep, tail = name.rpartition("@v")
    return (head, int(tail)) if sep and tail.isdigit() else (name, 1)


def remove_metric(name: str) -> MetricDef | None:
    """Drop ``name`` and its statistic when no other metric reads it; the entry or None."""
    metric = _METRICS.pop(name, None)
    if metric is not None and all(m.statistic != metric.statistic for m in _METRICS.values()):
        _STATISTICS.pop(metric.statistic, None)
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
    """The registered metric names (those that apply to ``kind``'s outputs when given:
    never a reported metric, which no output gives)."""
    return sorted(
        n for n, m in _METRICS.items() if kind is None or (kind in m.kinds and not m.reported)
    )


def statistic_for(name: str) -> Statistic:
    return _STATISTICS[name]


def _frozen(field_name: str, value: Any) -> Any:
    """A JSON config value made hashable (lists become tuples), since a spec's options
    key the statistics it shares; ``thawed`` gives the lists back to the metric."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(field_name, v) for v in value)
    raise ConfigError(
        field_name,
        value,
        "pass None, a bool, an int, a finite float, a str or a list of them "
        "(nnx-lab takes no nested mappings in a metric's config: docs/nnx_differences.md)",
    )


def thawed(value: Any) -> Any:
    """A frozen config value as JSON gives it (tuples back to lists)."""
    return [thawed(v) for v in value] if isinstance(value, tuple) else value


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
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ConfigError(
                f"MetricSpec({name!r}).version", version, "pass the registered version, e.g. 1"
            )
        if version != 1 and split_name(name)[1] == 1:
            if registry_name(name, version) not in _METRICS:
                have = sorted(v for n in _METRICS for i, v in [split_name(n)] if i == name)
                raise ConfigError(
                    f"MetricSpec({name!r}).version",
                    version,
                    f"that version is not registered (registered: {have or 'none'})",
                )
            name = registry_name(name, version)
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
        unknown = [] if metric.open_options else sorted(set(options) - set(metric.options))
        if unknown:
            takes = ", ".join(sorted(metric.options)) or "no options"
            raise ConfigError(
                f"MetricSpec({name!r}).{unknown[0]}",
                options[unknown[0]],
                f"check the spelling; {name} takes {takes}",
            )
        resolved = {**metric.options, **options}
        if metric.open_options:
            resolved = {
                k: _frozen(f"MetricSpec({name!r}).config.{k}", v) for k, v in resolved.items()
            }
        if metric.check_options is not None:
            metric.check_options(resolved)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "options", tuple(sorted(resolved.items())))
        object.__setattr__(self, "label", label or name)

    @property
    def id(self) -> str:
        """NNx's name for the registered metric's name."""
        return split_name(self.name)[0]

    @property
    def version(self) -> int:
        return split_name(self.name)[1]

    @property
    def config(self) -> dict[str, Any]:
        """NNx's name for the options (every option, defaults included)."""
        return {k: thawed(v) for k, v in self.options}

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("MetricSpec is immutable")

    @property
    def info(self) -> MetricDef:
        return _METRICS[self.name]

    @property
    def key(self) -> str:
        """Where the value is reported: NNx's ``name=`` when given, else the name with
        any non-default options (``ece(bins=10)``)."""
        if self.label != self.name:
            return self.label
        defaults = self.info.options
        changed = [(k, v) for k, v in self.options if defaults.get(k) != v]
        if not changed:
            return self.name
        return f"{self.name}({', '.join(f'{k}={v!r}' for k, v in changed)})"

    def state(self) -> dict[str, Any]:
        state = {"name": self.name, "options": {k: thawed(v) for k, v in self.options}}
        if self.label != self.name:  # only when given, so existing run ids hold
            state["label"] = self.label
        return state

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> MetricSpec:
        return cls(state["name"], config=dict(state.get("options") or {}), name=state.get("label"))

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
