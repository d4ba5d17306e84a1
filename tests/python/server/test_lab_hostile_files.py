"""The runs panel's server against a runs folder a colleague shared, through its REST
handlers: a YAML bomb costs the listing, the summary and compare nothing; one damaged
run is one row marked damaged with its reason; a bad file is a 4xx with its reason,
never a 500; a run-named link out of the root is refused; the documented
``--NNxLab.runs_roots='["/x"]'`` is the list it says.

Each test tries to break one promise (issue 20, section 3)."""

from __future__ import annotations

import json
import time
import tracemalloc

import lab_factories
import pytest
import yaml
from jupyter_server.serverapp import ServerApp
from lab_factories import fake_run, step_line
from pytest_jupyter.jupyter_server import *  # noqa: F403 - the server fixtures, for this module only
from traitlets import TraitError

from nnx_lab.runs import RunRecordError
from nnx_lab.server import NNxLab, RunsService

# the server fixtures every module of these tests shares (an import would read as unused)
api, jp_server_config = lab_factories.api, lab_factories.jp_server_config
no_env_root = lab_factories.no_env_root

# 8 levels of 9 aliases (43 million values once expanded) in the fields a row shows
BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefg", "bcdefgh", strict=True)
    )
    + "status: failed\nerror: *h\ntorch: *h\n"
)
GOOD, BAD = "0" * 32, "b" * 32


def _config(seed: int) -> dict:
    return {
        "format": 1,
        "net": {"input_dim": 8, "output_dim": 3},
        "model": {"net": "feed_fwd"},
        "train": {"n_epochs": 1, "seed": seed},
        "data": None,
        "initial_weights": None,
    }


def _run(root, run_id, meta, *, config=None, plan=None):
    path = fake_run(root, run_id, meta, [step_line(1)])
    (path / "run.yaml").write_text(yaml.safe_dump(config or _config(int(run_id[0], 16))))
    if plan is not None:
        (path / "plan.json").write_text(json.dumps(plan))
    return path


def _listing(api):
    code, listing = api("runs")
    assert code == 200
    key = next(f["key"] for f in listing["folders"] if f["label"] == "runs")
    return key, {r["run_id"]: r for r in listing["runs"]}


def test_a_yaml_bomb_costs_the_listing_summary_and_compare_nothing(api, jp_root_dir):
    runs = jp_root_dir / "runs"
    _run(runs, GOOD, {"status": "finished", "started_at": 1796000000.0})
    _run(runs, BAD, BOMB)
    start = time.perf_counter()
    key, rows = _listing(api)
    assert rows[BAD]["status"] == "damaged"
    assert "anchors or aliases" in rows[BAD]["error"]
    assert rows[GOOD]["status"] == "finished"
    code, summary = api(f"runs/{key}/{BAD}")
    assert code == 200
    assert summary["metadata"] is None
    assert any("anchors or aliases" in p for p in summary["problems"])
    code, reply = api("compare", params=[("run", f"{key}/{GOOD}"), ("run", f"{key}/{BAD}")])
    assert code == 409
    assert BAD in reply["message"]
    assert "anchors or aliases" in reply["message"]
    # before: 13 s and 270 MB for the listing, 1.2 GB for the compare, on every poll
    assert time.perf_counter() - start < 5


def test_the_service_refuses_the_bomb_in_bounded_memory(tmp_path):
    _run(tmp_path / "runs", BAD, BOMB)
    _run(tmp_path / "runs", GOOD, {"status": "finished"})
    service = RunsService(NNxLab(rescan_s=1e9), tmp_path)
    key = service.discovery().folders[0].key
    tracemalloc.start()
    try:
        service.list_runs()
        with pytest.raises(Exception, match="anchors or aliases"):
            service.compare([(key, GOOD), (key, BAD)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, peak


HOSTILE_META = {
    "1" * 32: ({"status": "finished", "started_at": "yesterday"}, "started_at", "'yesterday'"),
    "2" * 32: ("status: finished\nstarted_at: 1.0e+300\n", "started_at", "1e+300"),
    "3" * 32: ({"status": "finished", "planned_epochs": 1.5}, "planned_epochs", "1.5"),
    "4" * 32: ({"status": "finished", "steps": -4}, "steps", "-4"),
    "5" * 32: ({"status": "finished", "writer": {"pid": "me"}}, "writer.pid", "'me'"),
    "6" * 32: ({"status": "done"}, "status", "'done'"),
    "7" * 32: ({"status": "finished", "best": {"value": float("nan")}}, "best.value", "nan"),
    "8" * 32: ({"status": "finished", "parent_run_id": "../x"}, "parent_run_id", "'../x'"),
}


def test_one_damaged_run_is_one_row_with_its_reason_and_the_others_list(api, jp_root_dir):
    runs = jp_root_dir / "runs"
    _run(runs, GOOD, {"status": "finished", "started_at": 1796000000.0})
    for run_id, (meta, _, _) in HOSTILE_META.items():
        _run(runs, run_id, meta)
    key, rows = _listing(api)
    assert sorted(rows) == sorted([GOOD, *HOSTILE_META])
    assert rows[GOOD]["status"] == "finished"
    for run_id, (_, field, shown) in HOSTILE_META.items():
        row = rows[run_id]
        assert row["status"] == "damaged", run_id
        assert row["error"].startswith(f"metadata.yaml: {field}: "), row["error"]
        assert shown in row["error"], row["error"]
        code, summary = api(f"runs/{key}/{run_id}")  # the run's own page answers too
        assert code == 200
        assert summary["run"]["status"] == "damaged"
        assert any(field in p for p in summary["problems"])


def test_a_malformed_code_record_or_run_yaml_in_compare_is_a_4xx_with_its_reason(api, jp_root_dir):
    runs = jp_root_dir / "runs"
    _run(runs, GOOD, {"status": "finished"})
    plans = {
        "c" * 32: {"record": {"values": {}, "code": [{"name": "no role"}]}},
        "d" * 32: {"record": {"values": {}, "code": "abc"}},
        "e" * 32: {"record": {"values": {}, "code": [5]}},
        "f" * 32: {"record": "not a mapping"},
    }
    for run_id, plan in plans.items():
        _run(runs, run_id, {"status": "finished"}, plan=plan)
    bad_config = {**_config(9), "train": {"n_epochs": 1.5, "seed": 9}}
    _run(runs, "9" * 32, {"status": "finished"}, config=bad_config)
    key, _ = _listing(api)
    for run_id in [*plans, "9" * 32]:
        code, reply = api("compare", params=[("run", f"{key}/{GOOD}"), ("run", f"{key}/{run_id}")])
        assert 400 <= code < 500, (run_id, code, reply)
        assert run_id in reply["message"], reply
    code, reply = api("compare", params=[("run", f"{key}/{GOOD}"), ("run", f"{key}/{'9' * 32}")])
    assert "train.n_epochs" in reply["message"]
    assert "1.5" in reply["message"]


def test_a_bad_file_a_service_did_not_expect_is_a_409_never_a_500(api, jp_serverapp):
    service = jp_serverapp.web_app.settings["nnx_lab_runs"]

    def damaged(**_):
        raise RunRecordError(service.server_root / "runs" / "metadata.yaml", "truncated")

    service.list_runs = damaged
    code, reply = api("runs")
    assert code == 409
    assert reply["message"] == "metadata.yaml: truncated"


def test_hostile_log_lines_are_counted_with_their_field_and_the_page_goes_on(api, jp_root_dir):
    runs = jp_root_dir / "runs"
    lines = [
        {**step_line(1), "lr": float("nan")},
        {**step_line(2), "step": 2.5},
        {
            "event": "run_started",
            "run_id": None,
            "run_dir": None,
            "n_epochs": 1,
            "start_epoch": 1,
            "start_step": 0,
            "steps_per_epoch": None,
            "time": 1e300,
        },
        step_line(3, loss=float("nan")),  # a diverging run's NaN loss is data
    ]
    path = fake_run(runs, GOOD, {"status": "finished"})
    raw = "".join(json.dumps(x) + "\n" for x in lines) + "[" * 10_000 + "]" * 10_000 + "\n"
    (path / "metrics.jsonl").write_text(raw)
    key, _ = _listing(api)
    code, page = api(f"runs/{key}/{GOOD}/log")
    assert code == 200
    assert [e["step"] for e in page["events"]] == [3]
    assert page["events"][0]["loss"] == "NaN"
    reasons = [d["reason"] for d in page["damage"]]
    assert page["bad_lines"] == 4
    assert reasons[0].startswith("lr: must be a finite number")
    assert reasons[1].startswith("step: must be a whole number")
    assert reasons[2].startswith("time: must be a Unix time")
    assert "nested deeper" in reasons[3]


def test_a_run_named_link_out_of_the_root_is_refused_by_the_server(api, jp_root_dir, tmp_path):
    runs = jp_root_dir / "runs"
    _run(runs, GOOD, {"status": "finished"})
    secret = _run(tmp_path / "elsewhere", "e" * 32, {"status": "finished", "error": "SECRET"})
    (runs / ("e" * 32)).symlink_to(secret)
    key, rows = _listing(api)
    assert rows["e" * 32]["status"] == "damaged"
    assert rows["e" * 32]["refused"] is True
    assert "SECRET" not in json.dumps(rows)
    for url in (f"runs/{key}/{'e' * 32}", f"runs/{key}/{'e' * 32}/log"):
        assert api(url)[0] == 403
    code, _ = api("compare", params=[("run", f"{key}/{GOOD}"), ("run", f"{key}/{'e' * 32}")])
    assert code == 403


# -- runs_roots from the command line ---------------------------------------------------------


def _roots(*argv):
    app = ServerApp()
    app.parse_command_line(list(argv))
    return NNxLab(parent=app).runs_roots


def test_the_documented_command_line_list_of_roots_is_read_as_a_list():
    assert _roots('--NNxLab.runs_roots=["/data/shared-runs"]') == ["/data/shared-runs"]
    assert _roots('--NNxLab.runs_roots=["/x", "~/y"]') == ["/x", "~/y"]
    assert _roots("--NNxLab.runs_roots=['/x', '/y']") == ["/x", "/y"]
    assert _roots("--NNxLab.runs_roots=/x", "--NNxLab.runs_roots=/y") == ["/x", "/y"]
    assert _roots("--NNxLab.runs_roots=/x") == ["/x"]
    assert _roots("--NNxLab.runs_roots=./[old]") == ["./[old]"]
    assert NNxLab(runs_roots=["~/experiments", "/data"]).runs_roots == ["~/experiments", "/data"]


@pytest.mark.parametrize("value", ["[/x", '["/x", 5]', "[]]", '[""]', "", "[[]]"])
def test_a_list_of_roots_that_cannot_be_read_is_refused_with_the_fix(value):
    with pytest.raises(TraitError, match="runs_roots") as info:
        _roots(f"--NNxLab.runs_roots={value}")
    assert "--NNxLab.runs_roots='[" in str(info.value) or "empty" in str(info.value)
