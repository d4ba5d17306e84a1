"""The monitor's Report button: the view asks, the kernel writes the run's one-file HTML
report (``report_<run id>.html`` in the working folder, or ``report_path``) and answers
the view that asked with where it is, or why not (issue 27)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import nnx_lab
from nnx_lab import Devices, Losses, Nets, NNModel, NNModelParams, NNParams, NNTrainParams
from nnx_lab.errors import ConfigError
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import FakeFrontend


@pytest.fixture(autouse=True)
def _no_bar(monkeypatch):
    monkeypatch.setenv("NNX_TQDM_DISABLE", "1")


def _train(root, monitor=None):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(64, 4, generator=g)
    y = (X[:, 0] > 0).long()
    model = NNModel(
        net_params=NNParams(input_dim=4, output_dim=2, hidden_dims=[8]),
        params=NNModelParams(net=Nets.FEED_FWD, device=Devices.CPU, loss=Losses.CROSS_ENTROPY),
    )
    loader = DataLoader(TensorDataset(X, y), batch_size=32)
    params = NNTrainParams(n_epochs=2, train_loader=loader, runs_root=str(root))
    return model.train(params=params, callbacks=[monitor] if monitor else [])


def _click_report(fe: FakeFrontend) -> dict:
    fe.clear()
    fe.widget._dispatch_frontend_msg(fe.widget, {"kind": "report", "view": fe.view}, [])
    replies = [c for c in fe.custom if c.get("kind") == "report_done"]
    assert len(replies) == 1
    assert replies[0]["to"] == fe.view
    return replies[0]


def test_report_writes_beside_the_notebook_and_says_where(tmp_path, monkeypatch):
    notebook = tmp_path / "notebook"
    notebook.mkdir()
    monkeypatch.chdir(notebook)  # a notebook's kernel runs in the notebook's folder
    monitor = TrainingMonitor()
    fe = FakeFrontend(monitor)
    try:
        run = _train(tmp_path / "runs", monitor)
        reply = _click_report(fe)
        assert "error" not in reply
        target = notebook / f"report_{run.id}.html"
        assert reply["path"] == str(target)
        # the page nnx_lab.report writes for this run
        expected = nnx_lab.report(run.id, tmp_path / "expected.html", runs_root=tmp_path / "runs")
        assert target.read_text(encoding="utf-8") == expected.read_text(encoding="utf-8")
        assert monitor.error == ""
    finally:
        monitor.close()


def test_a_path_set_on_the_monitor_and_a_replayed_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = _train(tmp_path / "runs")
    monitor = TrainingMonitor.from_run(run.id, runs_root=tmp_path / "runs")
    try:
        (tmp_path / "shared").mkdir()
        monitor.report_path = tmp_path / "shared" / "for_the_class.html"
        reply = _click_report(FakeFrontend(monitor))
        assert reply["path"] == str(tmp_path / "shared" / "for_the_class.html")
        page = (tmp_path / "shared" / "for_the_class.html").read_text(encoding="utf-8")
        assert f"nnx-lab run {run.id}" in page
        assert not (tmp_path / f"report_{run.id}.html").exists()
        # from code, the same: a path given wins
        assert monitor.write_report("mine.html") == tmp_path / "mine.html"
        assert (tmp_path / "mine.html").is_file()
    finally:
        monitor.close()


def test_a_refusal_is_the_answer_and_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monitor = TrainingMonitor()
    fe = FakeFrontend(monitor)
    try:
        reply = _click_report(fe)  # nothing trained yet
        assert "path" not in reply
        assert "nnx_lab.report(run_id, path)" in reply["error"]
        run = _train(tmp_path / "runs", monitor)
        monitor.report_path = tmp_path / "no_such_folder" / "r.html"
        reply = _click_report(fe)
        assert "does not exist" in reply["error"]
        assert list(tmp_path.glob("*.html")) == []
        assert not (tmp_path / "no_such_folder").exists()
        assert monitor.error == ""  # said beside the button, not under the widget
        with pytest.raises(ConfigError, match="report_path"):
            monitor.report_path = tmp_path  # a folder
        with pytest.raises(ConfigError, match="report_path"):
            monitor.report_path = 3
        monitor.report_path = None
        assert _click_report(fe)["path"] == str(tmp_path / f"report_{run.id}.html")
    finally:
        monitor.close()
