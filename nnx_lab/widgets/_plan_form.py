"""The PlanBuilder's form, as data: the fields and sections it draws, what typed text
means for a field, the form's own limits (each field's, from ``PlanField.bound``, and
the network's size), values and problems as the browser shows them, the branch list
and the processes box. No widget state here: ``_plan_builder`` holds the widget."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ..plans import ExperimentPlan, PlanField, Problem, Problems

__all__ = [
    "FORM_MAX_PARAMETERS",
    "MAX_PROCESSES",
    "PREVIEW_MAX_PARAMETERS",
    "branch_rows",
    "check_processes",
    "field_json",
    "form_problems",
    "network_parameters",
    "parse_text",
    "plain",
    "problem_json",
    "sections_of",
    "size_problems",
]

# Form sections: title, and whether it starts open. A section the plan grows later
# gets its id as title and starts open.
_SECTIONS = {
    "net": ("Network", True),
    "model": ("Model", True),
    "optim": ("Optimizer", True),
    "scheduler": ("Learning-rate scheduler (on plateau)", True),
    "train": ("Training", True),
    "early_stopping": ("Early stopping", True),
    "data": ("Data", True),
    "run": ("Run settings (do not change results)", False),
    "resume": ("Resume", False),
}
# The most parameters a network typed into the form may have (400 MB of float32): a limit
# of this tool, as the fields' own form limits are (plans/_bounds.py); code may go past.
FORM_MAX_PARAMETERS = 100_000_000
# The largest network the run-id preview builds: the run id hashes the initial weights,
# which exist only once the network is built (20 MB of float32 at most, tens of ms). A
# larger network gets its run id when Fit starts; nothing is allocated for it before.
PREVIEW_MAX_PARAMETERS = 5_000_000
_NOT_NNX = "a limit of the PlanBuilder, not of NNx: to go past it, set it in code"

# A bound on the processes one Fit starts on this machine: a typo (200 for 2) would
# otherwise start that many workers. Larger or multi-node runs: nnx_lab.launch directly.
MAX_PROCESSES = 64


def check_processes(value: Any) -> int:
    """``value`` as a number of processes, or ``ValueError`` naming the fix."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            raise ValueError(
                f"processes={text!r}: type a whole number, 1 (train in the kernel) or "
                f"2 to {MAX_PROCESSES} (launch that many processes)"
            ) from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(
            f"processes={value!r}: pass a whole number, 1 (train in the kernel) or "
            f"2 to {MAX_PROCESSES} (launch that many processes)"
        )
    if not 1 <= value <= MAX_PROCESSES:
        raise ValueError(
            f"processes={value}: pass 1 (train in the kernel) or 2 to {MAX_PROCESSES} "
            "(launch that many processes); for more, or several machines, call "
            "nnx_lab.launch(plan, nproc_per_node=..., nnodes=...)"
        )
    return value


def form_problems(f: PlanField, value: Any) -> Problems:
    """The refusal of a value past the form's own limit for field ``f`` (which names
    the bound and says how to go past it); empty when within it."""
    refusal = None if f.bound is None else f.bound.form_refusal(value)
    if refusal is None:
        return Problems()
    fix = f"{refusal} ({_NOT_NNX}: builder.plan = builder.plan.with_value({f.path!r}, ...))"
    return Problems([Problem(f.path, value, fix)])


def network_parameters(plan: ExperimentPlan) -> int | None:
    """How many parameters the network of ``plan`` has, from its params alone: the
    network is built on torch's ``meta`` device (shapes, no storage), so nothing is
    allocated whatever its size. None when the net's fields do not make a network."""
    import torch

    from ..engine.enums import Nets, coerce_enum
    from ..engine.net_kinds import NET_PARAMS
    from ..engine.nets import build_net
    from ..engine.params import NNParams

    values = {f.name: plan.value(f.path) for f in plan.fields() if f.section == "net"}
    held = plan.value("model.net")
    try:
        if type(held) in NET_PARAMS.values():  # a built-in network's own params
            kind, params = next(k for k, c in NET_PARAMS.items() if c is type(held)), held
        else:  # the MLP's net.* fields (a spec's size is its factory's: None)
            params = NNParams(**values)
            kind = coerce_enum(Nets, held, "model.net")
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            net = build_net(kind, params)
        return sum(p.numel() for p in net.parameters())
    except Exception:  # the plan's own problems say why
        return None


def size_problems(path: str, value: Any, plan: ExperimentPlan) -> Problems:
    """The refusal of an edit (``path`` = ``value``, giving ``plan``) that makes the
    network larger than this form builds (``FORM_MAX_PARAMETERS``); empty otherwise."""
    n = network_parameters(plan)
    if n is None or n <= FORM_MAX_PARAMETERS:
        return Problems()
    fix = (
        f"the network would have {n:,} parameters: at most {FORM_MAX_PARAMETERS:,} in "
        f"this form ({_NOT_NNX}: builder.plan = builder.plan.with_net(...))"
    )
    return Problems([Problem(path, value, fix)])


def _label(f: PlanField) -> str:
    return f.name.replace("_", " ")


def field_json(f: PlanField) -> dict[str, Any]:
    """A field as the form draws it (``PlanField.to_json()`` plus a label)."""
    return {**f.to_json(), "label": _label(f)}


def sections_of(fields: Iterable[PlanField]) -> list[dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for f in fields:
        if f.section not in out:
            title, open_ = _SECTIONS.get(f.section, (f.section.replace("_", " ").title(), True))
            out[f.section] = {"id": f.section, "title": title, "open": open_}
    return list(out.values())


def parse_text(f: PlanField, text: str) -> Any:
    """What the user typed, as the field's type; text that does not parse is passed on
    as it is, so the plan's own check names the problem (one wording for form and code)."""
    s = text.strip()
    if s == "" and f.nullable:
        return None
    try:
        if f.type == "int":
            return int(s)
        if f.type == "float":
            return float(s)
        if f.type == "int_list":
            inner = s.strip("[]() ")
            if not inner:
                return []
            return [int(p) for p in re.split(r"[,\s]+", inner) if p]
        if f.type == "bool":
            lowered = s.lower()
            if lowered in ("true", "1", "yes", "on"):
                return True
            if lowered in ("false", "0", "no", "off"):
                return False
            return text
        if f.type == "any":
            return json.loads(s.replace("(", "[").replace(")", "]"))
    except ValueError:
        return text
    return text


def plain(value: Any) -> Any:
    """A JSON value the front end can show (a non-finite float as its text)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def problem_json(p: Problem) -> dict[str, Any]:
    return {"field": p.field, "value": plain(p.to_json()["value"]), "fix": p.fix, "text": str(p)}


def branch_rows(
    start: ExperimentPlan, branches: Mapping[str, ExperimentPlan], current: ExperimentPlan
) -> list[dict[str, Any]]:
    """The branch list: each variant's changes from the ``start`` plan, its problems, and
    whether it is the ``current`` plan."""
    initial = start.values()
    rows = []
    for name, plan in branches.items():
        values = plan.values()
        changes = [
            {"path": p, "value": plain(v)}
            for p, v in values.items()
            if initial.get(p) != v and not p.startswith("train.overwrite")
        ]
        rows.append(
            {
                "name": name,
                "changes": changes,
                "problems": len(plan.validate()),
                "current": plan == current,
            }
        )
    return rows
