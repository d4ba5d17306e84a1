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


_SHOWN = 8  # candidates named in an error message


def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def find_run_id(root: str | os.PathLike[str], prefix: object, field: str = "run_id") -> str:
    """The one run under ``root`` whose id is ``prefix`` or starts with it.

    Something that cannot be an id or a prefix of one, and a prefix matching several
    runs, raise ``ValueError``; nothing matching raises ``FileNotFoundError``; each names
    the candidates.
    """
    if not isinstance(prefix, str) or _PREFIX.fullmatch(prefix) is None:
        raise ValueError(
            f"{field}={_shown(prefix)} is not a run id: pass the run's id (32 lowercase hex "
            "digits, as in run.id) or its first characters, e.g. '3fa2c1'"
        )
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(
            f"no runs folder {root.resolve()} (for run {prefix!r}): pass runs_root= the "
            "folder the run was trained in, or set NNX_RUNS_ROOT"
        )
    runs = sorted(e.name for e in os.scandir(root) if is_run_id(e.name) and e.is_dir())
    matches = [name for name in runs if name.startswith(prefix)]
    if not matches:
        there = f"the runs there: {_listing(runs)}" if runs else "it holds no run"
        raise FileNotFoundError(
            f"no run {prefix!r} under {root.resolve()}; {there}. Check the id, or pass "
            "runs_root= (or set NNX_RUNS_ROOT)"
        )
    if len(matches) > 1:
        raise ValueError(
            f"run id prefix {prefix!r} is ambiguous under {root.resolve()}: it matches "
            f"{len(matches)} runs ({_listing(matches)}); pass more characters"
        )
    return matches[0]
