"""Comparing two records: the config-drift report's rows, and what to do about each.

This is the torch-free core the engine, the plans and the Jupyter server share: two
``Record``s (``_drift_record.py``) in, a ``DriftReport`` out, as plain data. Where the
records come from (a plan, a model, a run today) is the business of the layers above
(``nnx_lab.plans.drift_report``, ``nnx_lab.engine.drift``).

``drift_report(a)`` compares what a plan, a model or a run fixed with the present:
a plan keeps the objects it was given, so a function redefined since (a loss, a data
factory, a callback class) is not what it will run; a model keeps the network it was
built with; a finished run is compared with today's code and library versions.
``drift_report(a, b)`` compares two sides (plans, models, runs by id). Each row says what,
the value on each side, whether it changes the run id, and what to do. The report is
plain data: ``rows``, ``to_frame()``, ``str()``; widgets only render it.

Comparing two records imports no torch (a test checks it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ._drift_record import Record, display_code, flatten

__all__ = [
    "ABSENT",
    "ACTIONS",
    "RUN_KNOBS",
    "DriftReport",
    "DriftRow",
    "compare_many",
    "compare_records",
]

# The train values that never enter a run id (run.yaml leaves them out).
RUN_KNOBS = (
    "overwrite_existing",
    "runs_root",
    "progress",
    "log_every",
    "checkpoint_every_s",
    "stop_on_nonfinite",
    "save_phase_checkpoints",
    "name",
)

REBUILD_MODEL = "rebuild the model"
REBUILD_PLAN = "rebuild the plan"
RELOAD = "reload the module, then rebuild"
NEW_RUN = "a new run"
OVERWRITE = "a new run with overwrite_existing=True (not in the run id)"
NOTHING = "nothing: does not affect results"
ACTIONS = (REBUILD_MODEL, REBUILD_PLAN, RELOAD, NEW_RUN, OVERWRITE, NOTHING)

_ORDER = ("format", "net", "model", "train", "data", "initial_weights", "early_stopping")


class _Absent:
    """A value one side does not have (shown as "-")."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __str__(self) -> str:
        return "-"


ABSENT: Any = _Absent()


@dataclass(frozen=True)
class DriftRow:
    """One compared item. ``then`` / ``now`` are the two sides (A / B for two records);
    ``changes_run_id`` is None when it depends (a data factory changes the id only if the
    loaders it returns differ)."""

    what: str
    then: Any
    now: Any
    changed: bool
    changes_run_id: bool | None
    action: str
    kind: str  # "value" | "code" | "environment" | "unknown"
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "then": None if self.then is ABSENT else self.then,
            "now": None if self.now is ABSENT else self.now,
            "then_absent": self.then is ABSENT,
            "now_absent": self.now is ABSENT,
            "changed": self.changed,
            "changes_run_id": self.changes_run_id,
            "action": self.action,
            "kind": self.kind,
            "note": self.note,
        }


def _show(value: Any, width: int = 28) -> str:
    if value is ABSENT:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."


@dataclass(frozen=True)
class DriftReport:
    """Rows (changed and unchanged), the report's stated limits, and its two sides."""

    rows: tuple[DriftRow, ...]
    limits: tuple[str, ...]
    labels: tuple[str, str]  # column names: ("then", "now") or ("A", "B")
    sides: tuple[str, str]  # what each side is, e.g. ("plan, when built", "plan, now")
    handle: str  # "plan" | "model" | "run" | "pair"

    @property
    def changed(self) -> tuple[DriftRow, ...]:
        return tuple(r for r in self.rows if r.changed)

    @property
    def drifted(self) -> bool:
        return any(r.changed for r in self.rows)

    def row(self, what: str) -> DriftRow:
        """The row named ``what`` (a path such as ``train.optim.max_lr``, or ``code
        data.train``)."""
        for r in self.rows:
            if r.what == what:
                return r
        raise KeyError(f"no row {what!r} in this report; rows: {[r.what for r in self.rows]}")

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": [r.to_json() for r in self.rows],
            "limits": list(self.limits),
            "labels": list(self.labels),
            "sides": list(self.sides),
            "handle": self.handle,
        }

    def to_frame(self, changed_only: bool = False) -> Any:
        """The rows as a pandas DataFrame (columns: what, the two side labels, changed,
        changes_run_id, action, kind, note)."""
        import pandas as pd

        a, b = self.labels
        rows = self.changed if changed_only else self.rows
        return pd.DataFrame(
            [
                {
                    "what": r.what,
                    a: _show(r.then, 10_000),
                    b: _show(r.now, 10_000),
                    "changed": r.changed,
                    "changes_run_id": r.changes_run_id,
                    "action": r.action,
                    "kind": r.kind,
                    "note": r.note,
                }
                for r in rows
            ],
            columns=["what", a, b, "changed", "changes_run_id", "action", "kind", "note"],
        )

    def short(self) -> str:
        """The banner a re-fit through a drifted handle prints ("" when nothing drifted)."""
        if not self.drifted:
            return ""
        head = {
            "plan": "nnx_lab: this plan holds the code it was built with (rebuild the plan "
            "to pick up changes)",
            "model": "nnx_lab: values fixed when this model was built (rebuild the model to "
            "change them)",
        }.get(self.handle, f"nnx_lab: {self.sides[0]} differs from {self.sides[1]}")
        lines = [head]
        for r in self.changed:
            lines.append(
                f"  ! {r.what}: {_show(r.then, 40)} {self.labels[0]}, "
                f"{_show(r.now, 40)} {self.labels[1]}"
                + (f"; {r.note}" if r.note else "")
                + f" ({r.action})"
            )
        lines.append("  (silence: nnx_lab.plans.set_config_report(False))")
        return "\n".join(lines)

    def __str__(self) -> str:
        a, b = self.labels
        lines = [f"Drift report: {a} = {self.sides[0]}; {b} = {self.sides[1]}"]
        width = max([len(r.what) for r in self.rows] + [4])
        lines.append(f"  {'what':<{width}}  {a:<28}  {b:<28}  {'run id':<8}  what to do")
        unchanged = 0
        for r in self.rows:
            if not r.changed:
                unchanged += 1
                continue
            rid = {True: "changes", False: "same", None: "depends"}[r.changes_run_id]
            lines.append(
                f"! {r.what:<{width}}  {_show(r.then):<28}  {_show(r.now):<28}  {rid:<8}  "
                f"{r.action}"
            )
            if r.note:
                lines.append(f"  {'':<{width}}  {r.note}")
        if not self.drifted:
            lines.append("  nothing differs")
        if unchanged:
            lines.append(f"  ({unchanged} unchanged rows: report.rows has them all)")
        if self.limits:
            lines.append("Limits:")
            lines += [f"  - {text}" for text in self.limits]
        return "\n".join(lines)

    def _repr_html_(self) -> str:  # a notebook without the widget shows the table
        import html

        return f"<pre>{html.escape(str(self))}</pre>"


# -- classification --------------------------------------------------------------------------
def _in_run_id(path: str) -> bool:
    head, _, rest = path.partition(".")
    if head == "train":
        return rest.split(".")[0] not in RUN_KNOBS
    return head in ("format", "net", "model", "data", "initial_weights", "frozen")


def _value_action(path: str, handle: str, extra: dict[str, Any]) -> tuple[str, str]:
    head = path.split(".")[0]
    if handle == "model":
        if head == "net" or path in ("model.net", "model.device"):
            return REBUILD_MODEL, "this model keeps the network it was built with"
        if path.startswith("model.loss"):
            if extra.get("loss_lands", True):
                return NEW_RUN, "the loss object itself changed: the next train() uses it"
            return (
                REBUILD_MODEL,
                "model.params names another loss than the one the model holds; set "
                "model.loss_fn = ... or rebuild",
            )
        if head == "model":
            return NEW_RUN, "resolved afresh by every train()"
    if handle == "plan" and path.startswith("model.loss"):
        return NEW_RUN, "the loss object the plan holds was changed in place: the next fit uses it"
    if head == "environment":
        return OVERWRITE, "library versions are not in the run id; rerun to see if results differ"
    if head == "early_stopping":
        return OVERWRITE, "callbacks are not in the run id"
    if _in_run_id(path):
        return NEW_RUN, ""
    return NOTHING, ""


_REBUILD_HINT = {
    "model.loss": "plan.with_loss(...)",
    "data.train": "plan.with_data(...)",
    "data.val": "plan.with_data(..., val=...)",
}


def _code_id(role: str) -> bool | None:
    if role == "model.loss":
        return True
    if role.startswith("data."):
        return None
    return False


def _code_row(
    role: str, then: dict[str, Any] | None, now: dict[str, Any] | None, handle: str
) -> DriftRow:
    what = f"code {role}"
    in_id = _code_id(role)
    if then is None or now is None:
        shown = (
            ABSENT if then is None else display_code(then),
            ABSENT if now is None else display_code(now),
        )
        action = NEW_RUN if in_id is not False else OVERWRITE
        return DriftRow(what, *shown, True, in_id, action, "code", "only one side has it")
    shown = (display_code(then), display_code(now))

    def row(changed: bool, action: str, kind: str, note: str = "") -> DriftRow:
        return DriftRow(what, *shown, changed, in_id, action, kind, note)

    name = then.get("name") or f"{then.get('module')}.{then.get('qualname')}"
    if then.get("digest") is None:
        if then.get("kind") == "reference":  # a plan read from JSON holds no code yet
            note = f"{name} is a reference the plan has not resolved: plan.resolve() takes its code"
            return row(False, "", "unknown", note)
        return row(False, "", "unknown", f"{name} has no readable code: it cannot be compared")
    if now.get("found") is False:
        if handle in ("plan", "model"):
            action = REBUILD_PLAN if handle == "plan" else REBUILD_MODEL
            note = (
                f"{name} no longer exists under that name; the {handle} keeps the object it holds"
            )
            return row(True, action, "code", note)
        module = then.get("module") or name.rpartition(".")[0]
        note = (
            f"{name} is not defined in this process: import its module (or run the cell "
            "that defines it) to compare"
            if now.get("loaded", True)
            else f"{name}: module {module} is not loaded in this process, and a report "
            f"never imports what a record names; to compare, import its module yourself "
            f"(import {module}) if you trust it"
        )
        return row(False, "", "unknown", note)
    if now.get("digest") == then.get("digest"):
        return row(False, "", "code")
    if handle in ("plan", "model"):
        if now.get("same_object"):
            note = (
                f"the source of {name} was edited but its module was not reloaded; the "
                "code that runs is still the old one"
            )
            return row(True, RELOAD, "code", note)
        if handle == "model":
            note = (
                f"{name} was redefined after this model was built; it keeps the old code "
                "(rebuild, or set model.loss_fn to the new one)"
            )
            return row(True, REBUILD_MODEL, "code", note)
        hint = _REBUILD_HINT.get(role, "plan.with_callbacks(...)")
        note = (
            f"{name} was redefined after this plan was built; the plan keeps calling the "
            f"version it holds ({hint} to pick up the new one)"
        )
        return row(True, REBUILD_PLAN, "code", note)
    if in_id is False:
        return row(True, OVERWRITE, "code", "callbacks are not in the run id")
    note = "the id changes only if the loaders it returns differ" if in_id is None else ""
    return row(True, NEW_RUN, "code", note)


def _canon(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _unflatten(flat: dict[str, Any], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, value in flat.items():
        if not path.startswith(prefix + "."):
            continue
        node = out
        parts = path[len(prefix) + 1 :].split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def _ordered(paths: list[str]) -> list[str]:
    def key(item: tuple[int, str]) -> tuple[int, int]:
        index, path = item
        head = path.split(".")[0]
        rank = _ORDER.index(head) if head in _ORDER else len(_ORDER) + (head == "environment")
        return rank, index

    return [p for _, p in sorted(enumerate(paths), key=key)]


def _value_rows(a: Record, b: Record, handle: str) -> tuple[list[DriftRow], list[str]]:
    fa = {k: _canon(v) for k, v in flatten(a.values).items()}
    fb = {k: _canon(v) for k, v in flatten(b.values).items()}
    extra = {**a.extra, **b.extra}
    rows: list[DriftRow] = []
    notes: list[str] = []
    done: set[str] = set()
    for path in _ordered(list(dict.fromkeys([*fa, *fb]))):
        if path in done:
            continue
        kind = "environment" if path.startswith("environment.") else "value"
        if path in fa and path in fb:
            then, now = fa[path], fb[path]
        else:
            here_a = path in fa
            mine, other = (fa, fb) if here_a else (fb, fa)
            missing_side = b if here_a else a
            unknown = next(
                (u for u in missing_side.unknown if path == u or path.startswith(u + ".")), None
            )
            if unknown is not None:
                done.add(path)
                note = f"{missing_side.label}: {unknown}"
                if note not in notes:
                    notes.append(note)
                continue
            # One row where a side has a leaf (None: switched off) and the other a subtree.
            if any(k.startswith(path + ".") for k in other):
                at = path
            else:
                at = next((q for q in _prefixes(path) if q in other), None)
            if at is None:
                then, now = fa.get(path, ABSENT), fb.get(path, ABSENT)
            else:
                leaf_side = mine if at in mine else other
                tree_side = other if leaf_side is mine else mine
                done.update(k for k in tree_side if k.startswith(at + "."))
                leaf, tree = leaf_side[at], _unflatten(tree_side, at)
                path = at
                then, now = (leaf, tree) if leaf_side is fa else (tree, leaf)
        done.add(path)
        changed = then != now
        in_id = _in_run_id(path) if kind == "value" else False
        action, note = _value_action(path, handle, extra) if changed else ("", "")
        rows.append(DriftRow(path, then, now, changed, in_id, action, kind, note))
    return rows, notes


def _prefixes(path: str) -> list[str]:
    parts = path.split(".")
    return [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


def compare_records(a: Record, b: Record, *, handle: str = "pair") -> DriftReport:
    """The drift report between two records (``handle`` says whose "then" and "now"
    they are: ``plan``, ``model``, ``run`` or ``pair``)."""
    rows, unknown_notes = _value_rows(a, b, handle)
    code_a = {c["role"]: c for c in a.code}
    code_b = {c["role"]: c for c in b.code}
    code_rows = [
        _code_row(role, code_a.get(role), code_b.get(role), handle)
        for role in dict.fromkeys([*code_a, *code_b])
    ]
    limits = list(dict.fromkeys([*a.limits, *b.limits]))
    if code_rows:
        limits.append(
            "Only the named functions and classes are fingerprinted (their source, or "
            "bytecode where there is none): a helper they call, or a global, a closure "
            "variable or a module constant they read, can change without showing here."
        )
    if unknown_notes:
        limits.append(
            "Left out, as a plan cannot know them before fit without calling its factories "
            "and building a model: " + ", ".join(unknown_notes) + "."
        )
    limits += [r.note for r in code_rows if r.kind == "unknown" and r.note]
    if handle == "pair":
        labels, sides = ("A", "B"), (a.label, b.label)
    else:
        labels, sides = ("then", "now"), (a.label, b.label)
    return DriftReport(
        (*rows, *code_rows),
        tuple(dict.fromkeys(limits)),
        labels,
        sides,
        handle,
    )


def compare_many(records: list[Record]) -> tuple[list[dict[str, Any]], list[str]]:
    """Two or more records side by side, each against the first: one row per compared
    item in the order first met (``what``, ``values`` and ``absent`` per record,
    ``changed``, ``changes_run_id`` (None: it depends), ``kind``, the first ``action``),
    and the reports' limits. The runs panel's compare view is this table."""
    rows: dict[str, dict[str, Any]] = {}
    limits: list[str] = []
    for i, other in enumerate(records[1:], start=1):
        report = compare_records(records[0], other)
        limits += [x for x in report.limits if x not in limits]
        for r in report.rows:
            row = rows.setdefault(
                r.what,
                {
                    "what": r.what,
                    "values": [None] * len(records),
                    "absent": [False] * len(records),
                    "changed": False,
                    "changes_run_id": False,
                    "kind": r.kind,
                    "action": None,
                },
            )
            row["values"][0] = None if r.then is ABSENT else r.then
            row["absent"][0] = r.then is ABSENT
            row["values"][i] = None if r.now is ABSENT else r.now
            row["absent"][i] = r.now is ABSENT
            if r.changed:
                row["changed"] = True
                row["action"] = row["action"] or r.action
                if r.changes_run_id is None and row["changes_run_id"] is False:
                    row["changes_run_id"] = None
                elif r.changes_run_id:
                    row["changes_run_id"] = True
    return list(rows.values()), limits
