"""The TrainingMonitor in a real JupyterLab (and Notebook 7), driven by headless Chromium.

* quickstart.ipynb runs to the end under the monitor: status "finished", one loss point
  drawn per optimizer step; the monitor's screenshot goes to docs/img/monitor.png.
* After a page reload the monitor redraws the same history from the kernel.
* monitor_stop.ipynb starts a long run in a background thread; the Stop button ends it
  cleanly: status "stopped", LAST checkpoint on disk, metadata.yaml says stopped.
* The quickstart also finishes in Notebook 7's UI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from lab_harness import REPO, SCREENSHOTS, JupyterServer, Lab, close_lab, open_lab
from playwright.sync_api import expect

pytestmark = pytest.mark.usefixtures("monitor_bundle")


TRAINED = re.compile(r"trained (\d+) iterations; saved under runs/([^/\s]+)/")
RUN_TIMEOUT = 120_000  # ms
DOCS_IMG = REPO / "docs" / "img" / "monitor.png"


@dataclass
class Finished:
    lab: Lab
    steps: int
    run_id: str


def logged(run_dir: Path, event: str) -> int:
    """How many ``event`` lines the run's JSONL log holds (``step``: one per step)."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return sum(1 for line in lines if line.strip() and json.loads(line).get("event") == event)


def epoch_rows(monitor):
    return monitor.get_by_test_id("epochs-table").locator("tbody tr")


def monitor_of(lab: Lab, index: int = 0):
    return lab.page.locator(".nnx-monitor").nth(index)


def run_quickstart(lab: Lab) -> Finished:
    lab.run_all()
    assert lab.tracebacks() == []
    match = TRAINED.search(lab.output_text())
    assert match, f"no 'trained N iterations' line in the outputs:\n{lab.output_text()}"
    steps, run_id = int(match.group(1)), match.group(2)
    assert steps > 0
    monitor = monitor_of(lab)
    expect(monitor.get_by_test_id("status")).to_have_text("finished", timeout=RUN_TIMEOUT)
    expect(monitor.get_by_test_id("loss-chart")).to_have_attribute(
        "data-points", str(steps), timeout=RUN_TIMEOUT
    )
    return Finished(lab=lab, steps=steps, run_id=run_id)


@pytest.fixture(scope="module")
def quickstart(browser, jupyter_server: JupyterServer, request):
    """quickstart.ipynb, run to the end once in JupyterLab; shared by the tests below."""
    lab = open_lab(browser, jupyter_server)
    failed = True
    try:
        lab.open_notebook("quickstart.ipynb")
        result = run_quickstart(lab)
        failed = False
        yield result
    finally:
        close_lab(lab, "quickstart", failed=failed or request.session.testsfailed > 0)
        jupyter_server.shutdown_kernels()


def test_quickstart_finishes_with_every_step_drawn(quickstart: Finished, lab_root: Path):
    monitor = monitor_of(quickstart.lab)
    assert quickstart.run_id in monitor.get_by_test_id("run-id").text_content()
    expect(monitor.get_by_test_id("error")).to_have_text("")
    # The run on disk agrees with what the monitor drew.
    run_dir = lab_root / "runs" / quickstart.run_id
    assert (run_dir / "checkpoints" / "last.json").is_file()
    meta = yaml.safe_load((run_dir / "metadata.yaml").read_text())
    assert meta["status"] == "finished"
    assert logged(run_dir, "step") == quickstart.steps
    # One row per validated epoch, the last one (where EarlyStopping may stop) included.
    expect(epoch_rows(monitor)).to_have_count(logged(run_dir, "epoch_ended"), timeout=10_000)


def test_monitor_screenshot(quickstart: Finished):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / "monitor.png"
    page = quickstart.lab.page
    monitor = monitor_of(quickstart.lab)
    # Tall enough for the whole monitor below the notebook toolbar.
    page.set_viewport_size({"width": 1280, "height": 1400})
    monitor.evaluate("el => el.scrollIntoView({block: 'start'})")
    monitor.screenshot(path=shot, animations="disabled")
    assert shot.stat().st_size > 1000
    # The committed copy is refreshed on request only, so a test run leaves the
    # working tree clean: NNX_UPDATE_DOCS_IMG=1 pytest tests/browser
    if os.environ.get("NNX_UPDATE_DOCS_IMG") == "1" or not DOCS_IMG.exists():
        DOCS_IMG.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, DOCS_IMG)


def test_monitor_redraws_after_reload(quickstart: Finished):
    lab = quickstart.lab
    lab.save()  # the widget's output (its model id) must be in the file to come back
    lab.reload()
    monitor = monitor_of(lab)
    expect(monitor.get_by_test_id("status")).to_have_text("finished", timeout=RUN_TIMEOUT)
    expect(monitor.get_by_test_id("loss-chart")).to_have_attribute(
        "data-points", str(quickstart.steps), timeout=RUN_TIMEOUT
    )
    assert quickstart.run_id in monitor.get_by_test_id("run-id").text_content()


def test_stop_button_stops_a_long_run(new_lab, jupyter_server: JupyterServer, lab_root: Path):
    lab = new_lab()
    try:
        lab.open_notebook("monitor_stop.ipynb")
        lab.run_all()  # fit() returns at once: the run goes on in a thread
        assert lab.tracebacks() == []
        monitor = monitor_of(lab)
        status = monitor.get_by_test_id("status")
        chart = monitor.get_by_test_id("loss-chart")
        expect(status).to_have_text("running", timeout=RUN_TIMEOUT)
        expect(chart).to_have_attribute(
            "data-points", re.compile(r"^[1-9]\d*$"), timeout=RUN_TIMEOUT
        )
        monitor.get_by_test_id("stop").click()
        expect(status).to_have_text("stopped", timeout=RUN_TIMEOUT)
        points = int(chart.get_attribute("data-points"))
        assert points > 0
        run_id = monitor.get_by_test_id("run-id").text_content().strip()
        run_dir = lab_root / "runs" / run_id
        assert (run_dir / "checkpoints" / "last.json").is_file()
        assert list((run_dir / "checkpoints").glob("*.safetensors"))
        meta = yaml.safe_load((run_dir / "metadata.yaml").read_text())
        assert meta["status"] == "stopped"
        # Every step the loop took before stopping is drawn.
        expect(chart).to_have_attribute("data-points", str(logged(run_dir, "step")))
    finally:
        jupyter_server.shutdown_kernels()


def test_quickstart_finishes_in_notebook7(new_lab, jupyter_server: JupyterServer):
    lab = new_lab()
    try:
        lab.open_notebook("quickstart.ipynb", ui="notebook")
        run_quickstart(lab)
    finally:
        jupyter_server.shutdown_kernels()
