"""A plan's JSON form (``to_json`` / ``from_json``): values by path, and factories as
importable ``module:qualname`` references, so another process (a distributed worker, a
saved ``plan.json``) rebuilds the same plan.

Reading is inspect-only: the document passes its strict shape
(``nnx_lab/runs/_schemas/plan.py``) and each reference becomes a ``Reference``, text
that ``plan.resolve()`` imports when the user asks for the code (``_plan_refs``).

Objects are written as their state or as references, never as their repr (which would
not read back): declared metrics, the monitor, a precision policy, a custom loss and
``extra_metrics``. What cannot travel (a lambda, a function defined in ``__main__``, a
borrowed instance) is refused all at once, each with its field and fix.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ..engine.params import CustomLossRef
from ..engine.precision import PrecisionPolicy
from ..engine.selection import MonitorSpec
from ..errors import ConfigError
from ..runs import PLAN_FORMAT, PlanSchemaError, check_plan_json
from ._fields import plan_fields
from ._net_value import net_from_json, net_json
from ._problems import PlanError, Problem, json_safe
from ._refs import Reference, reference_of
from ._sources import Source, reference_source
from ._updates import frozen, is_custom_loss

__all__ = ["PLAN_FORMAT", "plan_from_json", "plan_to_json"]

PLAN_SOURCE = "plan JSON"
_ROLES = ("data.train", "data.val")


def plan_to_json(
    values: Mapping[str, Any],
    sources: Mapping[str, str],
    data: tuple[Source | None, Source | None],
    callbacks: tuple[Source, ...],
) -> dict[str, Any]:
    """The plan's JSON, or a ``PlanError`` naming every field that cannot be written."""
    problems: list[Problem] = []
    out: dict[str, Any] = {}
    for path, value in values.items():
        try:
            out[path] = _value_json(path, value)
        except ConfigError as exc:
            problems.append(Problem(path, value, exc.fix))
    blocks: dict[str, Any] = {}
    for role, src in zip(_ROLES, data, strict=True):
        blocks[role.split(".")[1]] = _source_json(src, role, problems)
    written = [_source_json(cb, f"callbacks[{i}]", problems) for i, cb in enumerate(callbacks)]
    if problems:
        raise PlanError(problems)
    return {
        "format": PLAN_FORMAT,
        "values": out,
        "sources": dict(sources),
        "data": blocks,
        "callbacks": written,
    }


def plan_from_json(
    data: Any, source: str | os.PathLike[str] | None = None
) -> tuple[dict[str, Any], dict[str, str], tuple[Source | None, Source | None], tuple[Source, ...]]:
    """``(values, sources, data sources, callbacks)`` from ``plan_to_json``'s form (a
    mapping, or its JSON text). The document passes its strict shape first (a
    ``PlanSchemaError`` naming ``source``, the field, the value and the fix); its
    references stay text (``Reference``): nothing is imported. The values are frozen, as
    a plan holds them."""
    where = PLAN_SOURCE if source is None else os.fspath(source)
    kinds = {f.path: (f.type, f.nullable or f.default is None) for f in plan_fields()}
    doc = check_plan_json(data, source=where, fields=kinds)
    values: dict[str, Any] = {}
    for path, value in doc["values"].items():
        try:
            values[path] = frozen(_value_from_json(path, value))
        except (ConfigError, TypeError, ValueError, KeyError) as exc:
            raise PlanSchemaError(
                where,
                f"values[{path!r}]",
                f"cannot be read back ({getattr(exc, 'fix', None) or exc})",
                value=value,
                fix="give the value as ExperimentPlan.to_json() writes it",
            ) from None
    given = doc.get("sources") or {}
    sources = {p: str(given.get(p, "with_value")) for p in values}
    blocks = doc.get("data") or {}
    built = []
    for role in _ROLES:
        entry = blocks.get(role.split(".")[1])
        built.append(
            None
            if entry is None
            else reference_source(Reference(entry["factory"]), role, entry["via"], "data")
        )
    callbacks = tuple(
        reference_source(Reference(entry["factory"]), f"callbacks[{i}]", entry["via"], "callback")
        for i, entry in enumerate(doc.get("callbacks") or [])
    )
    return values, sources, (built[0], built[1]), callbacks


def _value_json(path: str, value: Any) -> Any:
    if isinstance(value, Reference):
        return {"ref": value.text}
    if path == "model.net":
        return net_json(value, path)
    if path == "model.loss":
        if isinstance(value, CustomLossRef):
            raise ConfigError(path, value.name, "a loss from a saved record holds no code")
        if is_custom_loss(value):
            return {"ref": reference_of(value, path)}
    if isinstance(value, PrecisionPolicy):
        return value.to_json()
    if path == "train.metrics":
        if not all(hasattr(m, "state") and hasattr(m, "key") for m in value):
            raise ConfigError(path, value, "pass MetricSpec objects, e.g. [MetricSpec('nll')]")
        return [m.state() for m in value]
    if path == "train.monitor" and isinstance(value, MonitorSpec):
        return value.to_json()
    if path == "train.extra_metrics" and value:
        return {
            "refs": {
                name: reference_of(fn, f"{path}[{name!r}]") for name, fn in dict(value).items()
            }
        }
    if isinstance(value, MappingProxyType):
        value = dict(value)
    safe = json_safe(value)
    if _plain(safe) and (safe == value or isinstance(value, tuple | dict | str)):
        return safe
    raise ConfigError(
        path,
        value,
        f"a {type(value).__name__} cannot be written as JSON; use a plain value "
        "(number, string, list) or an enum member",
    )


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _value_from_json(path: str, value: Any) -> Any:
    if path == "model.net":
        return net_from_json(value)
    if path == "model.loss" and isinstance(value, dict):
        return Reference(value["ref"])
    if path == "train.metrics" and isinstance(value, list):
        from ..data.metrics import MetricSpec  # imports torch: only for a plan that has them

        return tuple(MetricSpec.from_state(s) if isinstance(s, dict) else s for s in value)
    if path == "train.monitor" and isinstance(value, dict):
        return MonitorSpec.from_json(value)
    if path == "train.extra_metrics" and isinstance(value, dict):
        return {name: Reference(ref) for name, ref in value["refs"].items()}
    if path == "model.precision" and isinstance(value, dict):
        try:
            return PrecisionPolicy.from_json(value)
        except (ConfigError, KeyError):
            return value  # validate() names what is wrong with it
    return value


def _source_json(src: Source | None, role: str, problems: list[Problem]) -> dict[str, Any] | None:
    if src is None:
        return None
    if src.kind == "reference":
        return {"factory": src.obj.text, "via": src.via}
    if src.kind != "factory":
        problems.append(
            Problem(
                role,
                src.obj,
                f"a borrowed {type(src.obj).__qualname__} cannot travel to another "
                "process; pass a factory: an importable function that returns it",
            )
        )
        return None
    try:
        return {"factory": reference_of(src.obj, role), "via": src.via}
    except ConfigError as exc:
        problems.append(Problem(role, src.obj, exc.fix))
        return None
