"""Stopping a run from outside its process: a stop request in the run's folder.

Whoever may not touch the training process (the JupyterLab runs panel's server, a
launcher, another notebook) writes ``stop_request.json`` into the run's folder; the
writer's watchdog thread looks for it twice a second and ends the run after the current
step, exactly as a Stop button does: LAST written, status "stopped", the request's reason
recorded. Checking costs the training loop nothing.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ._atomic import atomic_write_json
from ._ids import resolve_runs_root, run_dir
from ._records import RunRecordError, effective_status, read_record

__all__ = ["STOP_REQUEST", "read_stop_request", "request_stop"]

STOP_REQUEST = "stop_request.json"


def request_stop(
    run_id: str,
    runs_root: str | os.PathLike[str] | None = None,
    *,
    reason: str = "stop requested",
    by: str | None = None,
) -> Path:
    """Ask the process training ``run_id`` to stop after its current step.

    Refused (``ValueError``) for a run that is not running; the request is a file, so it
    reaches a writer in another process, or on another machine sharing the folder.
    """
    path = run_dir(resolve_runs_root(runs_root), run_id)
    try:
        status = effective_status(read_record(path / "metadata.yaml"))
    except (FileNotFoundError, RunRecordError) as exc:
        raise ValueError(f"run {run_id}: no readable metadata.yaml ({exc})") from None
    if status != "running":
        raise ValueError(f"run {run_id} is {status}, not running: there is nothing to stop")
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError(f"reason={reason!r}: say why the run is stopped")
    target = path / STOP_REQUEST
    atomic_write_json(target, {"reason": reason[:500], "by": by, "requested_at": time.time()})
    return target


def read_stop_request(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The stop request in a run folder, or None (a torn or odd file reads as a bare stop)."""
    target = Path(path) / STOP_REQUEST
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"reason": "stop requested", "by": None}
    return data if isinstance(data, dict) else {"reason": "stop requested", "by": None}
