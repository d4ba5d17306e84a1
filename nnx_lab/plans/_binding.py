"""The binding report: where each configured value came from, and which source won.

Three sources, lowest first: the library default (the params dataclasses), the plan
(the ``with_*`` call that set it), and a per-call keyword (``plan.fit(seed=43)``). The
report lists every field with its winner and what it overrode; its text is printed once
when a plan is fitted and written into the run directory (``binding.json``).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..engine.params import NNModelParams
from ._drift import ABSENT
from ._fields import EARLY_STOPPING, TOGGLES, plan_fields
from ._problems import json_safe
from ._sources import Source

__all__ = ["Binding", "BindingReport", "build_binding_report", "plan_binding"]

DEFAULT, PLAN, CALL = "default", "plan", "call"
DEVICE = "model.device"


@dataclass(frozen=True)
class Binding:
    """One value: the winner (``value``, ``source``, ``via``) and every candidate."""

    path: str
    value: Any
    source: str  # "default" | "plan" | "call"
    via: str  # "library default", the with_* call, or "fit(seed=...)"
    default: Any
    plan: Any  # ABSENT when the plan does not set it
    call: Any  # ABSENT when no per-call value was given
    in_run_id: bool

    @property
    def overridden(self) -> list[tuple[str, Any]]:
        """The candidates that lost, highest first."""
        lost = []
        if self.source == CALL and self.plan is not ABSENT:
            lost.append((PLAN, self.plan))
        if self.source != DEFAULT:
            lost.append((DEFAULT, self.default))
        return lost

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "value": self.value,
            "source": self.source,
            "via": self.via,
            "default": self.default,
            "plan": None if self.plan is ABSENT else self.plan,
            "plan_set": self.plan is not ABSENT,
            "call": None if self.call is ABSENT else self.call,
            "call_set": self.call is not ABSENT,
            "in_run_id": self.in_run_id,
        }


def _show(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 32 else text[:29] + "..."


@dataclass(frozen=True)
class BindingReport:
    """``rows`` (one per field, in form order), ``objects`` (data sources and callbacks,
    as ``(what, description, via)``), and the text form ``str(report)``."""

    rows: tuple[Binding, ...]
    objects: tuple[tuple[str, str, str], ...]

    def __getitem__(self, path: str) -> Binding:
        for row in self.rows:
            if row.path == path:
                return row
        raise KeyError(f"no field {path!r}; ExperimentPlan.fields() lists the paths")

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": [r.to_json() for r in self.rows],
            "objects": [{"what": w, "description": d, "via": v} for w, d, v in self.objects],
            "text": str(self),
        }

    def __str__(self) -> str:
        lines = [
            "nnx_lab binding report: where each value came from "
            "(library default < plan < fit(...) keyword; the winner is shown)"
        ]
        shown = [r for r in self.rows if r.value != r.default or r.source == CALL]
        width = max([len(r.path) for r in shown] + [len(w) for w, _, _ in self.objects] + [4])
        for r in shown:
            lost = "; ".join(f"{src}: {_show(v)}" for src, v in r.overridden)
            lines.append(
                f"  {r.path:<{width}}  {_show(r.value):<14}  {r.via}"
                + (f"  (over {lost})" if lost else "")
            )
        for what, description, via in self.objects:
            lines.append(f"  {what:<{width}}  {description}  ({via})")
        rest = [r.path for r in self.rows if r not in shown]
        if rest:
            lines += textwrap.wrap(
                f"at their library default ({len(rest)}): " + ", ".join(rest),
                width=96,
                initial_indent="  ",
                subsequent_indent="    ",
            )
        return "\n".join(lines)


def build_binding_report(
    values: dict[str, Any],
    sources: dict[str, str],
    overrides: dict[str, Any],
    objects: list[tuple[str, str, str]],
) -> BindingReport:
    """The report for a plan's ``values`` (set by ``sources``) and per-call ``overrides``
    (both keyed by plan path)."""
    rows = []
    for f in plan_fields():
        if f.toggle is not None and not _on(f.toggle, values, overrides):
            continue  # a switched-off section binds nothing
        plan = json_safe(values[f.path]) if f.path in values else ABSENT
        call = json_safe(overrides[f.path]) if f.path in overrides else ABSENT
        if call is not ABSENT:
            value, source, via = call, CALL, f"fit({f.name}=...)"
        elif plan is not ABSENT:
            value, source, via = plan, PLAN, f"plan: {sources.get(f.path, 'with_value')}"
        else:
            value, source, via = f.default, DEFAULT, "library default"
        rows.append(Binding(f.path, value, source, via, f.default, plan, call, f.in_run_id))
    return BindingReport(tuple(rows), tuple(objects))


def plan_binding(
    values: Mapping[str, Any],
    sources: Mapping[str, str],
    overrides: Mapping[str, Any],
    data: tuple[Source | None, Source | None],
    callbacks: tuple[Source, ...],
    extra_callbacks: Iterable[Any] = (),
) -> BindingReport:
    """The report of a plan's fit: its values and per-call ``overrides``, and its
    objects (data sources, early stopping, its callbacks, then the fit's own)."""
    objects = []
    for role, src in zip(("data.train", "data.val"), data, strict=True):
        if src is not None:
            objects.append((role, src.describe(), src.via))
    if values.get(EARLY_STOPPING):
        objects.append(
            ("callbacks", "EarlyStopping (a fresh one per fit)", sources[EARLY_STOPPING])
        )
    for cb in callbacks:
        objects.append(("callbacks", cb.describe(), cb.via))
    for cb in extra_callbacks:
        objects.append(("callbacks", f"{type(cb).__qualname__} instance", "fit(callbacks=...)"))
    # what the engine stages on the device follows from the device alone (docs/performance.md)
    device = overrides.get(DEVICE, values.get(DEVICE, NNModelParams().device))
    from ..engine.staging import staging_note  # torch: a report is built, not imported

    objects.append(("staging", staging_note(_device_name(device)), "engine, from model.device"))
    return build_binding_report(dict(values), dict(sources), dict(overrides), objects)


def _device_name(device: Any) -> str:
    """A plan's device as torch spells it: a ``Devices`` member, or its wire value."""
    return str(getattr(device, "value", device))


def _on(toggle: str, values: dict[str, Any], overrides: dict[str, Any]) -> bool:
    assert toggle in TOGGLES
    return bool(overrides.get(toggle, values.get(toggle, False)))
