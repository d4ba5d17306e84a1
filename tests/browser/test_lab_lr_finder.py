"""The LRFinderWidget in a real JupyterLab, driven by headless Chromium on
notebooks/lr_finder.ipynb.

* Run All: the sweep draws its whole curve, the suggestion is marked, hovering reads
  (LR, loss).
* A click on the curve chooses a rate: the Chosen LR field and the chart's mark follow,
  and the kernel holds it (``finder.chosen_lr``).
* Use this LR: the linked PlanBuilder's learning-rate field shows the chosen rate.
* A page reload keeps the curve, the choice and the builder's field.
* A long sweep (30,000 steps, a notebook written here): Stop while it runs ends it; the
  widget says ``stopped`` (not "Stopping…" forever), and so does the kernel. A second
  sweep is held after its last step: Stop then ends the reading of the curve too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lab_harness import REPO, JupyterServer, Lab, write_notebook
from playwright.sync_api import expect

NOTEBOOK = "lr_finder.ipynb"
RUN_TIMEOUT = 240_000  # ms: a sweep and two short fits on a loaded 2-core machine
LR_FIELD = "field-train.optim.max_lr"


@pytest.fixture(scope="module", autouse=True)
def lr_finder_bundle() -> None:
    for name in ("lr_finder.js", "plan_builder.js"):
        if not (REPO / "nnx_lab" / "static" / name).exists():
            pytest.fail(f"nnx_lab/static/{name} is missing: run `npm run build`", pytrace=False)


def three_digits(lr: float) -> float:
    """What "Use this LR" writes into the builder: the rate to 3 significant digits."""
    return float(f"{lr:.3g}")


def finder_of(lab: Lab):
    return lab.page.locator(".nnx-lr-finder").first


def kernel_value(lab: Lab, code: str) -> str:
    """Run ``code`` in a new last cell and return what it printed (then delete the cell)."""
    page = lab.page
    page.evaluate(
        """(code) => {
            const panel = window.jupyterapp.shell.currentWidget;
            const nb = panel.content;
            nb.activeCellIndex = nb.widgets.length - 1;
            window.jupyterapp.commands.execute('notebook:insert-cell-below');
            nb.activeCell.model.sharedModel.setSource(code);
        }""",
        code,
    )
    lab.run_command("notebook:run-cell")
    lab.wait_idle()
    cell = page.locator(".jp-Notebook .jp-CodeCell").last
    expect(cell.locator(".jp-OutputArea-output")).not_to_have_count(0)
    text = cell.locator(".jp-OutputArea-output").first.text_content().strip()
    lab.run_command("notebook:delete-cell")
    return text


def test_a_click_on_the_curve_picks_a_rate_and_use_sets_the_builder(
    new_lab, jupyter_server: JupyterServer
):
    lab = new_lab()
    lab.open_notebook(NOTEBOOK)
    lab.run_all(timeout=RUN_TIMEOUT)
    assert lab.tracebacks() == []
    finder = finder_of(lab)
    expect(finder.get_by_test_id("status")).to_have_text("finished")
    chart = finder.get_by_test_id("lr-chart")
    expect(chart).to_have_attribute("data-points", "100")
    suggested = float(chart.get_attribute("data-suggested"))
    # the notebook used the suggestion: the builder's field holds it, to 3 digits
    field = lab.page.get_by_test_id(LR_FIELD)
    assert float(field.input_value()) == three_digits(suggested)
    before_use = field.input_value()
    assert float(chart.get_attribute("data-chosen")) == pytest.approx(suggested)

    over = chart.locator(".u-over")
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    # hover: the readout names a rate and a loss
    over.hover(position={"x": box["width"] * 0.5, "y": box["height"] / 2})
    readout = re.compile(r"^LR \d\S* · loss \S+ · smoothed")
    expect(finder.get_by_test_id("readout")).to_have_text(readout)

    # a click well left of the suggestion (log-x: 20% of the width from 1e-7)
    over.click(position={"x": box["width"] * 0.2, "y": box["height"] / 2})
    expect(chart).not_to_have_attribute("data-chosen", chart.get_attribute("data-suggested"))
    chosen = float(chart.get_attribute("data-chosen"))
    assert 1e-7 < chosen < suggested
    shown = finder.get_by_test_id("chosen-lr")
    expect(shown).to_have_value(re.compile(r"^\d(\.\d+)?e-\d+$"))
    assert float(shown.input_value()) == pytest.approx(chosen, rel=5e-3)  # 3 digits shown
    # the kernel holds the pick at full precision
    assert float(kernel_value(lab, "print(repr(finder.chosen_lr))")) == pytest.approx(chosen)

    # Use this LR: the linked builder's learning-rate field follows
    finder.get_by_test_id("use").click()
    expect(field).not_to_have_value(before_use)
    assert float(field.input_value()) == three_digits(chosen)
    expect(finder.get_by_test_id("plan-lr")).to_contain_text("builder max_lr")
    expect(finder.get_by_test_id("error")).to_have_text("")

    # a reload keeps the curve, the choice and the builder's field
    lab.save()
    lab.reload()
    finder = finder_of(lab)
    chart = finder.get_by_test_id("lr-chart")
    expect(chart).to_have_attribute("data-points", "100")
    assert float(chart.get_attribute("data-chosen")) == pytest.approx(chosen)
    assert float(lab.page.get_by_test_id(LR_FIELD).input_value()) == three_digits(chosen)
    assert "Unknown subshell_id" not in jupyter_server.log_tail(400)
    jupyter_server.shutdown_kernels()


LONG_SWEEP = """
from nnx_lab import ExperimentPlan
from nnx_lab.example_data import WINE_DIMS, wine_train_loader, wine_val_loader
from nnx_lab.widgets import LRFinderWidget

plan = (
    ExperimentPlan()
    .with_net(hidden_dims=[8], **WINE_DIMS)
    .with_data(wine_train_loader, val=wine_val_loader, identity="wine")
    .with_seed(0)
)
# small rates: the sweep does not diverge, it runs until it is stopped
finder = LRFinderWidget(plan, num_iter=30_000, start_lr=1e-7, end_lr=1e-4)
finder
"""

HELD_SWEEP = """
import time


class HoldAfterTheLastStep:
    \"\"\"Holds the sweep after its last step until Stop is clicked, so the click lands
    while the curve is being read.\"\"\"

    def on_attach(self, control):
        self.control = control

    def on_sweep_points(self, event):
        if any(p[0] == 59 for p in event.points):
            while not self.control.stop_requested:
                time.sleep(0.05)


held = LRFinderWidget(plan, num_iter=60, end_lr=1e-3, callbacks=[HoldAfterTheLastStep()])
held
"""


@pytest.fixture(scope="module")
def long_sweep_notebook(lab_root: Path) -> str:
    name = "lr_finder_long_sweep.ipynb"
    write_notebook(lab_root / name, [LONG_SWEEP, HELD_SWEEP])
    return name


def test_stop_ends_a_long_sweep_and_the_widget_says_stopped(
    new_lab, jupyter_server: JupyterServer, long_sweep_notebook: str
):
    lab = new_lab()
    try:
        lab.open_notebook(long_sweep_notebook)
        lab.run_all()  # the cell returns at once: the sweep runs in a background thread
        finder = finder_of(lab)
        expect(finder.get_by_test_id("status")).to_have_text("running", timeout=RUN_TIMEOUT)
        progress = finder.get_by_test_id("progress")
        expect(progress).to_have_text(re.compile(r"^\d[\d,]* / 30,000 steps$"))
        chart = finder.get_by_test_id("lr-chart")
        # some of the curve is drawn: the sweep is well under way
        lab.page.wait_for_function(
            "(el) => Number(el.dataset.points) >= 50",
            arg=chart.element_handle(),
            timeout=RUN_TIMEOUT,
        )
        stop = finder.get_by_test_id("stop")
        expect(stop).to_be_enabled()
        stop.click()
        # ended, and said so: not "Stopping…" forever
        expect(finder.get_by_test_id("status")).to_have_text("stopped", timeout=30_000)
        expect(stop).to_have_text("Stop")
        expect(stop).to_be_disabled()
        expect(finder.get_by_test_id("restart")).to_be_enabled()
        expect(finder.get_by_test_id("reason")).to_have_text("stopped from the LR finder")
        done = int(re.match(r"^([\d,]+) /", progress.text_content()).group(1).replace(",", ""))
        assert 50 <= done < 30_000
        # the suggestion of the curve so far is there
        expect(chart).not_to_have_attribute("data-suggested", "")
        # the kernel agrees
        said = kernel_value(lab, "print(finder.status, len(finder.result.lrs))")
        status, swept = said.split()
        assert status == "stopped"
        assert int(swept) == done

        # Stop after the last step, while the curve is read: that phase ends too
        held = lab.page.locator(".nnx-lr-finder").nth(1)
        expect(held.get_by_test_id("progress")).to_have_text("60 / 60 steps", timeout=RUN_TIMEOUT)
        expect(held.get_by_test_id("status")).to_have_text("running")
        held.get_by_test_id("stop").click()
        expect(held.get_by_test_id("status")).to_have_text("stopped", timeout=30_000)
        expect(held.get_by_test_id("stop")).to_have_text("Stop")
        expect(held.get_by_test_id("reason")).to_have_text(
            "stopped from the LR finder while the curve was read: the valley rule was not computed"
        )
        expect(held.get_by_test_id("rules")).to_contain_text("valley no valley found")
        assert lab.tracebacks() == []
        assert "Unknown subshell_id" not in jupyter_server.log_tail(400)
    finally:
        jupyter_server.shutdown_kernels()
