"""A plan's references: where a plan read from JSON holds text instead of code, what
``validate()`` says of them, and ``plan.resolve()``, the step that imports them.

A loaded plan holds a ``Reference`` at each place its JSON named code: a spec's factory
(``model.net``, registered for the spec once imported), the custom loss
(``model.loss``), each extra metric (``train.extra_metrics``), the data factories
(``data.train``, ``data.val``) and the callback factories (``callbacks[i]``). Every one
is checked before any is imported, so a plan naming ``os:abort`` next to an honest
factory imports neither.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..errors import ConfigError
from ._locate import check_reference, import_reference
from ._net_value import SpecWithFactory, register_factory
from ._problems import PlanError, Problem
from ._refs import Reference
from ._sources import Source, callback_source, data_source
from ._updates import frozen, loss_entry

__all__ = [
    "has_references",
    "reference_problems",
    "resolve_references",
    "stand_in_values",
]

_ROLES = ("data.train", "data.val")


def unresolved_stand_in(*args: Any, **kwargs: Any) -> Any:
    """What the params objects hold, for ``validate()``, where a plan holds a reference:
    never called (a plan is resolved before anything of it runs)."""
    raise ConfigError("plan", "unresolved", "the plan holds references: call plan.resolve() first")


def _places(
    values: Mapping[str, Any],
    data: tuple[Source | None, Source | None],
    callbacks: tuple[Source, ...],
) -> Iterator[tuple[str, Reference]]:
    """(field, reference) for every reference a plan holds, in the order of its fields."""
    net = values.get("model.net")
    if isinstance(net, SpecWithFactory):
        yield "model.net", net.factory
    loss = values.get("model.loss")
    if isinstance(loss, Reference):
        yield "model.loss", loss
    extra = values.get("train.extra_metrics")
    if isinstance(extra, Mapping):
        for name, fn in extra.items():
            if isinstance(fn, Reference):
                yield f"train.extra_metrics[{name!r}]", fn
    for role, src in zip(_ROLES, data, strict=True):
        if src is not None and isinstance(src.obj, Reference):
            yield role, src.obj
    for i, cb in enumerate(callbacks):
        if isinstance(cb.obj, Reference):
            yield f"callbacks[{i}]", cb.obj


def has_references(
    values: Mapping[str, Any],
    data: tuple[Source | None, Source | None],
    callbacks: tuple[Source, ...],
) -> bool:
    return next(_places(values, data, callbacks), None) is not None


def reference_problems(
    values: Mapping[str, Any],
    data: tuple[Source | None, Source | None],
    callbacks: tuple[Source, ...],
    roots: tuple[Path, ...],
) -> list[Problem]:
    """One problem per reference that may not be resolved or would not resolve. Nothing
    is imported."""
    problems = []
    for field, ref in _places(values, data, callbacks):
        why = check_reference(ref, roots)
        if why is not None:
            problems.append(Problem(_problem_field(field), ref.text, why))
    return problems


def _problem_field(field: str) -> str:
    # Problems are one per plan field: every extra metric is train.extra_metrics.
    return "train.extra_metrics" if field.startswith("train.extra_metrics[") else field


def resolve_references(
    values: Mapping[str, Any],
    loss: dict[str, Any] | None,
    data: tuple[Source | None, Source | None],
    callbacks: tuple[Source, ...],
    roots: tuple[Path, ...],
    *,
    skip: tuple[str, ...] = (),
) -> tuple[
    dict[str, Any], dict[str, Any] | None, tuple[Source | None, Source | None], tuple[Source, ...]
]:
    """``(values, loss entry, data, callbacks)`` with the references imported, but those whose
    field starts with one of ``skip`` (``("callbacks",)``: what an LR sweep does not
    use). Every reference is checked before the first import; a ``PlanError`` lists
    those that fail."""
    places = [
        (field, ref)
        for field, ref in _places(values, data, callbacks)
        if not (skip and field.startswith(skip))
    ]
    problems = [
        Problem(_problem_field(field), ref.text, why)
        for field, ref in places
        if (why := check_reference(ref, roots)) is not None
    ]
    found: dict[str, Any] = {}
    if not problems:
        for field, ref in places:
            try:
                found[field] = import_reference(ref, field, roots)
            except ConfigError as exc:
                problems.append(Problem(_problem_field(field), ref.text, exc.fix))
    if problems:
        raise PlanError(problems)
    out = dict(values)
    if "model.net" in found:
        try:
            out["model.net"] = register_factory(values["model.net"], found["model.net"])
        except ConfigError as exc:
            raise PlanError([Problem("model.net", exc.value, exc.fix)]) from None
    if "model.loss" in found:
        out["model.loss"] = found["model.loss"]
        loss = loss_entry(found["model.loss"])
    extra = values.get("train.extra_metrics")
    if isinstance(extra, Mapping):
        out["train.extra_metrics"] = frozen(
            {name: found.get(f"train.extra_metrics[{name!r}]", fn) for name, fn in extra.items()}
        )
    made = [
        data_source(found[role], role, src.via) if src is not None and role in found else src
        for role, src in zip(_ROLES, data, strict=True)
    ]
    made_callbacks = tuple(
        callback_source(found[f"callbacks[{i}]"], i, cb.via) if f"callbacks[{i}]" in found else cb
        for i, cb in enumerate(callbacks)
    )
    return out, loss, (made[0], made[1]), made_callbacks


def stand_in_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The values with each reference replaced by a stand-in callable, for building the
    params objects ``validate()`` checks (a reference holds no code to check)."""
    out = dict(values)
    if isinstance(out.get("model.net"), SpecWithFactory):
        out["model.net"] = out["model.net"].spec
    if isinstance(out.get("model.loss"), Reference):
        out["model.loss"] = unresolved_stand_in
    extra = out.get("train.extra_metrics")
    if isinstance(extra, Mapping) and any(isinstance(v, Reference) for v in extra.values()):
        out["train.extra_metrics"] = MappingProxyType(
            {k: unresolved_stand_in if isinstance(v, Reference) else v for k, v in extra.items()}
        )
    return out
