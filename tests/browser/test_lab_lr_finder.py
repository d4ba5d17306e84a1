"""The LRFinderWidget in a real JupyterLab, driven by headless Chromium on
notebooks/lr_finder.ipynb.

* Run All: the sweep draws its whole curve, the suggestion is marked, hovering reads
  (LR, loss).
* A click on the curve chooses a rate: the Chosen LR field and the chart's mark follow,
  and the kernel holds it (``finder.chosen_lr``).
* Use this LR: the linked PlanBuilder's learning-rate field shows the chosen rate.
* A page reload keeps the curve, the choice and the builder's field.
"""

from __future__ import annotations

import re

import pytest
from lab_harness import REPO, JupyterServer, Lab
from playwright.sync_api import expect

NOTEBOOK = "lr_finder.ipynb"
RUN_TIMEOUT = 240_000  # ms: a sweep and two short fits on a loaded 2-core machine
LR_FIELD = "field-train.optim.max_lr"


@pytest.fixture(scope="module", autouse=True)
def lr_finder_bundle() -> None:
    for name in ("lr_finder.js", "plan_builder.js"):
        if not (REPO / "nnx_lab" / "static" / name).exists():
            pytest.fail(f"nnx_lab/static/{name} is missing: run `npm run build`", pytrace=False)


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
    # the notebook used the suggestion: the builder's field holds it
    field = lab.page.get_by_test_id(LR_FIELD)
    assert float(field.input_value()) == pytest.approx(suggested, rel=1e-6)
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
    expect(field).not_to_have_value(re.compile(re.escape(f"{suggested}")))
    assert float(field.input_value()) == pytest.approx(chosen, rel=1e-6)
    expect(finder.get_by_test_id("plan-lr")).to_contain_text("builder max_lr")
    expect(finder.get_by_test_id("error")).to_have_text("")

    # a reload keeps the curve, the choice and the builder's field
    lab.save()
    lab.reload()
    finder = finder_of(lab)
    chart = finder.get_by_test_id("lr-chart")
    expect(chart).to_have_attribute("data-points", "100")
    assert float(chart.get_attribute("data-chosen")) == pytest.approx(chosen)
    assert float(lab.page.get_by_test_id(LR_FIELD).input_value()) == pytest.approx(chosen, rel=1e-6)
    assert "Unknown subshell_id" not in jupyter_server.log_tail(400)
    jupyter_server.shutdown_kernels()
