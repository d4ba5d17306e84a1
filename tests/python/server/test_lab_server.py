"""nnx_lab.server, the JupyterLab runs panel's REST side, in a real Jupyter server
(pytest-jupyter's fixtures): listing, paging a log by byte offset, statuses with
"interrupted", a stop request that ends a real training run in another process, the
403 of a request without a token or without the right, refusals of '..' and of links
that lead out, and damaged or hostile run folders shown as damaged, never fatal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import lab_factories
import pytest
import yaml
from lab_factories import fake_run as _fake_run
from lab_factories import step_line as _step
from lab_factories import trained_run as _train
from pytest_jupyter.jupyter_server import *  # noqa: F403 - the server fixtures, for this module only
from traitlets import TraitError

from nnx_lab.runs import STOP_REQUEST, writer_identity
from nnx_lab.server import AUTH_RESOURCE, NNxLab, RunsService

# the server fixtures every module of these tests shares (an import would read as unused)
api, jp_server_config = lab_factories.api, lab_factories.jp_server_config
no_env_root = lab_factories.no_env_root

HERE = Path(__file__).resolve().parents[1]  # tests/python
ROOT = HERE.parents[1]
ID_A = "a" * 32
ID_B = "b" * 32


# -- a server with the extension --------------------------------------------------------


def _by_id(listing):
    return {r["run_id"]: r for r in listing["runs"]}


def _folder(listing, label):
    return next(f["key"] for f in listing["folders"] if f["label"] == label)


# -- run folders ------------------------------------------------------------------------


# -- listing ----------------------------------------------------------------------------


def test_the_runs_under_the_root_are_listed_with_their_status(api, jp_root_dir):
    a = _train(jp_root_dir / "runs", n_epochs=2)
    b = _train(jp_root_dir / "nb" / "exp" / "runs", n_epochs=3, seed=7)
    _train(jp_root_dir / "x" / "y" / "z" / "runs", n_epochs=1, seed=8)  # below max_depth
    _train(jp_root_dir / ".hidden" / "runs", n_epochs=1, seed=9)  # hidden folders are skipped
    code, listing = api("runs")
    assert code == 200
    assert {f["label"] for f in listing["folders"]} == {"runs", "nb/exp/runs"}
    rows = _by_id(listing)
    assert set(rows) == {a.id, b.id}
    assert rows[a.id]["status"] == "finished"
    assert rows[a.id]["epochs_completed"] == rows[a.id]["planned_epochs"] == 2
    assert rows[b.id]["planned_epochs"] == 3
    assert rows[b.id]["best_source"] == "val_edp.error"
    assert isinstance(rows[b.id]["best_value"], float)
    assert rows[b.id]["duration_s"] > 0
    assert rows[b.id]["folder"] == _folder(listing, "nb/exp/runs")
    assert "path" not in rows[a.id]  # the browser gets keys, not paths to edit


def test_a_new_run_appears_in_the_listing_and_configured_roots_are_read(
    jp_serverapp, api, jp_root_dir, tmp_path
):
    code, listing = api("runs")
    assert (code, listing["runs"]) == (200, [])
    run = _train(jp_root_dir / "runs", n_epochs=1)
    assert set(_by_id(api("runs")[1])) == {run.id}
    # a root outside the server's directory, named in the config (any folder name)
    elsewhere = tmp_path / "shared-experiments"
    other = _train(elsewhere, n_epochs=1, seed=3)
    service = jp_serverapp.web_app.settings["nnx_lab_runs"]
    service.config.runs_roots = [str(jp_root_dir), str(elsewhere)]
    listing = api("runs")[1]
    assert set(_by_id(listing)) == {run.id, other.id}
    assert str(elsewhere) in {f["label"] for f in listing["folders"]}


def test_the_search_and_the_listing_are_bounded(tmp_path):
    root = tmp_path / "root"
    for i in range(30):
        (root / f"d{i:02d}" / "deeper").mkdir(parents=True)
    (root / "zz" / "runs").mkdir(parents=True)
    service = RunsService(NNxLab(max_dirs=10, rescan_s=0), root)
    listing = service.list_runs()
    assert listing["truncated"] is True
    assert listing["visited"] == 10
    assert any("max_dirs" in n for n in listing["notes"])
    runs = root / "runs"
    for i in range(5):
        _fake_run(runs, f"{i:032x}", {"status": "finished", "started_at": 1000.0 + i})
        os.utime(runs / f"{i:032x}", (1000 + i, 1000 + i))
    listing = RunsService(NNxLab(max_runs=3, rescan_s=0), root).list_runs()
    assert [r["run_id"][-1] for r in listing["runs"]] == ["4", "3", "2"]  # the newest
    assert any("2 older runs are not listed" in n for n in listing["notes"])


# -- one run, its log by byte offset ------------------------------------------------------


def test_a_runs_summary_and_its_log_paged_by_byte_offset(api, jp_root_dir, jp_serverapp):
    run = _train(jp_root_dir / "runs", n_epochs=3)
    key = _folder(api("runs")[1], "runs")
    code, summary = api(f"runs/{key}/{run.id}")
    assert code == 200
    assert summary["run"]["status"] == "finished"
    assert summary["config"]["train"]["n_epochs"] == 3
    assert summary["metadata"]["status"] == "finished"
    log = jp_root_dir / "runs" / run.id / "metrics.jsonl"
    assert summary["log_bytes"] == log.stat().st_size
    assert summary["problems"] == []
    # the whole log in pages of 4 KiB: every line once, in order, offsets forward only
    events, offset, pages = [], 0, 0
    while True:
        code, page = api(f"runs/{key}/{run.id}/log", params={"offset": offset, "max_bytes": 4096})
        assert code == 200
        assert page["offset"] == offset
        assert page["next_offset"] - offset <= 4096
        events += page["events"]
        offset = page["next_offset"]
        pages += 1
        if not page["more"]:
            break
    expected = [json.loads(x) for x in log.read_text().splitlines()]
    assert pages > 2
    assert offset == log.stat().st_size
    assert [e["event"] for e in events] == [e["event"] for e in expected]
    assert events == json.loads(json.dumps(expected))
    # a live log: an incomplete last line is held back until it is whole
    with log.open("a") as fh:
        fh.write('{"event": "step", "step": 25, "epoch": 4, "batch": 0, "lr": 0.01, "sam')
    code, page = api(f"runs/{key}/{run.id}/log", params={"offset": offset})
    assert (page["events"], page["next_offset"], page["more"]) == ([], offset, False)
    assert page["pending_bytes"] > 0
    with log.open("a") as fh:
        fh.write('ples": 32, "loss": NaN}\n')
    code, page = api(f"runs/{key}/{run.id}/log", params={"offset": offset})
    assert [e["step"] for e in page["events"]] == [25]
    assert page["events"][0]["loss"] == "NaN"  # JSON a browser parses
    # a log that shrank was replaced: the panel is told to start again
    log.write_text(json.dumps(_step(1)) + "\n")
    code, page = api(f"runs/{key}/{run.id}/log", params={"offset": offset})
    assert (page["reset"], page["next_offset"]) == (True, 0)
    code, page = api(f"runs/{key}/{run.id}/log", params={"offset": -1})
    assert code == 400
    assert "offset=-1" in page["message"]
    code, page = api(f"runs/{key}/{run.id}/log", params={"offset": "ten"})
    assert code == 400


def test_a_huge_log_and_a_huge_line_are_read_a_page_at_a_time(tmp_path):
    root = tmp_path / "root"
    runs = root / "runs"
    path = _fake_run(runs, ID_A, {"status": "finished"})
    log = path / "metrics.jsonl"
    head = "".join(json.dumps(_step(i)) + "\n" for i in range(1, 4)).encode()
    long_line = b'{"event": "step", "pad": "' + b"x" * (3 << 20) + b'"}\n'
    tail = "".join(json.dumps(_step(i)) + "\n" for i in range(4, 7)).encode()
    log.write_bytes(head + long_line + tail)
    with log.open("r+b") as fh:  # 1 GiB, sparse: no disk, the server must not read it all
        fh.truncate(1 << 30)
    service = RunsService(NNxLab(page_bytes=1 << 20, rescan_s=0), root)
    key = service.discovery().folders[0].key
    assert service.summary(key, ID_A)["log_bytes"] == 1 << 30
    offset, in_line, events, bad, pages = 0, False, [], 0, 0
    while pages < 12:
        page = service.log_page(key, ID_A, offset, in_line=in_line)
        pages += 1
        assert page["next_offset"] - offset <= 1 << 20
        events += page["events"]
        bad += page["bad_lines"]
        offset, in_line = page["next_offset"], page["in_line"]
    assert [e["step"] for e in events] == [1, 2, 3, 4, 5, 6]
    assert bad == 2  # the 3 MiB line, then the zeros of the sparse tail: skipped, counted
    assert 0 < offset < 20 << 20  # twelve pages, not the gigabyte
    # a page far into the gigabyte costs one page too
    page = service.log_page(key, ID_A, 900 << 20)
    assert page["next_offset"] == (900 << 20) + (1 << 20)
    assert page["in_line"] is True


# -- statuses ---------------------------------------------------------------------------


def test_statuses_include_interrupted_for_a_run_whose_writer_died(api, jp_root_dir):
    runs = jp_root_dir / "runs"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        me = writer_identity()
        writer = {**me, "pid": child.pid}
        from nnx_lab.runs._records import _proc_start

        writer["proc_start"] = _proc_start(child.pid)
        base = {"started_at": time.time(), "heartbeat": time.time(), "planned_epochs": 5}
        _fake_run(runs, ID_A, {**base, "status": "running", "writer": writer})
        _fake_run(runs, ID_B, {**base, "status": "running", "writer": me})
        _fake_run(runs, "c" * 32, {**base, "status": "stopped", "stop_reason": "by hand"})
        _fake_run(runs, "d" * 32, {**base, "status": "failed", "error": "ValueError: x\nmore"})
        rows = _by_id(api("runs")[1])
        assert rows[ID_A]["status"] == "running"
        assert rows[ID_B]["status"] == "running"
        assert rows["c" * 32]["status"] == "stopped"
        assert rows["d" * 32]["status"] == "failed"
        assert rows["d" * 32]["error"] == "ValueError: x"
    finally:
        child.kill()
        child.wait()
    rows = _by_id(api("runs")[1])
    assert rows[ID_A]["status"] == "interrupted"  # its process is gone
    assert rows[ID_B]["status"] == "running"  # this process lives


# -- stop ---------------------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    import engine_factories as f

    class Slow:
        def on_step_ended(self, event):
            time.sleep(0.02)

    params = f.train_params({root!r}, n_epochs=200, checkpoint_every_s=0)
    run = f.model().train(params, callbacks=[Slow()])
    print("done", run.status.value, flush=True)
    """
)


def _wait_for(predicate, timeout=90.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"not true after {timeout}s: {predicate}")


def test_the_stop_request_ends_a_real_training_run_in_another_process(api, jp_root_dir):
    runs = jp_root_dir / "runs"
    code = WORKER.format(tests=str(HERE), root=str(runs))
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NNX_TQDM_DISABLE": "1"},
    )
    try:
        row = _wait_for(
            lambda: next(
                (r for r in api("runs")[1]["runs"] if r["status"] == "running" and r["steps"]),
                None,
            )
        )
        key, run_id = row["folder"], row["run_id"]
        run_dir = runs / run_id
        before = {p.name for p in run_dir.iterdir()}
        code, reply = api(
            f"runs/{key}/{run_id}/stop", method="POST", body=json.dumps({"reason": "enough"})
        )
        assert (code, reply["requested"]) == (200, True)
        assert STOP_REQUEST in {p.name for p in run_dir.iterdir()} - before
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "done stopped" in out, err
    meta = yaml.safe_load((run_dir / "metadata.yaml").read_text())
    assert meta["status"] == "stopped"
    assert meta["epochs_completed"] < 200
    assert (run_dir / "checkpoints" / "last.json").is_file()
    last = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert (last["event"], last["status"]) == ("run_finished", "stopped")
    assert "enough" in (last["stop_reason"] or "")
    # the reason reads once: "enough by <user>", the panel not named again as the user
    assert last["stop_reason"].startswith("enough by ")
    assert "runs panel" not in last["stop_reason"]
    assert _by_id(api("runs")[1])[run_id]["status"] == "stopped"
    # a stopped run has nothing to stop: refused, nothing written
    (run_dir / STOP_REQUEST).unlink(missing_ok=True)
    code, reply = api(f"runs/{key}/{run_id}/stop", method="POST", body="{}")
    assert code == 409
    assert "stopped, not running" in reply["message"]
    assert not (run_dir / STOP_REQUEST).exists()
    code, reply = api(f"runs/{key}/{run_id}/stop", method="POST", body="not json")
    assert code == 400


# -- security -----------------------------------------------------------------------------


def _endpoints(key, run_id):
    return [
        ("GET", "runs", None),
        ("GET", f"runs/{key}/{run_id}", None),
        ("GET", f"runs/{key}/{run_id}/log", None),
        ("POST", f"runs/{key}/{run_id}/stop", None),
        ("PUT", f"runs/{key}/{run_id}/name", None),
        ("GET", f"runs/{key}/{run_id}/report", None),
        ("GET", "compare", [("run", f"{key}/{run_id}"), ("run", f"{key}/{run_id}")]),
    ]


def test_every_handler_refuses_a_request_without_a_token(api, jp_root_dir):
    meta = {"status": "running", "writer": writer_identity(), "heartbeat": time.time()}
    path = _fake_run(jp_root_dir / "runs", ID_A, meta, [_step(1)])
    key = _folder(api("runs")[1], "runs")
    for method, url, params in _endpoints(key, ID_A):
        for headers in ({"Authorization": ""}, {"Authorization": "token not-the-token"}):
            code, _ = api(url, method=method, headers=headers, params=params)
            assert code == 403, (method, url, headers)
    assert not (path / STOP_REQUEST).exists()
    code, _ = api("runs")  # with the token
    assert code == 200


@lab_factories.without_the_runs_right
def test_a_user_without_the_right_gets_403(api, jp_root_dir):
    meta = {"status": "running", "writer": writer_identity(), "heartbeat": time.time()}
    path = _fake_run(jp_root_dir / "runs", ID_A, meta, [_step(1)])
    key = RunsService(NNxLab(), jp_root_dir).discovery().folders[0].key
    for method, url, params in _endpoints(key, ID_A):
        code, reply = api(url, method=method, params=params)
        assert code == 403, (method, url)
        assert AUTH_RESOURCE in reply["message"]
    assert not (path / STOP_REQUEST).exists()
    assert api("/api/status")[0] == 200  # the rest of the server is open to this user


def test_traversal_and_links_that_lead_out_are_refused(api, jp_root_dir, tmp_path):
    runs = jp_root_dir / "runs"
    _fake_run(runs, ID_A, {"status": "finished"}, [_step(1)])
    outside = tmp_path / "outside"
    secret = _fake_run(outside, ID_B, {"status": "secret-status"}, [_step(1, 42.0)])
    (runs / ID_B).symlink_to(secret)  # a run folder that is a link out
    (runs / ID_A / "plan.json").symlink_to(outside / "nothing")
    c = "c" * 32
    _fake_run(runs, c, {"status": "finished"})
    (runs / c / "metrics.jsonl").symlink_to(secret / "metrics.jsonl")  # a file that is a link
    (jp_root_dir / "linked").mkdir()
    (jp_root_dir / "linked" / "runs").symlink_to(outside)  # a runs folder that is a link
    listing = api("runs")[1]
    assert [f["label"] for f in listing["folders"]] == ["runs"]
    rows = _by_id(listing)
    assert rows[ID_B]["status"] == "damaged"
    assert rows[ID_B]["refused"] is True
    assert "secret-status" not in json.dumps(listing)
    key = _folder(listing, "runs")
    code, reply = api(f"runs/{key}/{ID_B}")
    assert code == 403
    assert "leads outside" in reply["message"]
    assert api(f"runs/{key}/{ID_B}/log")[0] == 403
    code, reply = api(f"runs/{key}/{c}/log")
    assert code == 403
    assert "a link" in reply["message"]
    for bad_id in ("..", "%2e%2e", "..%2f..%2fetc", ID_A.upper(), ID_A[:-1], "x" * 32):
        code, reply = api(f"runs/{key}/{bad_id}")
        assert code == 400, bad_id
        assert "not a run id" in reply["message"]
    code, reply = api(f"runs/..%2f..%2f/{ID_A}")
    assert code == 404
    assert "no runs folder" in reply["message"]
    assert api(f"runs/r{'0' * 16}/{ID_A}")[0] == 404
    assert api("runs/" + key + "/" + "d" * 32)[0] == 404  # a valid id that is not there
    code, reply = api("compare", params={"run": f"{key}/{ID_A}"})
    assert code == 400


def test_a_named_pipe_is_refused_without_blocking(tmp_path):
    root = tmp_path / "root"
    path = _fake_run(root / "runs", ID_A, {"status": "finished"})
    os.mkfifo(path / "metrics.jsonl")
    os.mkfifo(path / "run.yaml")
    service = RunsService(NNxLab(rescan_s=0), root)
    key = service.discovery().folders[0].key
    summary = service.summary(key, ID_A)  # returns: never waits on the pipes
    assert any("not a plain file" in p for p in summary["problems"])
    from nnx_lab.server import ApiError

    with pytest.raises(ApiError, match="not a plain file") as info:
        service.log_page(key, ID_A, 0)
    assert info.value.status == 403


# -- damaged and hostile run folders ------------------------------------------------------


def test_damaged_run_folders_are_shown_as_damaged_and_the_server_goes_on(api, jp_root_dir):
    runs = jp_root_dir / "runs"
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    cases = {
        "1" * 32: "status: [unclosed\n",  # not YAML
        "2" * 32: "- a list\n- not a mapping\n",
        "3" * 32: "status: finished\n" + "#" * (300 << 10),  # more than max_record_bytes
        "4" * 32: b"status: \xff\xfe\n",  # not UTF-8
        "5" * 32: None,  # no metadata.yaml
        "6" * 32: {"status": {"nested": "odd"}, "best": "not a mapping", "started_at": "soon"},
        "7" * 32: laughs + "status: finished\n",  # 9**9 values once expanded
        "8" * 32: "status: finished\nsteps: " + "9" * 5000 + "\n",  # a number Python refuses
    }
    for run_id, meta in cases.items():
        path = runs / run_id
        path.mkdir(parents=True)
        if isinstance(meta, bytes):
            (path / "metadata.yaml").write_bytes(meta)
        elif isinstance(meta, dict):
            (path / "metadata.yaml").write_text(yaml.safe_dump(meta))
        elif meta is not None:
            (path / "metadata.yaml").write_text(meta)
    (runs / "not-a-run").mkdir()  # odd names: not runs, not listed
    (runs / "we\nird <b>name").mkdir()
    log_lines = [
        json.dumps(_step(1)).replace("1.0", "1e400"),  # a number that overflows to inf
        "not json at all",
        "[1, 2, 3]",
        json.dumps({"event": "no_such_event"}),
        json.dumps({**_step(2), "step": "two"}),  # a field of the wrong type
        json.dumps(_step(3)),
    ]
    ok = _fake_run(runs, "9" * 32, {"status": "finished", "planned_epochs": 1})
    (ok / "metrics.jsonl").write_text("\n".join(log_lines) + "\n" + '{"event": "st')
    (ok / "run.yaml").write_text(laughs)
    code, listing = api("runs")
    assert code == 200
    rows = _by_id(listing)
    assert set(rows) == {*cases, "9" * 32}
    for run_id in ("1" * 32, "2" * 32, "3" * 32, "4" * 32, "5" * 32, "8" * 32):
        assert rows[run_id]["status"] == "damaged", run_id
        assert rows[run_id]["error"]
    assert "not valid YAML" in rows["1" * 32]["error"]
    assert "not a mapping" in rows["2" * 32]["error"]
    assert "max_record_bytes" in rows["3" * 32]["error"]
    assert "UTF-8" in rows["4" * 32]["error"]
    assert rows["5" * 32]["error"] == "no metadata.yaml"
    assert rows["6" * 32]["status"] == "damaged"
    assert "is not a run status" in rows["6" * 32]["error"]
    assert rows["7" * 32]["status"] == "damaged"  # aliases are refused, never expanded
    assert "anchors or aliases" in rows["7" * 32]["error"]
    key = _folder(listing, "runs")
    code, page = api(f"runs/{key}/{'9' * 32}/log")
    assert code == 200
    assert [e["step"] for e in page["events"]] == [1, 3]
    assert page["events"][0]["loss"] == "Infinity"
    assert page["bad_lines"] == 4
    assert [d["offset"] for d in page["damage"]] == [
        sum(len(x) + 1 for x in log_lines[:i]) for i in (1, 2, 3, 4)
    ]
    assert page["pending_bytes"] == len('{"event": "st')  # a torn last line, held back
    code, summary = api(f"runs/{key}/{'9' * 32}")
    assert code == 200
    assert summary["config"] is None  # run.yaml's aliases would expand to 9**9 values
    aliases = "uses YAML anchors or aliases, which nnx_lab never writes"
    assert f"run.yaml: {aliases}" in summary["problems"]
    code, summary = api(f"runs/{key}/{'7' * 32}")
    assert summary["metadata"] is None
    assert f"metadata.yaml: {aliases}" in summary["problems"]
    for run_id in cases:
        code, _ = api(f"runs/{key}/{run_id}")
        assert code == 200, run_id
        code, _ = api(f"runs/{key}/{run_id}/log")
        assert code == 200, run_id
    assert api("/api/status")[0] == 200


def test_odd_folder_names_are_listed_and_served(tmp_path):
    root = tmp_path / "root"
    odd = root / 'we\nird "name" <b>' / "runs"
    run = _fake_run(odd, ID_A, {"status": "finished"}, [_step(1)])
    assert run.is_dir()
    raw = os.fsencode(root) + b"/bytes-\xff\xfe/runs"
    os.makedirs(raw)
    os.makedirs(raw + b"/" + ID_B.encode())
    with open(raw + b"/" + ID_B.encode() + b"/metadata.yaml", "w") as fh:
        fh.write("status: finished\n")
    service = RunsService(NNxLab(rescan_s=0), root)
    listing = json.loads(json.dumps(service.list_runs(), allow_nan=False))
    labels = {f["label"] for f in listing["folders"]}
    assert 'we\nird "name" <b>/runs' in labels
    assert "bytes-\\xff\\xfe/runs" in labels
    rows = _by_id(listing)
    assert rows[ID_A]["status"] == rows[ID_B]["status"] == "finished"
    for f in listing["folders"]:
        run_id = ID_A if f["label"].startswith("we") else ID_B
        assert service.summary(f["key"], run_id)["run"]["status"] == "finished"


# -- compare --------------------------------------------------------------------------------


def test_compare_lists_the_values_that_differ_and_marks_the_run_id(api, jp_root_dir):
    from nnx_lab import NNOptimParams, Optims

    a = _train(jp_root_dir / "runs", n_epochs=1)
    b = _train(
        jp_root_dir / "runs",
        n_epochs=1,
        optim=NNOptimParams(name=Optims.ADAM, max_lr=1e-3, grad_clip_norm=1.0),
    )
    key = _folder(api("runs")[1], "runs")
    code, report = api("compare", params={"run": f"{key}/{a.id}"})
    assert code == 400
    assert "2 to 8 runs" in report["message"]
    pairs = [("run", f"{key}/{a.id}"), ("run", f"{key}/{b.id}")]
    code, report = api("compare", params=pairs)
    assert code == 200
    assert [r["run_id"] for r in report["runs"]] == [a.id, b.id]
    rows = {r["what"]: r for r in report["rows"]}
    assert rows["train.optim.max_lr"]["values"] == [0.01, 0.001]
    assert rows["train.optim.max_lr"]["changes_run_id"] is True
    assert all(r["changed"] for r in report["rows"])
    assert report["unchanged"] > 10
    code, reply = api("compare", params=[("run", "no-slash"), ("run", f"{key}/{b.id}")])
    assert code == 400
    (jp_root_dir / "runs" / b.id / "run.yaml").write_text("train: [broken\n")
    code, reply = api("compare", params=pairs)
    assert code == 409
    assert b.id in reply["message"]


# -- layering and settings --------------------------------------------------------------------


def test_the_server_side_never_imports_torch(tmp_path):
    root = tmp_path / "root"
    a = _train(root / "runs", n_epochs=1)
    b = _train(root / "runs", n_epochs=1, seed=5)
    code = textwrap.dedent(
        f"""
        from nnx_lab.server import NNxLab, RunsService, _jupyter_server_extension_points
        assert _jupyter_server_extension_points() == [{{"module": "nnx_lab.server"}}]
        s = RunsService(NNxLab(rescan_s=0), {str(root)!r})
        listing = s.list_runs()
        key = listing["folders"][0]["key"]
        s.summary(key, {a.id!r})
        s.log_page(key, {a.id!r}, 0)
        report = s.compare([(key, {a.id!r}), (key, {b.id!r})])
        assert any(r["what"] == "train.seed" for r in report["rows"])
        assert s.report(key, {a.id!r})["html"].startswith("<!doctype html>")
        """
    )
    out = lab_factories.torch_after(code)
    assert out.stdout.strip() == "[]", out.stderr


def test_settings_are_checked_where_they_are_set():
    with pytest.raises(TraitError, match=r"NNxLab.max_depth=-1 is out of range"):
        NNxLab(max_depth=-1)
    with pytest.raises(TraitError, match=r"NNxLab.page_bytes=0"):
        NNxLab(page_bytes=0)
    with pytest.raises(TraitError, match="rescan_s"):
        NNxLab(rescan_s=-1.0)


def test_a_stop_request_for_a_run_that_is_not_running_writes_nothing(tmp_path):
    root = tmp_path / "root"
    path = _fake_run(root / "runs", ID_A, {"status": "running", "writer": {"pid": 2**22 + 7}})
    service = RunsService(NNxLab(rescan_s=0), root)
    key = service.discovery().folders[0].key
    from nnx_lab.server import ApiError

    with pytest.raises(ApiError, match="interrupted, not running") as info:
        service.stop(key, ID_A, reason="x", by="test")
    assert info.value.status == 409
    assert sorted(p.name for p in path.iterdir()) == ["metadata.yaml"]
