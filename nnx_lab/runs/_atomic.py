"""Atomic writes, file locks and the YAML/JSON helpers every saved file goes through."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_yaml",
    "file_lock",
    "read_json",
]


def durable() -> bool:
    """``NNX_FSYNC=1`` adds fsync of files and folders (power-loss durability).

    Without it a write is still atomic for readers and for a killed process: the name
    points at the old file or the new one, never at a partial file.
    """
    return os.environ.get("NNX_FSYNC", "").strip().lower() in ("1", "true", "yes")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temp file in the same folder, then ``os.replace``: all or nothing."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide runs from other users
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable():
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if durable():
        _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_bytes(path, (json.dumps(data, indent=1, allow_nan=True) + "\n").encode())


# libyaml's C emitter when present: the pure-Python one costs milliseconds.
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def atomic_write_yaml(path: Path, data: Any) -> bytes:
    """Write ``data`` as YAML (its keys in their order); returns the bytes written."""
    raw = yaml.dump(data, Dumper=_Dumper, sort_keys=False).encode()
    atomic_write_bytes(path, raw)
    return raw


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (created when missing)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
