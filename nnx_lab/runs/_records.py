"""A run's YAML records, its writer, and whether that writer is still alive.

``metadata.yaml`` names the process that writes the run (pid, host, boot, the process's
start time) and a heartbeat that the writer refreshes every ``HEARTBEAT_S`` seconds. A
run recorded as "running" whose writer is gone is reported as "interrupted": on the
writer's own machine by looking the process up (a reused pid is told apart by its start
time); from another machine sharing the folder, by a heartbeat older than
``STALE_AFTER_S``.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

import yaml

from ..errors import RunRecordError

__all__ = [
    "HEARTBEAT_S",
    "INTERRUPTED",
    "STALE_AFTER_S",
    "RunRecordError",
    "effective_status",
    "parse_record",
    "read_record",
    "writer_alive",
    "writer_identity",
]

HEARTBEAT_S = 10.0  # NNX_HEARTBEAT_S overrides it for a writer
STALE_AFTER_S = 120.0
INTERRUPTED = "interrupted"

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A YAML mapping (``run.yaml``, ``metadata.yaml``), or a RunRecordError naming it."""
    path = Path(path)
    return parse_record(path.read_bytes(), path)


def parse_record(raw: bytes, path: str | os.PathLike[str]) -> dict[str, Any]:
    """The YAML mapping in ``raw`` (the bytes of the record at ``path``), or a
    RunRecordError naming ``path``. For readers that fetch the bytes themselves (the
    Jupyter server extension reads with a size bound and refuses links)."""
    path = Path(path)
    try:
        data = yaml.load(raw.decode("utf-8"), Loader=_Loader)
    except UnicodeDecodeError as exc:
        raise RunRecordError(path, f"not UTF-8 text ({exc.reason})") from None
    except yaml.YAMLError as exc:
        raise RunRecordError(path, f"not valid YAML ({str(exc).splitlines()[0]})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise RunRecordError(path, f"a YAML {type(data).__name__}, not a mapping")
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
