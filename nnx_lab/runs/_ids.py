"""Run ids and where they live: nothing resolves outside the runs root.

A run id is the 32-character lowercase hex MD5 of the run's canonical configuration.
Every id that reaches a path is checked as what it is, and the resolved folder must be
the runs root's own child: ``../x``, absolute paths and symlinks that lead elsewhere
are refused before anything is read or created.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = [
    "RUN_ID_LENGTH",
    "find_run_id",
    "is_run_id",
    "resolve_runs_root",
    "run_dir",
    "validate_run_id",
]

RUN_ID_LENGTH = 32
_RUN_ID = re.compile(r"[0-9a-f]{32}")
_PREFIX = re.compile(r"[0-9a-f]{1,32}")


def resolve_runs_root(runs_root: str | os.PathLike[str] | None = None) -> Path:
    """Explicit root > ``NNX_RUNS_ROOT`` > ``./runs``."""
    if runs_root is not None:
        return Path(runs_root)
    return Path(os.environ.get("NNX_RUNS_ROOT") or "runs")


def is_run_id(value: object) -> bool:
    return isinstance(value, str) and _RUN_ID.fullmatch(value) is not None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate_run_id(value: object, field: str = "run_id") -> str:
    """``value`` when it is a run id, else a ValueError that names the field and the fix."""
    if is_run_id(value):
        return value  # type: ignore[return-value]
    if not isinstance(value, str):
        why = f"a {type(value).__name__}, not a string"
    elif value != value.strip() or not value:
        why = "empty or padded with spaces"
    elif len(value) != RUN_ID_LENGTH:
        why = f"{len(value)} characters long, not {RUN_ID_LENGTH}"
    else:
        why = "not lowercase hexadecimal"
    raise ValueError(
        f"{field}={_shown(value)} is not a run id ({why}); pass run.id, the "
        f"{RUN_ID_LENGTH}-character hex name of a folder under the runs root"
    )


def _confined(root: Path, run_id: str, field: str) -> Path:
    path = root / run_id
    if os.path.lexists(path):
        real_root = root.resolve()
        if path.resolve() != real_root / run_id:
            raise ValueError(
                f"{field}={run_id!r}: {path} is a link that leads outside the runs root "
                f"{real_root}; runs are only read from their own folder under the root. "
                "Replace the link with the run's folder, or pass runs_root= where it lives"
            )
    return path


def run_dir(root: str | os.PathLike[str], run_id: object, field: str = "run_id") -> Path:
    """``root/<run_id>`` for a valid id, confined to ``root`` (nothing is created)."""
    return _confined(Path(root), validate_run_id(run_id, field), field)


def find_run_id(root: str | os.PathLike[str], prefix: object, field: str = "run_id") -> str:
    """The one run under ``root`` whose id starts with ``prefix`` (a full id is returned as is).

    An unknown or ambiguous prefix raises, listing what it matched.
    """
    if is_run_id(prefix):
        return prefix  # type: ignore[return-value]
    if not isinstance(prefix, str) or _PREFIX.fullmatch(prefix) is None:
        validate_run_id(prefix, field)  # raises with the reason
    root = Path(root)
    try:
        names = sorted(
            e.name for e in os.scandir(root) if is_run_id(e.name) and e.name.startswith(prefix)
        )
    except FileNotFoundError:
        names = []
    if not names:
        raise FileNotFoundError(
            f"{field}={prefix!r}: no run under {root.resolve()} starts with it; check the id, "
            "or pass runs_root= where the run was written"
        )
    if len(names) > 1:
        shown = ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
        raise ValueError(
            f"{field}={prefix!r} is ambiguous: {len(names)} runs start with it ({shown}); "
            "give more characters of the id"
        )
    return names[0]
