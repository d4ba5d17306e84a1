"""Finding a run directory from an id or an unambiguous prefix of one."""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["find_run_dir"]

# Run ids are the MD5 hex digest of the run's configuration (nnx_lab.engine.runs).
_ID = re.compile(r"[0-9a-f]{32}")
_PREFIX = re.compile(r"[0-9a-f]{1,32}")
_SHOWN = 8  # candidates named in an error message


def _resolve_root(runs_root: str | os.PathLike[str] | None) -> Path:
    # The engine's rule (explicit > NNX_RUNS_ROOT > ./runs). Imported here, not at
    # the top: nnx_lab.engine.runs imports torch, and importing the widgets must not.
    from ..engine.runs import resolve_runs_root

    return resolve_runs_root(runs_root)


def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def find_run_dir(run_id: object, runs_root: str | os.PathLike[str] | None = None) -> Path:
    """The directory of the run whose id is ``run_id`` or starts with it.

    ``runs_root=None`` means ``NNX_RUNS_ROOT``, else ``./runs``. Raises ``ValueError``
    for something that cannot be an id (or prefix) and for a prefix that matches
    several runs, ``FileNotFoundError`` when nothing matches; both name the
    candidates. A match that leads outside the runs root (a symlink) is refused.
    """
    if not isinstance(run_id, str) or not _PREFIX.fullmatch(run_id):
        raise ValueError(
            f"run_id={run_id!r} is not a run id: pass the run's id (32 lowercase hex "
            f"digits, as in run.id) or its first characters, e.g. '3fa2c1'"
        )
    root = _resolve_root(runs_root)
    if not root.is_dir():
        raise FileNotFoundError(
            f"no runs folder {root.resolve()} (for run {run_id!r}): pass runs_root= the "
            f"folder the run was trained in, or set NNX_RUNS_ROOT"
        )
    # is_dir() follows links: a linked run is found, then checked for where it leads
    runs = sorted(p.name for p in root.iterdir() if _ID.fullmatch(p.name) and p.is_dir())
    matches = [name for name in runs if name.startswith(run_id)]
    if not matches:
        there = f"the runs there: {_listing(runs)}" if runs else "it holds no run"
        raise FileNotFoundError(
            f"no run {run_id!r} under {root.resolve()}; {there}. Check the id, or pass "
            f"runs_root= (or set NNX_RUNS_ROOT)"
        )
    if len(matches) > 1:
        raise ValueError(
            f"run id prefix {run_id!r} is ambiguous under {root.resolve()}: it matches "
            f"{len(matches)} runs ({_listing(matches)}); pass more characters"
        )
    run_dir = root / matches[0]
    real_root = root.resolve()
    real = run_dir.resolve()
    if real != real_root and real_root not in real.parents:
        raise ValueError(
            f"run {matches[0]} under {real_root} leads outside it (to {real}); refusing to read it"
        )
    return run_dir
