"""A run's own records (run.yaml, metadata.yaml) pass one strict shape: every hostile
value is one error naming the file, the field and the value, caught alike as a
SchemaError and as the RunRecordError readers have always caught; YAML aliases and
oversized records are refused before anything is built; list_runs shows one damaged row
per bad run, and never follows a run-named link out of the root.

Each test tries to break one promise (issue 20, sections 2 and 3)."""

from __future__ import annotations

import os
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
import yaml

from nnx_lab.errors import FileError, NNxError, RunRecordError
from nnx_lab.runs import (
    LogFollower,
    RecordSchemaError,
    SchemaError,
    list_runs,
    parse_record,
    read_record,
    run_rows,
)

GOOD_META = {
    "nnx_lab": "0.1.0",
    "torch": "2.13.0+cpu",
    "numpy": "2.4.6",
    "safetensors": "0.8.0",
    "python": "3.11.7",
    "platform": "Linux",
    "device": "cpu",
    "seed": 42,
    "status": "finished",
    "started_at": 1796145033.6,
    "heartbeat": 1796145049.6,
    "writer": {"pid": 4521, "host": "vm", "boot_id": "882c01ca", "proc_start": 672516},
    "precision": {
        "requested": "fp32",
        "effective": "fp32",
        "fallback_reason": None,
        "device": "cpu",
        "tf32": {"applies": False},
        "covers": ["train", "evaluate"],
        "not_covered": [],
    },
    "parent_run_id": "6ea83cf0418c7ab533302cd855f47af2",
    "resume_status": {
        "from_run_id": "6ea83cf0418c7ab533302cd855f47af2",
        "checkpoint": "last",
        "mode": "stateful",
        "restored": ["weights"],
        "from_epoch": 2,
        "from_step": 16,
        "epoch_complete": True,
        "n_epochs": 1,
        "planned_epochs": 3,
    },
    "planned_epochs": 3,
    "epochs_completed": 3,
    "steps": 24,
    "best": {"value": 0.6875, "source": "val_edp.error", "epoch": 1},
    "error": None,
    "stop_reason": None,
    "finished_at": 1796145050.2,
}
GOOD_CONFIG = {
    "format": 1,
    "net": {"input_dim": 8, "output_dim": 3, "hidden_dims": [32, 16]},
    "model": {"net": "feed_fwd", "device": "cpu"},
    "train": {
        "n_epochs": 2,
        "seed": 42,
        "resume": {
            "from_run_id": "6ea83cf0418c7ab533302cd855f47af2",
            "checkpoint": "last",
            "mode": "stateful",
            "epochs": "additional",
        },
    },
    "data": None,
    "initial_weights": None,
}
# 8 levels of 9 aliases: 43 million values once expanded, from 370 bytes
BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefg", "bcdefgh", strict=True)
    )
    + "status: failed\nerror: *h\ntorch: *h\n"
)


def _write(path: Path, value) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(value, bytes):
        path.write_bytes(value)
    else:
        path.write_text(value if isinstance(value, str) else yaml.safe_dump(value))
    return path


def _refused(path: Path) -> RecordSchemaError:
    with pytest.raises(RecordSchemaError) as info:
        read_record(path)
    err = info.value
    for family in (SchemaError, RunRecordError, FileError, NNxError, ValueError):
        assert isinstance(err, family), family
    assert err.path == path
    assert str(err).startswith(f"{path}: ")
    assert err.fix
    return err


def test_the_records_the_engine_writes_pass_and_read_as_plain_mappings(tmp_path):
    meta = read_record(_write(tmp_path / "metadata.yaml", GOOD_META))
    assert meta == GOOD_META
    config = read_record(_write(tmp_path / "run.yaml", GOOD_CONFIG))
    assert config == GOOD_CONFIG
    # a record of an older version (fewer fields) and one of a newer (more) both pass
    assert read_record(_write(tmp_path / "metadata.yaml", "status: finished\n")) == {
        "status": "finished"
    }
    newer = {**GOOD_META, "a_field_of_tomorrow": {"x": [1, 2]}}
    assert read_record(_write(tmp_path / "metadata.yaml", newer)) == newer
    assert read_record(_write(tmp_path / "metadata.yaml", "")) == {}


@pytest.mark.parametrize(
    ("change", "field", "value"),
    [
        ({"started_at": "yesterday"}, "started_at", "yesterday"),
        ({"started_at": 1e300}, "started_at", 1e300),
        ({"finished_at": -5.0}, "finished_at", -5.0),
        ({"heartbeat": float("nan")}, "heartbeat", None),
        ({"planned_epochs": 1.5}, "planned_epochs", 1.5),
        ({"steps": -3}, "steps", -3),
        ({"epochs_completed": True}, "epochs_completed", True),
        ({"status": "exploded"}, "status", "exploded"),
        ({"status": {"nested": "odd"}}, "status", {"nested": "odd"}),
        ({"writer": {"pid": "1234"}}, "writer.pid", "1234"),
        ({"writer": "me"}, "writer", "me"),
        ({"best": {"value": float("inf")}}, "best.value", None),
        ({"best": "not a mapping"}, "best", "not a mapping"),
        ({"parent_run_id": "../../elsewhere"}, "parent_run_id", "../../elsewhere"),
        ({"precision": {"requested": "fp32"}}, "precision", None),
        ({"resume_status": {"from_run_id": 5}}, "resume_status.from_run_id", 5),
        ({"error": ["not", "text"]}, "error", ["not", "text"]),
        ({"seed": "42"}, "seed", "42"),
    ],
)
def test_each_hostile_metadata_value_names_the_file_the_field_and_the_value(
    tmp_path, change, field, value
):
    path = _write(tmp_path / "run" / "metadata.yaml", {**GOOD_META, **change})
    err = _refused(path)
    assert err.field == field
    if value is not None:
        assert err.value == value
        assert repr(value)[:20] in str(err)
    assert f"metadata.yaml: {field}: " in str(err)


@pytest.mark.parametrize(
    ("train", "field"),
    [
        ({"n_epochs": 1.5, "seed": 1}, "train.n_epochs"),
        ({"n_epochs": 0, "seed": 1}, "train.n_epochs"),
        ({"n_epochs": "3", "seed": 1}, "train.n_epochs"),
        ({"n_epochs": 3, "seed": 1.0}, "train.seed"),
        ({"n_epochs": 3, "seed": 1, "resume": {"from_run_id": "x"}}, "train.resume.from_run_id"),
        ("abc", "train"),
    ],
)
def test_each_hostile_run_yaml_value_is_refused_with_its_field(tmp_path, train, field):
    err = _refused(_write(tmp_path / "run.yaml", {**GOOD_CONFIG, "train": train}))
    assert err.field == field


def test_a_run_yaml_without_its_sections_or_not_a_mapping_is_refused(tmp_path):
    assert "net" in str(_refused(_write(tmp_path / "run.yaml", {"format": 1})))
    err = _refused(_write(tmp_path / "run.yaml", "- a list\n- not a mapping\n"))
    assert "not a mapping" in str(err)


@pytest.mark.parametrize(
    "text",
    [
        "status: [unclosed\n",
        b"status: \xff\xfe\n",
        "status: finished\nsteps: " + "9" * 5000 + "\n",
        "a: " + "[" * 200 + "]" * 200 + "\n",
        "a: !!python/object/apply:os.system ['echo pwned']\n",
        "a: &x 1\nb: *x\n",
    ],
    ids=["not-yaml", "not-utf8", "5000-digits", "deep", "python-tag", "one-alias"],
)
def test_hostile_yaml_is_one_record_error(tmp_path, text):
    _refused(_write(tmp_path / "metadata.yaml", text))


def test_a_yaml_bomb_is_refused_at_once_without_being_built(tmp_path):
    path = _write(tmp_path / "metadata.yaml", BOMB)
    assert len(BOMB.encode()) < 400
    tracemalloc.start()
    start = time.perf_counter()
    try:
        err = _refused(path)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "anchors or aliases" in str(err)
    assert seconds < 0.5, seconds  # before: seconds of CPU and 270 MB in list_runs
    assert peak < 2 << 20, peak


def test_a_record_over_the_size_cap_is_refused_unread(tmp_path):
    path = _write(tmp_path / "metadata.yaml", "status: finished\n" + "#" * (2 << 20))
    err = _refused(path)
    assert "NNX_MAX_RECORD_BYTES" in err.fix
    with path.open("r+b") as fh:  # a sparse gigabyte: refused from its size alone
        fh.truncate(1 << 30)
    start = time.perf_counter()
    _refused(path)
    assert time.perf_counter() - start < 0.5


def test_a_record_that_is_a_link_or_a_pipe_is_refused_without_blocking(tmp_path):
    outside = _write(tmp_path / "outside" / "secret.yaml", "status: finished\n")
    link = tmp_path / "run" / "metadata.yaml"
    link.parent.mkdir()
    link.symlink_to(outside)
    assert "a link" in str(_refused(link))
    pipe = tmp_path / "pipe" / "metadata.yaml"
    pipe.parent.mkdir()
    os.mkfifo(pipe)
    done = []
    reader = threading.Thread(target=lambda: done.append(_refused(pipe)), daemon=True)
    reader.start()
    reader.join(5)
    assert done, "the reader blocked on the pipe"
    assert "not a plain file" in str(done[0])


def test_parse_record_checks_bytes_a_reader_fetched_itself(tmp_path):
    assert parse_record(b"status: running\n", tmp_path / "metadata.yaml") == {"status": "running"}
    with pytest.raises(RunRecordError, match="started_at"):
        parse_record(b"started_at: soon\n", tmp_path / "metadata.yaml")


# -- list_runs: one bad run is one row ---------------------------------------------------


def _run(root: Path, run_id: str, meta) -> Path:
    folder = root / run_id
    folder.mkdir(parents=True)
    if meta is not None:
        _write(folder / "metadata.yaml", meta)
    return folder


def test_one_damaged_run_is_one_damaged_row_and_the_root_still_lists(tmp_path):
    root = tmp_path / "runs"
    good = "0" * 32
    _run(root, good, {**GOOD_META, "started_at": 1796000000.0, "finished_at": 1796000100.0})
    bad = {
        "1" * 32: {"status": "finished", "started_at": "yesterday"},
        "2" * 32: "status: finished\nstarted_at: 1.0e+300\n",
        "3" * 32: {"status": "finished", "planned_epochs": 1.5},
        "4" * 32: BOMB,
        "5" * 32: "status: [unclosed\n",
        "6" * 32: None,
        "7" * 32: {"status": "finished", "best": {"value": float("nan")}},
    }
    for run_id, meta in bad.items():
        _run(root, run_id, meta)
    start = time.perf_counter()
    frame = list_runs(root)
    assert time.perf_counter() - start < 5  # the bomb costs nothing (pandas' import aside)
    rows = frame.set_index("run_id")
    assert sorted(rows.index) == sorted([good, *bad])
    assert rows.loc[good, "status"] == "finished"
    assert rows.loc[good, "duration_s"] == pytest.approx(100.0)
    for run_id in bad:
        assert rows.loc[run_id, "status"] == "damaged", run_id
    errors = rows["error"]
    unix = "must be a Unix time (seconds since 1970, before 2200)"
    assert errors["1" * 32] == f"metadata.yaml: started_at: {unix} (got 'yesterday')"
    assert errors["2" * 32] == f"metadata.yaml: started_at: {unix} (got 1e+300)"
    assert errors["3" * 32] == "metadata.yaml: planned_epochs: must be a whole number (got 1.5)"
    assert "anchors or aliases" in errors["4" * 32]
    assert "not valid YAML" in errors["5" * 32]
    assert errors["6" * 32] == "no metadata.yaml"
    assert "best.value" in errors["7" * 32]


def test_list_runs_never_follows_a_run_named_link_out_of_the_root(tmp_path):
    root = tmp_path / "runs"
    _run(root, "0" * 32, {"status": "finished"})
    secret = _run(tmp_path / "elsewhere", "e" * 32, {"status": "finished", "error": "SECRET"})
    (root / ("e" * 32)).symlink_to(secret)
    rows = {r["run_id"]: r for r in run_rows(root)}
    assert rows["e" * 32]["status"] == "damaged"
    assert "leads out of its runs folder" in rows["e" * 32]["error"]
    assert "SECRET" not in repr(rows)
    assert rows["0" * 32]["status"] == "finished"


def test_the_follower_refuses_a_run_named_link_out_of_its_root(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    secret = _run(tmp_path / "elsewhere", "e" * 32, {"status": "finished"})
    (root / ("e" * 32)).symlink_to(secret)

    class Sink:
        def on_run_started(self, event):
            raise AssertionError("nothing is read from a link out of the root")

    with pytest.raises(ValueError, match="leads outside the runs root"):
        LogFollower(root / ("e" * 32), [Sink()])
    LogFollower(secret, [Sink()])  # the folder itself, named where it is: read as asked
