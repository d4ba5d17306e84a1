"""What a plan's ``model.net`` holds, and how it travels as JSON (issue 22).

``model.net`` is a ``Nets`` member (the MLP's sizes are the ``net.*`` fields), a
``ModelSpec`` (a registered factory's network), or a built-in network's own params
(``NNConvParams``, ``NNTransformerParams``, ``NNViTParams``, ``NNMoEParams``), held as
data: the params' member is implied by their class. A wrapped module's record
(``RuntimeModuleRef``) can sit in an ``NNModelParams`` but not in a plan's JSON: nothing
could rebuild the instance in another process.

JSON forms: a member is its string; a spec is ``{"kind": "spec", "id", "version",
"config", "seed", "factory"}``; params are ``{"kind": "params", "net": "conv", "params":
{...}}``. A spec's ``factory`` is the ``module:qualname`` of the function registered for
it where the plan was written (when it is importable): read back, it is a plan reference
(``SpecWithFactory``), text until ``plan.resolve()`` imports it and registers it for the
spec, which is how a launch worker gets the factory the notebook registered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..engine.enums import Nets, coerce_enum
from ..engine.model_params import NNParams
from ..engine.net_kinds import NET_PARAMS
from ..engine.registry import (
    RUNTIME_FIX,
    ModelSpec,
    RuntimeModuleRef,
    register_model_factory,
    registered_model_factories,
)
from ..errors import ConfigError
from ._refs import Reference, reference_of

__all__ = [
    "OWN_NET_PARAMS",
    "SpecWithFactory",
    "net_from_json",
    "net_json",
    "net_parts",
    "net_summary",
    "own_net_params",
    "register_factory",
    "spec_factory_ref",
]

# The built-in networks whose params are not the MLP's ``net.*`` fields.
OWN_NET_PARAMS: dict[type, Nets] = {c: n for n, c in NET_PARAMS.items() if c is not NNParams}


@dataclass(frozen=True)
class SpecWithFactory:
    """A spec read from a plan's JSON with the factory its writer had registered for it,
    named and not imported (``plan.resolve()`` imports and registers it)."""

    spec: ModelSpec
    factory: Reference


def spec_factory_ref(spec: ModelSpec) -> str | None:
    """``module:qualname`` of the factory registered here for ``spec``, when another
    process can import it (not a lambda, nor a function of ``__main__``); else None."""
    factory = registered_model_factories().get((spec.id, spec.version))
    if factory is None:
        return None
    try:
        return reference_of(factory, "model.net")
    except ConfigError:
        return None


def register_factory(value: SpecWithFactory, factory: Any) -> ModelSpec:
    """``value``'s spec, with ``factory`` (its reference, imported) registered for it
    unless this very function is registered already; another one is refused."""
    spec = value.spec
    have = registered_model_factories().get((spec.id, spec.version))
    if have is None:
        register_model_factory(spec.id, spec.version, factory)
    elif have is not factory:
        raise ConfigError(
            "model.net",
            value.factory.text,
            f"another factory ({getattr(have, '__module__', '?')}."
            f"{getattr(have, '__qualname__', '?')}) is registered as {spec.id!r} version "
            f"{spec.version} in this process; unregister it, or bump the spec's version",
        )
    return spec


def own_net_params(value: Any) -> bool:
    return type(value) in OWN_NET_PARAMS


def net_parts(value: Any) -> tuple[Any, Any]:
    """``(NNModelParams.net, the network's params)`` of a ``model.net`` value: for a
    member, ``(member, None)`` (the MLP's params come from the ``net.*`` fields); for a
    spec, ``(spec, None)``; for a built-in network's params, ``(its member, params)``."""
    if own_net_params(value):
        return OWN_NET_PARAMS[type(value)], value
    return value, None


def net_summary(values: Mapping[str, Any]) -> str:
    """The network in a plan's repr: ``8->[16]->3`` for the MLP, else the spec or the
    params' member."""
    held = values.get("model.net")
    spec = getattr(held, "spec", held)
    if isinstance(spec, ModelSpec):
        return f"ModelSpec({spec.id!r}, {spec.version})"
    if own_net_params(held):
        return f"Nets.{OWN_NET_PARAMS[type(held)].name}"
    return (
        f"{values.get('net.input_dim', '?')}->{list(values.get('net.hidden_dims', ()))}->"
        f"{values.get('net.output_dim', '?')}"
    )


def net_json(value: Any, path: str = "model.net") -> Any:
    """``value``'s JSON form, or a ``ConfigError`` with the fix for a runtime module."""
    if isinstance(value, RuntimeModuleRef):
        raise ConfigError(path, f"a runtime module ({value.name})", RUNTIME_FIX)
    if isinstance(value, SpecWithFactory):
        return {"kind": "spec", **value.spec.state(), "factory": value.factory.text}
    if isinstance(value, ModelSpec):
        ref = spec_factory_ref(value)
        return {"kind": "spec", **value.state(), **({"factory": ref} if ref else {})}
    if own_net_params(value):
        net = OWN_NET_PARAMS[type(value)].value
        return {"kind": "params", "net": net, "params": value.to_json()}
    return value.value if isinstance(value, Nets) else value


_NOT_STATE = ("kind", "factory")


def net_from_json(value: Any) -> Any:
    """What ``net_json`` wrote, back as a member's string, a spec or params (refused
    values raise ``ConfigError``/``TypeError``, which the reader reports)."""
    if not isinstance(value, Mapping):
        return value
    if value.get("kind") == "spec":
        spec = ModelSpec.from_state({k: v for k, v in value.items() if k not in _NOT_STATE})
        ref = value.get("factory")
        return spec if ref is None else SpecWithFactory(spec, Reference(ref))
    kind = coerce_enum(Nets, value["net"], "model.net")
    cls = NET_PARAMS[kind]
    if cls is NNParams:
        raise ConfigError(
            "model.net",
            kind.value,
            "the MLP's sizes are the net.* fields: write model.net as the string 'feed_fwd'",
        )
    return cls.from_json(dict(value["params"]))
