"""The shape of a plan's JSON (``ExperimentPlan.to_json``) and of a run's ``plan.json``.

A plan JSON is someone else's data until it passes here: a file from a course page, a
launch folder, a run folder a colleague shared. The whole document is checked before
anything of it is used: the envelope (``format``, ``values``, ``sources``, ``data``,
``callbacks``; unknown keys refused), each value against its field's kind (an integer
field takes an integer, not ``"abc"`` nor ``true``), every number finite, every string
and list of bounded length, the whole within the size and nesting limits of
``runs/_schema.py``. A reference (``"module:qualname"``) is checked here only as text
(its syntax and length): what it may name is the plans layer's rule, and nothing here
imports or calls anything.

A violation is one ``PlanSchemaError``: a ``SchemaError`` (the file, the field, the
value, the fix) that is also a ``ConfigError``, as every refusal of a plan is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from ...errors import ConfigError
from .._schema import LIMITS, Finite, SchemaError, check, parse_json, read_bounded

__all__ = [
    "PLAN_FORMAT",
    "PLAN_SOURCE",
    "PlanSchemaError",
    "check_plan_json",
    "read_plan_json",
    "read_run_plan",
]

PLAN_FORMAT = "nnx_lab.plan/1"
PLAN_SOURCE = "plan JSON"  # what an error names when the plan came from no file

# A plan has ~45 fields and a handful of objects; these bounds are far above what any
# plan writes and far below what could cost memory or time.
MAX_NODES = 100_000  # values in one document, all levels together
MAX_TEXT = 4096  # characters of one string
MAX_LIST = 4096  # items of one list (a network's hidden widths included)
MAX_INT = 2**62

_PLAN_FIX = (
    "pass what ExperimentPlan.to_json() wrote, unchanged; a plan JSON from elsewhere "
    "must have that shape (docs/plans.md, 'JSON')"
)
_RUN_FIX = "the run's plan.json is damaged or was not written by nnx_lab; restore it"

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = rf"{_IDENT}(?:\.{_IDENT})*"
Ref = Annotated[str, msgspec.Meta(max_length=512, pattern=rf"^{_DOTTED}:{_DOTTED}$")]
Via = Annotated[str, msgspec.Meta(max_length=64, pattern=r"^[a-z][a-z_]*$")]
Key = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT)]
Int = Annotated[int, msgspec.Meta(ge=-MAX_INT, le=MAX_INT)]
Number = Int | Finite
Hex64 = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}$")]
RunId = Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{32}$")]


class PlanSchemaError(SchemaError, ConfigError):
    """A plan JSON that is not the shape ``to_json`` writes: ``path`` (the file, or
    "plan JSON"), ``field``, ``value``, ``reason`` and ``fix``. A ``SchemaError`` and a
    ``ConfigError`` both, so ``except ConfigError`` around a plan catches it too."""

    def __init__(
        self,
        path: str | Path,
        field: str,
        reason: str,
        *,
        value: Any = None,
        fix: str = _PLAN_FIX,
        line: int | None = None,
    ) -> None:
        # Set by hand: the two bases' constructors take different arguments.
        self.path, self.line, self.fix = Path(path), line, fix
        self.field, self.value, self.reason = field, value, reason
        where = f"{field}: " if field else ""
        shown = "" if value is None else f" (got {_short(value)})"
        Exception.__init__(self, f"{path}: {where}{reason}{shown}; {fix}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- the envelope ---------------------------------------------------------------------------
class FactoryEntry(msgspec.Struct, forbid_unknown_fields=True):
    factory: Ref
    via: Via


class DataBlock(msgspec.Struct, forbid_unknown_fields=True):
    train: FactoryEntry | None = None
    val: FactoryEntry | None = None


class PlanDocument(msgspec.Struct, forbid_unknown_fields=True):
    format: Literal["nnx_lab.plan/1"]
    values: Annotated[dict[Key, Any], msgspec.Meta(max_length=256)]
    sources: Annotated[dict[Key, Via], msgspec.Meta(max_length=256)] = msgspec.field(
        default_factory=dict
    )
    data: DataBlock = msgspec.field(default_factory=DataBlock)
    callbacks: Annotated[list[FactoryEntry], msgspec.Meta(max_length=64)] = msgspec.field(
        default_factory=list
    )


# -- values whose JSON form is not their field's plain kind ----------------------------------
class LossRef(msgspec.Struct, forbid_unknown_fields=True):
    ref: Ref


class MetricRefs(msgspec.Struct, forbid_unknown_fields=True):
    refs: Annotated[dict[Key, Ref], msgspec.Meta(max_length=64)]


class MetricState(msgspec.Struct, forbid_unknown_fields=True):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
    options: Annotated[dict[Key, Any], msgspec.Meta(max_length=64)] = msgspec.field(
        default_factory=dict
    )


class ParamGroupState(msgspec.Struct, forbid_unknown_fields=True):
    """One fine-tuning rule (``NNParamGroupSpec(...).to_json()``)."""

    name_pattern: Annotated[str, msgspec.Meta(min_length=1, max_length=512)]
    lr: Finite | None = None
    lr_multiplier: Finite | None = None
    weight_decay: Finite | None = None


Choice = Annotated[str, msgspec.Meta(max_length=128)]


class SpecNet(msgspec.Struct, forbid_unknown_fields=True, tag_field="kind", tag="spec"):
    """A registered factory's network (``ModelSpec.state()``): named, never code."""

    id: Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
    version: Annotated[int, msgspec.Meta(ge=1, le=MAX_INT)]
    config: Annotated[dict[Key, Any], msgspec.Meta(max_length=256)] = msgspec.field(
        default_factory=dict
    )
    seed: Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)] = 0
    factory: Ref | None = None  # a plan reference: the plans layer's trust rules apply


class ParamsNet(msgspec.Struct, forbid_unknown_fields=True, tag_field="kind", tag="params"):
    """A built-in network's params (``NNConvParams(...).to_json()``), as data."""

    net: Choice
    params: Annotated[dict[Key, Any], msgspec.Meta(max_length=64)]


_NET_FIX = (
    "give a network's name ('conv'), a spec {'kind': 'spec', 'id', 'version', 'config', "
    "'seed'} or params {'kind': 'params', 'net', 'params'}, as to_json() writes them"
)
_RUNTIME_FIX = (
    "a module passed as NNModel(module=...) is runtime-only: nothing in a file can make "
    "the instance again; register a factory and use ModelSpec (docs/models.md)"
)

# By path: the kinds `to_json` writes in another form than the field's plain type.
_SPECIAL: dict[str, Any] = {
    "model.loss": Choice | LossRef,
    "model.net": Choice | SpecNet | ParamsNet,
    "model.precision": Choice | dict[Key, Any] | None,
    "model.compile": bool | Annotated[dict[Key, Any], msgspec.Meta(max_length=16)],
    "train.metrics": Annotated[list[MetricState], msgspec.Meta(max_length=64)],
    "train.monitor": dict[Key, Any] | None,
    "train.extra_metrics": MetricRefs | None,
    "train.optim.momentum": Number | list[Number] | None,
    "train.optim.param_groups": Annotated[list[ParamGroupState], msgspec.Meta(max_length=256)],
}

_KINDS: dict[str, Any] = {
    "int": Int,
    "float": Number,
    "bool": bool,
    "str": Text,
    "int_list": Annotated[list[Int], msgspec.Meta(max_length=MAX_LIST)],
    "choice": Choice,
    "any": Any,
}


def _value_type(path: str, kind: str, nullable: bool) -> Any:
    if path in _SPECIAL:
        return _SPECIAL[path]
    base = _KINDS.get(kind, Any)
    return base | None if nullable and base is not Any else base


# -- a run's plan.json --------------------------------------------------------------------
class CodeRecordJSON(msgspec.Struct, forbid_unknown_fields=True):
    role: Key
    module: Text | None = None
    qualname: Text | None = None
    kind: Key = "function"
    digest: Hex64 | None = None
    name: Text | None = None


class RecordJSON(msgspec.Struct, forbid_unknown_fields=True):
    kind: Literal["plan", "model", "run"]
    label: Text
    values: dict[Key, Any]
    code: Annotated[list[CodeRecordJSON], msgspec.Meta(max_length=256)] = msgspec.field(
        default_factory=list
    )
    unknown: Annotated[list[Text], msgspec.Meta(max_length=256)] = msgspec.field(
        default_factory=list
    )
    limits: Annotated[list[Text], msgspec.Meta(max_length=256)] = msgspec.field(
        default_factory=list
    )
    run_id: RunId | None = None


class NotPortable(msgspec.Struct, forbid_unknown_fields=True):
    field: Key
    value: Any
    fix: Text


class RunPlanFile(msgspec.Struct, forbid_unknown_fields=True):
    format: Literal[1]
    run_id: RunId
    attempt_id: Annotated[str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^[\w-]+$")]
    plan: dict[Key, Any] | None
    record: RecordJSON
    not_portable: Annotated[list[NotPortable], msgspec.Meta(max_length=256)] = msgspec.field(
        default_factory=list
    )


# -- checking ---------------------------------------------------------------------------------
def _plain(value: Any, source: str | Path, prefix: str, fix: str) -> None:
    """Plain JSON values only, finite, of bounded size and depth: walked without
    recursion, so a 10**5-deep document is refused, not a RecursionError."""
    stack: list[tuple[Any, str, int]] = [(value, prefix, 1)]
    seen = 0
    while stack:
        node, where, depth = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            raise PlanSchemaError(
                source, prefix, f"holds more than {MAX_NODES:,} values, far more than a plan"
            )
        if depth > LIMITS.nesting:
            raise PlanSchemaError(
                source,
                where,
                f"nested deeper than {LIMITS.nesting} levels",
                fix="a plan nests a few levels; " + fix,
            )
        if node is None or isinstance(node, bool | str):
            if isinstance(node, str) and len(node) > MAX_TEXT:
                raise PlanSchemaError(
                    source, where, f"a string longer than {MAX_TEXT} characters", fix=fix
                )
        elif isinstance(node, int):
            if not -MAX_INT <= node <= MAX_INT:
                raise PlanSchemaError(
                    source, where, "an integer too large to be a setting", fix=fix
                )
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise PlanSchemaError(source, where, "must be a finite number", value=node, fix=fix)
        elif isinstance(node, Mapping):
            for key, item in node.items():
                if not isinstance(key, str):
                    raise PlanSchemaError(
                        source, where, "an object key that is not a string", value=key, fix=fix
                    )
                stack.append((item, _key_path(where, key), depth + 1))
        elif isinstance(node, list | tuple):
            if len(node) > MAX_LIST:
                raise PlanSchemaError(
                    source, where, f"a list longer than {MAX_LIST:,} items", fix=fix
                )
            stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in enumerate(node))
        else:
            raise PlanSchemaError(
                source,
                where,
                f"a {type(node).__name__}, which JSON cannot hold",
                value=node,
                fix=fix,
            )


def _key_path(where: str, key: str) -> str:
    if "." in key or not key:  # a plan's value paths: values['train.n_epochs']
        return f"{where}[{key!r}]"
    return f"{where}.{key}" if where else key


def _check(value: Any, schema: Any, source: str | Path, field: str, fix: str) -> Any:
    try:
        return check(value, schema, source, fix=fix)
    except SchemaError as exc:
        inner = exc.field
        if inner and not inner.startswith("["):
            inner = "." + inner
        shown = exc.value if inner or isinstance(value, Mapping | list) else value
        raise PlanSchemaError(
            source,
            f"{field}{inner}" if field else inner.lstrip("."),
            exc.reason,
            value=shown,
            fix=fix,
        ) from None


def _parsed(data: Any, source: str | Path, fix: str) -> Any:
    if isinstance(data, str):
        data = data.encode("utf-8")
    if isinstance(data, bytes | bytearray):
        try:
            return parse_json(bytes(data), source)
        except SchemaError as exc:
            raise PlanSchemaError(source, exc.field, exc.reason, fix=fix) from None
    return data


def check_plan_json(
    data: Any,
    *,
    source: str | Path = PLAN_SOURCE,
    fields: Mapping[str, tuple[str, bool]] | None = None,
    prefix: str = "",
) -> dict[str, Any]:
    """``data`` (a mapping, or JSON text or bytes) checked as a plan's JSON; the
    document itself, unchanged, when it passes (integers stay integers), else one
    ``PlanSchemaError`` naming ``source``, the field, the value and the fix.

    ``fields`` (path -> (kind, nullable), from ``plan_fields()``) checks each value
    against its field and refuses a path that is no field; without it (a reader with no
    plans layer, such as the server), values are checked as plain JSON only.
    """
    data = _parsed(data, source, _PLAN_FIX)
    if not isinstance(data, Mapping) or data.get("format") != PLAN_FORMAT:
        got = data.get("format") if isinstance(data, Mapping) else type(data).__name__
        raise PlanSchemaError(
            source,
            f"{prefix}.format" if prefix else "format",
            f"not a plan's JSON (expected format {PLAN_FORMAT!r})",
            value=got,
            fix="pass what ExperimentPlan.to_json() returned",
        )
    _plain(data, source, prefix, _PLAN_FIX)
    _check(data, PlanDocument, source, prefix, _PLAN_FIX)
    values = data["values"]
    for path, value in values.items():
        where = f"{prefix + '.' if prefix else ''}values[{path!r}]"
        if path == "model.net" and isinstance(value, Mapping) and "runtime_module" in value:
            raise PlanSchemaError(
                source, where, "names a runtime module", value="runtime_module", fix=_RUNTIME_FIX
            )
        if fields is None:
            if path in _SPECIAL:
                _check(value, _SPECIAL[path], source, where, _PLAN_FIX)
            continue
        if path not in fields:
            raise PlanSchemaError(
                source,
                where,
                "no plan field has this path",
                value=path,
                fix="check the spelling: ExperimentPlan.fields() lists every path",
            )
        kind, nullable = fields[path]
        fix = _NET_FIX if path == "model.net" else _field_fix(kind)
        _check(value, _value_type(path, kind, nullable), source, where, fix)
    for path in data.get("sources") or {}:
        if path not in values:
            raise PlanSchemaError(
                source,
                f"{prefix + '.' if prefix else ''}sources[{path!r}]",
                "names a path the plan's values do not set",
                value=path,
                fix="each source names a path of 'values'; " + _PLAN_FIX,
            )
    return dict(data)


def _field_fix(kind: str) -> str:
    what = {
        "int": "an integer",
        "float": "a finite number",
        "bool": "true or false",
        "str": "a string",
        "int_list": "a list of integers",
        "choice": "one of the field's choices, as a string",
    }.get(kind, "the value to_json wrote")
    return f"give {what} (ExperimentPlan.fields() describes each field)"


def read_plan_json(
    path: str | Path, *, fields: Mapping[str, tuple[str, bool]] | None = None
) -> dict[str, Any]:
    """The plan JSON in the file at ``path``, checked (``check_plan_json``), read
    within the size limit."""
    path = Path(path)
    try:
        data = read_bounded(path)
    except SchemaError as exc:
        raise PlanSchemaError(path, exc.field, exc.reason, fix=exc.fix) from None
    return check_plan_json(data, source=path, fields=fields)


def read_run_plan(file: Path) -> dict[str, Any]:
    """A run's ``plan.json`` (what ``plan.fit()`` wrote there), checked: a
    ``SchemaError`` naming the file, the field and the fix otherwise. The plan it holds
    is checked as a plan JSON's envelope; nothing it names is looked up."""
    if file.is_symlink():
        raise SchemaError(file, "", "is a link; a run's plan.json is a plain file", fix=_RUN_FIX)
    value = parse_json(read_bounded(file), file)
    if isinstance(value, Mapping):
        _plain_run(value, file)
    document = check(value, RunPlanFile, file, fix=_RUN_FIX)
    if document.plan is not None:
        try:
            check_plan_json(document.plan, source=file, prefix="plan")
        except PlanSchemaError as exc:
            raise SchemaError(file, exc.field, exc.reason, value=exc.value, fix=_RUN_FIX) from None
    return dict(value)


def _plain_run(value: Mapping[str, Any], file: Path) -> None:
    try:
        _plain(value, file, "", _RUN_FIX)
    except PlanSchemaError as exc:
        raise SchemaError(file, exc.field, exc.reason, value=exc.value, fix=_RUN_FIX) from None
