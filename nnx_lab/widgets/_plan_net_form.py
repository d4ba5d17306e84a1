"""The PlanBuilder's Network section when the plan's network is not the MLP's ``net.*``
fields: a ``ModelSpec``'s config keys (``net.config.<key>``) or a built-in network's
params (``net.params.<name>``, e.g. ``NNConvParams.conv_channels``), each a form field
whose edit is ``plan.with_net(<name>=value)``. The MLP's plan fields are shown as always.

The spec's id, version and seed, and which network it is, are not edited here (the
``model.net`` select shows it); a config key the spec does not have yet is added in
code: ``builder.plan = builder.plan.with_net(new_key=...)``.
"""

from __future__ import annotations

from dataclasses import fields
from enum import Enum
from typing import Any

from ..engine.net_kinds import NET_PARAMS
from ..engine.params import NNParams
from ..engine.registry import ModelSpec
from ..errors import ConfigError
from ..plans import PlanField, Problem, Problems

__all__ = ["CONFIG", "PARAMS", "NetForm", "form_fields", "net_edit", "net_form", "net_label"]

PARAMS, CONFIG = "net.params.", "net.config."
_MEMBERS = {cls: kind for kind, cls in NET_PARAMS.items() if cls is not NNParams}


class NetForm:
    """The virtual net fields of a plan (``fields``), their values (``values``), and
    what the ``model.net`` select shows (``label``: a member's value or the spec)."""

    def __init__(self, fields_: list[PlanField], values: dict[str, Any], label: str) -> None:
        self.fields, self.values, self.label = fields_, values, label


def _spec(value: Any) -> Any:
    return getattr(value, "spec", value)  # a loaded plan's spec, its factory unresolved


def net_label(value: Any) -> str | None:
    """What the ``model.net`` select shows for a spec or params (None: the member)."""
    spec = _spec(value)
    if isinstance(spec, ModelSpec):
        return f"ModelSpec({spec.id!r}, {spec.version}, seed={spec.seed})"
    kind = _MEMBERS.get(type(value))
    return None if kind is None else kind.value


def _kind(value: Any) -> tuple[str, tuple[Any, ...] | None]:
    if isinstance(value, Enum):
        return "choice", tuple(m.value for m in type(value))
    if isinstance(value, bool):
        return "bool", None
    if isinstance(value, int):
        return "int", None
    if isinstance(value, float):
        return "float", None
    if isinstance(value, str):
        return "str", None
    if isinstance(value, list | tuple) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return "int_list", None
    return "any", None


def _field(path: str, name: str, owner: str, value: Any) -> PlanField:
    kind, choices = _kind(value)
    shown = value.value if isinstance(value, Enum) else value
    return PlanField(
        path=path,
        section="net",
        name=name,
        owner=owner,
        type=kind,
        default=list(shown) if isinstance(shown, tuple) else shown,
        nullable=value is None,
        choices=choices,
    )


def net_form(value: Any) -> NetForm | None:
    """The Network section for ``model.net``'s ``value``; None for a member (the MLP's
    plan fields, or a member given no params: the plan's problems say what to set)."""
    label = net_label(value)
    if label is None:
        return None
    spec = _spec(value)
    if isinstance(spec, ModelSpec):
        owner = f"ModelSpec({spec.id!r}, {spec.version}).config"
        items = list(spec.config.items())
        made = [_field(CONFIG + k, k, f"{owner}[{k!r}]", v) for k, v in items]
    else:
        cls = type(value).__name__
        items = [(f.name, getattr(value, f.name)) for f in fields(value)]
        made = [_field(PARAMS + k, k, f"{cls}.{k}", v) for k, v in items]
    values = {f.path: f.default for f in made}
    return NetForm(made, values, label)


def form_fields(base: tuple[PlanField, ...], form: NetForm | None) -> list[PlanField]:
    """The form's fields: the plan's, with the Network section replaced by ``form``'s."""
    if form is None:
        return list(base)
    return [*form.fields, *(f for f in base if f.section != "net")]


def net_edit(plan: Any, path: str, value: Any) -> tuple[Any, Problems]:
    """``(the plan with the edit, no problems)`` or ``(None, why it is refused)`` for an
    edit of a virtual net field: ``plan.with_net(<name>=value)``, then the plan's own
    checks of what it changes."""
    name = path.removeprefix(PARAMS).removeprefix(CONFIG)
    try:
        edited = plan.with_net(**{name: value})
    except (ConfigError, TypeError, ValueError) as exc:
        return None, Problems([Problem(path, value, getattr(exc, "fix", None) or str(exc))])
    before = {p.field for p in plan.validate()}
    fresh = [p for p in edited.validate() if p.field not in before]
    if fresh:
        return None, Problems(
            Problem(path, value, f"makes {p.field} invalid: {p.fix}") for p in fresh
        )
    return edited, Problems()
