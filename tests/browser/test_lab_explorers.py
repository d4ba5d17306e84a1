"""The CalibrationExplorer and the AbstentionExplorer in a real JupyterLab (and Notebook 7),
driven by headless Chromium.

* calibration_and_abstention.ipynb runs to the end. Moving the temperature slider with the
  mouse changes the ECE the explorer shows; after a page reload the explorer shows the
  temperature the slider was left at, with the same ECE. Fit and Save work from their
  buttons (a calibrator file appears where the path box says).
* Moving the threshold slider changes the coverage; a reload keeps the threshold and the
  coverage; a risk ceiling typed in chooses a threshold.
* A notebook written here makes an explorer that measures in the kernel
  (``compute="kernel"``): the slider changes ECE there too, a reload keeps it, and a bad
  temperature typed in is refused with a message while the kernel keeps its own. The
  same notebook works in Notebook 7.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from lab_harness import REPO, SCREENSHOTS, JupyterServer, Lab, open_lab, write_notebook
from playwright.sync_api import expect

NOTEBOOK = "calibration_and_abstention.ipynb"
RUN_TIMEOUT = 300_000  # ms: the notebook trains a network on 2 shared cores
DOCS_IMG = REPO / "docs" / "img"

pytestmark = pytest.mark.usefixtures("explorer_bundles")


@pytest.fixture(scope="session")
def explorer_bundles() -> None:
    for name in ("calibration.js", "abstention.js"):
        if not (REPO / "nnx_lab" / "static" / name).exists():
            pytest.fail(f"nnx_lab/static/{name} is missing: run `npm run build`", pytrace=False)


@pytest.fixture(scope="module")
def classroom(browser, jupyter_server: JupyterServer, request):
    """calibration_and_abstention.ipynb run to the end once, in JupyterLab."""
    from lab_harness import close_lab

    lab = open_lab(browser, jupyter_server)
    failed = True
    try:
        lab.open_notebook(NOTEBOOK)
        lab.run_all(timeout=RUN_TIMEOUT)
        assert lab.tracebacks() == []
        failed = False
        yield lab
    finally:
        close_lab(lab, "classroom", failed=failed or request.session.testsfailed > 0)
        jupyter_server.shutdown_kernels()


def calibration_of(lab: Lab):
    return lab.page.locator(".nnx-calibration").first


def abstention_of(lab: Lab):
    return lab.page.locator(".nnx-abstention").first


def drawn(explorer) -> dict[str, str]:
    fig = explorer.get_by_test_id("reliability-chart")
    expect(fig).to_have_attribute("data-ece", re.compile(r"^\d"), timeout=RUN_TIMEOUT)
    return {
        "temperature": fig.get_attribute("data-temperature"),
        "ece": fig.get_attribute("data-ece"),
        "shown": explorer.get_by_test_id("ece").text_content(),
    }


def click_slider(slider, fraction: float) -> None:
    """Click the slider's track at ``fraction`` of its width, as a user does."""
    slider.scroll_into_view_if_needed()
    box = slider.bounding_box()
    slider.click(position={"x": box["width"] * fraction, "y": box["height"] / 2})


def screenshot(explorer, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / name
    explorer.page.set_viewport_size({"width": 1280, "height": 1400})
    explorer.evaluate("el => el.scrollIntoView({block: 'start'})")
    explorer.page.wait_for_timeout(300)  # the charts follow the width they were given
    explorer.screenshot(path=shot, animations="disabled")
    target = DOCS_IMG / name
    if os.environ.get("NNX_UPDATE_DOCS_IMG") == "1" or not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, target)


def test_moving_the_temperature_slider_changes_ece_and_a_reload_keeps_it(classroom: Lab):
    lab = classroom
    explorer = calibration_of(lab)
    # the notebook fitted the temperature from code; the view shows it
    fitted = re.search(r"fitted T = ([\d.]+)", lab.output_text()).group(1)
    before = drawn(explorer)
    assert float(before["temperature"]) == pytest.approx(float(fitted), rel=1e-3)
    assert explorer.get_attribute("data-compute") == "browser"  # 539 x 10 logits: few
    screenshot(explorer, "calibration_explorer.png")
    click_slider(explorer.get_by_test_id("temperature"), 0.3)  # a low temperature: sharper
    fig = explorer.get_by_test_id("reliability-chart")
    expect(fig).not_to_have_attribute("data-ece", before["ece"])
    after = drawn(explorer)
    assert float(after["temperature"]) < 1
    assert float(after["ece"]) > float(before["ece"])  # sharper than fitted: worse calibrated
    assert after["shown"] == f"{float(after['ece']):.4f}"
    assert explorer.get_by_test_id("temperature-value").input_value() == after["temperature"]
    # the kernel hears of the slider once it rests; the state then survives a reload
    lab.page.wait_for_timeout(1500)
    lab.save()
    lab.reload()
    explorer = calibration_of(lab)
    expect(explorer.get_by_test_id("reliability-chart")).to_have_attribute(
        "data-temperature", after["temperature"], timeout=RUN_TIMEOUT
    )
    assert drawn(explorer) == after
    expect(explorer.get_by_test_id("fit-message")).to_have_text(
        re.compile(rf"^fitted T = {re.escape(fitted[:4])}")
    )


def test_fit_and_save_from_the_buttons(classroom: Lab, lab_root: Path):
    from nnx_lab.calibration import TemperatureCalibrator

    explorer = calibration_of(classroom)
    explorer.get_by_test_id("reset").click()
    expect(explorer.get_by_test_id("reliability-chart")).to_have_attribute(
        "data-temperature", "1", timeout=RUN_TIMEOUT
    )
    explorer.get_by_test_id("fit").click()
    fitted = re.search(r"fitted T = ([\d.]+)", classroom.output_text()).group(1)
    fig = explorer.get_by_test_id("reliability-chart")
    expect(fig).not_to_have_attribute("data-temperature", "1", timeout=RUN_TIMEOUT)
    assert float(fig.get_attribute("data-temperature")) == pytest.approx(float(fitted), rel=1e-3)
    path = explorer.get_by_test_id("path")
    path.fill("from_the_button.json")
    path.press("Enter")
    explorer.get_by_test_id("save").click()
    expect(explorer.get_by_test_id("saved")).to_contain_text(
        "to from_the_button.json", timeout=RUN_TIMEOUT
    )
    saved = TemperatureCalibrator.load(lab_root / "from_the_button.json")
    assert saved.temperature == pytest.approx(float(fitted), rel=1e-3)
    # a folder that does not exist: refused under the widget, nothing written
    path.fill("no/such/folder/cal.json")
    path.press("Enter")
    explorer.get_by_test_id("save").click()
    error = explorer.get_by_test_id("error")
    expect(error).to_contain_text("does not exist; create it first", timeout=RUN_TIMEOUT)
    assert not (lab_root / "no").exists()


def test_moving_the_threshold_slider_changes_coverage_and_a_reload_keeps_it(classroom: Lab):
    lab = classroom
    explorer = abstention_of(lab)
    expect(explorer).to_have_attribute("data-coverage", re.compile(r"^0\."), timeout=RUN_TIMEOUT)
    before = explorer.get_attribute("data-coverage")
    shown = explorer.get_by_test_id("coverage").text_content()
    assert shown == f"{float(before):.4f}"
    assert explorer.get_by_test_id("mistakes").locator("tbody tr").count() >= 1
    screenshot(explorer, "abstention_explorer.png")
    click_slider(explorer.get_by_test_id("threshold"), 0.95)  # a high threshold
    expect(explorer).not_to_have_attribute("data-coverage", before, timeout=RUN_TIMEOUT)
    after = explorer.get_attribute("data-coverage")
    threshold = explorer.get_attribute("data-threshold")
    assert float(after) < float(before)  # a stricter threshold answers fewer rows
    # the box shows the threshold's digits (0.992755, never cut to "0.992")
    box = explorer.get_by_test_id("threshold-value")
    assert float(box.input_value()) == pytest.approx(float(threshold), rel=1e-5)
    assert box.evaluate("(e) => e.scrollWidth <= e.clientWidth"), box.input_value()
    expect(explorer.get_by_test_id("coverage")).to_have_text(f"{float(after):.4f}")
    expect(explorer.get_by_test_id("declined-rows").locator("tbody tr")).to_have_count(10)
    lab.save()
    lab.reload()
    explorer = abstention_of(lab)
    expect(explorer).to_have_attribute("data-threshold", threshold, timeout=RUN_TIMEOUT)
    expect(explorer).to_have_attribute("data-coverage", after)
    expect(explorer.get_by_test_id("coverage")).to_have_text(f"{float(after):.4f}")
    # a ceiling typed in chooses the threshold again
    ceiling = explorer.get_by_test_id("risk-ceiling")
    ceiling.fill("0.05")
    ceiling.press("Enter")
    expect(explorer.get_by_test_id("selection")).to_have_text(
        re.compile(r"^ceiling 0\.05: threshold "), timeout=RUN_TIMEOUT
    )
    expect(explorer).not_to_have_attribute("data-threshold", threshold)


KERNEL_NOTEBOOK = """
import torch
from nnx_lab import ProbabilitySpec, prediction_from_logits
from nnx_lab.widgets import CalibrationExplorer

torch.manual_seed(0)
y = torch.randint(0, 10, (20_000,))
z = torch.randn(20_000, 10)
z[torch.arange(20_000), y] += 2.0
prediction = prediction_from_logits(3 * z, ProbabilitySpec("categorical"))
explorer = CalibrationExplorer(prediction, y, model_id="synthetic", compute="kernel")
explorer
"""


@pytest.fixture(scope="module")
def kernel_notebook(lab_root: Path) -> str:
    name = "explorer_kernel_mode.ipynb"
    write_notebook(lab_root / name, [KERNEL_NOTEBOOK])
    return name


def test_in_kernel_mode_the_slider_changes_ece_a_reload_keeps_it_and_bad_input_is_refused(
    new_lab, jupyter_server: JupyterServer, kernel_notebook: str
):
    lab = new_lab()
    try:
        lab.open_notebook(kernel_notebook)
        lab.run_all()
        explorer = calibration_of(lab)
        before = drawn(explorer)
        assert before["temperature"] == "1"
        assert explorer.get_attribute("data-compute") == "kernel"
        click_slider(explorer.get_by_test_id("temperature"), 0.8)
        fig = explorer.get_by_test_id("reliability-chart")
        expect(fig).not_to_have_attribute("data-ece", before["ece"], timeout=RUN_TIMEOUT)
        after = drawn(explorer)
        assert float(after["temperature"]) > 1
        # a temperature the kernel refuses: shown, and the box goes back to the kernel's
        box = explorer.get_by_test_id("temperature-value")
        box.fill("-3")
        box.press("Enter")
        error = explorer.get_by_test_id("error")
        expect(error).to_contain_text("temperature=-3.0 is invalid", timeout=RUN_TIMEOUT)
        expect(box).to_have_value(after["temperature"])
        assert drawn(explorer) == after
        lab.save()
        lab.reload()
        explorer = calibration_of(lab)
        expect(explorer.get_by_test_id("reliability-chart")).to_have_attribute(
            "data-temperature", after["temperature"], timeout=RUN_TIMEOUT
        )
        assert drawn(explorer) == after
    finally:
        jupyter_server.shutdown_kernels()


def test_the_explorer_works_in_notebook7(
    new_lab, jupyter_server: JupyterServer, kernel_notebook: str
):
    lab = new_lab()
    try:
        lab.open_notebook(kernel_notebook, ui="notebook")
        lab.run_all()
        explorer = calibration_of(lab)
        before = drawn(explorer)
        click_slider(explorer.get_by_test_id("temperature"), 0.2)
        expect(explorer.get_by_test_id("reliability-chart")).not_to_have_attribute(
            "data-ece", before["ece"], timeout=RUN_TIMEOUT
        )
        assert float(drawn(explorer)["temperature"]) < 1
    finally:
        jupyter_server.shutdown_kernels()
