"""The TrainingMonitor in a real JupyterLab (and Notebook 7), driven by headless Chromium.

* quickstart.ipynb runs to the end under the monitor: status "finished", every step
  drawn (the chart's canvas holds the lines' pixels); hover reads out a step; the log
  toggle changes the axis; the screenshot goes to docs/img/monitor.png on request.
* Report writes the run's HTML report beside the notebook and says where.
* After a page reload the monitor redraws the same history from the kernel.
* monitor_stop.ipynb starts a long run in a background thread; the page is reloaded
  several times while it trains: each time the whole history comes back and Stop
  still ends the run cleanly (status "stopped", LAST on disk).
* monitor_nan.ipynb: a run whose loss turns NaN shows the non-finite marker.
* After a kernel restart, the saved notebook shows the fallback picture and the
  ``from_run`` hint instead of only "model not found".
* In a narrow pane the charts follow the widget's width; Notebook 7 works too.
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
from lab_harness import REPO, SCREENSHOTS, JupyterServer, Lab, open_lab, pixels
from playwright.sync_api import expect

pytestmark = pytest.mark.usefixtures("monitor_bundle")


TRAINED = re.compile(r"trained (\d+) iterations; saved under runs/([^/\s]+)/")
RUN_TIMEOUT = 120_000  # ms
DOCS_IMG = REPO / "docs" / "img" / "monitor.png"
RELOADS = 3


@dataclass
class Finished:
    lab: Lab
    steps: int
    run_id: str


def logged(run_dir: Path, event: str) -> int:
    """How many ``event`` lines the run's JSONL log holds (``step``: one per step)."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return sum(1 for line in lines if line.strip() and json.loads(line).get("event") == event)


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
        "data-steps", str(steps), timeout=RUN_TIMEOUT
    )
    return Finished(lab=lab, steps=steps, run_id=run_id)


@pytest.fixture(scope="module")
def quickstart(browser, jupyter_server: JupyterServer, request):
    """quickstart.ipynb, run to the end once in JupyterLab; shared by the tests below."""
    from lab_harness import close_lab

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
    chart = monitor.get_by_test_id("loss-chart")
    expect(chart).to_have_attribute("data-points", str(quickstart.steps))
    expect(chart).to_have_attribute("data-first", "1")
    # The run on disk agrees with what the monitor drew.
    run_dir = lab_root / "runs" / quickstart.run_id
    assert (run_dir / "checkpoints" / "last.json").is_file()
    meta = yaml.safe_load((run_dir / "metadata.yaml").read_text())
    assert meta["status"] == "finished"
    assert logged(run_dir, "step") == quickstart.steps
    epochs = logged(run_dir, "epoch_ended")
    expect(monitor.get_by_test_id("page-status")).to_have_text(f"1–{epochs} of {epochs}")
    rows = monitor.get_by_test_id("epochs-table").locator("tbody tr")
    expect(rows).to_have_count(epochs)
    # the live view hides the fallback output below it
    fallback = quickstart.lab.page.locator(".nnx-monitor-snapshot")
    expect(fallback).to_have_count(1)
    expect(fallback).to_be_hidden()


def test_monitor_screenshot_has_the_lines_drawn(quickstart: Finished):
    page = quickstart.lab.page
    monitor = monitor_of(quickstart.lab)
    chart = monitor.get_by_test_id("loss-chart")
    # the smoothed line (accent colour) and the raw loss (grey) are drawn on the canvas
    assert pixels(chart, "var(--nnx-accent)") > 300
    assert pixels(chart, "var(--nnx-raw)") > 100
    assert pixels(monitor.get_by_test_id("lr-chart"), "var(--nnx-second)") > 100
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / "monitor.png"
    page.set_viewport_size({"width": 1280, "height": 1400})
    monitor.evaluate("el => el.scrollIntoView({block: 'start'})")
    monitor.screenshot(path=shot, animations="disabled")
    # The committed copy is refreshed on request only, so a test run leaves the
    # working tree clean: NNX_UPDATE_DOCS_IMG=1 pytest tests/browser
    if os.environ.get("NNX_UPDATE_DOCS_IMG") == "1" or not DOCS_IMG.exists():
        DOCS_IMG.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, DOCS_IMG)


def test_hover_reads_out_the_step_under_the_pointer(quickstart: Finished):
    monitor = monitor_of(quickstart.lab)
    over = monitor.get_by_test_id("loss-chart").locator(".u-over")
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    quickstart.lab.page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    readout = monitor.get_by_test_id("loss-chart").get_by_test_id("readout")
    expect(readout).to_have_text(
        re.compile(r"^step [\d,]+ · loss [\d.e+-]+ · smoothed [\d.e+-]+ · lr [\d.e+-]+$")
    )
    expect(monitor.get_by_test_id("lr-chart").get_by_test_id("readout")).to_have_text(
        re.compile(r"^step [\d,]+ · lr ")
    )
    quickstart.lab.page.mouse.move(0, 0)


def test_the_log_toggle_changes_the_loss_axis(quickstart: Finished):
    monitor = monitor_of(quickstart.lab)
    chart = monitor.get_by_test_id("loss-chart")
    linear = [float(v) for v in chart.get_attribute("data-y-range").split(",")]
    before = chart.locator("canvas").screenshot()
    monitor.get_by_test_id("log-toggle").check()
    expect(chart).to_have_attribute("data-log", "y")
    expect(chart).not_to_have_attribute("data-y-range", ",".join(f"{v:.6g}" for v in linear))
    lo, hi = (float(v) for v in chart.get_attribute("data-y-range").split(","))
    assert lo > 0
    assert hi / lo >= 10  # the loss falls by more than a decade
    assert chart.locator("canvas").screenshot() != before
    monitor.get_by_test_id("log-toggle").uncheck()
    expect(chart).to_have_attribute("data-log", "")


def test_report_writes_the_runs_html_beside_the_notebook(quickstart: Finished, lab_root: Path):
    monitor = monitor_of(quickstart.lab)
    target = lab_root / f"report_{quickstart.run_id}.html"
    target.unlink(missing_ok=True)
    monitor.get_by_test_id("report").click()
    note = monitor.get_by_test_id("report-note")
    expect(note).to_have_text(f"Report written to {target}", timeout=RUN_TIMEOUT)
    page = target.read_text(encoding="utf-8")
    assert f"nnx-lab run {quickstart.run_id}" in page
    assert "nnx-report-data" in page
    expect(monitor.get_by_test_id("report")).to_be_enabled()
    target.unlink()


def test_monitor_redraws_after_reload(quickstart: Finished):
    lab = quickstart.lab
    lab.save()  # the widget's output (its model id) must be in the file to come back
    lab.reload()
    monitor = monitor_of(lab)
    expect(monitor.get_by_test_id("status")).to_have_text("finished", timeout=RUN_TIMEOUT)
    chart = monitor.get_by_test_id("loss-chart")
    expect(chart).to_have_attribute("data-steps", str(quickstart.steps), timeout=RUN_TIMEOUT)
    expect(chart).to_have_attribute("data-first", "1")
    assert quickstart.run_id in monitor.get_by_test_id("run-id").text_content()


def test_reloads_during_a_fit_bring_back_the_whole_history_and_stop_works(
    new_lab, jupyter_server: JupyterServer, lab_root: Path
):
    lab = new_lab()
    try:
        lab.open_notebook("monitor_stop.ipynb")
        lab.run_all()  # fit() returns at once: the run goes on in a thread
        assert lab.tracebacks() == []
        lab.save()  # the output with the widget must be in the file to come back
        for attempt in range(RELOADS + 1):
            monitor = monitor_of(lab)
            status = monitor.get_by_test_id("status")
            chart = monitor.get_by_test_id("loss-chart")
            expect(status).to_have_text("running", timeout=RUN_TIMEOUT)
            expect(chart).to_have_attribute(
                "data-steps", re.compile(r"^[1-9]\d*$"), timeout=RUN_TIMEOUT
            )
            # the whole history: from step 1, up to where the run is
            expect(chart).to_have_attribute("data-first", "1")
            step = int(monitor.get_by_test_id("step").text_content().split("/")[0].replace(",", ""))
            expect(chart).to_have_attribute(
                "data-steps",
                re.compile(r"^\d+$"),
                timeout=RUN_TIMEOUT,
            )
            lab.page.wait_for_function(
                "([fig, step]) => Number(fig.dataset.steps) >= step - 50",
                arg=[chart.element_handle(), step],
                timeout=RUN_TIMEOUT,
            )
            table = monitor.get_by_test_id("page-status")
            expect(table).to_have_text(re.compile(r" of [\d,]+$"), timeout=RUN_TIMEOUT)
            # the epoch table keeps up with the header's epoch counter (the run goes on
            # between two reads, so read the counter first and wait for the table)
            epoch = int(monitor.get_by_test_id("epoch").text_content().split("/")[0])
            lab.page.wait_for_function(
                "([el, epoch]) => Number(el.textContent.split(' of ').pop().replace(/,/g, ''))"
                " >= epoch - 2",
                arg=[table.element_handle(), epoch],
                timeout=10_000,
            )
            if attempt < RELOADS:
                lab.reload()
        monitor.get_by_test_id("stop").click()
        expect(status).to_have_text("stopped", timeout=RUN_TIMEOUT)
        expect(monitor.get_by_test_id("stop")).to_have_attribute(
            "title", "The run has ended (stopped)"
        )
        run_id = monitor.get_by_test_id("run-id").text_content().strip()
        run_dir = lab_root / "runs" / run_id
        assert (run_dir / "checkpoints" / "last.json").is_file()
        assert list((run_dir / "checkpoints").glob("*.safetensors"))
        meta = yaml.safe_load((run_dir / "metadata.yaml").read_text())
        assert meta["status"] == "stopped"
        # Every step the loop took before stopping is in the view.
        expect(chart).to_have_attribute("data-steps", str(logged(run_dir, "step")))
        # a stopped pill is not the grey of a new run's
        colors = monitor.evaluate(
            """el => ['created', 'stopped'].map(st => {
                const s = document.createElement('span');
                s.className = 'nnx-status';
                s.dataset.status = st;
                el.append(s);
                const c = getComputedStyle(s).backgroundColor;
                s.remove();
                return c;
            })"""
        )
        assert colors[0] != colors[1], colors
        assert "Unknown subshell_id" not in jupyter_server.log.read_text(errors="replace")
    finally:
        jupyter_server.shutdown_kernels()


def test_a_run_whose_loss_turns_nan_shows_the_marker(new_lab, jupyter_server: JupyterServer):
    lab = new_lab()
    try:
        lab.open_notebook("monitor_nan.ipynb")
        lab.run_all()
        assert lab.tracebacks() == []
        monitor = monitor_of(lab)
        expect(monitor.get_by_test_id("status")).to_have_text(
            re.compile("^(finished|failed)$"), timeout=RUN_TIMEOUT
        )
        badge = monitor.get_by_test_id("nonfinite")
        expect(badge).to_be_visible()
        expect(badge).to_have_text(re.compile(r"loss non-finite since step \d+"))
        since = re.search(r"step ([\d,]+)", badge.text_content()).group(1).replace(",", "")
        chart = monitor.get_by_test_id("loss-chart")
        expect(chart).to_have_attribute("data-nonfinite-since", since)
        assert pixels(chart, "var(--jp-error-color1, #d32f2f)") > 30  # the red mark
        expect(monitor.get_by_test_id("loss")).to_have_text(re.compile("^non-finite"))
        assert f"loss non-finite since step {since}" in lab.output_text()
    finally:
        jupyter_server.shutdown_kernels()


def test_after_a_kernel_restart_the_notebook_shows_the_last_picture_and_how_to_get_it_back(
    new_lab, jupyter_server: JupyterServer
):
    lab = new_lab()
    try:
        lab.open_notebook("quickstart.ipynb")
        finished = run_quickstart(lab)
        monitor = monitor_of(lab)
        # the view sends its picture once the run has ended; the kernel keeps it
        lab.page.wait_for_function(
            "() => !!document.querySelector('.nnx-monitor-snapshot img')", timeout=RUN_TIMEOUT
        )
        expect(lab.page.locator(".nnx-monitor-snapshot")).to_be_hidden()
        lab.save()
        # a fresh kernel: the widget models of the saved outputs no longer exist
        (session,) = jupyter_server.api("/api/sessions")
        jupyter_server.api(f"/api/kernels/{session['kernel']['id']}/restart", method="POST")
        lab.reload()
        expect(monitor).to_have_count(0, timeout=RUN_TIMEOUT)
        fallback = lab.page.locator(".nnx-monitor-snapshot")
        expect(fallback).to_be_visible(timeout=RUN_TIMEOUT)
        expect(fallback).to_contain_text(f'TrainingMonitor.from_run("{finished.run_id}")')
        expect(fallback).to_contain_text("status=finished")
        img = fallback.locator("img")
        lab.page.wait_for_function(
            "img => img.complete && img.naturalWidth > 300", arg=img.element_handle()
        )
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        fallback.screenshot(path=SCREENSHOTS / "fallback.png")
    finally:
        jupyter_server.shutdown_kernels()


def test_a_narrow_pane_stacks_the_charts_at_the_widget_width(quickstart: Finished):
    page = quickstart.lab.page
    monitor = monitor_of(quickstart.lab)
    page.set_viewport_size({"width": 1280, "height": 900})
    wide = monitor.get_by_test_id("epoch-chart").bounding_box()
    lr = monitor.get_by_test_id("lr-chart").bounding_box()
    assert abs(wide["y"] - lr["y"]) < 5  # side by side in a wide pane
    # narrow the notebook's own width, not the window: a split pane
    monitor.evaluate("el => { el.parentElement.style.width = '420px'; }")
    page.wait_for_timeout(300)
    box = monitor.bounding_box()
    epoch = monitor.get_by_test_id("epoch-chart").bounding_box()
    lr = monitor.get_by_test_id("lr-chart").bounding_box()
    assert box["width"] <= 430
    assert lr["y"] > epoch["y"] + 50  # stacked
    for chart in ("loss-chart", "epoch-chart", "lr-chart"):
        canvas = monitor.get_by_test_id(chart).locator("canvas").bounding_box()
        assert canvas["width"] >= 0.8 * box["width"] - 40, (chart, canvas, box)
    table = monitor.get_by_test_id("epochs-table").locator("xpath=..").bounding_box()
    assert table["x"] + table["width"] <= box["x"] + box["width"] + 1  # not cut off: it scrolls
    monitor.evaluate("el => { el.parentElement.style.width = ''; }")


def test_quickstart_finishes_in_notebook7(new_lab, jupyter_server: JupyterServer):
    lab = new_lab()
    try:
        lab.open_notebook("quickstart.ipynb", ui="notebook")
        run_quickstart(lab)
    finally:
        jupyter_server.shutdown_kernels()
