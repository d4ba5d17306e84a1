"""Finding the runs folders under the server's roots, with a bounded amount of work.

A runs folder is a configured root that holds runs, or a folder named ``runs`` found
below a root, at most ``max_depth`` levels down. The search visits at most ``max_dirs``
folders, never follows a link (a link could lead out of the root, or in a circle), and
skips hidden folders and the usual package trees. Each folder found gets a key that
the panel uses to name it: a digest of its real path, never a path the browser could
edit into another one.
"""

from __future__ import annotations

import hashlib
import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from ..runs import is_run_id

__all__ = ["Discovery", "RunsFolder", "discover", "folder_key", "shown_path"]

_SKIP = frozenset({"node_modules", "__pycache__", "site-packages", "checkpoints"})
_ENTRIES_PER_DIR = 100  # entries examined per folder visited, on average, at most


@dataclass(frozen=True)
class RunsFolder:
    key: str  # "r" + 16 hex digits of the SHA-256 of the real path
    label: str  # what the panel shows: the path from the server's root, else absolute
    path: Path  # the real path (links resolved when found)


@dataclass
class Discovery:
    folders: list[RunsFolder] = field(default_factory=list)
    visited: int = 0  # folders visited
    truncated: bool = False  # the search stopped at max_dirs
    notes: list[str] = field(default_factory=list)

    def by_key(self) -> dict[str, RunsFolder]:
        return {f.key: f for f in self.folders}


def folder_key(real: Path) -> str:
    return "r" + hashlib.sha256(os.fsencode(real)).hexdigest()[:16]


def shown_path(path: Path, server_root: Path | None) -> str:
    """``path`` from the server's root when inside it, else absolute; bytes that are not
    UTF-8 are shown escaped (a folder name can be any bytes)."""
    shown = path
    if server_root is not None:
        try:
            shown = path.relative_to(server_root)
        except ValueError:
            shown = path
    text = os.fsencode(shown).decode("utf-8", "backslashreplace")
    return text if text not in ("", ".") else "."


def _holds_runs(path: Path, budget: int) -> bool:
    try:
        with os.scandir(path) as it:
            for i, entry in enumerate(it):
                if i >= budget:
                    return False
                if is_run_id(entry.name):
                    return True
    except OSError:
        return False
    return False


def discover(
    roots: list[Path], *, max_depth: int, max_dirs: int, server_root: Path | None
) -> Discovery:
    """The runs folders under ``roots`` (see the module docstring)."""
    out = Discovery()
    seen: set[Path] = set()
    real_server_root = server_root.resolve() if server_root is not None else None
    entries_left = max_dirs * _ENTRIES_PER_DIR

    def add(path: Path) -> None:
        if path in seen:
            return
        seen.add(path)
        out.folders.append(RunsFolder(folder_key(path), shown_path(path, real_server_root), path))

    for root in roots:
        try:
            real = root.expanduser().resolve(strict=True)
        except (OSError, RuntimeError):
            out.notes.append(f"runs root {shown_path(root, None)} does not exist")
            continue
        if not real.is_dir():
            out.notes.append(f"runs root {shown_path(root, None)} is not a folder")
            continue
        if real.name == "runs" or _holds_runs(real, _ENTRIES_PER_DIR * 10):
            add(real)
        queue: deque[tuple[Path, int]] = deque([(real, 0)])
        while queue:
            folder, depth = queue.popleft()
            if out.visited >= max_dirs or entries_left <= 0:
                out.truncated = True
                break
            out.visited += 1
            try:
                with os.scandir(folder) as it:
                    for entry in it:
                        entries_left -= 1
                        if entries_left <= 0:
                            out.truncated = True
                            break
                        name = entry.name
                        if name.startswith(".") or name in _SKIP or is_run_id(name):
                            continue
                        try:
                            # a link is never followed: it could lead out of the root
                            if not entry.is_dir(follow_symlinks=False):
                                continue
                        except OSError:
                            continue
                        child = Path(entry.path)
                        if name == "runs":
                            add(child)
                        elif depth + 1 <= max_depth:
                            queue.append((child, depth + 1))
            except OSError:
                continue
        if out.truncated:
            out.notes.append(
                f"the search for runs folders stopped after {out.visited} folders "
                "(NNxLab.max_dirs); add the folder you want as NNxLab.runs_roots"
            )
            break
    out.folders.sort(key=lambda f: f.label)
    return out
