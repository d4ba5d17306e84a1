"""What a run does when its disk refuses a write, and where a test may kill it mid-write.

A run that cannot write its checkpoints, its log or its metadata (the disk is full, the
quota is reached, the file system went read-only, an I/O error) ends "failed" with that
reason: ``cannot_write`` turns such an ``OSError`` into a ``RunDirectoryError`` naming
the file and the fix, which fails the run like any other error, and the recorder writes
the failure as far as the disk still allows (``handlers.run_directory``). Other
``OSError``s propagate as they are.

``kill_point(name)`` is the fault-injection hook of the writers' order: with
``NNX_FAULT_KILL_AT=<name>`` (or ``<name>@<n>``, the n-th time that point is reached) in
the environment, the process SIGKILLs itself there, so a test can stop a run at any
boundary between two writes and check that what it left agrees (docs/resume.md).
Unset, it costs one environment lookup per write.
"""

from __future__ import annotations

import errno
import os
import signal
from collections import Counter
from pathlib import Path

from ..errors import RunDirectoryError

__all__ = [
    "CANNOT_WRITE",
    "ENDS_FAILED",
    "FAULT_ENV",
    "NO_RUN",
    "cannot_write",
    "is_write_fault",
    "kill_point",
]

FAULT_ENV = "NNX_FAULT_KILL_AT"

# The errors of a disk that refuses writes (rather than of a wrong path or a bug).
CANNOT_WRITE = frozenset(
    code
    for code in (
        errno.ENOSPC,
        getattr(errno, "EDQUOT", None),
        errno.EROFS,
        errno.EIO,
        errno.EFBIG,
    )
    if code is not None
)

_reached: Counter[str] = Counter()


def is_write_fault(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in CANNOT_WRITE


ENDS_FAILED = "the run ends as failed"
NO_RUN = "no run was created"


def cannot_write(
    what: str, path: Path | str, exc: OSError, *, ended: str = ENDS_FAILED
) -> RunDirectoryError:
    """The error for ``exc``, raised while writing ``what`` at ``path``; ``ended`` says
    what became of the run."""
    name = errno.errorcode.get(exc.errno or 0, "EIO")
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    return RunDirectoryError(
        f"cannot write {what} ({path}): {reason} ({name}); {ended}. Free space (or "
        "raise the quota, or make the runs root writable) and train again: a failed run "
        "is replaced by its rerun"
    )


def kill_point(name: str) -> None:
    """SIGKILL this process here when ``NNX_FAULT_KILL_AT`` names this point."""
    wanted = os.environ.get(FAULT_ENV)
    if not wanted:
        return
    point, _, nth = wanted.partition("@")
    if point != name:
        return
    _reached[name] += 1
    if _reached[name] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
