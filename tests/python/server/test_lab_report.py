"""The runs panel's "Report" (``GET nnx-lab/api/runs/<folder>/<id>/report``) in a real
Jupyter server: it sends the run's one-file HTML report (the page ``nnx_lab.report``
writes) and writes nothing in the runs root; it needs the token and the "read" right,
refuses a bad id and a run folder leading out of its runs folder, and a log past
``NNxLab.report_log_bytes`` before reading it (issue 27)."""

from __future__ import annotations

import lab_factories
import pytest
from lab_factories import fake_run as _fake_run
from lab_factories import file_sizes as _files
from lab_factories import runs_key as _key
from lab_factories import step_line as _step
from lab_factories import trained_run as _train
from pytest_jupyter.jupyter_server import *  # noqa: F403 - the server fixtures, for this module only
from traitlets import TraitError
from traitlets.config import Config

import nnx_lab
from nnx_lab.server import AUTH_RESOURCE, NNxLab

# the server fixtures every module of these tests shares (an import would read as unused)
api, jp_server_config = lab_factories.api, lab_factories.jp_server_config
no_env_root = lab_factories.no_env_root

ID_A = "a" * 32
ID_B = "b" * 32


def test_the_report_of_a_run_is_sent_and_nothing_is_written(api, jp_root_dir, tmp_path):
    runs = jp_root_dir / "runs"
    run = _train(runs, n_epochs=2)
    before = _files(runs)
    code, reply = api(f"runs/{_key(api)}/{run.id}/report")
    assert code == 200
    assert reply["run_id"] == run.id
    assert reply["filename"] == f"report_{run.id}.html"
    # the very page nnx_lab.report writes for this run
    written = nnx_lab.report(run.id, tmp_path / "r.html", runs_root=runs)
    assert reply["html"] == written.read_text(encoding="utf-8")
    assert f"nnx-lab run {run.id}" in reply["html"]
    assert "nnx-report-data" in reply["html"]
    assert _files(runs) == before  # nothing written in the runs root


def test_without_the_token_no_report_is_sent(api, jp_root_dir):
    _fake_run(jp_root_dir / "runs", ID_A, {"status": "finished"}, [_step(1)])
    (jp_root_dir / "runs" / ID_A / "run.yaml").write_text("train: {n_epochs: 1}\n")
    key = _key(api)
    for headers in ({"Authorization": ""}, {"Authorization": "token not-the-token"}):
        code, reply = api(f"runs/{key}/{ID_A}/report", headers=headers)
        assert code == 403
        assert "html" not in (reply or {})


@lab_factories.without_the_runs_right
def test_a_user_without_the_right_gets_no_report(api, jp_root_dir):
    _fake_run(jp_root_dir / "runs", ID_A, {"status": "finished"}, [_step(1)])
    from nnx_lab.server import RunsService

    key = RunsService(NNxLab(), jp_root_dir).discovery().folders[0].key
    code, reply = api(f"runs/{key}/{ID_A}/report")
    assert code == 403
    assert AUTH_RESOURCE in reply["message"]


def test_a_bad_id_and_a_run_folder_leading_out_are_refused(api, jp_root_dir, tmp_path):
    runs = jp_root_dir / "runs"
    _fake_run(runs, ID_A, {"status": "finished"}, [_step(1)])  # no run.yaml
    secret = _fake_run(tmp_path / "outside", ID_B, {"status": "secret-status"}, [_step(1)])
    (secret / "run.yaml").write_text("train: {secret: 42}\n")
    (runs / ID_B).symlink_to(secret)
    key = _key(api)
    code, reply = api(f"runs/{key}/{ID_B}/report")
    assert code == 403
    assert "leads outside" in reply["message"]
    for bad_id in ("..", "%2e%2e", "..%2f..%2fetc", ID_A.upper(), "x" * 32):
        code, reply = api(f"runs/{key}/{bad_id}/report")
        assert code == 400, bad_id
        assert "not a run id" in reply["message"]
    assert api(f"runs/{key}/{'d' * 32}/report")[0] == 404  # a valid id that is not there
    assert api(f"runs/r{'0' * 16}/{ID_A}/report")[0] == 404  # no such runs folder
    code, reply = api(f"runs/{key}/{ID_A}/report")
    assert code == 409
    assert "no run.yaml" in reply["message"]


@pytest.mark.parametrize(
    "jp_server_config",
    [
        Config(
            {
                "ServerApp": {"jpserver_extensions": {"nnx_lab.server": True}},
                "NNxLab": {"rescan_s": 0.0, "report_log_bytes": 100},
            }
        )
    ],
)
def test_a_log_past_the_bound_is_refused_with_the_setting_to_raise(api, jp_root_dir):
    steps = [_step(i) for i in range(1, 9)]
    path = _fake_run(jp_root_dir / "runs", ID_A, {"status": "finished"}, steps)
    (path / "run.yaml").write_text("train: {n_epochs: 1}\n")
    code, reply = api(f"runs/{_key(api)}/{ID_A}/report")
    assert code == 413
    assert "NNxLab.report_log_bytes=100" in reply["message"]
    assert "nnx_lab.report(" in reply["message"]


def test_the_bound_is_checked_where_it_is_set():
    with pytest.raises(TraitError, match=r"NNxLab.report_log_bytes=0"):
        NNxLab(report_log_bytes=0)


def test_the_panels_report_shows_the_bundle_the_run_recorded(api, jp_root_dir, tmp_path):
    from nnx_lab.bundles import export_bundle
    from nnx_lab.runs import read_bundle

    runs = jp_root_dir / "runs"
    run = _train(runs, n_epochs=1)
    bundle = export_bundle(run.id, tmp_path / "shared.zip", archive=True, runs_root=runs)
    code, reply = api(f"runs/{_key(api)}/{run.id}/report")
    assert code == 200
    assert read_bundle(bundle).manifest_sha256 in reply["html"]
    assert "shared.zip (zip)" in reply["html"]
