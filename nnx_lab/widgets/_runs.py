"""Finding a run directory from an id or an unambiguous prefix of one."""

from __future__ import annotations

import os
from pathlib import Path

from ..runs import find_run_id, resolve_runs_root, run_dir

__all__ = ["find_run_dir"]


def find_run_dir(run_id: object, runs_root: str | os.PathLike[str] | None = None) -> Path:
    """The directory of the run whose id is ``run_id`` or starts with it, confined to
    the runs root (``runs_root=None``: ``NNX_RUNS_ROOT``, else ``./runs``); see
    ``nnx_lab.runs.find_run_id`` for the refusals."""
    root = resolve_runs_root(runs_root)
    return run_dir(root, find_run_id(root, run_id))
