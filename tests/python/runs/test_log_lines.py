"""Each line of a run's metrics.jsonl passes one strict shape: NaN where a diverging run
logs it (a loss, a metric), never in a counter, a learning rate or a time; a hostile
line is one LogLineError naming the file, the line and the field, caught alike as a
SchemaError and as a LogDamagedError; a log is read as a stream, so neither a huge log
nor a huge line costs more than a chunk.

Each test tries to break one promise (issue 20, sections 2 and 3)."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from nnx_lab.errors import FileError, LogDamagedError
from nnx_lab.runs import (
    CHUNK_BYTES,
    EpochEnded,
    JsonlReader,
    LogLineError,
    RunFinished,
    RunStarted,
    SchemaError,
    StepMetrics,
    event_from_json,
    event_from_line,
    iter_jsonl,
    parse_line,
    quick_event,
)

RUN = "6ea83cf0418c7ab533302cd855f47af2"
STARTED = {
    "event": "run_started",
    "run_id": RUN,
    "run_dir": "/runs/x",
    "n_epochs": 2,
    "start_epoch": 1,
    "start_step": 0,
    "steps_per_epoch": 8,
    "config": {"format": 1},
    "parent_run_id": None,
    "time": 1796145045.2,
}
STEP = {
    "event": "step",
    "step": 1,
    "epoch": 1,
    "batch": 0,
    "lr": 0.01,
    "samples": 32,
    "loss": 1.16,
    "error": 0.78,
    "accuracy": 0.22,
}
EPOCH = {
    "event": "epoch_ended",
    "epoch": 1,
    "step": 8,
    "lr": 0.01,
    "train": {"loss": 1.1, "samples": 256, "metrics": {"mse": 0.5}},
    "val": {"loss": 1.2, "error": 0.6},
    "signal": 0.6,
    "signal_source": "val_edp.error",
    "improved": True,
    "seconds": 2.5,
}
CHECKPOINT = {"event": "checkpoint_written", "type": "best", "epoch": 1, "step": 8, "path": "x"}
FINISHED = {
    "event": "run_finished",
    "run_id": RUN,
    "status": "finished",
    "epochs_completed": 2,
    "steps": 16,
    "error": None,
    "traceback": None,
    "stop_reason": None,
    "time": 1796145049.6,
}
GOOD = [STARTED, STEP, EPOCH, CHECKPOINT, FINISHED]


def _raw(obj) -> bytes:
    return json.dumps(obj).encode()


@pytest.mark.parametrize("obj", GOOD, ids=lambda o: o["event"])
def test_the_lines_the_engine_writes_replay_the_same_by_either_path(obj):
    raw = _raw(obj)
    fast, slow = quick_event(raw), event_from_json(parse_line(raw))
    assert fast == slow
    assert fast is not None


@pytest.mark.parametrize(
    "obj",
    [
        {**STEP, "loss": float("nan")},
        {**STEP, "loss": float("inf"), "accuracy": float("nan")},
        {**EPOCH, "train": {"loss": float("nan"), "samples": 256}},
        {**EPOCH, "val": {"loss": float("-inf")}, "signal": None},
        {**STEP, "metrics": {"mse": float("nan")}},
    ],
    ids=["nan-loss", "inf-loss", "nan-train", "inf-val", "nan-metric"],
)
def test_a_diverging_run_s_nan_is_data(obj):
    raw = json.dumps(obj).encode()  # written as NaN / Infinity, as the engine does
    assert quick_event(raw) is None  # JSON has no NaN: the slow path decides
    event = event_from_line(raw)
    assert isinstance(event, StepMetrics | EpochEnded)


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ({**STEP, "lr": float("nan")}, "lr"),
        ({**STEP, "step": "two"}, "step"),
        ({**STEP, "step": 1.5}, "step"),
        ({**STEP, "samples": -1}, "samples"),
        ({**STEP, "batch": True}, "batch"),
        ({k: v for k, v in STEP.items() if k != "loss"}, ""),
        ({**STARTED, "n_epochs": 1.5}, "n_epochs"),
        ({**STARTED, "time": 1e300}, "time"),
        ({**STARTED, "time": "yesterday"}, "time"),
        ({**STARTED, "run_id": "../../x"}, "run_id"),
        ({**EPOCH, "seconds": -1.0}, "seconds"),
        ({**EPOCH, "signal": float("inf")}, "signal"),
        ({**EPOCH, "train": "abc"}, "train"),
        ({**CHECKPOINT, "type": "middle"}, "type"),
        ({**FINISHED, "status": "exploded"}, "status"),
        ({**FINISHED, "epochs_completed": -2}, "epochs_completed"),
        ({"event": "banana"}, "event"),
        ({"event": ["step"]}, "event"),
    ],
)
def test_each_hostile_line_names_the_file_the_line_and_the_field(tmp_path, obj, field):
    raw = json.dumps(obj).encode()
    with pytest.raises(LogLineError) as info:
        event_from_line(raw, tmp_path / "metrics.jsonl", 7)
    err = info.value
    for family in (SchemaError, LogDamagedError, FileError, ValueError):
        assert isinstance(err, family)
    assert (err.field, err.line, err.path.name) == (field, 7, "metrics.jsonl")
    assert str(err).startswith(f"{tmp_path / 'metrics.jsonl'}, line 7: ")
    assert quick_event(raw) is None  # the fast path never lets a hostile line through


def test_the_unknown_kind_still_says_so():
    with pytest.raises(ValueError, match="unknown event kind 'banana'"):
        event_from_json({"event": "banana"})


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b'{"event": "step", "x": ' + b"[" * 100 + b"]" * 100 + b"}",
        b'{"event": "step", "step": 1' + b"0" * 5000 + b"}",
        b"\xff\xfe",
        b"not json",
        b"[1, 2]",
    ],
    ids=["deep-1e5", "deep-100", "5000-digits", "not-utf8", "not-json", "not-object"],
)
def test_hostile_bytes_are_one_line_error(raw):
    with pytest.raises(LogLineError):
        event_from_line(raw, "metrics.jsonl", 3)
    assert quick_event(raw) is None


def test_the_events_keep_their_types_and_defaults():
    started = event_from_line(_raw({k: v for k, v in STARTED.items() if k != "time"}))
    assert isinstance(started, RunStarted)
    assert started.time > 0  # the event's default
    finished = event_from_line(_raw(FINISHED))
    assert isinstance(finished, RunFinished)
    assert finished.time == FINISHED["time"]
    (record,) = event_from_line(_raw(STEP)).records
    assert (record.step, record.lr, record.precision, record.metrics) == (1, 0.01, None, None)


# -- reading a log as a stream -------------------------------------------------------------


def test_a_line_longer_than_the_cap_is_skipped_without_being_held(tmp_path):
    log = tmp_path / "metrics.jsonl"
    huge = b'{"event": "step", "pad": "' + b"x" * (40 << 20) + b'"}\n'
    log.write_bytes(_raw(STEP) + b"\n" + huge + _raw(FINISHED) + b"\n")
    reader = JsonlReader(log, strict=False)
    tracemalloc.start()
    try:
        lines = reader.read_numbered()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [n for n, _ in lines] == [1, 3]
    assert reader.bad_lines == 1
    assert peak < max(8 * CHUNK_BYTES, 4 << 20), peak / 2**20  # never the 40 MB line
    with pytest.raises(LogDamagedError, match=r"line 2: a line longer than") as info:
        JsonlReader(log).read()
    assert isinstance(info.value, SchemaError)


def test_an_overlong_line_being_written_is_skipped_when_its_end_comes(tmp_path):
    log = tmp_path / "metrics.jsonl"
    reader = JsonlReader(log, strict=False, max_line_bytes=1000)
    log.write_bytes(_raw(STEP) + b"\n" + b'{"pad": "' + b"x" * 5000)
    assert len(reader.read()) == 1
    with log.open("ab") as fh:
        fh.write(b"x" * 5000 + b'"}\n' + _raw(FINISHED) + b"\n")
    assert reader.read() == [json.loads(_raw(FINISHED))]
    assert (reader.bad_lines, reader.lines_read) == (1, 3)
    assert reader.offset == log.stat().st_size


def test_a_big_log_is_read_in_bounded_memory(tmp_path):
    log = tmp_path / "metrics.jsonl"
    line = _raw({**STEP, "extra": {"note": "x" * 4000}}) + b"\n"  # few lines, many bytes
    per = (4 << 20) // len(line)
    with log.open("wb") as fh:
        for _ in range(8):
            fh.write(line * per)  # 32 MB
    tracemalloc.start()
    try:
        count = sum(1 for _ in iter_jsonl(log))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == 8 * per
    assert peak < 4 * CHUNK_BYTES + (1 << 20), peak / 2**20  # a chunk or so, never 32 MB


def test_a_log_that_is_a_link_is_refused(tmp_path):
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(_raw(STEP) + b"\n")
    log = tmp_path / "metrics.jsonl"
    log.symlink_to(outside)
    for strict in (True, False):
        with pytest.raises(LogDamagedError, match="a link"):
            JsonlReader(log, strict=strict).read()
