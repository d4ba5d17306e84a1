"""Keeping a widget's views in step with its kernel-side series.

``SeriesTransport`` owns the custom-message half of the protocol (``_protocol``):

* **Updates**, coalesced and throttled: whatever happens in between, the views get
  at most one ``update`` every ``interval`` seconds, carrying only the rows they have
  not seen. A request that comes too early arms a one-shot timer, so the last change
  is never held back longer than ``interval``.
* **Snapshots**, chunked: a view that says ``hello`` gets everything in messages of
  at most ``MAX_MESSAGE_BYTES`` of buffers, addressed to it.

Every message carries a sequence number, so a view can tell a missed update and ask
again. The next widgets (LR sweep, reliability diagram, ...) reuse this with their
own series.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._protocol import MAX_MESSAGE_BYTES, PROTOCOL_VERSION, SNAPSHOT, UPDATE, Op
from ._series import BucketSeries

__all__ = ["SeriesTransport", "TransportStats"]

log = logging.getLogger("nnx_lab.widgets")

Send = Callable[[dict[str, Any], list[bytes]], None]


@dataclass
class TransportStats:
    """What the transport sent: for tests, benchmarks and the docs' figures."""

    updates: int = 0
    snapshots: int = 0  # snapshot messages (parts), not snapshots
    bytes: int = 0  # buffer bytes
    largest: int = 0  # the largest message's buffer bytes
    parts_per_snapshot: list[int] = field(default_factory=list)


@dataclass
class _Piece:
    """Rows ``[start, start + count)`` of one series, to be sent as one op."""

    name: str
    at: int
    start: int
    count: int


class SeriesTransport:
    """Sends named ``BucketSeries`` to a widget's views (see the module docstring).

    ``send(content, buffers)`` sends one custom message to every view; ``lock`` is
    the widget's lock (the series change under it); ``on_flush(now)`` runs at every
    flush, under the lock, for the widget to refresh its small synced state.
    """

    def __init__(
        self,
        send: Send,
        series: Mapping[str, BucketSeries],
        lock: threading.RLock,
        *,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        on_flush: Callable[[float], None] | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self._send = send
        self.series = dict(series)
        self._lock = lock
        self.interval = float(interval)
        self.clock = clock
        self._on_flush = on_flush
        self.max_message_bytes = int(max_message_bytes)
        self.seq = 0
        self.stats = TransportStats()
        self.paused = False  # while a log is read in one go: no message, no timer
        self._last_flush = -math.inf
        self._timer: threading.Timer | None = None
        # A one-shot timer flushes what came after the last flush; tests that drive
        # the clock themselves replace this with None.
        self.timer_factory: Callable[..., threading.Timer] | None = threading.Timer
        self._closed = False

    # ------------------------------------------------------------------ updates

    def request_flush(self) -> None:
        """Flush now if the interval has passed since the last flush, else soon."""
        with self._lock:
            if self.paused or self._closed:
                return
            now = self.clock()
            wait = self._last_flush + self.interval - now
            if wait <= 0:
                self._flush(now)
            else:
                self._arm(wait)

    def flush(self) -> None:
        """Send what changed now, whatever the interval."""
        with self._lock:
            if not self.paused and not self._closed:
                self._flush(self.clock())

    def _arm(self, wait: float) -> None:
        if self._timer is not None or self.timer_factory is None:
            return
        timer = self.timer_factory(wait, self._on_timer)
        timer.daemon = True
        self._timer = timer
        timer.start()

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
            if self.paused or self._closed:
                return
            try:
                self._flush(self.clock())
            except Exception:  # a timer thread has nobody to raise to
                log.exception("a delayed widget update failed")

    def _flush(self, now: float) -> None:
        self._last_flush = now
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pieces = []
        for name, series in self.series.items():
            change = series.take_changes()
            if change is not None:
                pieces.append(_Piece(name, change.at, change.at, change.count))
        if pieces:
            for ops, buffers in self._pack(pieces):
                self.seq += 1
                head = {"kind": UPDATE, "version": PROTOCOL_VERSION, "seq": self.seq}
                self._emit(head, ops, buffers)
                self.stats.updates += 1
        if self._on_flush is not None:
            self._on_flush(now)

    # ------------------------------------------------------------------ snapshots

    def snapshot(self, view: str, req: int) -> int:
        """Send everything to ``view`` (chunked); returns the number of messages."""
        with self._lock:
            # Flush first: the snapshot is then exactly the state of update ``seq``,
            # and the next update continues from there for every view alike.
            if not self._closed:
                self._flush(self.clock())
            pieces = [_Piece(name, 0, 0, len(s)) for name, s in self.series.items()]
            packed = self._pack(pieces)
            for part, (ops, buffers) in enumerate(packed):
                head = {
                    "kind": SNAPSHOT,
                    "version": PROTOCOL_VERSION,
                    "seq": self.seq,
                    "to": view,
                    "req": req,
                    "part": part,
                    "parts": len(packed),
                }
                self._emit(head, ops, buffers)
                self.stats.snapshots += 1
            self.stats.parts_per_snapshot.append(len(packed))
            return len(packed)

    # ------------------------------------------------------------------ packing

    def _pack(self, pieces: list[_Piece]) -> list[tuple[list[Op], list[bytes]]]:
        """Split pieces into messages of at most ``max_message_bytes`` of buffers.

        A piece too big for one message goes on in the next, as an op that keeps
        the rows sent so far (``at`` = where the previous part ended).
        """
        messages: list[tuple[list[Op], list[bytes]]] = []
        ops: list[Op] = []
        buffers: list[bytes] = []
        room = self.max_message_bytes
        queue = list(pieces)
        while queue:
            piece = queue.pop(0)
            series = self.series[piece.name]
            row = series.row_bytes()
            fit = max(0, room // row)
            if piece.count > fit and ops and fit == 0:
                messages.append((ops, buffers))
                ops, buffers, room = [], [], self.max_message_bytes
                queue.insert(0, piece)
                continue
            count = min(piece.count, max(fit, 1))
            ops.append(
                {
                    "series": piece.name,
                    "at": piece.at,
                    "count": count,
                    "fields": series.fields,
                    "dtypes": series.dtypes,
                    "width": series.width,
                    "total": series.total,
                    "buffer": len(buffers),
                }
            )
            buffers.extend(series.buffers(piece.start, piece.start + count))
            room -= count * row
            if count < piece.count:
                rest = piece.count - count
                queue.insert(0, _Piece(piece.name, piece.at + count, piece.start + count, rest))
                messages.append((ops, buffers))
                ops, buffers, room = [], [], self.max_message_bytes
        if ops or not messages:
            messages.append((ops, buffers))
        return messages

    def _emit(self, head: dict[str, Any], ops: list[Op], buffers: list[bytes]) -> None:
        size = sum(len(b) for b in buffers)
        self.stats.bytes += size
        self.stats.largest = max(self.stats.largest, size)
        self._send({**head, "ops": ops}, buffers)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
