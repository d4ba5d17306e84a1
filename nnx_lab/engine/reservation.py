"""Reserving a run directory, and what happens to one that is already there.

A writer holds ``<run>/.writer.lock`` (an exclusive ``flock``) for the whole life of its
run; the kernel drops it when the process dies, however it dies. So a run directory is
*live* while that lock is held, and nobody replaces or deletes a live run:
``overwrite_existing=True`` on it is refused, naming the process. A new run directory is
built under a temporary name with its lock, ``run.yaml`` and ``metadata.yaml`` in place,
then renamed into place in one step, so no reader ever sees a half-made run and two
writers racing for one id cannot both win.

An existing run that failed, or whose writer died without a word ("interrupted"), does
not block a rerun (nor does one whose record still says "running" while its writer lock,
on this machine, is free: its writer let go of it without being able to record its end,
e.g. on a full disk, and it counts as interrupted): it is moved aside to
``<root>/.replaced/<id>-<time>/`` (nothing is deleted that the user did not ask to
delete) and a warning says where. A finished or stopped run is replaced only with
``overwrite_existing=True``, which deletes it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import socket
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..runs import (
    INTERRUPTED,
    RunRecordError,
    atomic_write_json,
    atomic_write_yaml,
    effective_status,
    read_record,
    remember_metadata,
    run_dir,
)
from .write_faults import NO_RUN, cannot_write, is_write_fault

__all__ = ["ExistingRun", "RunLock", "inspect_existing", "reserve_run_dir"]

LOCK_NAME = ".writer.lock"
REPLACED = ".replaced"
_REPLACEABLE = ("failed", "interrupted")


@dataclass
class RunLock:
    """The writer's exclusive hold on its run directory."""

    fd: int | None

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self.fd, fcntl.LOCK_UN)
                os.close(self.fd)
            self.fd = None


def _try_lock(path: Path, *, create: bool) -> RunLock | None:
    """The writer lock of the run at ``path``, or None when a live process holds it."""
    flags = os.O_RDWR | (os.O_CREAT if create else 0)
    try:
        fd = os.open(path / LOCK_NAME, flags, 0o644)
    except FileNotFoundError:
        return RunLock(None)  # no lock file: nobody holds it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return None
        raise
    return RunLock(fd)


@dataclass
class ExistingRun:
    """A run directory already under the root, and what a new run may do with it."""

    path: Path
    status: str  # the effective status ("interrupted" for a dead writer)
    live: bool  # a process holds its writer lock (or its heartbeat is fresh elsewhere)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def replaceable(self) -> bool:
        """Whether a rerun may move it aside without being asked to overwrite."""
        return not self.live and self.status in _REPLACEABLE

    def writer(self) -> str:
        w = self.metadata.get("writer") or {}
        started = self.metadata.get("started_at")
        since = (
            time.strftime(" since %Y-%m-%d %H:%M:%S", time.localtime(started))
            if isinstance(started, int | float)
            else ""
        )
        return f"process {w.get('pid', '?')} on host {w.get('host', '?')}{since}"


def inspect_existing(root: Path, run_id: str) -> ExistingRun | None:
    """The run directory for ``run_id`` if one exists (nothing is created or changed)."""
    path = run_dir(root, run_id)
    if not os.path.lexists(path):
        return None
    try:
        metadata = read_record(path / "metadata.yaml")
    except (FileNotFoundError, RunRecordError):
        metadata = {}  # no record, or a damaged one: the run is not usable as it is
    lock = _try_lock(path, create=False)
    held = lock is None
    let_go = lock is not None and lock.fd is not None  # a lock file nobody holds
    if lock is not None:
        lock.release()
    status = effective_status(metadata) if metadata else "failed"
    if status == "running" and let_go and _written_here(metadata):
        # a writer holds its lock for the run's whole life (the kernel drops it only
        # when the process dies): this one ended the run without recording it
        status = INTERRUPTED
    live = held or status == "running"
    return ExistingRun(path, "running" if held else status, live, metadata)


def _written_here(metadata: dict[str, Any]) -> bool:
    """Whether the run's writer is on this machine, where its lock can be trusted."""
    writer = metadata.get("writer")
    return isinstance(writer, dict) and writer.get("host") == socket.gethostname()


def _move_aside(root: Path, existing: ExistingRun, run_id: str, delete: bool) -> None:
    """Take the old run out of the way while holding its writer lock."""
    lock = _try_lock(existing.path, create=False)
    if lock is None:
        raise FileExistsError(
            f"run {run_id} is being written by another process now; it was not replaced"
        )
    try:
        if delete:
            trash = root / f".{run_id}.deleted-{uuid.uuid4().hex[:8]}"
            os.rename(existing.path, trash)
            shutil.rmtree(trash, ignore_errors=True)
            return
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        target = root / REPLACED / f"{run_id}-{stamp}-{uuid.uuid4().hex[:4]}"
        target.parent.mkdir(exist_ok=True)
        os.rename(existing.path, target)
    finally:
        lock.release()
    warnings.warn(
        f"run {run_id} had {existing.status}; its folder was moved to {target} and the run "
        "starts afresh (delete that folder when you no longer need it)",
        RuntimeWarning,
        stacklevel=4,
    )


def reserve_run_dir(
    root: Path,
    run_id: str,
    existing: ExistingRun | None,
    *,
    overwrite: bool,
    config: dict[str, Any],
    metadata: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> tuple[Path, RunLock]:
    """Make ``root/<id>`` with its records and take its writer lock, atomically.

    ``existing`` is what ``inspect_existing`` found when the request was checked; it was
    refused then unless it may be replaced. ``extra`` maps further JSON files (by name)
    to their content; they are in place when the folder appears (a provenance manifest).
    """
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".{run_id}.new-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    lock: RunLock | None = None
    try:
        (staging / "checkpoints").mkdir()
        lock = _try_lock(staging, create=True)
        assert lock is not None  # nobody else knows this folder
        atomic_write_yaml(staging / "run.yaml", config)
        raw = atomic_write_yaml(staging / "metadata.yaml", metadata)
        for name, content in (extra or {}).items():
            atomic_write_json(staging / name, content)
        if existing is not None:
            _move_aside(root, existing, run_id, delete=not existing.replaceable)
        target = run_dir(root, run_id)
        try:
            os.rename(staging, target)  # atomic; fails if another writer got there first
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                raise FileExistsError(
                    f"run {run_id} was created by another process a moment ago; it is theirs"
                ) from None
            raise
        remember_metadata(target, raw, metadata)
        return target, lock
    except BaseException as exc:
        if lock is not None:
            lock.release()
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, OSError) and is_write_fault(exc):
            raise cannot_write("the run directory", staging, exc, ended=NO_RUN) from exc
        raise


def existing_run_error(root: Path, run_id: str, existing: ExistingRun, overwrite: bool) -> None:
    """Raise when ``existing`` blocks a new run of the same id (see the module text)."""
    if existing.live:
        raise FileExistsError(
            f"run {run_id} under {root}/ is being written by {existing.writer()}; it is "
            "never replaced while its writer runs. Wait for it to end, or stop it"
            + (" (overwrite_existing=True does not apply to a live run)" if overwrite else "")
        )
    if existing.replaceable or overwrite:
        return
    raise FileExistsError(
        f"run {run_id} already exists under {root}/ (same configuration and data, status "
        f"{existing.status}); pass NNTrainParams(overwrite_existing=True) to replace it, or "
        f"delete {existing.path}"
    )
