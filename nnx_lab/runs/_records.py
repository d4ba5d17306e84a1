"""A run's YAML records, its writer, and whether that writer is still alive.

``run.yaml`` and ``metadata.yaml`` are read through the one strict decoder
(``_schema``): a plain file of the run's own folder (a link, a pipe or a file above
``LIMITS.record_bytes`` is refused before a byte is parsed), YAML without anchors or
aliases and nested at most ``LIMITS.nesting`` deep, then the record's shape
(``_schemas.records``). Whatever is wrong is one ``RecordSchemaError``: a
``SchemaError`` (file, field, value, fix) that is also the ``RunRecordError`` readers
have always caught.

``metadata.yaml`` names the process that writes the run (pid, host, boot, the process's
start time) and a heartbeat that the writer refreshes every ``HEARTBEAT_S`` seconds. A
run recorded as "running" whose writer is gone is reported as "interrupted": on the
writer's own machine by looking the process up (a reused pid is told apart by its start
time); from another machine sharing the folder, by a heartbeat older than
``STALE_AFTER_S``.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import time
from pathlib import Path
from typing import Any

import yaml

from ..errors import FileError, RunRecordError
from ._schema import LIMITS, READ_FLAGS, SchemaError, _short, check, parse_yaml
from ._schemas.records import RUN_NAME_MAX, RUN_STATUSES, Metadata, RunConfig

__all__ = [
    "HEARTBEAT_S",
    "INTERRUPTED",
    "STALE_AFTER_S",
    "RecordSchemaError",
    "RunRecordError",
    "effective_status",
    "parse_record",
    "problem",
    "read_plain",
    "read_record",
    "writer_alive",
    "writer_identity",
]

HEARTBEAT_S = 10.0  # NNX_HEARTBEAT_S overrides it for a writer
STALE_AFTER_S = 120.0
INTERRUPTED = "interrupted"

_RECORD_FIX = "the run's record is damaged. Restore the file, or delete the run and train it again"
_TIMES = frozenset({"started_at", "heartbeat", "finished_at", "time"})
_SHAPES: dict[str, type] = {"run.yaml": RunConfig, "metadata.yaml": Metadata}


class RecordSchemaError(SchemaError, RunRecordError):
    """A ``run.yaml`` or ``metadata.yaml`` that is not what nnx_lab writes: ``path``,
    ``field`` (dotted, ``""`` for the whole file), ``value``, ``reason`` and ``fix``.
    Caught as a ``SchemaError`` or as a ``RunRecordError`` alike."""

    default_fix = _RECORD_FIX

    @classmethod
    def of(cls, exc: SchemaError, fix: str = _RECORD_FIX) -> RecordSchemaError:
        fix = exc.fix if "NNX_MAX" in exc.fix else fix  # keep the fix that names a limit
        reason = plain_reason(exc.reason, exc.field)
        if isinstance(exc, yaml.YAMLError) and cls is RecordSchemaError:
            cls = RecordYamlError
        return cls(exc.path, exc.field, reason, value=exc.value, fix=fix, line=exc.line)


class RecordYamlError(RecordSchemaError, yaml.YAMLError):
    """A record that is not YAML nnx-lab reads (e.g. a ``!!python`` tag): caught as a
    ``RunRecordError`` or as the ``yaml.YAMLError`` NNx raises there."""


def plain_reason(reason: str, field: str = "") -> str:
    """A schema's refusal in words where msgspec's alone says little."""
    if field == "status":
        return f"is not a run status ({', '.join(RUN_STATUSES)})"
    if field == "name":
        return (
            f"must be one line of 1 to {RUN_NAME_MAX} characters, without a control or a "
            "direction character"
        )
    if field.rsplit(".", 1)[-1] in _TIMES or "7258118400" in reason:
        return "must be a Unix time (seconds since 1970, before 2200)"
    if reason.startswith("Expected `int") and reason.endswith("got `float`"):
        return "must be a whole number"
    return reason


def problem(exc: BaseException) -> str:
    """What is wrong with a run file, in one line a listing shows: the file's name, the
    field and the value for a schema error (``metadata.yaml: planned_epochs: must be a
    whole number (got 1.5)``), the reason for another damaged file."""
    if isinstance(exc, SchemaError):
        where = f"{exc.field}: " if exc.field else ""
        shown = "" if exc.value is None else f" (got {_short(exc.value)})"
        line = f", line {exc.line}" if exc.line is not None else ""
        return f"{exc.path.name}{line}: {where}{exc.reason}{shown}"
    if isinstance(exc, FileError):
        return f"{exc.path.name}: {exc.reason}"
    if isinstance(exc, OSError) and exc.strerror:
        name = Path(exc.filename).name if exc.filename else "file"
        return f"{name}: {exc.strerror}"
    return f"{type(exc).__name__}: {exc}"[:300]


def read_plain(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of the plain file at ``path``, opened without following a link and
    without blocking (a named pipe is refused, never waited on), at most ``max_bytes``.
    A link, anything but a plain file, or a larger file is a ``RecordSchemaError``;
    ``FileNotFoundError`` and other ``OSError`` pass."""
    path = Path(path)
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno != errno.ENOENT and os.path.islink(path)):
            raise RecordSchemaError(
                path,
                "",
                "a link; run files are read only from the run's own folder",
                fix="replace the link with the file itself",
            ) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RecordSchemaError(path, "", "not a plain file", fix="remove it")
        if info.st_size > max_bytes:
            raise RecordSchemaError(
                path,
                "",
                f"{info.st_size:,} bytes, larger than the {max_bytes:,} a record may hold",
                fix="if the file is genuine, raise NNX_MAX_RECORD_BYTES (docs/security.md)",
            )
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew while it was read
        raise RecordSchemaError(path, "", f"larger than the {max_bytes:,} bytes a record may hold")
    return data


def read_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A run's YAML record (``run.yaml``, ``metadata.yaml``) as a checked mapping, or a
    ``RecordSchemaError`` naming the file, the field and the value (see the module
    docstring). A missing file is ``FileNotFoundError``."""
    path = Path(path)
    return parse_record(read_plain(path, LIMITS.record_bytes), path)


def parse_record(raw: bytes, path: str | os.PathLike[str]) -> dict[str, Any]:
    """The record in ``raw`` (the bytes of the file at ``path``), checked as the file's
    name says (``run.yaml``, ``metadata.yaml``; another name: a mapping), or a
    ``RecordSchemaError``. For readers that fetch the bytes themselves (the Jupyter
    server extension reads with its own size bound)."""
    path = Path(path)
    try:
        data = parse_yaml(raw, path)
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise SchemaError(path, "", f"a YAML {type(data).__name__}, not a mapping")
        shape = _SHAPES.get(path.name)
        status = data.get("status", "created")
        if shape is Metadata and not (isinstance(status, str) and status in RUN_STATUSES):
            # the field a listing is for: named first, whatever else is wrong
            raise SchemaError(path, "status", "is not a run status", value=status)
        if shape is not None:
            check(data, shape, path)
    except SchemaError as exc:
        raise RecordSchemaError.of(exc) from None
    return data


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _proc_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux); None when there is no
    such process, or only its zombie (it has exited; its parent has not reaped it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces; the fields after it are plain.
    rest = stat.rsplit(")", 1)[1].split()
    if rest[0] in ("Z", "X"):
        return None
    return int(rest[19])


def writer_identity() -> dict[str, Any]:
    """This process, as a run records its writer."""
    pid = os.getpid()
    return {
        "pid": pid,
        "host": socket.gethostname(),
        "boot_id": _boot_id(),
        "proc_start": _proc_start(pid),
    }


def writer_alive(writer: Any, heartbeat: Any = None, now: float | None = None) -> bool:
    """Whether the process that writes a run can still be running."""
    now = time.time() if now is None else now
    if not isinstance(writer, dict) or not isinstance(writer.get("pid"), int):
        # A run from before writers were recorded: only the heartbeat can tell.
        return isinstance(heartbeat, int | float) and now - heartbeat < STALE_AFTER_S
    same_host = writer.get("host") == socket.gethostname()
    boot = _boot_id()
    if same_host and (boot is None or writer.get("boot_id") in (None, boot)):
        pid = writer["pid"]
        start = _proc_start(pid)
        if start is not None or boot is not None:  # Linux: /proc tells
            return start is not None and writer.get("proc_start") in (None, start)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if same_host:  # the machine rebooted since: no process of that boot survives
        return False
    return isinstance(heartbeat, int | float) and now - heartbeat < STALE_AFTER_S


def effective_status(metadata: dict[str, Any], now: float | None = None) -> str:
    """The recorded status, or "interrupted" for a "running" run whose writer is gone."""
    status = str(metadata.get("status", "created"))
    if status == "running" and not writer_alive(
        metadata.get("writer"), metadata.get("heartbeat"), now
    ):
        return INTERRUPTED
    return status
