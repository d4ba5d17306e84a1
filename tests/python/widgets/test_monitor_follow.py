"""TrainingMonitor.from_run: a finished run's log, and a log still being written."""

from __future__ import annotations

import json
import time

import pytest

from nnx_lab.engine.events import RunFinished, StepMetrics
from nnx_lab.runs import JsonlReader, LogDamagedError
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import FakeFrontend, feed, scripted_run, write_jsonl

R1 = "3fa2" + "0" * 28


def _wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / "runs" / R1
    d.mkdir(parents=True)
    return d


def test_from_run_renders_a_finished_run_like_the_live_monitor(run_dir):
    events = scripted_run(run_id=R1, n_epochs=3, steps_per_epoch=20, log_every=7)
    write_jsonl(run_dir / "metrics.jsonl", events)
    live = TrainingMonitor()
    feed(live, events)
    replayed = TrainingMonitor.from_run(R1, runs_root=run_dir.parent)
    try:
        for name in ("run_id", "status", "epoch", "n_epochs", "step", "total_steps", "samples"):
            assert getattr(replayed, name) == getattr(live, name), name
        assert replayed.elapsed == pytest.approx(live.elapsed)
        assert replayed.series() == live.series()
        assert replayed.epoch_rows == live.epoch_rows
        assert replayed._follower is None  # finished: nothing to follow
        fe = FakeFrontend(replayed)
        fe.hello()
        assert fe.rows_sent("steps", ("snapshot",)) == 60
        assert fe.rows_sent("epochs", ("snapshot",)) == 3
    finally:
        live.close()
        replayed.close()


def test_from_run_sends_nothing_while_reading_the_log(run_dir, monkeypatch):
    write_jsonl(run_dir / "metrics.jsonl", scripted_run(run_id=R1, steps_per_epoch=500))
    sent = []
    monkeypatch.setattr(TrainingMonitor, "send", lambda self, c, buffers=None: sent.append(c))
    m = TrainingMonitor.from_run(R1, runs_root=run_dir.parent)
    # one update with everything, once the log has been read
    assert [c["kind"] for c in sent] == ["update"]
    assert [(op["series"], op["at"], op["count"]) for op in sent[0]["ops"]] == [
        ("steps", 0, 1500),
        ("epochs", 0, 3),
    ]
    m.close()


def test_follow_a_run_being_written(run_dir):
    path = run_dir / "metrics.jsonl"
    events = scripted_run(run_id=R1, n_epochs=2, steps_per_epoch=30, log_every=5)
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    body = events[:-1]
    write_jsonl(path, body[:10])
    m = TrainingMonitor.from_run(R1, runs_root=run_dir.parent, poll_interval=0.05)
    fe = FakeFrontend(m)
    fe.hello()  # as a view does when it renders
    try:
        assert m.status == "running"
        first = m.loss_points
        assert first > 0
        assert m._follower is not None
        assert m._follower.is_alive()
        assert m.can_stop is False
        with pytest.raises(RuntimeError, match="another process"):
            m.stop()

        write_jsonl(path, body[10:])
        assert _wait_for(lambda: m.loss_points == 60)
        assert _wait_for(lambda: fe.length_after("steps") == 60)

        # the writer is in the middle of the last line: nothing of it is applied yet
        line = json.dumps(finished.to_json()) + "\n"
        with path.open("a") as fh:
            fh.write(line[:20])
        time.sleep(0.3)
        assert m.status == "running"
        with path.open("a") as fh:
            fh.write(line[20:])
        m.wait(timeout=10)  # the follower ends at run_finished
        assert m.status == "finished"
        assert not m._follower.is_alive()
        assert fe.state["status"] == "finished"
        assert m.series()["step"] == list(range(1, 61))
    finally:
        m.close()


def test_close_stops_following(run_dir):
    write_jsonl(run_dir / "metrics.jsonl", scripted_run(run_id=R1)[:5])
    m = TrainingMonitor.from_run(R1, runs_root=run_dir.parent, poll_interval=0.05)
    follower = m._follower
    assert follower.is_alive()
    m.close()
    assert not follower.is_alive()


def test_follow_waits_for_the_log_to_appear(run_dir):
    m = TrainingMonitor.from_run(R1, runs_root=run_dir.parent, poll_interval=0.05)
    try:
        assert m.status == "created"
        assert m.run_id == R1
        write_jsonl(run_dir / "metrics.jsonl", scripted_run(run_id=R1))
        m.wait(timeout=10)
        assert m.status == "finished"
        assert m.loss_points == 30
    finally:
        m.close()


def test_without_follow_an_unfinished_log_takes_the_metadata_status(run_dir):
    write_jsonl(run_dir / "metrics.jsonl", scripted_run(run_id=R1)[:6])
    (run_dir / "metadata.yaml").write_text("status: failed\nseed: 0\n")
    m = TrainingMonitor.from_run(R1, runs_root=run_dir.parent, follow=False)
    assert m.status == "failed"
    assert m._follower is None
    m.close()


def test_missing_run_says_what_to_check(tmp_path, run_dir):
    with pytest.raises(
        FileNotFoundError, match=rf"no run 'abc' under .*runs there: {R1}\. Check the id"
    ):
        TrainingMonitor.from_run("abc", runs_root=run_dir.parent)
    with pytest.raises(FileNotFoundError, match=r"no runs folder .*nowhere.*NNX_RUNS_ROOT"):
        TrainingMonitor.from_run("abc", runs_root=tmp_path / "nowhere")


def test_a_prefix_finds_the_run_and_an_ambiguous_one_lists_the_candidates(run_dir):
    write_jsonl(run_dir / "metrics.jsonl", scripted_run(run_id=R1))
    other = "3fb9" + "1" * 28
    (run_dir.parent / other).mkdir()
    m = TrainingMonitor.from_run("3fa", runs_root=run_dir.parent)
    assert m.run_id == R1
    assert m.status == "finished"
    m.close()
    with pytest.raises(ValueError, match=rf"prefix '3f' is ambiguous.*2 runs \({R1}, {other}\)"):
        TrainingMonitor.from_run("3f", runs_root=run_dir.parent)


@pytest.mark.parametrize("bad", ["", "..", "../x", "/abs/dir", "ABC", "r1", "0" * 33, 12])
def test_something_that_is_no_run_id_is_refused_before_reading(bad, run_dir):
    with pytest.raises(ValueError, match="is not a run id"):
        TrainingMonitor.from_run(bad, runs_root=run_dir.parent)


def test_a_run_linked_from_outside_the_root_is_refused(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    write_jsonl(outside / "metrics.jsonl", scripted_run(run_id=R1))
    (root / R1).symlink_to(outside, target_is_directory=True)
    with pytest.raises(ValueError, match="leads outside the runs root"):
        TrainingMonitor.from_run(R1, runs_root=root)


def test_without_runs_root_the_runs_root_of_training_is_used(monkeypatch, tmp_path):
    root = tmp_path / "the-root"
    (root / R1).mkdir(parents=True)
    write_jsonl(root / R1 / "metrics.jsonl", scripted_run(run_id=R1, steps_per_epoch=4))
    monkeypatch.chdir(tmp_path)  # no ./runs here
    monkeypatch.setenv("NNX_RUNS_ROOT", str(root))
    m = TrainingMonitor.from_run(R1)
    assert m.loss_points == 12
    m.close()
    monkeypatch.delenv("NNX_RUNS_ROOT")
    with pytest.raises(FileNotFoundError, match=r"no runs folder .*/runs "):
        TrainingMonitor.from_run(R1)


def test_bad_lines_are_skipped(run_dir):
    path = run_dir / "metrics.jsonl"
    events = scripted_run(run_id=R1, n_epochs=1, steps_per_epoch=5)
    write_jsonl(path, events[:3])
    with path.open("a") as fh:
        fh.write("this is not json\n")
        fh.write(json.dumps({"event": "from_the_future", "x": 1}) + "\n")
    write_jsonl(path, events[3:])
    m = TrainingMonitor.from_run(R1, runs_root=run_dir.parent)
    assert m.status == "finished"
    assert m.loss_points == 5
    m.close()


def test_the_log_reader_keeps_partial_lines_and_restarts_after_truncation(tmp_path):
    """The one JSONL reader (nnx_lab.runs) that followers and NNRun.load share."""
    path = tmp_path / "m.jsonl"
    tail = JsonlReader(path, strict=False)
    assert tail.read() == []  # no file yet
    path.write_text('{"a": 1}\n{"b"')
    assert tail.read() == [{"a": 1}]
    with path.open("a") as fh:
        fh.write(": 2}\nnot json\n")
    assert tail.read() == [{"b": 2}]  # the damaged line is skipped and counted
    assert tail.bad_lines == 1
    assert tail.read() == []
    path.write_text('{"c": 3}\n')  # rewritten, shorter
    assert tail.read() == [{"c": 3}]
    assert tail.restarted
    strict = JsonlReader(path)
    path.write_text('{"c": 3}\n[1]\n')
    with pytest.raises(LogDamagedError, match="line 2"):
        strict.read()


def _metadata(run_dir, **fields):
    import yaml

    (run_dir / "metadata.yaml").write_text(yaml.safe_dump(fields))


def test_a_follower_ends_when_the_writer_is_gone(run_dir):
    events = scripted_run(run_id=R1, n_epochs=3, steps_per_epoch=5)
    write_jsonl(run_dir / "metrics.jsonl", events[:8])  # no run_finished: "still running"
    dead = {"pid": 2**22 + 12345, "host": __import__("socket").gethostname(), "proc_start": 1}
    _metadata(run_dir, status="running", writer=dead, heartbeat=0.0)
    m = TrainingMonitor.from_run(R1, runs_root=run_dir.parent, poll_interval=0.02)
    try:
        assert _wait_for(lambda: m.status == "interrupted", timeout=10)
        assert "without a word" in m.stop_reason
        assert m._follower.join(timeout=5)
        assert not m._follower.is_alive()
    finally:
        m.close()
    replay = TrainingMonitor.from_run(R1, runs_root=run_dir.parent, follow=False)
    assert replay.status == "interrupted"
    replay.close()


def test_a_follower_ends_when_the_run_directory_is_deleted(run_dir):
    import shutil

    events = scripted_run(run_id=R1, n_epochs=3, steps_per_epoch=5)
    write_jsonl(run_dir / "metrics.jsonl", events[:8])
    _metadata(run_dir, status="running", heartbeat=__import__("time").time(), writer=None)
    m = TrainingMonitor.from_run(R1, runs_root=run_dir.parent, poll_interval=0.02)
    try:
        assert m.status == "running"
        shutil.rmtree(run_dir)
        assert _wait_for(lambda: "was deleted while it was followed" in m.error, timeout=10)
        assert m._follower.join(timeout=5)
        assert not m._follower.is_alive()
    finally:
        m.close()


def test_step_lines_replay_as_one_record_batches(run_dir):
    events = scripted_run(run_id=R1, n_epochs=1, steps_per_epoch=4, log_every=4)
    assert any(isinstance(e, StepMetrics) and len(e.records) == 4 for e in events)
    write_jsonl(run_dir / "metrics.jsonl", events)
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert sum(json.loads(x)["event"] == "step" for x in lines) == 4
    m = TrainingMonitor.from_run(R1, runs_root=run_dir.parent)
    assert m.series()["step"] == [1, 2, 3, 4]
    m.close()


def test_the_monitor_refuses_a_run_named_link_out_of_its_root(tmp_path):
    """As list_runs, the server and NNRun.load refuse it: the same confinement."""
    root = tmp_path / "runs"
    root.mkdir()
    secret = tmp_path / "elsewhere" / R1
    secret.mkdir(parents=True)
    write_jsonl(secret / "metrics.jsonl", scripted_run(run_id=R1, n_epochs=1))
    (root / R1).symlink_to(secret)
    with pytest.raises(ValueError, match="leads outside the runs root"):
        TrainingMonitor.from_run(R1, runs_root=root)
    monitor = TrainingMonitor()
    with pytest.raises(ValueError, match="leads outside the runs root"):
        monitor.follow_run(root / R1)
    assert monitor.steps_seen == 0
    monitor.follow_run(secret, follow=False).close()  # the folder itself, where it is
