"""What a plan's ``model.net`` holds, and how it travels as JSON (issue 22).

``model.net`` is a ``Nets`` member (the MLP's sizes are the ``net.*`` fields), a
``ModelSpec`` (a registered factory's network), or a built-in network's own params
(``NNConvParams``, ``NNTransformerParams``, ``NNViTParams``, ``NNMoEParams``), held as
data: the params' member is implied by their class. A wrapped module's record
(``RuntimeModuleRef``) can sit in an ``NNModelParams`` but not in a plan's JSON: nothing
could rebuild the instance in another process.

JSON forms: a member is its string; a spec is ``{"kind": "spec", "id", "version",
"config", "seed"}``; params are ``{"kind": "params", "net": "conv", "params": {...}}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..engine.enums import Nets, coerce_enum
from ..engine.model_params import NNParams
from ..engine.net_kinds import NET_PARAMS
from ..engine.registry import RUNTIME_FIX, ModelSpec, RuntimeModuleRef
from ..errors import ConfigError

__all__ = [
    "OWN_NET_PARAMS",
    "net_from_json",
    "net_json",
    "net_parts",
    "own_net_params",
]

# The built-in networks whose params are not the MLP's ``net.*`` fields.
OWN_NET_PARAMS: dict[type, Nets] = {c: n for n, c in NET_PARAMS.items() if c is not NNParams}


def own_net_params(value: Any) -> bool:
    return type(value) in OWN_NET_PARAMS


def net_parts(value: Any) -> tuple[Any, Any]:
    """``(NNModelParams.net, the network's params)`` of a ``model.net`` value: for a
    member, ``(member, None)`` (the MLP's params come from the ``net.*`` fields); for a
    spec, ``(spec, None)``; for a built-in network's params, ``(its member, params)``."""
    if own_net_params(value):
        return OWN_NET_PARAMS[type(value)], value
    return value, None


def net_json(value: Any, path: str = "model.net") -> Any:
    """``value``'s JSON form, or a ``ConfigError`` with the fix for a runtime module."""
    if isinstance(value, RuntimeModuleRef):
        raise ConfigError(path, f"a runtime module ({value.name})", RUNTIME_FIX)
    if isinstance(value, ModelSpec):
        return {"kind": "spec", **value.state()}
    if own_net_params(value):
        net = OWN_NET_PARAMS[type(value)].value
        return {"kind": "params", "net": net, "params": value.to_json()}
    return value.value if isinstance(value, Nets) else value


def net_from_json(value: Any) -> Any:
    """What ``net_json`` wrote, back as a member's string, a spec or params (refused
    values raise ``ConfigError``/``TypeError``, which the reader reports)."""
    if not isinstance(value, Mapping):
        return value
    if value.get("kind") == "spec":
        return ModelSpec.from_state({k: v for k, v in value.items() if k != "kind"})
    kind = coerce_enum(Nets, value["net"], "model.net")
    cls = NET_PARAMS[kind]
    if cls is NNParams:
        raise ConfigError(
            "model.net",
            kind.value,
            "the MLP's sizes are the net.* fields: write model.net as the string 'feed_fwd'",
        )
    return cls.from_json(dict(value["params"]))
