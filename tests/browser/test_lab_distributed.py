"""distributed.ipynb in a real JupyterLab: two processes launched from the notebook, their
run followed live by the TrainingMonitor until "finished"; then a launched run stopped,
and resumed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from lab_harness import JupyterServer
from playwright.sync_api import expect

pytestmark = pytest.mark.usefixtures("monitor_bundle")

RUN_TIMEOUT = 180_000  # ms
FINISHED = re.compile(r"finished: (\d+) steps, 2 processes")


def test_a_launched_run_reaches_finished_in_the_monitor(
    new_lab, jupyter_server: JupyterServer, lab_root: Path
):
    lab = new_lab()
    lab.open_notebook("distributed.ipynb")
    lab.run_all()
    assert lab.tracebacks() == []
    match = FINISHED.search(lab.output_text())
    assert match, lab.output_text()
    steps = int(match.group(1))
    monitors = lab.page.locator(".nnx-monitor")
    expect(monitors).to_have_count(3)
    first, stopped, resumed = (monitors.nth(i) for i in range(3))
    expect(first.get_by_test_id("status")).to_have_text("finished", timeout=RUN_TIMEOUT)
    chart = first.get_by_test_id("loss-chart")
    expect(chart).to_have_attribute("data-steps", str(steps), timeout=RUN_TIMEOUT)
    expect(first.get_by_test_id("error")).to_have_text("")
    expect(stopped.get_by_test_id("status")).to_have_text("stopped", timeout=RUN_TIMEOUT)
    expect(resumed.get_by_test_id("status")).to_have_text("finished", timeout=RUN_TIMEOUT)

    # what the monitor drew is what rank 0 wrote, and the two ranks both ran
    run_id = first.get_by_test_id("run-id").text_content().strip().split()[-1]
    run_dir = next((lab_root / "runs").glob(f"{run_id[:8]}*"))
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert sum(json.loads(x).get("event") == "step" for x in lines if x.strip()) == steps
    launches = sorted((lab_root / "runs" / ".launches").iterdir())
    assert any((folder / "rank1.log").is_file() for folder in launches)
    jupyter_server.shutdown_kernels()
