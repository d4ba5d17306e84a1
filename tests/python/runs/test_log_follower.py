"""nnx_lab.runs.LogFollower: a run's log replayed as events to sinks, and followed while
it is written; torch-free (the launcher and the monitor both read runs through it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nnx_lab.runs import FOLLOW_ENDINGS, LogFollower
from nnx_lab.runs._events import (
    EpochEnded,
    RunFinished,
    RunStarted,
    StepMetrics,
    StepRecord,
)

ROOT = Path(__file__).resolve().parents[3]
RUN = "ab" * 16


class Recorder:
    """A sink of every hook the follower calls, in order."""

    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()

    def _add(self, *call):
        with self.lock:
            self.calls.append(call)

    def on_run_started(self, event):
        self._add("run_started", event.run_id)

    def on_step_metrics(self, event):
        self._add("steps", tuple(r.step for r in event.records))

    def on_epoch_ended(self, event):
        self._add("epoch", event.epoch)

    def on_run_finished(self, event):
        self._add("finished", event.status, event.error)

    def on_log_read(self, events):
        self._add("read", events)

    def on_log_restarted(self):
        self._add("restarted")

    def on_follow_ended(self, reason, detail):
        self._add("ended", reason, detail)

    def events(self):
        with self.lock:
            return [c for c in self.calls if c[0] not in ("read",)]


def _lines(*events):
    out = []
    for event in events:
        if isinstance(event, StepMetrics):  # the log writes one line per step
            out += [json.dumps({**r.__dict__, "event": "step"}) for r in event.records]
        else:
            out.append(json.dumps(event.to_json()))
    return "".join(line + "\n" for line in out)


def _run(n_steps=4):
    steps = [
        StepRecord(step=s, epoch=1, batch=s - 1, lr=0.1, samples=8, loss=1.0 / s)
        for s in range(1, n_steps + 1)
    ]
    started = RunStarted(
        run_id=RUN, run_dir="x", n_epochs=1, start_epoch=1, start_step=0, steps_per_epoch=n_steps
    )
    epoch = EpochEnded(
        epoch=1,
        step=n_steps,
        lr=0.1,
        train={"loss": 0.5},
        val=None,
        signal=None,
        signal_source=None,
        improved=False,
        seconds=1.0,
    )
    finished = RunFinished(run_id=RUN, status="finished", epochs_completed=1, steps=n_steps)
    return started, StepMetrics(records=tuple(steps)), epoch, finished


def _wait_for(predicate, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / RUN
    d.mkdir()
    return d


def test_it_imports_no_torch_no_engine_and_no_widget():
    out = subprocess.run(
        [sys.executable, "-c", "import sys, nnx_lab.runs._follow; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    mods = set(out.stdout.split())
    assert "nnx_lab.runs._follow" in mods
    for banned in ("torch", "nnx_lab.engine", "nnx_lab.widgets", "nnx_lab.distributed"):
        assert banned not in mods, banned


def test_a_whole_log_replays_as_the_events_of_the_run(run_dir):
    started, steps, epoch, finished = _run()
    (run_dir / "metrics.jsonl").write_text(_lines(started, steps, epoch, finished))
    sink = Recorder()
    follower = LogFollower(run_dir, [sink])
    assert follower.read() == 7  # one event per step line
    assert sink.events() == [
        ("run_started", RUN),
        ("steps", (1,)),
        ("steps", (2,)),
        ("steps", (3,)),
        ("steps", (4,)),
        ("epoch", 1),
        ("finished", "finished", None),
    ]
    assert follower.finished
    assert follower.read() == 0  # nothing new
    assert sink.calls[-1] == ("read", 0)


def test_a_partial_last_line_waits_and_a_line_appended_later_is_delivered(run_dir):
    started, steps, epoch, finished = _run()
    path = run_dir / "metrics.jsonl"
    path.write_text(_lines(started, steps))
    sink = Recorder()
    follower = LogFollower(run_dir, [sink], poll_interval=0.02).start()
    try:
        assert _wait_for(lambda: ("steps", (4,)) in sink.events())
        line = _lines(epoch)
        with path.open("a") as fh:  # the writer is in the middle of a line
            fh.write(line[:15])
        time.sleep(0.2)
        assert ("epoch", 1) not in sink.events()
        with path.open("a") as fh:
            fh.write(line[15:])
        assert _wait_for(lambda: ("epoch", 1) in sink.events())
        assert follower.is_alive()
        with path.open("a") as fh:  # the run ends: the follower ends with it
            fh.write(_lines(finished))
        assert follower.join(timeout=10)
        assert not follower.is_alive()
        assert follower.ended == "finished"
        assert sink.events()[-2:] == [("finished", "finished", None), ("ended", "finished", "")]
    finally:
        follower.close()


def test_it_waits_for_the_log_and_close_stops_it(run_dir):
    sink = Recorder()
    follower = LogFollower(run_dir, [sink], poll_interval=0.02).start()
    assert _wait_for(lambda: ("read", 0) in sink.calls)  # no log yet: reads as empty
    started, *_ = _run()
    (run_dir / "metrics.jsonl").write_text(_lines(started))
    assert _wait_for(lambda: ("run_started", RUN) in sink.events())
    follower.close()
    assert not follower.is_alive()
    assert follower.join(timeout=0)
    assert sink.events()[-1] == ("ended", "closed", "")
    follower.close()  # again: nothing more
    assert [c for c in sink.calls if c[0] == "ended"] == [("ended", "closed", "")]


def test_finish_reads_the_rest_and_delivers_the_sources_last_event(run_dir):
    started, steps, _, _ = _run()
    path = run_dir / "metrics.jsonl"
    path.write_text(_lines(started))
    sink = Recorder()
    follower = LogFollower(run_dir, [sink], poll_interval=5).start()  # a slow poll
    assert _wait_for(lambda: ("run_started", RUN) in sink.events())
    path.write_text(_lines(started, steps))  # more, written before the writer ended
    failed = RunFinished(run_id=RUN, status="failed", epochs_completed=0, steps=0, error="boom")
    follower.finish(failed)
    assert not follower.is_alive()
    assert sink.events()[-3:] == [
        ("steps", (4,)),
        ("finished", "failed", "boom"),
        ("ended", "finished", ""),
    ]
    # a source with no last word, and a log without run_finished: "ended"
    other = Recorder()
    lone = LogFollower(run_dir, [other])
    (run_dir / "metrics.jsonl").write_text(_lines(started))
    lone.finish()
    assert other.events() == [("run_started", RUN), ("ended", "ended", "")]
    assert lone.join(timeout=0)


def test_a_quiet_log_whose_writer_is_gone_ends_the_follow(run_dir):
    import socket

    import yaml

    started, *_ = _run()
    (run_dir / "metrics.jsonl").write_text(_lines(started))
    dead = {"pid": 2**22 + 12345, "host": socket.gethostname(), "proc_start": 1}
    (run_dir / "metadata.yaml").write_text(
        yaml.safe_dump({"status": "running", "writer": dead, "heartbeat": 0.0})
    )
    sink = Recorder()
    follower = LogFollower(run_dir, [sink], poll_interval=0.02).start()
    assert follower.join(timeout=10)
    assert follower.ended == "interrupted"
    assert sink.events()[-1][:2] == ("ended", "interrupted")
    assert "without a word" in sink.events()[-1][2]


def test_a_replaced_log_is_read_again_from_its_start(run_dir):
    started, steps, epoch, _ = _run()
    path = run_dir / "metrics.jsonl"
    path.write_text(_lines(started, steps, epoch))
    sink = Recorder()
    follower = LogFollower(run_dir, [sink])
    follower.read()
    path.write_text(_lines(started))  # shorter: a new run of the same id
    assert follower.read() == 1
    assert sink.events()[-2:] == [("restarted",), ("run_started", RUN)]


def test_damaged_lines_are_skipped_and_a_sink_without_hooks_is_refused(run_dir):
    started, *_ = _run()
    (run_dir / "metrics.jsonl").write_text(
        "not json\n" + json.dumps({"event": "from_the_future"}) + "\n" + _lines(started)
    )
    sink = Recorder()
    follower = LogFollower(run_dir, [sink])
    assert follower.read() == 1
    assert follower.skipped == 1  # the unknown event; the line that is no JSON: the reader's
    assert sink.events() == [("run_started", RUN)]
    with pytest.raises(TypeError, match="implements no hook"):
        LogFollower(run_dir, [object()])
    with pytest.raises(ValueError, match="poll_interval"):
        LogFollower(run_dir, [sink], poll_interval=0)
    assert set(FOLLOW_ENDINGS) >= {"finished", "closed", "ended", "interrupted", "deleted"}
