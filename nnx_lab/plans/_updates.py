"""What a ``with_*`` call sets: values by plan path, each path checked against the field
index when it is set (a value itself is checked later, by ``validate()``).

A params object or keyword arguments become ``{path: value}`` updates here; the plan
stores them frozen (tuples and read-only mappings), so a caller's list changed later is
not the plan's. A custom loss's identity and code record are taken as it enters.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from ..engine.enums import Losses, Nets
from ..engine.params import (
    CustomLossRef,
    NNOptimParams,
    NNParams,
    NNSchedulerParams,
    NNTrainParams,
)
from ..engine.registry import RUNTIME_FIX, ModelSpec, RuntimeModuleRef
from ..errors import ConfigError
from ._fields import SCHEDULER, PlanField, field_index, plan_fields
from ._net_value import OWN_NET_PARAMS, own_net_params
from ._problems import json_safe
from ._refs import Reference, code_record, reference_code

__all__ = [
    "field_at",
    "frozen",
    "is_custom_loss",
    "loss_entry",
    "model_net_updates",
    "net_updates",
    "same_value",
    "section_updates",
    "train_call_updates",
    "train_updates",
    "unknown_keyword",
]


def field_at(path: str, via: str) -> PlanField:
    """The field at ``path``; an unknown path is refused with the closest ones."""
    index = field_index()
    if path not in index:
        close = difflib.get_close_matches(path, index, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ConfigError(
            via,
            path,
            f"no plan field has this path{hint}; check the spelling: "
            "ExperimentPlan.fields() lists every path",
        )
    return index[path]


def unknown_keyword(via: str, name: str, allowed: Iterable[str]) -> ConfigError:
    allowed = sorted(allowed)
    close = difflib.get_close_matches(name, allowed, n=2)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return ConfigError(
        f"{via}({name}=...)",
        name,
        f"no such setting{hint}; check the spelling: one of " + ", ".join(allowed),
    )


def frozen(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(frozen(v) for v in value)
    if isinstance(value, dict):
        return MappingProxyType({k: frozen(v) for k, v in value.items()})
    return value


def same_value(a: Any, b: Any) -> bool:
    """Whether two plans' values at one path are the same (the same object, equal, or
    the same JSON for values that are not code)."""
    if a is b:
        return True
    try:
        if a == b:
            return True
    except Exception:
        return False
    return not callable(a) and json_safe(a) == json_safe(b)


def is_custom_loss(value: Any) -> bool:
    return not isinstance(value, str | Losses | CustomLossRef) and callable(value)


def loss_entry(loss: Any) -> dict[str, Any] | None:
    """The identity and code record of a custom loss, taken as it enters a plan (for a
    reference read from JSON: its name, no code)."""
    if isinstance(loss, Reference):
        return {
            "identity": {"custom": loss.name, "code": None},
            "code": reference_code(loss, "model.loss"),
            "reference": True,
        }
    if not is_custom_loss(loss):
        return None
    from ..engine.losses import custom_loss_identity  # torch: only for a custom loss

    return {"identity": custom_loss_identity(loss), "code": code_record(loss, "model.loss")}


def _names(prefix: str) -> list[str]:
    """The field names directly under ``prefix`` (``train`` has ``n_epochs``, not
    ``optim.max_lr``)."""
    return [f.name for f in plan_fields() if f.path.rsplit(".", 1)[0] == prefix]


def section_updates(
    prefix: str, cls: type, obj: Any, changes: Mapping[str, Any], via: str
) -> dict[str, Any]:
    """Every field of a params object ``obj`` (when given), then ``changes`` by name."""
    names = _names(prefix)
    updates: dict[str, Any] = {}
    if obj is not None:
        if not isinstance(obj, cls):
            raise ConfigError(
                via,
                obj,
                f"pass a {cls.__name__}(...), or keyword arguments (checked now, not at "
                "validate(): docs/nnx_differences.md)",
            )
        updates = {f"{prefix}.{n}": getattr(obj, n) for n in names}
        accum = getattr(obj, "accumulate_grad_batches", None)  # NNx's spelling, on the optim
        if accum is not None:
            updates["train.accumulation_steps"] = accum
    for name, value in changes.items():
        if name not in names:
            raise unknown_keyword(via, name, names)
        updates[f"{prefix}.{name}"] = value
    return updates


def train_updates(
    train_params: NNTrainParams | None, changes: Mapping[str, Any], via: str
) -> dict[str, Any]:
    """``with_train``'s updates: every training field of ``train_params`` (its
    ``data_id``, ``runs_root`` and resume settings only when set), then ``changes``;
    ``optim=`` and ``scheduler=`` take params objects. Its loaders are the caller's to
    turn into data sources."""
    names = _names("train")
    updates: dict[str, Any] = {}
    if train_params is not None:
        if not isinstance(train_params, NNTrainParams):
            raise ConfigError(via, train_params, "pass an NNTrainParams(...), or keyword arguments")
        for name in names:
            if name in ("data_id", "runs_root") and getattr(train_params, name) is None:
                continue  # not set there: what the plan has stays
            if name.startswith("resume_") and train_params.resume_from_run_id is None:
                continue
            updates[f"train.{name}"] = getattr(train_params, name)
        changes = {"optim": train_params.optim, "scheduler": train_params.scheduler, **changes}
    for name, value in changes.items():
        if name == "optim":
            updates.update(section_updates("train.optim", NNOptimParams, value, {}, via))
        elif name == "scheduler":
            updates[SCHEDULER] = value is not None
            if value is not None:
                updates.update(section_updates(SCHEDULER, NNSchedulerParams, value, {}, via))
        elif name in ("train_loader", "val_loader"):
            raise ConfigError(
                f"{via}({name}=...)", value, "give data with plan.with_data(train, val=...)"
            )
        elif name in names:
            updates[f"train.{name}"] = value
        else:
            raise unknown_keyword(via, name, [*names, "optim", "scheduler"])
    return updates


def train_call_updates(overrides: Mapping[str, Any], via: str) -> dict[str, Any]:
    """Per-call values of training fields (``fit(seed=43)``), by path."""
    names = _names("train")
    out = {}
    for name, value in overrides.items():
        if name not in names:
            raise unknown_keyword(via, name, names)
        out[f"train.{name}"] = value
    return out


def net_updates(current: Any, obj: Any, changes: Mapping[str, Any]) -> tuple[dict, list[str]]:
    """``with_net``'s ``(updates, removed paths)``. A spec or a built-in network's params
    go to ``model.net`` and remove the MLP's ``net.*`` fields (they no longer apply);
    keyword ``changes`` edit the spec's config or the params held now; an ``NNParams``
    (or changes with the MLP) sets the ``net.*`` fields, and ``model.net`` back to the
    MLP when it held a spec or params."""
    own = isinstance(current, ModelSpec) or own_net_params(current)
    if isinstance(obj, RuntimeModuleRef):
        raise ConfigError("with_net", f"a runtime module ({obj.name})", RUNTIME_FIX)
    if isinstance(obj, ModelSpec) or own_net_params(obj) or (obj is None and own):
        base = current if obj is None else obj
        if changes:
            try:
                base = (
                    base.with_config(**changes)
                    if isinstance(base, ModelSpec)
                    else base.replace(**changes)
                )
            except TypeError as exc:
                raise ConfigError(
                    "with_net", sorted(changes), f"{exc}; name fields of {base!r}"
                ) from None
        mlp = [f.path for f in plan_fields() if f.section == "net"]
        return {"model.net": base}, mlp
    updates = section_updates("net", NNParams, obj, changes, "with_net")
    if obj is not None and own:
        updates["model.net"] = Nets.FEED_FWD
    return updates, []


def model_net_updates(current: Any, updates: dict[str, Any]) -> tuple[dict, list[str]]:
    """``with_model``'s ``(updates, removed paths)``: ``net=Nets.CONV`` keeps the
    ``NNConvParams`` the plan holds (the member they imply), and a spec given there
    removes the MLP's ``net.*`` fields, as ``with_net(spec)`` does."""
    if "model.net" not in updates:
        return updates, []
    new = updates["model.net"]
    if own_net_params(current):
        kind = OWN_NET_PARAMS[type(current)]
        if new is kind or new == kind.value:
            return {p: v for p, v in updates.items() if p != "model.net"}, []
    if isinstance(new, ModelSpec) or own_net_params(new):
        return updates, [f.path for f in plan_fields() if f.section == "net"]
    return updates, []
