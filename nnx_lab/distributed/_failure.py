"""A word every rank can read: which rank failed first, and a barrier bounded on all.

A rank that fails cannot tell the others through the process group: they wait in a
collective it will never join. So it writes one record (rank, type, message,
traceback) into torchrun's store, the TCP key-value store every rank of the job
already reaches at ``MASTER_ADDR:MASTER_PORT`` (torchrun's agent holds it, so it
outlives the ranks), and exits. Its sockets close, the others' collective raises
(gloo: "connection closed by peer"), and each of them reads the record and ends with
the first failing rank's reason instead. The first record wins (``compare_set``): a
rank whose collective broke because another left learns it is a consequence.

A failed rank must leave by exiting: gloo closes a group's sockets only when the
process ends (neither ``destroy_process_group`` nor ``abort`` does while DDP holds the
group), and the others' collectives break only then. torchrun ends them 0.1 s later
with SIGTERM, which does not cut their records short (``_sigterm``).

The same store gives ``shutdown()`` a barrier whose wait is bounded on every rank
(gloo's ``monitored_barrier`` bounds only rank 0's: the others wait on the group's
30-minute timeout), and that nobody waits at once a rank has failed.

Everything here is best effort: without the store (a group that was not started by
torchrun's ``env://``, a store that is gone) nothing is announced and nothing waits.
"""

from __future__ import annotations

import datetime
import json
import os
import time
from typing import Any

import torch.distributed as dist

__all__ = ["FailureBoard", "board", "forget"]

_TRACEBACK_CHARS = 20_000
_STORE_TIMEOUT_S = 10.0
_POLL_S = 0.05

_generation = 0  # one per process group this process has left: every rank counts alike
_board: FailureBoard | None = None
_connected_generation = -1


class FailureBoard:
    """The failure record and the shutdown barrier of one process group."""

    def __init__(self, store: Any, rank: int, world_size: int) -> None:
        self.store, self.rank, self.world_size = store, rank, world_size

    @classmethod
    def connect(cls, rank: int, world_size: int, generation: int) -> FailureBoard | None:
        addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
        if not addr or not port or not port.isdigit():
            return None
        job = os.environ.get("TORCHELASTIC_RUN_ID", "job")
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        try:
            store = dist.TCPStore(
                addr,
                int(port),
                is_master=False,
                timeout=datetime.timedelta(seconds=_STORE_TIMEOUT_S),
                wait_for_workers=False,
            )
        except (RuntimeError, OSError, ValueError):
            return None
        prefix = f"nnx_lab/{job}/{attempt}/{generation}/"
        return cls(dist.PrefixStore(prefix, store), rank, world_size)

    # -- the failure record ------------------------------------------------------------
    def announce(self, error: BaseException, traceback: str | None) -> dict[str, Any] | None:
        """Record this rank's failure unless another rank's came first; returns the first
        record (this rank's or the earlier one), or None without a store."""
        record = {
            "rank": self.rank,
            "type": type(error).__name__,
            "message": str(error)[:2000],
            "traceback": (traceback or "")[-_TRACEBACK_CHARS:],
            "time": time.time(),
        }
        try:
            first = self.store.compare_set("failed", "", json.dumps(record))
        except (RuntimeError, OSError, ValueError):
            return None
        return _decode(first) or record

    def first(self) -> dict[str, Any] | None:
        """The first rank's failure record, or None (none yet, or no store)."""
        try:
            if not self.store.check(["failed"]):
                return None
            return _decode(self.store.get("failed"))
        except (RuntimeError, OSError, ValueError):
            return None

    # -- leaving together ----------------------------------------------------------------
    def gather(self, name: str, timeout_s: float) -> bool:
        """Wait until every rank has arrived at ``name``, at most ``timeout_s`` seconds,
        and not at all once a rank has failed; True when all arrived."""
        try:
            self.store.add(f"arrived/{name}", 1)
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if self.store.add(f"arrived/{name}", 0) >= self.world_size:
                    return True
                if self.store.check(["failed"]):
                    return False
                time.sleep(_POLL_S)
        except (RuntimeError, OSError, ValueError):
            pass
        return False


def _decode(raw: Any) -> dict[str, Any] | None:
    try:
        data = json.loads(bytes(raw).decode("utf-8"))
    except (ValueError, TypeError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("rank"), int) else None


def board() -> FailureBoard | None:
    """The board of the current process group (connected on first use), or None."""
    global _board, _connected_generation
    if not (dist.is_available() and dist.is_initialized()):
        return None
    if _connected_generation != _generation:
        _connected_generation = _generation
        _board = FailureBoard.connect(dist.get_rank(), dist.get_world_size(), _generation)
    return _board


def forget() -> None:
    """The group is destroyed: its board goes with it (a next group has its own)."""
    global _board, _connected_generation, _generation
    _board, _connected_generation = None, -1
    _generation += 1
