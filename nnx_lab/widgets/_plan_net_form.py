"""The PlanBuilder's Network section when the plan's network is not the MLP's ``net.*``
fields: a ``ModelSpec``'s config keys (``net.config.<key>``) or a built-in network's
params (``net.params.<name>``, e.g. ``NNConvParams.conv_channels``), each a form field
whose edit is ``plan.with_net(<name>=value)``. The MLP's plan fields are shown as always.

Choosing another member in the ``model.net`` select swaps the section (``kind_swap``):
the new kind's params are built from the values shown now and those shown before under
the same names (``output_dim``, ``dropout_prob``, ``activation``, ...), the rest from the
params class's defaults, and checked by it before the plan changes. The spec's id,
version and seed are not edited here; a config key the spec does not have yet is added
in code: ``builder.plan = builder.plan.with_net(new_key=...)``.
"""

from __future__ import annotations

from dataclasses import fields
from enum import Enum
from typing import Any

from ..engine.enums import Nets
from ..engine.net_kinds import NET_PARAMS
from ..engine.params import NNParams
from ..engine.registry import ModelSpec
from ..errors import ConfigError
from ..plans import PlanField, Problem, Problems, plan_fields
from ._plan_form import size_problems

__all__ = [
    "CONFIG",
    "PARAMS",
    "NetForm",
    "form_fields",
    "kind_swap",
    "net_change",
    "net_edit",
    "net_form",
    "net_label",
]

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
        if isinstance(value, list) and len(value) == 1:  # "8" in a pair field: 8 x 8
            return net_edit(plan, path, value[0])
        return None, Problems([Problem(path, value, getattr(exc, "fix", None) or str(exc))])
    before = {p.field for p in plan.validate()}
    fresh = [p for p in edited.validate() if p.field not in before]
    if fresh:
        return None, Problems(
            Problem(path, value, f"makes {p.field} invalid: {p.fix}") for p in fresh
        )
    return edited, Problems()


# A required field no other kind shares: the value a swap starts it at (edit it after).
_STARTERS = {"vocab_size": 256}


def shown_values(plan: Any) -> dict[str, Any]:
    """The Network section's values by field name (the MLP's ``net.*`` fields, the
    params' fields or the spec's config keys); None-valued ones left out."""
    held = plan.value("model.net")
    spec = _spec(held)
    if isinstance(spec, ModelSpec):
        shown = dict(spec.config)
    elif type(held) in _MEMBERS:
        shown = {f.name: getattr(held, f.name) for f in fields(held)}
    else:
        shown = {f.name: plan.value(f.path) for f in plan_fields() if f.section == "net"}
    return {k: v for k, v in shown.items() if v is not None}


def kind_swap(plan: Any, value: Any, memory: dict[str, Any]) -> tuple[Any, Problems]:
    """``(the plan with network kind value, no problems)`` or ``(None, why not)``.

    ``memory`` (the builder's) keeps every value shown under a name, so a field the new
    kind shares with an earlier one comes back as it was typed (MLP -> CONV -> MLP keeps
    the MLP's ``hidden_dims``). A carried value the new params class refuses gives way to
    its default; a required field nothing supplies refuses the swap, naming it."""
    try:
        kind = Nets(getattr(value, "value", value))
    except ValueError:
        fix = f"choose one of {[m.value for m in Nets]}"
        return None, Problems([Problem("model.net", value, fix)])
    memory.update(shown_values(plan))
    cls = NET_PARAMS[kind]
    if cls is NNParams:  # the MLP: the plan's own net.* fields
        names = [f.name for f in plan_fields() if f.section == "net"]
        carried = {n: _plain_list(memory[n]) for n in names if n in memory}
        return plan.with_value("model.net", kind).with_net(**carried), Problems()
    wanted = {f.name: f for f in fields(cls)}
    kw = {n: _plain_tuple(memory[n]) for n in wanted if n in memory}
    for name, start in _STARTERS.items():
        if name in wanted and name not in kw:
            kw[name] = start
    missing = [n for n, f in wanted.items() if n not in kw and _required(f)]
    if missing:
        fix = (
            f"{cls.__name__} needs {', '.join(missing)}: set it in the form's network "
            f"section first, or in code: builder.plan = builder.plan.with_net({cls.__name__}"
            f"({', '.join(f'{n}=...' for n in missing)}))"
        )
        return None, Problems([Problem("model.net", kind.value, fix)])
    kept = {n: v for n, v in kw.items() if _required(wanted[n])}
    while True:
        try:
            return plan.with_net(cls(**kw)), Problems()
        except ConfigError as exc:  # a carried value this kind refuses: its default
            name = str(exc.field).rpartition(".")[2]
            if name in kw and not _required(wanted[name]):
                del kw[name]
            elif kw != kept:  # refused through another field: the defaults, all of them
                kw = dict(kept)
            else:
                fix = f"{cls.__name__}.{name}: {exc.fix}"
                return None, Problems([Problem("model.net", kind.value, fix)])


def _required(f: Any) -> bool:
    from dataclasses import MISSING

    return f.default is MISSING and f.default_factory is MISSING


def _plain_tuple(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


def _plain_list(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def net_change(plan: Any, path: str, value: Any, memory: dict[str, Any]) -> Any:
    """The builder's edit of a virtual net field (``net_edit``) or of the network kind
    (``kind_swap``): ``(plan or None, problems)``; None for any other field."""
    if path.startswith((PARAMS, CONFIG)):
        return net_edit(plan, path, value)
    if path == "model.net":
        edited, problems = kind_swap(plan, value, memory)
        if edited is not None:  # the new kind's network must fit the form, as an edit's
            problems = size_problems(path, value, edited)
        return (None if problems else edited), problems
    return None
