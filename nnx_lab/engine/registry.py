"""The model registry (§2.14): your own ``nn.Module`` made portable.

``register_model_factory(id, version, factory)`` names a function ``factory(config) ->
nn.Module``; a ``ModelSpec(id, version, config, seed=...)`` names one network it builds.
The spec is data (JSON-like, immutable), so it enters the run id, a checkpoint's sidecar
and a plan's JSON, and ``NNModel.from_checkpoint`` rebuilds the network through the
registry with no pickled code. The factory itself is code the process imports: it is
never read from a file.

A wrapped instance (``NNModel(module=...)``) has no recipe; it is recorded as a
``RuntimeModuleRef`` (its topology), which is why it cannot be rebuilt elsewhere.

This module imports no torch at import time: params stay importable without it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, MissingModelFactoryError
from .params_base import SEED_LIMIT, is_int

__all__ = [
    "RUNTIME_FIX",
    "ModelSpec",
    "RuntimeModuleRef",
    "build_from_spec",
    "own_net",
    "register_model_factory",
    "registered_model_factories",
    "unregister_model_factory",
]

RUNTIME_FIX = (
    "a module passed as NNModel(module=...) is runtime-only (there is no recipe to rebuild "
    "it from); register a factory and use ModelSpec: register_model_factory(id, version, "
    "factory) then NNModelParams(net=ModelSpec(id, version, config))"
)

_FACTORIES: dict[tuple[str, int], Callable[[dict[str, Any]], Any]] = {}
_MAX_DEPTH = 32


def _check_id(model_id: object, field: str) -> str:
    if not isinstance(model_id, str) or not model_id.strip() or model_id != model_id.strip():
        raise ConfigError(
            field, model_id, "pass a non-empty name without surrounding spaces, e.g. 'acme.encoder'"
        )
    return model_id


def _check_version(version: object, field: str) -> int:
    if not is_int(version) or int(version) < 1:  # type: ignore[call-overload]
        raise ConfigError(field, version, "pass a version integer >= 1")
    return int(version)  # type: ignore[call-overload]


def register_model_factory(
    id: str,
    version: int,
    factory: Callable[[dict[str, Any]], Any],
    *,
    replace: bool = False,
) -> None:
    """Register ``factory(config) -> nn.Module`` under ``(id, version)``.

    A second registration of the same pair is refused unless ``replace=True``: two
    different networks must never answer to one spec.
    """
    key = (_check_id(id, "id"), _check_version(version, "version"))
    if not callable(factory):
        raise ConfigError("factory", factory, "pass a function factory(config) -> nn.Module")
    if not isinstance(replace, bool):
        raise ConfigError("replace", replace, "pass True or False")
    if key in _FACTORIES and not replace and _FACTORIES[key] is not factory:
        raise ConfigError(
            "id",
            f"{key[0]!r} v{key[1]}",
            "is registered already; pass replace=True to replace it, or bump the version "
            "(a changed network deserves a new version: its runs get new ids)",
        )
    _FACTORIES[key] = factory


def unregister_model_factory(id: str, version: int) -> None:
    """Remove a registration; an unknown pair is refused, naming what is registered."""
    key = (_check_id(id, "id"), _check_version(version, "version"))
    if key not in _FACTORIES:
        raise MissingModelFactoryError("id", f"{key[0]!r} v{key[1]}", sorted(_FACTORIES))
    del _FACTORIES[key]


def registered_model_factories() -> dict[tuple[str, int], Callable[[dict[str, Any]], Any]]:
    """``{(id, version): factory}``, sorted; a copy (changing it registers nothing)."""
    return dict(sorted(_FACTORIES.items()))


def _plain(value: Any, path: str, depth: int = 0) -> Any:
    """A JSON-like copy of ``value``: dicts with string keys, lists, str, bool, int,
    finite floats and None. Tuples become lists (as they would in JSON)."""
    if depth > _MAX_DEPTH:
        raise ConfigError(path, "...", f"nest the config at most {_MAX_DEPTH} levels deep")
    if value is None or isinstance(value, bool | str):
        return value
    if is_int(value):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(path, value, "pass a finite number (JSON has no NaN or inf)")
        return value
    if isinstance(value, list | tuple):
        return [_plain(v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ConfigError(f"{path} key", k, "config keys must be strings (JSON keys)")
            out[k] = _plain(v, f"{path}[{k!r}]", depth + 1)
        return out
    raise ConfigError(
        path,
        value,
        f"a {type(value).__name__} is not JSON-like; pass dicts, lists, strings, numbers, "
        "booleans or None (name a module or a function by a string the factory looks up)",
    )


@dataclass(frozen=True, init=False)
class ModelSpec:
    """One network a registered factory builds: ``(id, version, config, seed)``.

    Immutable: ``config`` returns a fresh copy each time, so editing it changes nothing.
    The network is built under ``seed`` (the caller's random streams are left as they
    were), so one spec always gives the same initial weights.
    """

    id: str
    version: int
    _config: str  # canonical JSON: the spec stays hashable and cannot be mutated
    seed: int

    def __init__(
        self,
        id: str,
        version: int = 1,
        config: Mapping[str, Any] | None = None,
        *,
        seed: int = 0,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "id", _check_id(id, "ModelSpec.id"))
        set_(self, "version", _check_version(version, "ModelSpec.version"))
        if config is not None and not isinstance(config, Mapping):
            raise ConfigError(
                "ModelSpec.config", config, "pass a dict of JSON-like values, or None"
            )
        plain = _plain(dict(config or {}), "ModelSpec.config")
        set_(self, "_config", json.dumps(plain, sort_keys=True, separators=(",", ":")))
        if not is_int(seed) or not 0 <= int(seed) < SEED_LIMIT:  # type: ignore[call-overload]
            raise ConfigError("ModelSpec.seed", seed, "pass an integer seed in [0, 2**63)")
        set_(self, "seed", int(seed))  # type: ignore[call-overload]

    @property
    def config(self) -> dict[str, Any]:
        return json.loads(self._config)

    def __repr__(self) -> str:
        return f"ModelSpec({self.id!r}, {self.version}, {self._config}, seed={self.seed})"

    def state(self) -> dict[str, Any]:
        """The spec as JSON data (what a run, a sidecar and a plan record)."""
        return {"id": self.id, "version": self.version, "config": self.config, "seed": self.seed}

    to_json = state  # the params' canonical JSON calls to_json on its values

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> ModelSpec:
        """The spec ``state()`` wrote; unknown or missing keys are refused."""
        if not isinstance(state, Mapping):
            raise ConfigError("ModelSpec state", state, "pass the dict spec.state() returned")
        keys = set(state)
        if keys - {"id", "version", "config", "seed"} or not {"id", "version"} <= keys:
            raise ConfigError(
                "ModelSpec state",
                sorted(keys),
                "pass the dict spec.state() returned: keys id, version, config, seed",
            )
        return cls(state["id"], state["version"], state.get("config"), seed=state.get("seed", 0))

    def with_config(self, **changes: Any) -> ModelSpec:
        """A spec whose config has ``changes`` applied (the same id, version and seed)."""
        return ModelSpec(self.id, self.version, {**self.config, **changes}, seed=self.seed)


@dataclass(frozen=True)
class RuntimeModuleRef:
    """A wrapped instance as a record names it: its topology (parameter and buffer
    names, shapes, dtypes, its repr's digest), never its weights or its code."""

    topology: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        # a fresh copy each time: one object twice in a record would be a YAML alias
        return {"runtime_module": json.loads(json.dumps(self.topology))}

    @property
    def name(self) -> str:
        return str(self.topology.get("type", "module"))


def own_net(value: object) -> ModelSpec | RuntimeModuleRef | None:
    """``NNModelParams.net`` when it is not a ``Nets`` member: a spec, a runtime
    module's record, or their JSON (a saved record); None otherwise."""
    if isinstance(value, ModelSpec | RuntimeModuleRef):
        return value
    if isinstance(value, Mapping):
        if set(value) == {"runtime_module"} and isinstance(value["runtime_module"], Mapping):
            return RuntimeModuleRef(dict(value["runtime_module"]))
        return ModelSpec.from_state(value)
    return None


def build_from_spec(spec: ModelSpec, field: str = "NNModelParams.net") -> Any:
    """The spec's network, built by its factory under the spec's seed; every random
    stream of the caller (torch, CUDA, Python, NumPy) is as it was afterwards."""
    import random

    import numpy as np
    import torch

    from .training_state import preserved_rng

    factory = _FACTORIES.get((spec.id, spec.version))
    if factory is None:
        raise MissingModelFactoryError(field, spec, sorted(_FACTORIES))
    with preserved_rng():
        torch.manual_seed(spec.seed)
        random.seed(spec.seed)
        np.random.seed(spec.seed % 2**32)
        net = factory(spec.config)
    if not isinstance(net, torch.nn.Module):
        raise ConfigError(
            field,
            spec,
            f"its factory returned a {type(net).__name__}, not an nn.Module; make "
            f"factory(config) return the network",
        )
    return net
