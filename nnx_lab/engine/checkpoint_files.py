"""The files of a run's checkpoint folder: which tensors file each sidecar names, the
orphans a killed write left, and a second name for the same bytes.

A checkpoint write reads every sidecar of the run (the file it replaces, the orphans it
sweeps). The sidecars this process wrote are remembered by path with their bytes and
the tensors file they name: one that still holds those bytes is known without a parse,
and one changed since (another writer, an edit in place) is read as any file.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

from ..runs import TENSORS_FILE

__all__ = [
    "forget_sidecar",
    "link_or_copy",
    "referenced_file",
    "remember_sidecar",
    "remove_orphans",
]

_WRITTEN: dict[str, tuple[bytes, str | None]] = {}
_WRITTEN_MAX = 1024


def referenced_file(sidecar: Path) -> str | None:
    """The plain tensors-file name a sidecar holds; anything else counts as none."""
    try:
        raw = Path(sidecar).read_bytes()
        last = _WRITTEN.get(os.path.abspath(sidecar))
        if last is not None and last[0] == raw:
            return last[1]
        name = json.loads(raw).get("tensors_file")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) and TENSORS_FILE.fullmatch(name) else None


def forget_sidecar(path: Path) -> None:
    _WRITTEN.pop(os.path.abspath(path), None)


def remember_sidecar(path: Path, data: bytes, name: str) -> None:
    """``path`` now holds ``data``, this process's sidecar naming ``name``."""
    key = os.path.abspath(path)
    _WRITTEN.pop(key, None)
    _WRITTEN[key] = (data, name)
    if len(_WRITTEN) > _WRITTEN_MAX:
        del _WRITTEN[next(iter(_WRITTEN))]


def remove_orphans(folder: Path) -> None:
    """Delete tensors files no sidecar names and temp files of writes that were killed.

    Runs under the run's lock, so no other writer's temp file can be caught.
    """
    referenced = set()
    for sidecar in folder.glob("*.json"):
        name = referenced_file(sidecar)
        if name is not None:
            referenced.add(name)
    for path in folder.iterdir():
        orphan = TENSORS_FILE.fullmatch(path.name) is not None and path.name not in referenced
        if orphan or (path.name.startswith(".") and path.name.endswith(".tmp")):
            with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
                os.unlink(path)  # a link is removed itself, never what it points to


def link_or_copy(src: Path, dst: Path) -> None:
    tmp = dst.with_name(f".{dst.name}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    try:
        os.link(src, tmp)
    except OSError:  # a filesystem without hard links
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)
