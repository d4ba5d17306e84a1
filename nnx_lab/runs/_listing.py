"""``list_runs()``: what is under a runs root, one row per run, from the records alone.

A run whose folder is a link out of the root, or whose ``metadata.yaml`` is missing,
damaged or not what nnx_lab writes, is one row with status "damaged" and the reason in
``error``: one bad run never takes the listing down.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ._ids import is_run_id, resolve_runs_root, run_dir
from ._records import effective_status, problem, read_record

__all__ = ["COLUMNS", "LINK_OUT", "damaged_row", "list_runs", "metadata_row", "run_rows"]

LINK_OUT = "a link that leads out of its runs folder; not read"

COLUMNS = (
    "run_id",
    "name",
    "status",
    "started_at",
    "finished_at",
    "duration_s",
    "epochs_completed",
    "planned_epochs",
    "steps",
    "best_value",
    "best_source",
    "best_mode",
    "parent_run_id",
    "error",
    "path",
)


def damaged_row(path: Path, reason: str) -> dict[str, Any]:
    """The row of a run folder whose record cannot be read: status "damaged"."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(run_id=path.name, path=str(path), status="damaged", error=reason)
    return row


def metadata_row(path: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """The row of the run in ``path`` whose ``metadata.yaml`` holds ``meta``."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(run_id=path.name, path=str(path))
    started, finished = meta.get("started_at"), meta.get("finished_at")
    best = meta.get("best") if isinstance(meta.get("best"), dict) else {}
    error = meta.get("error")
    name = meta.get("name")
    row.update(
        name=name if isinstance(name, str) else None,
        status=effective_status(meta),
        started_at=started,
        finished_at=finished,
        duration_s=(
            finished - started
            if isinstance(started, int | float) and isinstance(finished, int | float)
            else None
        ),
        epochs_completed=meta.get("epochs_completed"),
        planned_epochs=meta.get("planned_epochs"),
        steps=meta.get("steps"),
        best_value=best.get("value"),
        best_source=best.get("source"),
        best_mode=best.get("mode"),
        parent_run_id=meta.get("parent_run_id"),
        error=str(error).splitlines()[0] if error else None,
    )
    return row


def _row(root: Path, name: str) -> dict[str, Any]:
    try:
        path = run_dir(root, name)
    except ValueError:
        return damaged_row(root / name, LINK_OUT)
    try:
        meta = read_record(path / "metadata.yaml")
    except FileNotFoundError:
        return damaged_row(path, "no metadata.yaml")
    except (ValueError, OSError) as exc:  # RecordSchemaError, a permission refused
        return damaged_row(path, problem(exc))
    return metadata_row(path, meta)


def run_rows(runs_root: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """One dict per run folder under the root, newest first (no torch, no pandas)."""
    root = resolve_runs_root(runs_root)
    try:
        entries = [e for e in os.scandir(root) if is_run_id(e.name) and e.is_dir()]
    except FileNotFoundError:
        return []
    rows = [_row(root, e.name) for e in entries]
    rows.sort(key=lambda r: r["started_at"] or 0.0, reverse=True)
    return rows


def list_runs(runs_root: str | os.PathLike[str] | None = None) -> Any:
    """The runs under ``runs_root`` (default: ``NNX_RUNS_ROOT`` or ``./runs``) as a pandas
    DataFrame, newest first: id, name (``NNTrainParams(name=...)`` or a rename), status
    ("interrupted" for a run whose writer died), start and end times (UTC), duration,
    epochs done and planned, steps, the best selection value, its source and its
    direction ("min": lower is better), the parent of a resumed run, the error of a
    failed one, and the folder. A folder with a damaged record is listed as "damaged"."""
    import pandas as pd

    frame = pd.DataFrame(run_rows(runs_root), columns=list(COLUMNS))
    for name in ("started_at", "finished_at"):
        frame[name] = pd.to_datetime(frame[name], unit="s", utc=True)
    return frame
