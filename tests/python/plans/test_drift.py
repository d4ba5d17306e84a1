"""The config-drift report: a mutated params value, a redefined loss function, a changed
plan, two runs, and a run against today's code; the re-fit banner and its switch; the
stated limits; and comparing two runs' records without torch."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import engine_factories as f
import plan_factories as pf
import pytest
import torch
import yaml

from nnx_lab import (
    ExperimentPlan,
    drift_report,
)
from nnx_lab.plans import ABSENT, ACTIONS, DriftReport, set_config_report

ROOT = Path(__file__).resolve().parents[3]
NET = pf.NET


@pytest.fixture(autouse=True)
def _quiet():
    before = set_config_report(False)
    yield
    set_config_report(before)


@pytest.fixture
def base(runs_root):
    return pf.toy_plan(runs_root, n_epochs=1)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """Write (and rewrite) a module of the user's, as an edited .py file next to a
    notebook; returns it imported (reloaded after a rewrite)."""
    folder = tmp_path / "user_code"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    names: list[str] = []

    def write(name: str, source: str, *, reload: bool = True):
        (folder / f"{name}.py").write_text(textwrap.dedent(source))
        importlib.invalidate_caches()
        if name in sys.modules:
            return importlib.reload(sys.modules[name]) if reload else sys.modules[name]
        names.append(name)
        return importlib.import_module(name)

    yield write
    for name in names:
        sys.modules.pop(name, None)


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


LOSS_V1 = """
import torch.nn.functional as F


def my_loss(out, y):
    return F.cross_entropy(out, y)
"""

LOSS_V2 = """
import torch.nn.functional as F


def my_loss(out, y):
    # smoothed since the first version
    return F.cross_entropy(out, y, label_smoothing=0.2)
"""


# -- a mutated params value -----------------------------------------------------------------
def test_a_reassigned_params_value_is_flagged_and_the_model_keeps_its_network(runs_root, capsys):
    model = f.model()
    assert not drift_report(model).drifted
    model.net_params = model.net_params.replace(hidden_dims=(64,))
    report = drift_report(model)
    row = report.row("net.hidden_dims")
    assert (row.then, row.now) == ([32, 16], [64])
    assert row.changed
    assert row.changes_run_id is True
    assert row.action == "rebuild the model"
    assert [r.what for r in report.changed] == ["net.hidden_dims"]
    set_config_report(True)
    run = model.train(f.train_params(runs_root, n_epochs=1))
    out = capsys.readouterr().out
    assert "values fixed when this model was built" in out
    assert "! net.hidden_dims: [32, 16] then, [64] now" in out
    assert "rebuild the model" in out
    assert "set_config_report(False)" in out
    assert run.config["net"]["hidden_dims"] == [32, 16]  # the record is what trained
    set_config_report(False)
    model.train(f.train_params(runs_root, n_epochs=1, overwrite_existing=True))
    assert capsys.readouterr().out == ""


def test_a_loss_module_mutated_in_place_lands_in_the_next_run(runs_root, base):
    loss = torch.nn.CrossEntropyLoss()
    model = f.model(loss=loss)
    params = f.train_params(runs_root, n_epochs=1)
    before = model.expected_run_id(params)
    plan = base.with_loss(loss)
    loss.label_smoothing = 0.2
    for handle in (model, plan):
        row = drift_report(handle).row("model.loss.settings")
        assert row.changed
        assert row.changes_run_id is True
        assert row.action == "a new run"
        assert "changed" in row.note
    assert model.expected_run_id(params) != before  # the next train() uses the new settings


# -- a redefined loss function --------------------------------------------------------------
def test_a_redefined_loss_function(user_module, base, capsys):
    name = _unique("losses")
    old = user_module(name, LOSS_V1).my_loss
    plan = base.with_loss(old)
    model = f.model(loss=old)
    assert not drift_report(plan).drifted
    assert not drift_report(model).drifted
    new = user_module(name, LOSS_V2).my_loss
    assert new is not old
    row = drift_report(plan).row("code model.loss")
    assert row.changed
    assert row.changes_run_id is True
    assert row.action == "rebuild the plan"
    assert "redefined" in row.note
    assert "plan.with_loss" in row.note
    assert row.then.split(" @")[0] == f"{name}.my_loss"
    assert drift_report(model).row("code model.loss").action == "rebuild the model"
    # the re-fit says so, and still runs the code the plan holds
    set_config_report(True)
    result = plan.fit()
    out = capsys.readouterr().out
    assert "this plan holds the code it was built with" in out
    assert "! code model.loss" in out
    assert "rebuild the plan" in out
    held, today = row.then.split("@")[1], row.now.split("@")[1]
    assert held != today
    assert result.run.config["model"]["loss"]["code"].startswith(held)  # the old code ran
    rebuilt = plan.with_loss(new)
    assert not drift_report(rebuilt).drifted


def test_an_edited_but_not_reloaded_module_is_named(user_module, base):
    name = _unique("losses")
    mod = user_module(name, LOSS_V1)
    plan = base.with_loss(mod.my_loss)
    user_module(name, LOSS_V2, reload=False)  # the file changes; the function object not
    row = drift_report(plan).row("code model.loss")
    assert row.changed
    assert row.action == "reload the module, then rebuild"
    assert "not reloaded" in row.note


# -- a changed plan and two runs ------------------------------------------------------------
def test_a_changed_plan(base):
    other = base.with_lr(1e-3).with_epochs(4).with_value("train.log_every", 5)
    report = drift_report(base, other)
    assert report.labels == ("A", "B")
    assert report.handle == "pair"
    lr = report.row("train.optim.max_lr")
    assert (lr.then, lr.now, lr.changed, lr.changes_run_id) == (1e-2, 1e-3, True, True)
    assert lr.action == "a new run"
    log = report.row("train.log_every")
    assert log.changed
    assert log.changes_run_id is False
    assert log.action == "nothing: does not affect results"
    assert {r.what for r in report.changed} == {
        "train.optim.max_lr",
        "train.n_epochs",
        "train.log_every",
    }
    assert not report.row("net.hidden_dims").changed
    assert not drift_report(base, base.with_seed(7)).drifted
    text = str(report)
    assert "! train.optim.max_lr" in text
    assert "unchanged rows" in text
    frame = report.to_frame()
    assert list(frame.columns[:3]) == ["what", "A", "B"]
    assert len(frame) == len(report.rows)
    assert set(report.to_frame(changed_only=True)["what"]) == {r.what for r in report.changed}
    assert all(r.action in (*ACTIONS, "") for r in report.rows)


def test_a_plan_against_the_run_it_fitted(base):
    result = base.fit()
    assert not drift_report(result, base).drifted
    report = drift_report(
        result.run.id, base.with_lr(1e-3), runs_root=base.value("train.runs_root")
    )
    assert [r.what for r in report.changed] == ["train.optim.max_lr"]
    assert any("data.train" in text and "Left out" in text for text in report.limits)


def test_two_runs(base, runs_root):
    a = base.fit()
    b = base.with_epochs(2).with_value("train.log_every", 5).fit()
    report = drift_report(a.run.id, b.run.id, runs_root=runs_root)
    assert {r.what for r in report.changed} == {"train.n_epochs", "train.log_every"}
    assert report.row("train.n_epochs").changes_run_id is True
    assert report.row("train.log_every").changes_run_id is False  # from plan.json
    assert not report.row("initial_weights").changed
    assert not report.row("data.train.batch_size").changed  # the run knows its pipeline
    assert report.sides == (f"run {a.run.id[:8]}", f"run {b.run.id[:8]}")
    same = drift_report(a.run, b, runs_root=runs_root)  # NNRun and FitResult work too
    assert [r.what for r in same.changed] == [r.what for r in report.changed]
    # two runs trained without a plan: run.yaml is the record
    x = f.model().train(f.train_params(runs_root / "x", n_epochs=1))
    y = f.model(net={"hidden_dims": [8]}).train(f.train_params(runs_root / "y", n_epochs=1))
    imperative = drift_report(x, y)
    assert {r.what for r in imperative.changed} == {"net.hidden_dims", "initial_weights"}


def test_two_run_records_compare_from_their_folders_alone(base, runs_root):
    a = base.fit()
    b = base.with_lr(1e-3).fit()
    code = textwrap.dedent(
        f"""
        from nnx_lab.plans import drift_report
        from nnx_lab.provenance import compare
        report = drift_report({a.run.id!r}, {b.run.id[:10]!r}, runs_root={str(runs_root)!r})
        assert [r.what for r in report.changed] == ["train.optim.max_lr"], report
        compare({a.run.id!r}, {b.run.id!r}, runs_root={str(runs_root)!r})
        report.to_json()
        print("compared")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "compared"


# -- a run against today's code -------------------------------------------------------------
FACTORY_V1 = """
import torch
from torch.utils.data import DataLoader, TensorDataset


def make_loader():
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(64, 8, generator=g), torch.randint(0, 3, (64,), generator=g)
    return DataLoader(TensorDataset(X, y), batch_size=32)
"""


def test_a_run_against_todays_code(user_module, base, runs_root):
    name = _unique("data")
    mod = user_module(name, FACTORY_V1)
    result = base.with_data(mod.make_loader, identity="toy").fit()
    assert not drift_report(result.run.id, runs_root=runs_root).drifted
    user_module(name, FACTORY_V1.replace("batch_size=32", "batch_size=16"))
    report = drift_report(result.run.id, runs_root=runs_root)
    assert report.sides == (f"run {result.run.id[:8]}", "today")
    row = report.row("code data.train")
    assert row.changed
    assert row.changes_run_id is None
    assert row.action == "a new run"
    assert "only if the loaders it returns differ" in row.note
    assert [r.what for r in report.changed] == ["code data.train"]
    # library versions: recorded by the run, compared with this process's
    meta_path = result.run.run_dir / "metadata.yaml"
    meta = yaml.safe_load(meta_path.read_text())
    meta["torch"] = "1.0.0"
    meta_path.write_text(yaml.safe_dump(meta))
    env = drift_report(result.run.id, runs_root=runs_root).row("environment.torch")
    assert (env.then, env.now) == ("1.0.0", torch.__version__)
    assert env.changes_run_id is False
    assert "overwrite_existing" in env.action


def test_code_that_cannot_be_found_today_is_a_stated_limit(user_module, base, runs_root):
    name = _unique("gone")
    mod = user_module(name, FACTORY_V1)
    result = base.with_data(mod.make_loader, identity="toy").fit()
    sys.modules.pop(name)
    (Path(mod.__file__)).unlink()
    report = drift_report(result.run.id, runs_root=runs_root)
    row = report.row("code data.train")
    assert not row.changed
    assert row.kind == "unknown"
    assert any("import its module" in text for text in report.limits)


def test_a_custom_loss_of_a_run_trained_without_a_plan(user_module, runs_root):
    name = _unique("losses")
    mod = user_module(name, LOSS_V1)
    run = f.model(loss=mod.my_loss).train(f.train_params(runs_root, n_epochs=1))
    assert not drift_report(run.id, runs_root=runs_root).drifted
    user_module(name, LOSS_V2)
    row = drift_report(run.id, runs_root=runs_root).row("code model.loss")
    assert row.changed
    assert row.changes_run_id is True
    assert row.action == "a new run"


def test_the_switch_follows_the_environment_until_set(monkeypatch):
    from nnx_lab.runs._output import config_report_enabled

    set_config_report(None)
    monkeypatch.setenv("NNX_CONFIG_REPORT", "0")
    assert not config_report_enabled()
    monkeypatch.setenv("NNX_CONFIG_REPORT", "1")
    assert config_report_enabled()
    assert set_config_report(False) is True  # returns what it was
    assert not config_report_enabled()
    with pytest.raises(TypeError, match="True, False or None"):
        set_config_report("no")


# -- limits and data form -------------------------------------------------------------------
def test_the_report_states_its_limits(base):
    borrowed = base.with_data(pf.make_train_loader(), val=pf.make_val_loader).with_callbacks(
        pf.EpochCounter
    )
    limits = drift_report(borrowed).limits
    assert any("borrowed DataLoader" in text for text in limits)
    assert any("global" in text and "helper" in text for text in limits)
    assert any("settings are not probed" in text for text in limits)
    assert "Limits:" in str(drift_report(borrowed))
    plain = ExperimentPlan().with_net(NET)  # no code: nothing to qualify
    assert drift_report(plain).limits == ()


def test_rows_as_json(base):
    report = drift_report(base, base.with_scheduler(patience=2))
    data = json.loads(json.dumps(report.to_json()))
    row = next(r for r in data["rows"] if r["what"] == "train.scheduler")
    assert row["changed"]
    assert row["then"] is None
    assert isinstance(row["now"], dict)
    assert isinstance(report, DriftReport)
    gone = drift_report(base.with_callbacks(pf.EpochCounter), base)
    callback = gone.row("code callbacks[0]")
    assert callback.now is ABSENT
    assert callback.changed
    assert next(r for r in gone.to_json()["rows"] if r["what"] == "code callbacks[0]")["now_absent"]
