"""Reading a run's files as a server must: bounded, never through a link, never
blocking on something that is not a plain file, and never crashing on what is inside.

A runs folder is written by training processes, and whoever shares it can put anything
there: a link to another file, a named pipe (opening it would block a worker forever),
a gigabyte where a record of a few kilobytes belongs, YAML that is not a mapping,
numbers JSON cannot carry. Each read here says what it refused and why, in words the
panel shows.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import stat
from pathlib import Path
from typing import Any

from ..errors import NNxError
from ..runs import RunRecordError, parse_record

__all__ = [
    "FileRefused",
    "TooLarge",
    "file_size",
    "json_safe",
    "read_range",
    "read_small",
    "read_yaml_record",
    "shown_size",
]

_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_FLAGS |= getattr(os, "O_CLOEXEC", 0)


class FileRefused(NNxError):
    """A run file that is not read (a link, not a plain file, too large); ``reason`` says so."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path, self.reason = Path(path), reason
        super().__init__(f"{Path(path).name}: {reason}")


def shown_size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _open(path: Path) -> tuple[int, os.stat_result]:
    """A descriptor of ``path`` opened without following a link, and its stat; a
    FileRefused for a link or anything but a plain file. FileNotFoundError passes."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        if os.path.islink(path):
            raise FileRefused(
                path, "a link; run files are read only from the run's own folder"
            ) from None
        raise FileRefused(path, f"cannot be opened ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(path, "not a plain file")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def file_size(path: Path) -> int:
    """The size of a plain file (FileRefused / FileNotFoundError otherwise)."""
    fd, info = _open(path)
    os.close(fd)
    return info.st_size


def read_small(path: Path, limit: int) -> bytes:
    """The whole file, when it is a plain file of at most ``limit`` bytes."""
    fd, info = _open(path)
    try:
        if info.st_size > limit:
            raise FileRefused(
                path,
                f"{shown_size(info.st_size)}, more than the {shown_size(limit)} a record "
                "may hold (NNxLab.max_record_bytes); not read",
            )
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while read
        raise FileRefused(path, f"more than the {shown_size(limit)} a record may hold; not read")
    return data


def read_range(path: Path, offset: int, length: int) -> tuple[bytes, int]:
    """Up to ``length`` bytes from ``offset``, and the file's size when opened."""
    fd, info = _open(path)
    try:
        if offset >= info.st_size or length <= 0:
            return b"", info.st_size
        return os.pread(fd, min(length, info.st_size - offset), offset), info.st_size
    finally:
        os.close(fd)


def read_yaml_record(path: Path, limit: int) -> dict[str, Any]:
    """A run's YAML record read with ``read_small``, then checked by the runs floor's
    one strict reader (``parse_record``: no anchors or aliases, bounded nesting, the
    record's schema); any damage is a RunRecordError (a ``SchemaError`` naming the
    field and the value where it has one)."""
    data = read_small(path, limit)
    try:
        return parse_record(data, path)
    except RunRecordError:
        raise
    except Exception as exc:  # the strict reader should say why; the server goes on
        raise RunRecordError(path, f"unreadable ({type(exc).__name__}: {exc})"[:300]) from None


class TooLarge(NNxError, ValueError):
    """A value with more nodes (or deeper) than a reply may carry."""


_MAX_STR = 20_000
_SAFE_INT = 2**53


def json_safe(value: Any, *, budget: int = 50_000, depth: int = 64) -> Any:
    """``value`` as plain JSON a browser parses: non-finite floats become the strings
    "NaN", "Infinity", "-Infinity"; keys become strings; dates ISO text; integers beyond
    2**53 text; long strings are cut. More than ``budget`` nodes, or nesting deeper than
    ``depth`` (YAML aliases can make a small file a huge value), raise TooLarge."""
    count = 0

    def walk(v: Any, level: int) -> Any:
        nonlocal count
        count += 1
        if count > budget:
            raise TooLarge(f"more than {budget} values")
        if level > depth:
            raise TooLarge(f"nested deeper than {depth} levels")
        if v is None or isinstance(v, bool):
            return v
        if isinstance(v, int):
            return v if -_SAFE_INT <= v <= _SAFE_INT else str(v)
        if isinstance(v, float):
            if math.isfinite(v):
                return v
            return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
        if isinstance(v, str):
            return v if len(v) <= _MAX_STR else v[:_MAX_STR] + "…"
        if isinstance(v, dict):
            return {str(k)[:_MAX_STR]: walk(x, level + 1) for k, x in v.items()}
        if isinstance(v, list | tuple | set | frozenset):
            return [walk(x, level + 1) for x in v]
        if isinstance(v, _dt.date | _dt.datetime):
            return v.isoformat()
        if isinstance(v, bytes):
            return f"<{len(v)} bytes>"
        return str(v)[:_MAX_STR]

    return walk(value, 0)
