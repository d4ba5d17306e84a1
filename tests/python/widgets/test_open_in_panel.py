"""From a notebook to a run's panel: ``nnx_lab.open_in_panel`` and the TrainingMonitor's
``runs_root`` (what its header's "Open in panel" link names the run's folder by)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import nnx_lab
from nnx_lab.widgets import TrainingMonitor, open_in_panel
from nnx_lab.widgets._panel import OPEN_MIME, panel_bundle
from nnx_lab.widgets._testing import feed, scripted_run, write_jsonl

R1 = "3fa2" + "0" * 28


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "runs"
    (root / R1).mkdir(parents=True)
    (root / R1 / "metadata.yaml").write_text("status: finished\n")
    return root


def test_the_output_names_the_run_and_the_real_path_of_its_folder(runs, tmp_path):
    link = tmp_path / "via-link"
    link.symlink_to(runs)
    bundle = panel_bundle("3fa2", link)  # a prefix, through a linked root
    data = bundle[OPEN_MIME]
    assert data["run_id"] == R1
    assert data["runs_root"] == str(runs.resolve())
    assert len(data["nonce"]) == 16
    assert panel_bundle(R1, runs)[OPEN_MIME]["nonce"] != data["nonce"]  # each call opens once
    assert R1 in bundle["text/plain"]
    assert "nnx-lab runs" in bundle["text/html"]


def test_open_in_panel_displays_the_output(runs, monkeypatch):
    shown = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False: shown.append((obj, raw)))
    assert nnx_lab.open_in_panel is open_in_panel
    assert open_in_panel(R1, runs) is None
    ((bundle, raw),) = shown
    assert raw is True
    assert bundle[OPEN_MIME]["run_id"] == R1


def test_ids_that_name_no_run_are_refused_before_anything_is_shown(runs, tmp_path, monkeypatch):
    shown = []
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda *a, **k: shown.append(a))
    with pytest.raises(ValueError, match="is not a run id"):
        open_in_panel("../etc", runs)
    with pytest.raises(FileNotFoundError, match="no run 'beef'"):
        open_in_panel("beef", runs)
    outside = tmp_path / "elsewhere" / ("b" * 32)
    outside.mkdir(parents=True)
    (runs / ("b" * 32)).symlink_to(outside)
    with pytest.raises(ValueError, match="leads outside the runs root"):
        open_in_panel("b" * 32, runs)
    assert shown == []


def test_the_monitor_knows_the_folder_of_the_run_it_shows(tmp_path):
    runs = tmp_path / "runs"
    events = scripted_run(run_id=R1, n_epochs=1, steps_per_epoch=3)
    m = TrainingMonitor()
    try:
        assert m.runs_root == ""
        cwd = os.getcwd()
        os.chdir(tmp_path)  # the run_dir a log records is relative to the writer's cwd
        try:
            feed(m, events)
        finally:
            os.chdir(cwd)
        assert m.runs_root == str(runs.resolve())
        assert "runs_root" in m.keys  # synced to the view
    finally:
        m.close()
    (runs / R1).mkdir(parents=True)
    write_jsonl(runs / R1 / "metrics.jsonl", events)
    replay = TrainingMonitor.from_run(R1, runs_root=Path(runs), follow=False)
    try:
        assert replay.runs_root == str(runs.resolve())
    finally:
        replay.close()
