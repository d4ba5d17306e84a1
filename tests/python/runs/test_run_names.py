"""A run's name in its records: checked as a name (one line, capped, no control or
direction character), accepted by metadata.yaml's strict shape and refused past it,
listed, renamed in place without touching anything else, and never lost to the
writer's own rewrites of metadata.yaml (its heartbeat) or lost by them (issue 21 §5)."""

from __future__ import annotations

import os
import threading

import pytest
import yaml

from nnx_lab.errors import ConfigError
from nnx_lab.runs import (
    RUN_NAME_MAX,
    RecordSchemaError,
    check_run_name,
    read_record,
    rename_run,
    run_rows,
    write_run_metadata,
)
from nnx_lab.runs import _naming as naming

ID = "a" * 32
BAD_NAMES = [
    "line\nbreak",
    "tab\there",
    "bell\x07",
    "right\u202eto left",
    "line\u2028separator",
    "x" * (RUN_NAME_MAX + 1),
]


def _run(tmp_path, meta):
    path = tmp_path / ID
    path.mkdir()
    (path / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    return path


def test_a_name_is_one_line_of_plain_text_within_the_cap():
    assert check_run_name("  high lr ") == "high lr"
    assert check_run_name(None) is None
    assert check_run_name("é · 学习率 ✓") == "é · 学习率 ✓"
    assert check_run_name("x" * RUN_NAME_MAX) == "x" * RUN_NAME_MAX
    for bad in [*BAD_NAMES, "", "   ", 42]:
        with pytest.raises(ConfigError) as err:
            check_run_name(bad, "NNTrainParams.name")
        assert err.value.field == "NNTrainParams.name"
        assert err.value.fix
    assert check_run_name("  ", clearing=True) is None  # the panel's "remove the name"


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_metadata_yaml_refuses_a_name_no_writer_gives(tmp_path, bad):
    path = _run(tmp_path, {"status": "finished", "name": bad})
    with pytest.raises(RecordSchemaError) as err:
        read_record(path / "metadata.yaml")
    assert err.value.field == "name"
    assert "one line" in err.value.reason
    assert run_rows(tmp_path)[0]["status"] == "damaged"


def test_the_listing_shows_the_name_and_the_best_metrics_direction(tmp_path):
    best = {"value": 0.91, "source": "val_edp.metrics.accuracy", "epoch": 2, "mode": "max"}
    _run(tmp_path, {"status": "finished", "name": "high lr", "best": best})
    (row,) = run_rows(tmp_path)
    assert (row["name"], row["best_source"], row["best_mode"]) == (
        "high lr",
        "val_edp.metrics.accuracy",
        "max",
    )


def test_a_rename_changes_the_name_and_nothing_else(tmp_path):
    meta = {
        "status": "finished",
        "started_at": 1796145033.6123457,
        "heartbeat": 1796145049.6,
        "best": {"value": 0.1, "source": "val_edp.error", "epoch": 3},
        "writer": {"pid": 12, "host": "vm"},
    }
    path = _run(tmp_path, meta)
    (path / "metrics.jsonl").write_text('{"event": "step"}\n')
    others = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in path.iterdir()}
    del others["metadata.yaml"]
    record = rename_run(path, "  second try ")
    assert record["name"] == "second try"
    on_disk = read_record(path / "metadata.yaml")
    assert on_disk == {**meta, "name": "second try"}  # every other value as it was
    assert {p.name for p in path.iterdir()} == {*others, "metadata.yaml"}  # no lock file left
    for name, (data, mtime) in others.items():
        assert ((path / name).read_bytes(), (path / name).stat().st_mtime_ns) == (data, mtime)
    rename_run(path, "")  # an empty name removes it
    assert "name" not in read_record(path / "metadata.yaml")


@pytest.mark.parametrize("bad", [*BAD_NAMES, 42, ["a"]])
def test_a_bad_name_is_refused_and_nothing_is_written(tmp_path, bad):
    path = _run(tmp_path, {"status": "finished", "name": "kept"})
    before = (path / "metadata.yaml").read_bytes()
    with pytest.raises(ConfigError):
        rename_run(path, bad)
    assert (path / "metadata.yaml").read_bytes() == before


def test_a_damaged_or_linked_record_is_not_renamed(tmp_path):
    path = _run(tmp_path, {"status": "finished", "n_epochs": "many", "best": "x"})
    before = (path / "metadata.yaml").read_bytes()
    with pytest.raises(RecordSchemaError):
        rename_run(path, "new")
    assert (path / "metadata.yaml").read_bytes() == before
    target = tmp_path / "elsewhere.yaml"
    target.write_text("status: finished\n")
    (path / "metadata.yaml").unlink()
    (path / "metadata.yaml").symlink_to(target)
    with pytest.raises(RecordSchemaError, match="link"):
        rename_run(path, "new")
    assert target.read_text() == "status: finished\n"


def test_the_writer_keeps_a_name_given_since_its_last_write(tmp_path):
    # the writer's own copy of the record, as RunRecorder holds it
    meta = {"status": "running", "name": "first", "heartbeat": 1000.0}
    path = _run(tmp_path, meta)
    rename_run(path, "renamed")
    meta["heartbeat"] = 1010.0
    write_run_metadata(path, meta)  # the next heartbeat
    on_disk = read_record(path / "metadata.yaml")
    assert (on_disk["name"], on_disk["heartbeat"]) == ("renamed", 1010.0)
    assert meta["name"] == "renamed"  # the writer's record says the same
    rename_run(path, "")
    write_run_metadata(path, meta)
    assert "name" not in read_record(path / "metadata.yaml")
    assert "name" not in meta


def test_the_writer_reads_its_own_last_write_once_and_sees_every_change(tmp_path, monkeypatch):
    meta = {"status": "running", "name": "first", "heartbeat": 1000.0}
    path = _run(tmp_path, meta)
    reads = []
    real = naming.parse_record
    monkeypatch.setattr(naming, "parse_record", lambda raw, p: reads.append(p) or real(raw, p))
    for beat in range(3):  # heartbeats over a file only this writer wrote: read once
        meta["heartbeat"] = 1000.0 + beat
        write_run_metadata(path, meta)
    assert len(reads) == 1
    rename_run(path, "renamed")  # a rename (its own read) replaces the bytes: read again
    write_run_metadata(path, meta)
    assert (len(reads), meta["name"]) == (3, "renamed")
    # an edit in place at once (the same inode, size and, likely, times), kept
    record = path / "metadata.yaml"
    text = record.read_text().replace("name: renamed", "name: edited!")
    with open(record, "r+") as fh:
        fh.write(text)
        fh.truncate()
    write_run_metadata(path, meta)
    assert (len(reads), meta["name"], read_record(record)["name"]) == (4, "edited!", "edited!")


def test_a_heartbeat_during_a_rename_waits_and_both_are_kept(tmp_path, monkeypatch):
    """The worst interleaving, forced: the writer's heartbeat arrives between the
    rename's read and its write. Without one lock, one of the two changes is lost."""
    meta = {"status": "running", "name": "old", "heartbeat": 1000.0}
    path = _run(tmp_path, meta)
    real = naming.atomic_write_yaml
    writers: list[threading.Thread] = []

    def write(target, data):
        if data.get("name") == "new" and not writers:  # the rename, between read and write
            meta["heartbeat"] = 2000.0
            beat = threading.Thread(target=write_run_metadata, args=(path, meta))
            beat.start()
            beat.join(0.3)  # under the lock it waits for the rename; unlocked, it writes now
            writers.append(beat)
        real(target, data)

    monkeypatch.setattr(naming, "atomic_write_yaml", write)
    rename_run(path, "new")
    writers[0].join(5)
    on_disk = read_record(path / "metadata.yaml")
    assert (on_disk["name"], on_disk["heartbeat"]) == ("new", 2000.0)


def test_racing_renames_and_heartbeats_lose_nothing_and_never_tear(tmp_path):
    meta = {"status": "running", "heartbeat": 0.0}
    path = _run(tmp_path, meta)
    errors: list[BaseException] = []
    done = threading.Event()

    def heartbeats():
        for i in range(1, 151):
            meta["heartbeat"] = float(i)
            write_run_metadata(path, meta)

    def renames():
        for j in range(150):
            rename_run(path, f"name {j}")

    def reader():
        while not done.is_set():
            try:
                read_record(path / "metadata.yaml")
            except BaseException as exc:  # a torn or half-written record
                errors.append(exc)
                return

    threads = [threading.Thread(target=f) for f in (heartbeats, renames)]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    done.set()
    watcher.join(10)
    assert errors == []
    on_disk = read_record(path / "metadata.yaml")
    assert (on_disk["name"], on_disk["heartbeat"]) == ("name 149", 150.0)
    assert not any(p.name.endswith(".tmp") for p in path.iterdir())
    assert os.listdir(path) == ["metadata.yaml"]
