"""The reading step that saved documents, data files, provenance and checkpoints share.

``read_json_file`` turns a path into a typed value in one pass: the file is looked at
first (a folder, a pipe, a device or a file over the size cap is refused without being
opened or read), read within the cap, parsed within the nesting cap, checked against its
shape (a ``msgspec.Struct``), then against the rules that span fields (the shape's
``rules()``, yielding ``Problem``s). Every refusal is one error of the caller's family: a
``Refusal`` subclass that is a ``SchemaError`` (file, field, value, fix) and also the
class the reader's callers have always caught (``ConfigError``, ``SplitError``, ...).
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, NamedTuple, TypeVar

import msgspec

from .. import _schema
from .._schema import SchemaError, check, parse_json, read_bounded

__all__ = [
    "HEX64",
    "INT64",
    "Label",
    "Problem",
    "Refusal",
    "Text",
    "check_header",
    "check_shape",
    "each_problem",
    "found",
    "join",
    "named",
    "plain_problem",
    "read_file",
    "read_json_file",
    "repeated",
]

T = TypeVar("T")

FIX = "the file is damaged or was not written by nnx_lab; restore it or write it again"
_LIMIT_FIX = "if the file is genuine, raise {name} (docs/security.md)"

# Shapes the families share. A name or an id: some visible text, of a sane length.
Text = Annotated[str, msgspec.Meta(min_length=1, max_length=1024, pattern=r"\S")]
Label = Annotated[str, msgspec.Meta(max_length=1024)]
INT64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
HEX64 = Annotated[str, msgspec.Meta(pattern=r"\A[0-9a-f]{64}\Z")]


class Problem(NamedTuple):
    """A rule that spans fields, broken: the field (dotted, within the file), why, the
    value and, where it differs from the file's, the fix."""

    field: str
    reason: str
    value: Any = None
    fix: str | None = None


class Refusal(SchemaError):
    """A ``SchemaError`` that is also the error class a reader's callers catch: a family
    declares ``class SplitFileError(Refusal, SplitError)``. The message and the
    attributes are the SchemaError's (``path``, ``field``, ``value``, ``reason``,
    ``fix``); ``text`` replaces the message where a family keeps its historic wording."""

    def __init__(
        self,
        path: str | Path,
        field: str,
        reason: str,
        *,
        value: Any = None,
        fix: str = FIX,
        line: int | None = None,
        text: str | None = None,
    ) -> None:
        plain = SchemaError(path, field, reason, value=value, fix=fix, line=line)
        # The second base (ConfigError, RunRecordError...) has its own __init__; the
        # attributes it would set are the SchemaError's, so they are copied, not chained.
        self.__dict__.update(plain.__dict__)
        Exception.__init__(self, text if text is not None else str(plain))

    @classmethod
    def of(cls, exc: SchemaError, *, prefix: str = "", fix: str | None = None) -> Refusal:
        """``exc`` as this family's error; a missing or unknown key is named as the field
        (msgspec names the object that lacks it or holds it)."""
        field, reason, value = named(exc)
        return cls(
            exc.path, join(prefix, field), reason, value=value, fix=fix or exc.fix, line=exc.line
        )


def named(exc: SchemaError) -> tuple[str, str, Any]:
    """The field, reason and value of ``exc``, with a missing or unknown key as the field."""
    field, reason, value = exc.field, exc.reason, exc.value
    if match := _MISSING.fullmatch(reason):
        return join(field, match["key"]), "missing: every file of this kind has it", None
    if match := _UNKNOWN.fullmatch(reason):
        held = value.get(match["key"]) if isinstance(value, dict) else None
        return (
            join(field, match["key"]),
            "is not a field of this file (nnx_lab never writes it)",
            held,
        )
    return field, reason, value


_MISSING = re.compile(r"Object missing required field `(?P<key>[^`]+)`")
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<key>[^`]+)`")


def join(prefix: str, field: str) -> str:
    """``"fit"`` + ``"rows"`` -> ``"fit.rows"``; an index joins without a dot."""
    if not prefix or not field:
        return prefix or field
    return f"{prefix}{field}" if field.startswith("[") else f"{prefix}.{field}"


# -- bytes --------------------------------------------------------------------------------------
def read_file(
    path: str | Path,
    error: type[Refusal],
    *,
    record: bool = False,
    missing: str = "no such file",
    missing_fix: str = "check the path",
) -> bytes:
    """The bytes of the plain file at ``path``, within the file cap (``record=True``: the
    record cap). Its size is read from the file system first, so a 100 MB file is
    refused without reading it, and a pipe or a device is never opened (a read could
    hang or never end)."""
    path = Path(path)
    limits = _schema.LIMITS  # looked up now, so a changed limit applies
    cap, name = (
        (limits.record_bytes, "NNX_MAX_RECORD_BYTES")
        if record
        else (limits.file_bytes, "NNX_MAX_FILE_BYTES")
    )
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a plain file"
            raise error(path, "", f"is {kind}", fix="name the file nnx_lab saved")
        if info.st_size > cap:
            raise error(
                path,
                "",
                f"is {info.st_size:,} bytes, more than the {cap:,} this reader takes",
                fix=_LIMIT_FIX.format(name=name),
            )
        return read_bounded(path, cap)
    except FileNotFoundError:
        raise error(path, "", missing, fix=missing_fix) from None
    except SchemaError as exc:
        if isinstance(exc, Refusal):
            raise
        raise error.of(exc, fix=_LIMIT_FIX.format(name=name)) from None
    except OSError as exc:
        raise error(
            path, "", f"cannot be read ({exc.strerror or exc})", fix="check its permissions"
        ) from None


# -- shapes -------------------------------------------------------------------------------------
def check_shape(
    value: Any,
    shape: type[T],
    path: str | Path,
    error: type[Refusal],
    *,
    fix: str = FIX,
    prefix: str = "",
) -> T:
    """Plain ``value`` as ``shape`` (strictly), then the shape's cross-field ``rules()``;
    the first violation is raised as ``error`` naming the field."""
    try:
        doc = check(value, shape, path, fix=fix)
    except SchemaError as exc:
        raise error.of(exc, prefix=prefix) from None
    rules = getattr(doc, "rules", None)
    if rules is not None:
        for problem in rules():
            raise error(
                path,
                join(prefix, problem.field),
                problem.reason,
                value=problem.value,
                fix=problem.fix or fix,
            )
    return doc


def read_json_file(
    path: str | Path,
    shape: type[T],
    error: type[Refusal],
    *,
    fix: str = FIX,
    header: tuple[str, str, int] | None = None,
    redo: str | None = None,
    record: bool = False,
    missing: str = "no such file",
    missing_fix: str = "check the path",
) -> T:
    """The JSON file at ``path`` as ``shape``: bounded read, bounded parse, its
    ``header`` (``(key, kind, version)``: what the file says it is, checked first so a
    file of another kind or version is named as such), then the strict check."""
    data = read_file(path, error, record=record, missing=missing, missing_fix=missing_fix)
    try:
        value = parse_json(data, path)
    except SchemaError as exc:
        reason = exc.reason.replace("not valid JSON", "not JSON", 1)
        if reason.startswith("not UTF-8"):
            reason = f"not JSON: {reason}"
        raise error(path, "", reason, fix=fix) from None
    if header is not None:
        check_header(value, path, error, header, fix=fix, redo=redo or fix)
    return check_shape(value, shape, path, error, fix=fix)


def check_header(
    value: Any,
    path: str | Path,
    error: type[Refusal],
    header: tuple[str, str, int],
    *,
    fix: str = FIX,
    redo: str = FIX,
) -> None:
    """Refuse a value that is not an object of ``header = (key, kind, version)``."""
    key, kind, version = header
    if not isinstance(value, dict):
        raise error(path, "", f"is a JSON {_json_type(value)}, not an object", fix=fix)
    if value.get(key) != kind:
        raise error(path, key, f"is not {kind!r}", value=value.get(key), fix=fix)
    got = value.get("version")
    if got != version or isinstance(got, bool):
        raise error(path, "version", f"this nnx_lab reads version {version}", value=got, fix=redo)


def _json_type(value: Any) -> str:
    names = {list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


# -- rules the shapes share ---------------------------------------------------------------------
def repeated(items: Iterable[Any], field: str, what: str = "entry") -> Problem | None:
    """The first item seen twice in ``items`` (1 and "1" are different, as in JSON)."""
    first: dict[tuple[type, Any], int] = {}
    for i, item in enumerate(items):
        key = (type(item), item)
        if key in first:
            return Problem(
                f"{field}[{i}]",
                f"repeats the {what} at position {first[key]}; each {what} appears once",
                item,
            )
        first[key] = i
    return None


def each_problem(entries: dict[str, Any], shape: type, field: str) -> Problem | None:
    """The first entry of a mapping that is not ``shape``, named by its key (msgspec
    names a mapping's entry ``[...]``, whatever the key), with that shape's rules."""
    for key, raw in entries.items():
        where = join(field, key)
        try:
            entry = check(raw, shape, "")
        except SchemaError as exc:
            inner, reason, value = named(exc)
            return Problem(join(where, inner), reason, value)
        for problem in getattr(entry, "rules", list)():
            return problem._replace(field=join(where, problem.field))
    return None


def plain_problem(value: Any, field: str, *, finite: bool = True) -> Problem | None:
    """The first number in a free-form JSON tree that is not data: an integer beyond 64
    bits, or (``finite=True``) NaN or an infinity. The tree is walked without
    recursion; its depth is already capped by the parser."""
    stack: list[tuple[Any, str]] = [(value, field)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, dict):
            stack.extend((v, join(where, str(k))) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(node))
        elif isinstance(node, bool):
            continue
        elif isinstance(node, int) and not -(2**63) <= node < 2**63:
            return Problem(where, "is an integer wider than 64 bits", node)
        elif finite and isinstance(node, float) and not math.isfinite(node):
            return Problem(where, "must be a finite number", node)
    return None


def found(problems: Iterable[Problem | None]) -> Iterator[Problem]:
    """The problems that are not None, for ``rules()`` written as a list of checks."""
    return (p for p in problems if p is not None)
