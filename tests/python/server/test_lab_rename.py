"""The runs panel's rename (``PUT nnx-lab/api/runs/<folder>/<id>/name``) in a real Jupyter
server: it needs the token and the "write" right, stays inside its runs folder, refuses
bad names and damaged records with a message and writes nothing then, and changes only
the name of metadata.yaml, also while the run trains (issue 21 §5)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import lab_factories
import pytest
import yaml
from jupyter_server.auth import Authorizer
from lab_factories import fake_run as _fake_run
from lab_factories import runs_key as _key
from lab_factories import trained_run as _train
from pytest_jupyter.jupyter_server import *  # noqa: F403 - the server fixtures, for this module only
from traitlets.config import Config

from nnx_lab.runs import RUN_NAME_MAX, read_record, writer_identity
from nnx_lab.server import AUTH_RESOURCE

# the server fixtures every module of these tests shares (an import would read as unused)
api, jp_server_config = lab_factories.api, lab_factories.jp_server_config
no_env_root = lab_factories.no_env_root

HERE = Path(__file__).resolve().parents[1]  # tests/python
ID_A = "a" * 32
ID_B = "b" * 32


def _rename(api, key, run_id, body, **kw):
    text = body if isinstance(body, str) else json.dumps(body)
    return api(f"runs/{key}/{run_id}/name", method="PUT", body=text, **kw)


def _row(api, run_id):
    return next(r for r in api("runs")[1]["runs"] if r["run_id"] == run_id)


def test_a_run_is_renamed_and_only_its_name_changes(api, jp_root_dir):
    run = _train(jp_root_dir / "runs", n_epochs=1, name="first")
    key = _key(api)
    assert _row(api, run.id)["name"] == "first"
    files = {
        p.relative_to(run.run_dir): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in run.run_dir.rglob("*")
        if p.is_file() and p.name != "metadata.yaml"
    }
    before = read_record(run.run_dir / "metadata.yaml")
    code, reply = _rename(api, key, run.id, {"name": "  high lr  "})
    assert (code, reply["name"], reply["run_id"]) == (200, "high lr", run.id)
    assert _row(api, run.id)["name"] == "high lr"
    assert read_record(run.run_dir / "metadata.yaml") == {**before, "name": "high lr"}
    after = {
        p.relative_to(run.run_dir): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in run.run_dir.rglob("*")
        if p.is_file() and p.name != "metadata.yaml"
    }
    assert after == files  # nothing else in the run was touched, nothing was added
    assert api(f"runs/{key}/{run.id}")[1]["metadata"]["name"] == "high lr"
    code, reply = _rename(api, key, run.id, {"name": ""})  # an empty name removes it
    assert (code, reply["name"]) == (200, None)
    assert _row(api, run.id)["name"] is None


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"name": "two\nlines"}, "one line"),
        ({"name": "x" * (RUN_NAME_MAX + 1)}, f"at most {RUN_NAME_MAX} characters"),
        ({"name": "a\u202eb"}, "direction"),
        ({"name": 42}, "as text"),
        ({"title": "x"}, '{"name": "..."}'),
        ("not json", '{"name": "..."}'),
        ("", '{"name": "..."}'),
    ],
)
def test_a_bad_name_is_refused_with_a_message_and_nothing_written(api, jp_root_dir, body, words):
    path = _fake_run(jp_root_dir / "runs", ID_A, {"status": "finished", "name": "kept"})
    before = (path / "metadata.yaml").read_bytes()
    code, reply = _rename(api, _key(api), ID_A, body)
    assert code == 400
    assert words in reply["message"]
    assert (path / "metadata.yaml").read_bytes() == before


def test_a_damaged_or_missing_record_is_not_renamed(api, jp_root_dir, tmp_path):
    runs = jp_root_dir / "runs"
    damaged = _fake_run(runs, ID_A, {"status": "finished", "steps": -3})
    before = (damaged / "metadata.yaml").read_bytes()
    key = _key(api)
    code, reply = _rename(api, key, ID_A, {"name": "x"})
    assert code == 409
    assert "steps" in reply["message"]
    assert "not renamed" in reply["message"]
    assert (damaged / "metadata.yaml").read_bytes() == before
    _fake_run(runs, ID_B, None)
    code, reply = _rename(api, key, ID_B, {"name": "x"})
    assert code == 409
    assert "no metadata.yaml" in reply["message"]
    assert not (runs / ID_B / "metadata.yaml").exists()
    # a record that is a link out: refused, its target untouched
    c = "c" * 32
    target = tmp_path / "outside.yaml"
    target.write_text("status: finished\n")
    (runs / c).mkdir()
    (runs / c / "metadata.yaml").symlink_to(target)
    code, reply = _rename(api, key, c, {"name": "x"})
    assert code == 409
    assert "link" in reply["message"]
    assert target.read_text() == "status: finished\n"


def test_traversal_and_run_folders_that_lead_out_are_refused(api, jp_root_dir, tmp_path):
    runs = jp_root_dir / "runs"
    _fake_run(runs, ID_A, {"status": "finished"})
    secret = _fake_run(tmp_path / "outside", ID_B, {"status": "finished"})
    (runs / ID_B).symlink_to(secret)
    key = _key(api)
    code, reply = _rename(api, key, ID_B, {"name": "x"})
    assert code == 403
    assert "leads outside" in reply["message"]
    assert "name" not in read_record(secret / "metadata.yaml")
    for bad_id in ("..", "%2e%2e", "..%2f..%2fetc", ID_A.upper(), "x" * 32):
        code, _ = _rename(api, key, bad_id, {"name": "x"})
        assert code in (400, 404), bad_id
    code, _reply = _rename(api, "no-such-folder", ID_A, {"name": "x"})
    assert code == 404
    assert "name" not in read_record(runs / ID_A / "metadata.yaml")


def test_without_the_token_nothing_is_renamed(api, jp_root_dir):
    path = _fake_run(jp_root_dir / "runs", ID_A, {"status": "finished", "name": "kept"})
    before = (path / "metadata.yaml").read_bytes()
    key = _key(api)
    for headers in ({"Authorization": ""}, {"Authorization": "token not-the-token"}):
        code, _ = _rename(api, key, ID_A, {"name": "x"}, headers=headers)
        assert code == 403
    assert (path / "metadata.yaml").read_bytes() == before


class _ReadOnly(Authorizer):
    """May read nnx-lab's runs, not write them."""

    def is_authorized(self, handler, user, action, resource):
        return resource != AUTH_RESOURCE or action == "read"


@pytest.mark.parametrize(
    "jp_server_config",
    [
        Config(
            {
                "ServerApp": {
                    "jpserver_extensions": {"nnx_lab.server": True},
                    "authorizer_class": _ReadOnly,
                },
                "NNxLab": {"rescan_s": 0.0},
            }
        )
    ],
)
def test_a_user_who_may_only_read_cannot_rename(api, jp_root_dir):
    path = _fake_run(jp_root_dir / "runs", ID_A, {"status": "finished", "name": "kept"})
    before = (path / "metadata.yaml").read_bytes()
    key = _key(api)
    assert _row(api, ID_A)["name"] == "kept"  # reading is allowed
    code, reply = _rename(api, key, ID_A, {"name": "x"})
    assert code == 403
    assert AUTH_RESOURCE in reply["message"]
    assert (path / "metadata.yaml").read_bytes() == before


def test_renames_racing_a_live_writers_heartbeats_lose_neither(api, jp_root_dir, monkeypatch):
    """A real run writing its heartbeat every 20 ms, renamed through the server as fast
    as requests go: the last name and the writer's last heartbeat both stand."""
    monkeypatch.setenv("NNX_HEARTBEAT_S", "0.02")
    started = threading.Event()

    class Slow:
        def on_step_ended(self, event):
            started.set()
            time.sleep(0.03)

    import sys

    sys.path.insert(0, str(HERE))
    import engine_factories as f

    runs = jp_root_dir / "runs"
    params = f.train_params(str(runs), n_epochs=3, checkpoint_every_s=0)
    out = {}
    job = threading.Thread(
        target=lambda: out.update(run=f.model().train(params, callbacks=[Slow()]))
    )
    job.start()
    assert started.wait(60)
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    key = _key(api)
    beats = set()
    for i in range(40):
        code, _ = _rename(api, key, run_dir.name, {"name": f"try {i}"})
        assert code == 200
        beats.add(read_record(run_dir / "metadata.yaml")["heartbeat"])
    job.join(120)
    meta = yaml.safe_load((run_dir / "metadata.yaml").read_text())
    assert (meta["name"], meta["status"]) == ("try 39", "finished")
    assert len(beats) > 1  # the writer's heartbeats went on between the renames
    assert meta["heartbeat"] >= max(beats)
    assert out["run"].metadata["name"] == "try 39"
    assert "writer" in meta
    assert meta["writer"]["pid"] == writer_identity()["pid"]
