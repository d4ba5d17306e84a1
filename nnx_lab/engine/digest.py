"""The SHA-256 of a large buffer, computed on another core while this one writes it.

``hashlib`` lets go of the GIL while it hashes a buffer over 2 KiB, and a file's
``write`` does too, so a checkpoint's tensors can be hashed and written at once instead
of one after the other. For a 16 MB checkpoint that is 15 ms of hashing hidden behind a
write of 5-150 ms (the second when the kernel throttles dirty pages). A small buffer is
hashed at once: starting a thread costs more than hashing it.
"""

from __future__ import annotations

import hashlib
import threading

__all__ = ["THREAD_MIN_BYTES", "Digest"]

THREAD_MIN_BYTES = 1 << 20


class Digest:
    """``hashlib.sha256(data).hexdigest()``, begun now and read with ``hexdigest()``.

    ``data`` must not change until then (the checkpoint writer passes immutable bytes).
    """

    def __init__(self, data: bytes) -> None:
        self._hex: str | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if len(data) < THREAD_MIN_BYTES:
            self._hex = hashlib.sha256(data).hexdigest()
            return
        # a daemon: when the write fails first, nobody waits for a digest no one reads
        self._thread = threading.Thread(
            target=self._run, args=(data,), name="nnx-lab-sha256", daemon=True
        )
        self._thread.start()

    def _run(self, data: bytes) -> None:
        try:
            self._hex = hashlib.sha256(data).hexdigest()
        except BaseException as exc:  # e.g. MemoryError: raised where it is read
            self._error = exc

    def hexdigest(self) -> str:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error
        assert self._hex is not None
        return self._hex
