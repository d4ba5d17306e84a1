"""The one strict decoder every file the package reads goes through.

A file from disk is someone else's data until it passes here: a runs folder a colleague
shared, a plan JSON from a course page, a bundle from an e-mail. Each kind of file
declares its shape once, as a ``msgspec.Struct`` (types, ranges, lengths; cross-field
rules in ``__post_init__``), and ``decode_json`` / ``decode_yaml`` / ``check`` turn the
bytes into that typed value or into one ``SchemaError`` naming the file, the field, the
value and the fix. A reader never sees a bare ``KeyError``, ``TypeError`` or
``RecursionError`` from a hostile file.

Why msgspec: it validates typed structures strictly in C (no coercion of ``"5"`` to 5,
no bools for numbers, unknown fields refused), so one declaration gives every check and
costs microseconds; pydantic would add a large dependency and coerce by default;
jsonschema would keep the shape apart from the typed value the readers use.

Before any shape is checked, the bytes pass the limits (``LIMITS``): a size cap, a
nesting cap, no YAML anchors or aliases (the package never writes them; a few hundred
bytes of nested aliases expand into gigabytes), numbers that are finite and of sane
length. The limits can be raised with ``NNX_MAX_FILE_BYTES``, ``NNX_MAX_RECORD_BYTES``
and ``NNX_MAX_NESTING``.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec
import yaml

from ..errors import FileError

__all__ = [
    "LIMITS",
    "Finite",
    "Limits",
    "NonNegativeInt",
    "PositiveInt",
    "Probability",
    "SchemaError",
    "YamlSyntaxError",
    "check",
    "decode_json",
    "decode_yaml",
    "parse_json",
    "parse_yaml",
    "read_bounded",
]

T = TypeVar("T")

# Shapes the schemas share. Bounds exclude NaN and the infinities: a comparison with NaN
# is false, and 1e308 is finite.
Finite = Annotated[float, msgspec.Meta(ge=-1.7976931348623157e308, le=1.7976931348623157e308)]
Probability = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
PositiveInt = Annotated[int, msgspec.Meta(ge=1, le=2**62)]
NonNegativeInt = Annotated[int, msgspec.Meta(ge=0, le=2**62)]

_DEFAULT_FIX = "the file is damaged or was not written by nnx_lab; restore it or write it again"


@dataclass(frozen=True)
class Limits:
    """What a file may cost before its shape is even looked at."""

    file_bytes: int = 64 << 20  # a plan, a record, a calibrator: kilobytes in practice
    record_bytes: int = 1 << 20  # run.yaml, metadata.yaml, one log line, a sidecar
    nesting: int = 64  # the package writes at most ~8 levels

    @classmethod
    def from_environment(cls) -> Limits:
        base = cls()

        def read(name: str, default: int) -> int:
            raw = os.environ.get(name, "").strip()
            return int(raw) if raw.isdigit() and int(raw) > 0 else default

        return cls(
            file_bytes=read("NNX_MAX_FILE_BYTES", base.file_bytes),
            record_bytes=read("NNX_MAX_RECORD_BYTES", base.record_bytes),
            nesting=read("NNX_MAX_NESTING", base.nesting),
        )


LIMITS = Limits.from_environment()


class SchemaError(FileError, ValueError):
    """A file that is not what it claims to be: ``path``, ``field`` (a dotted path
    inside the document, ``""`` for the whole file), ``value`` (shown short), ``reason``
    and ``fix``. Also raised for files over a limit."""

    default_fix = _DEFAULT_FIX

    def __init__(
        self,
        path: str | os.PathLike[str],
        field: str,
        reason: str,
        *,
        value: Any = None,
        fix: str | None = None,
        line: int | None = None,
    ) -> None:
        self.field, self.value = field, value
        where = f"{field}: " if field else ""
        shown = "" if value is None else f" (got {_short(value)})"
        fix = self.default_fix if fix is None else fix
        # FileError's own initializer, not super()'s: a subclass that is also a
        # LogDamagedError or a RunRecordError has one next in its MRO that takes other
        # arguments.
        FileError.__init__(self, Path(path), f"{where}{reason}{shown}", line=line, fix=fix)
        self.reason = reason


# flags of a reader's open(): never follow a link, never block on a FIFO, never leak the fd
READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
READ_FLAGS |= getattr(os, "O_CLOEXEC", 0)


class YamlSyntaxError(SchemaError, yaml.YAMLError):
    """A YAML file that is not YAML nnx-lab reads (a syntax error, a ``!!python`` tag):
    a ``yaml.YAMLError`` too, as PyYAML's own error is where NNx reads the file."""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- bytes -----------------------------------------------------------------------------------
def read_bounded(path: str | Path, max_bytes: int | None = None) -> bytes:
    """The bytes of the plain file at ``path``, refused (SchemaError) above ``max_bytes``
    (default ``LIMITS.file_bytes``) without reading more than that."""
    path = Path(path)
    cap = LIMITS.file_bytes if max_bytes is None else max_bytes
    with open(path, "rb") as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise SchemaError(
            path,
            "",
            f"larger than {cap:,} bytes, the most this reader takes",
            fix="if the file is genuine, raise NNX_MAX_FILE_BYTES (docs/security.md)",
        )
    return data


# -- parse: bytes -> plain values within the limits -------------------------------------------
def _constant(name: str) -> float:
    # Our writers use json.dumps(allow_nan=True): a NaN loss is written as NaN. Whether a
    # field may hold one is the schema's business (Finite refuses it).
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[name]


def parse_json(data: bytes, path: str | Path, *, line: int | None = None) -> Any:
    """JSON bytes as plain values, or a SchemaError (not UTF-8, not JSON, too deep, a
    number too long to be data)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SchemaError(path, "", f"not UTF-8 text ({exc.reason})", line=line) from None
    try:
        value = json.loads(text, parse_constant=_constant)
    except RecursionError:
        raise SchemaError(
            path, "", f"nested deeper than {LIMITS.nesting} levels", line=line
        ) from None
    except ValueError as exc:  # JSONDecodeError, or int() refusing a 5,000-digit literal
        raise SchemaError(path, "", f"not valid JSON ({str(exc)[:120]})", line=line) from None
    _check_nesting(value, path, line)
    return value


class _NoAliasLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe YAML that also refuses anchors and aliases."""


def parse_yaml(data: bytes, path: str | Path) -> Any:
    """YAML bytes as plain values, or a SchemaError. Only the safe tags load; an anchor
    or alias is refused before anything is built (the package never writes them)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SchemaError(path, "", f"not UTF-8 text ({exc.reason})") from None
    try:
        depth = 0
        for event in yaml.parse(text, Loader=_NoAliasLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise SchemaError(
                    path,
                    "",
                    "uses YAML anchors or aliases, which nnx_lab never writes",
                    fix="remove the & and * marks (write each value out), or restore the file",
                )
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > LIMITS.nesting:
                    raise SchemaError(path, "", f"nested deeper than {LIMITS.nesting} levels")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        value = yaml.load(text, Loader=_NoAliasLoader)
    except SchemaError:  # an alias or the nesting cap, said above (it is a ValueError too)
        raise
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(path, "", f"not valid YAML ({str(exc).splitlines()[0]})") from None
    except (ValueError, OverflowError) as exc:  # e.g. int() refusing a 5,000-digit literal
        raise SchemaError(path, "", f"holds a value that is not data ({str(exc)[:120]})") from None
    return value


def _check_nesting(value: Any, path: str | Path, line: int | None) -> None:
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > LIMITS.nesting:
            raise SchemaError(path, "", f"nested deeper than {LIMITS.nesting} levels", line=line)
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


# -- check: plain values -> the declared type -------------------------------------------------
_AT = re.compile(r"^(?P<reason>.*?)(?: - at `\$(?P<field>[^`]*)`)?$", re.S)


def _field(raw: str | None) -> str:
    if not raw:
        return ""
    # "$.train[2].name" -> "train[2].name"
    return raw[1:] if raw.startswith(".") else raw


def _value_at(value: Any, field: str) -> Any:
    node = value
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", field):
        try:
            node = node[int(part[1:-1])] if part.startswith("[") else node[part]
        except (KeyError, IndexError, TypeError, ValueError):
            return None
    return node


def check(
    value: Any,
    schema: type[T],
    path: str | Path,
    *,
    fix: str = _DEFAULT_FIX,
    line: int | None = None,
    dec_hook: Callable[[type, Any], Any] | None = None,
) -> T:
    """``value`` (plain JSON-like data) as ``schema``, strictly: no coercion, unknown
    fields refused where the schema says so; a SchemaError naming the field otherwise."""
    try:
        return msgspec.convert(value, schema, strict=True, dec_hook=dec_hook)
    except msgspec.ValidationError as exc:
        match = _AT.match(str(exc))
        reason = match.group("reason") if match else str(exc)
        field = _field(match.group("field") if match else None)
        bad = _value_at(value, field) if field else None
        if isinstance(bad, float) and not math.isfinite(bad):
            reason = "must be a finite number"
        raise SchemaError(path, field, reason, value=bad, fix=fix, line=line) from None


def decode_json(
    data: bytes,
    schema: type[T],
    path: str | Path,
    *,
    fix: str = _DEFAULT_FIX,
    line: int | None = None,
) -> T:
    """JSON bytes checked as ``schema`` (``parse_json`` then ``check``)."""
    return check(parse_json(data, path, line=line), schema, path, fix=fix, line=line)


def decode_yaml(data: bytes, schema: type[T], path: str | Path, *, fix: str = _DEFAULT_FIX) -> T:
    """YAML bytes checked as ``schema`` (``parse_yaml`` then ``check``)."""
    return check(parse_yaml(data, path), schema, path, fix=fix)
