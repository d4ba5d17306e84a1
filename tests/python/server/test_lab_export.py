"""The runs panel's "Export bundle" (``POST nnx-lab/api/runs/<folder>/<id>/bundle``) in a
real Jupyter server: the zip it sends is a bundle that validates, named after the run;
nothing is written in the runs root and the private temporary folder is gone after an
export, a refusal, a timeout and a client that went away; every bad request is a 4xx
before anything is spawned; one export per run at a time; the token and the "write"
right are required; the server module still imports no torch (issue 27)."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import lab_factories
import pytest
from lab_factories import fake_run as _fake_run
from lab_factories import file_sizes as _files
from lab_factories import runs_key as _key
from lab_factories import step_line as _step
from lab_factories import trained_run as _train
from pytest_jupyter.jupyter_server import *  # noqa: F403 - the server fixtures, for this module only
from tornado.httpclient import HTTPClientError
from traitlets import TraitError

from nnx_lab.bundles import inspect_bundle, validate_bundle
from nnx_lab.server import AUTH_RESOURCE, NNxLab, RunsService

api, jp_server_config = lab_factories.api, lab_factories.jp_server_config
no_env_root = lab_factories.no_env_root

ID_A = "a" * 32
ID_B = "b" * 32


@pytest.fixture(autouse=True)
def private_tmp(tmp_path, monkeypatch):
    """The server's temporary folder, watched: an export leaves nothing in it."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


def _exports_left(tmp: Path) -> list[Path]:
    # (torch makes its own folders in the same temporary folder: they are not ours)
    return list(tmp.glob("nnx-lab-export-*"))


def _post(api, path, body="", headers=None, timeout=120.0):
    """(status, headers, body bytes) of a POST to nnx-lab's API."""
    from jupyter_server.utils import url_path_join

    url = url_path_join(api._base, "nnx-lab/api", path)
    hdrs = {**api._auth, **(headers or {})}

    async def go():
        try:
            r = await api._client.fetch(
                url, method="POST", body=body, headers=hdrs, request_timeout=timeout
            )
        except HTTPClientError as exc:
            if exc.response is None:
                raise
            r = exc.response
        return r.code, r.headers, r.body or b""

    return api._loop.run_until_complete(go())


def test_the_bundle_of_a_run_is_sent_named_after_it_and_validates(
    api, jp_root_dir, tmp_path, private_tmp
):
    runs = jp_root_dir / "runs"
    run = _train(runs, n_epochs=2)
    key = _key(api)
    assert api(f"runs/{key}/{run.id}/name", method="PUT", body='{"name": "wine ü"}')[0] == 200
    before = _files(runs)
    code, headers, body = _post(api, f"runs/{key}/{run.id}/bundle")
    assert code == 200, body[:500]
    assert headers["Content-Type"] == "application/zip"
    disposition = headers["Content-Disposition"]
    assert f'filename="wine_-{run.id[:8]}.zip"' in disposition
    assert "filename*=UTF-8''wine%20%C3%BC-" in disposition
    zipped = tmp_path / "got.zip"
    zipped.write_bytes(body)
    validate_bundle(zipped)  # every payload's digest
    info = inspect_bundle(zipped)
    assert (info.run_id, info.capability, info.checkpoint, info.epoch) == (
        run.id,
        "resumable",
        "last",
        2,
    )
    assert _files(runs) == before  # nothing written in the runs root
    assert _exports_left(private_tmp) == []  # the private folder is gone
    # BEST on request
    code, _, body = _post(api, f"runs/{key}/{run.id}/bundle", body='{"checkpoint": "best"}')
    assert code == 200
    (tmp_path / "best.zip").write_bytes(body)
    assert inspect_bundle(tmp_path / "best.zip").checkpoint == "best"


def test_bad_requests_are_refused_before_anything_is_spawned(
    api, jp_root_dir, tmp_path, private_tmp, monkeypatch
):
    import nnx_lab.server._export as ex

    spawned = []

    async def no_spawn(*args, **kwargs):
        spawned.append(args)
        raise AssertionError("spawned")

    monkeypatch.setattr(ex.asyncio, "create_subprocess_exec", no_spawn)
    runs = jp_root_dir / "runs"
    _fake_run(runs, ID_A, {"status": "finished"}, [_step(1)])  # no run.yaml
    secret = _fake_run(tmp_path / "outside", ID_B, {"status": "finished"}, [_step(1)])
    (secret / "run.yaml").write_text("train: {n_epochs: 1}\n")
    (runs / ID_B).symlink_to(secret)
    no_ckpt = _fake_run(runs, "c" * 32, {"status": "finished"}, [_step(1)])
    (no_ckpt / "run.yaml").write_text("train: {n_epochs: 1}\n")
    bad_sidecar = _fake_run(runs, "e" * 32, {"status": "finished"}, [_step(1)])
    (bad_sidecar / "run.yaml").write_text("train: {n_epochs: 1}\n")
    (bad_sidecar / "checkpoints").mkdir()
    (bad_sidecar / "checkpoints" / "last.json").write_text('{"format": 1, "what": 2}')
    key = _key(api)
    cases = [
        (f"runs/{key}/{ID_B}/bundle", "", 403, "leads outside"),
        (f"runs/{key}/..%2f..%2fetc/bundle", "", 400, "not a run id"),
        (f"runs/{key}/{'d' * 32}/bundle", "", 404, "no run"),
        (f"runs/r{'0' * 16}/{ID_A}/bundle", "", 404, "no runs folder"),
        (f"runs/{key}/{ID_A}/bundle", "", 409, "no run.yaml"),
        (f"runs/{key}/{'c' * 32}/bundle", "", 409, "no LAST checkpoint"),
        (f"runs/{key}/{'c' * 32}/bundle", '{"checkpoint": "first"}', 400, "checkpoint="),
        (f"runs/{key}/{'c' * 32}/bundle", "not json", 400, "not JSON"),
        (f"runs/{key}/{'e' * 32}/bundle", "", 409, "not exported"),
    ]
    for path, body, status, words in cases:
        code, _, reply = _post(api, path, body=body)
        assert code == status, (path, reply[:300])
        assert words in reply.decode(), (path, reply[:300])
    assert spawned == []
    assert _exports_left(private_tmp) == []


def test_a_checkpoint_the_engine_refuses_is_a_409_with_its_reason(api, jp_root_dir, private_tmp):
    runs = jp_root_dir / "runs"
    run = _train(runs, n_epochs=1)
    (tensors,) = (runs / run.id / "checkpoints").glob("last-*.safetensors")
    tensors.write_bytes(tensors.read_bytes()[:-8] + b"\0" * 8)  # same size, other bytes
    code, _, reply = _post(api, f"runs/{_key(api)}/{run.id}/bundle")
    assert code == 409, reply[:500]
    assert "corrupted" in reply.decode()
    assert "no bundle" in reply.decode()
    assert _exports_left(private_tmp) == []


def _slow_exports(monkeypatch, seconds=30):
    """Exports that take ``seconds`` (a sleeping subprocess in place of the export)."""
    import nnx_lab.server._export as ex

    prepare = ex.BundleExports.prepare
    pids = []

    def slow(self, *args):
        job = prepare(self, *args)
        job.argv = [
            sys.executable,
            "-c",
            f"import os, time; print(os.getpid()); time.sleep({seconds})",
        ]
        return job

    run = ex.ExportJob.run

    async def recording(self):
        task = asyncio.ensure_future(run(self))
        while self.proc is None:
            await asyncio.sleep(0.01)
        pids.append(self.proc.pid)
        await task

    monkeypatch.setattr(ex.BundleExports, "prepare", slow)
    monkeypatch.setattr(ex.ExportJob, "run", recording)
    return pids


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie not yet reaped by asyncio counts as ended
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def test_one_export_per_run_and_a_timeout_stops_it_and_cleans_up(
    api, jp_root_dir, jp_serverapp, private_tmp, monkeypatch
):
    runs = jp_root_dir / "runs"
    run = _train(runs, n_epochs=1)
    key = _key(api)
    pids = _slow_exports(monkeypatch)
    jp_serverapp.web_app.settings["nnx_lab_runs"].config.export_timeout_s = 2.0
    url = f"runs/{key}/{run.id}/bundle"

    async def both():
        from jupyter_server.utils import url_path_join

        full = url_path_join(api._base, "nnx-lab/api", url)

        async def one(delay):
            await asyncio.sleep(delay)
            try:
                r = await api._client.fetch(full, method="POST", body="", headers=api._auth)
            except HTTPClientError as exc:
                r = exc.response
            return r.code, r.body.decode()

        return await asyncio.gather(one(0), one(0.5))

    (first, second) = api._loop.run_until_complete(both())
    assert second[0] == 409
    assert "being exported already" in second[1]
    assert first[0] == 504
    assert "NNxLab.export_timeout_s=2" in first[1]
    assert len(pids) == 1
    assert _gone(pids[0])
    assert _exports_left(private_tmp) == []
    # the slot is free again
    assert _post(api, url)[0] == 504


def test_a_client_that_goes_away_ends_the_export_and_its_files(
    api, jp_root_dir, private_tmp, monkeypatch
):
    runs = jp_root_dir / "runs"
    run = _train(runs, n_epochs=1)
    pids = _slow_exports(monkeypatch)
    with pytest.raises(HTTPClientError) as info:  # the client gives up after 1 s
        _post(api, f"runs/{_key(api)}/{run.id}/bundle", timeout=1.0)
    assert info.value.code == 599
    deadline = time.monotonic() + 20

    async def settle():
        while time.monotonic() < deadline:
            if pids and _gone(pids[0]) and not _exports_left(private_tmp):
                return True
            await asyncio.sleep(0.1)
        return False

    assert api._loop.run_until_complete(settle())


def test_without_the_token_nothing_is_exported(api, jp_root_dir, private_tmp):
    run = _train(jp_root_dir / "runs", n_epochs=1)
    key = _key(api)
    for headers in ({"Authorization": ""}, {"Authorization": "token not-the-token"}):
        code, _, _ = _post(api, f"runs/{key}/{run.id}/bundle", headers=headers)
        assert code == 403
    assert _exports_left(private_tmp) == []


@lab_factories.without_the_runs_right
def test_a_user_without_the_right_gets_no_bundle(api, jp_root_dir, private_tmp):
    _fake_run(jp_root_dir / "runs", ID_A, {"status": "finished"}, [_step(1)])
    key = RunsService(NNxLab(), jp_root_dir).discovery().folders[0].key
    code, _, reply = _post(api, f"runs/{key}/{ID_A}/bundle")
    assert code == 403
    assert AUTH_RESOURCE in reply.decode()


def test_the_settings_are_checked_where_they_are_set():
    with pytest.raises(TraitError, match=r"NNxLab.export_timeout_s=0"):
        NNxLab(export_timeout_s=0)
    with pytest.raises(TraitError, match=r"NNxLab.max_exports=0"):
        NNxLab(max_exports=0)


def test_the_export_route_imports_no_torch(tmp_path):
    root = tmp_path / "root"
    a = _train(root / "runs", n_epochs=1)
    code = textwrap.dedent(
        f"""
        from nnx_lab.server import NNxLab, RunsService
        from nnx_lab.server._export import BundleExports
        s = RunsService(NNxLab(rescan_s=0), {str(root)!r})
        key = s.list_runs()["folders"][0]["key"]
        job = BundleExports(s).prepare(key, {a.id!r}, "last")
        assert job.argv[1:4] == ["-m", "nnx_lab.bundles", "export"], job.argv
        job.close()
        """
    )
    out = lab_factories.torch_after(code)
    assert out.stdout.strip() == "[]", out.stderr


def test_past_max_exports_another_run_is_refused_with_429(
    api, jp_root_dir, jp_serverapp, private_tmp, monkeypatch
):
    runs = jp_root_dir / "runs"
    a = _train(runs, n_epochs=1)
    b = _train(runs, n_epochs=1, seed=5)
    key = _key(api)
    _slow_exports(monkeypatch)
    config = jp_serverapp.web_app.settings["nnx_lab_runs"].config
    config.export_timeout_s, config.max_exports = 2.0, 1

    async def both():
        from jupyter_server.utils import url_path_join

        async def one(run_id, delay):
            await asyncio.sleep(delay)
            url = url_path_join(api._base, "nnx-lab/api", f"runs/{key}/{run_id}/bundle")
            try:
                r = await api._client.fetch(url, method="POST", body="", headers=api._auth)
            except HTTPClientError as exc:
                r = exc.response
            return r.code, r.body.decode()

        return await asyncio.gather(one(a.id, 0), one(b.id, 0.5))

    first, second = api._loop.run_until_complete(both())
    assert first[0] == 504
    assert second[0] == 429
    assert "NNxLab.max_exports=1" in second[1]
    assert _exports_left(private_tmp) == []
