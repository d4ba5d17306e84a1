"""SeriesTransport: throttled updates and chunked snapshots (nnx_lab/widgets/_transport.py)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from nnx_lab.widgets._protocol import MAX_MESSAGE_BYTES, PROTOCOL_VERSION
from nnx_lab.widgets._series import BucketSeries, ColumnSpec, Reduce
from nnx_lab.widgets._transport import SeriesTransport


def series(capacity: int = 1_000_000) -> BucketSeries:
    return BucketSeries(
        [
            ColumnSpec("x", "int32", Reduce.LAST),
            ColumnSpec("y", "float32", Reduce.MEAN),
            ColumnSpec("n", "int32", Reduce.SUM),
        ],
        capacity=capacity,
    )


def add(s: BucketSeries, a: int, b: int) -> None:
    x = np.arange(a, b)
    s.extend({"x": x, "y": x * 0.5})


class Wire:
    def __init__(self) -> None:
        self.messages: list[tuple[dict, list[bytes]]] = []

    def __call__(self, content, buffers):
        self.messages.append((content, [bytes(b) for b in buffers]))

    def kinds(self):
        return [c["kind"] for c, _ in self.messages]


def make(interval: float = 0.1, clock=None, max_bytes: int = MAX_MESSAGE_BYTES, flushes=None):
    wire = Wire()
    s = {"a": series(), "b": series()}
    t = SeriesTransport(
        wire,
        s,
        threading.RLock(),
        interval=interval,
        clock=clock or time.monotonic,
        max_message_bytes=max_bytes,
        on_flush=(lambda now: flushes.append(now)) if flushes is not None else None,
    )
    return wire, s, t


def rebuild(messages, name):
    """Apply ops the way a view does (keep `at` rows, append): the rows it ends with."""
    rows: list[int] = []
    for content, buffers in messages:
        for op in content["ops"]:
            if op["series"] != name:
                continue
            assert op["at"] <= len(rows), "an op beyond the rows held"
            x = np.frombuffer(buffers[op["buffer"] + op["fields"].index("x")], dtype=np.int32)
            assert len(x) == op["count"]
            rows = rows[: op["at"]] + x.tolist()
    return rows


def test_updates_carry_only_new_rows_and_are_numbered():
    now = [0.0]
    wire, s, t = make(clock=lambda: now[0])
    t.timer_factory = None
    add(s["a"], 0, 10)
    t.request_flush()  # the first request goes out at once
    add(s["a"], 10, 15)
    add(s["b"], 0, 3)
    t.request_flush()  # too soon: held back
    assert len(wire.messages) == 1
    now[0] = 0.1
    t.request_flush()
    assert wire.kinds() == ["update", "update"]
    first, second = wire.messages[0][0], wire.messages[1][0]
    assert (first["seq"], second["seq"]) == (1, 2)
    assert first["version"] == PROTOCOL_VERSION
    assert [(o["series"], o["at"], o["count"]) for o in second["ops"]] == [
        ("a", 10, 5),
        ("b", 0, 3),
    ]
    assert rebuild(wire.messages, "a") == list(range(15))
    now[0] = 0.3
    t.request_flush()  # nothing changed: no message
    assert len(wire.messages) == 2


def test_at_most_one_update_per_interval_whatever_the_rate():
    now = [0.0]
    wire, s, t = make(interval=0.1, clock=lambda: now[0])
    t.timer_factory = None
    for i in range(10_000):  # 10,000 changes over 10 s
        add(s["a"], i, i + 1)
        now[0] += 0.001
        t.request_flush()
    assert 95 <= len(wire.messages) <= 101
    t.flush()  # what came after the last flush (a timer sends it in real use)
    assert rebuild(wire.messages, "a") == list(range(10_000))


def test_a_change_after_the_last_flush_goes_out_when_the_interval_ends():
    wire, s, t = make(interval=0.05)
    add(s["a"], 0, 1)
    t.request_flush()
    add(s["a"], 1, 2)
    t.request_flush()  # within the interval: a timer will send it
    assert len(wire.messages) == 1
    deadline = time.monotonic() + 5
    while len(wire.messages) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert rebuild(wire.messages, "a") == [0, 1]
    t.close()


def test_a_snapshot_is_chunked_addressed_and_continues_the_sequence():
    row = 20  # x, y, y:min, y:max, n: 4 bytes each
    wire, s, t = make(max_bytes=1_000 * row)
    add(s["a"], 0, 4_500)
    add(s["b"], 0, 700)
    t.flush()
    add(s["a"], 4_500, 4_600)  # pending: the snapshot flushes it first
    wire.messages.clear()
    parts = t.snapshot("view-1", 3)
    kinds = wire.kinds()
    assert kinds[0] == "update"  # the pending rows, to every view, first
    snap = [(c, b) for c, b in wire.messages if c["kind"] == "snapshot"]
    assert parts == len(snap) == 6  # 5,300 rows of 20 bytes in messages of 20,000 bytes
    for i, (content, buffers) in enumerate(snap):
        assert (content["to"], content["req"], content["part"], content["parts"]) == (
            "view-1",
            3,
            i,
            parts,
        )
        assert content["seq"] == t.seq == wire.messages[0][0]["seq"]
        assert sum(len(b) for b in buffers) <= 1_000 * row
    assert rebuild(snap, "a") == list(range(4_600))
    assert rebuild(snap, "b") == list(range(700))
    assert t.stats.largest <= 1_000 * row


def test_an_empty_snapshot_still_names_the_series():
    wire, _, t = make()
    t.snapshot("v", 1)
    ((content, buffers),) = wire.messages
    assert content["parts"] == 1
    assert [(o["series"], o["at"], o["count"]) for o in content["ops"]] == [
        ("a", 0, 0),
        ("b", 0, 0),
    ]
    assert buffers == [b""] * 10  # x, y, y:min, y:max, n of each series


def test_every_flush_refreshes_the_small_state():
    flushes = []
    now = [5.0]
    _, _, t = make(clock=lambda: now[0], flushes=flushes)
    t.timer_factory = None
    t.request_flush()
    assert flushes == [5.0]
    t.flush()  # forced, even within the interval
    assert flushes == [5.0, 5.0]


@pytest.mark.parametrize("paused", [True, False])
def test_a_paused_transport_sends_nothing(paused):
    wire, s, t = make()
    t.paused = paused
    add(s["a"], 0, 3)
    t.flush()
    assert len(wire.messages) == (0 if paused else 1)
