"""PlanBuilder, the race in the TrainingMonitor and DriftReport in a real JupyterLab (and
Notebook 7), driven by headless Chromium on notebooks/plans_and_drift.ipynb.

* Run All: the notebook races three branches; the builder's monitor draws three curves,
  one per colour, and a runs table where all three finished.
* Type an invalid learning rate: the error shows next to the field, the text stays.
* Fix it: the live DriftReport marks the row (and says it changes the run id).
* Click Fit, reload the page while it trains: the form and the monitor come back; the
  monitor finishes.
* Drop a branch and click Fit branches: two runs, two coloured curves.
* A refused field (max lr -1, a width past the form's limit): Fit, Fit branches and
  Branch wait and say which field; the field is readable in the light and the dark
  theme. A page that sets the builder's ``busy`` (a comm message, as any script in the
  page can send) changes nothing in the kernel: the run-id preview goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from lab_harness import REPO, SCREENSHOTS, JupyterServer, Lab, write_notebook
from playwright.sync_api import expect

pytestmark = pytest.mark.usefixtures("monitor_bundle")

NOTEBOOK = "plans_and_drift.ipynb"
RUN_TIMEOUT = 180_000  # ms: a few fits on a loaded 2-core machine
LR = "train.optim.max_lr"
# js/monitor/race.js RACE_COLORS: the first three runs
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c"]
DOCS_IMG = REPO / "docs" / "img"

# Pixels of a chart's canvas close to a colour.
_COLOR_PIXELS = """(fig, hex) => {
    const rgb = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
    const canvas = fig.querySelector('canvas');
    const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) {
        if (d[i + 3] > 200 && Math.abs(d[i] - rgb[0]) + Math.abs(d[i + 1] - rgb[1])
            + Math.abs(d[i + 2] - rgb[2]) < 60) n++;
    }
    return n;
}"""


def color_pixels(chart, hex_color: str) -> int:
    return chart.evaluate(_COLOR_PIXELS, hex_color)


def shoot(lab: Lab, locator, name: str, *, below=None) -> None:
    """A picture of ``locator`` (or from its top to the end of ``below``) in a tall
    window, to tests/browser/screenshots/ and, on request, to docs/img/."""
    page = lab.page
    page.set_viewport_size({"width": 1280, "height": 1800})
    locator.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    target = SCREENSHOTS / name
    if below is None:
        locator.screenshot(path=target, animations="disabled")
    else:
        box = below.bounding_box()
        page.screenshot(path=target, clip=box, animations="disabled")
    # The committed copies are refreshed on request only: NNX_UPDATE_DOCS_IMG=1
    if os.environ.get("NNX_UPDATE_DOCS_IMG") == "1" or not (DOCS_IMG / name).exists():
        shutil.copyfile(target, DOCS_IMG / name)
    page.set_viewport_size({"width": 1280, "height": 900})


def builder_of(lab: Lab):
    return lab.page.locator(".nnx-plan-builder")


def check_race(builder, names: list[str]) -> None:
    """The builder's monitor shows a finished race of ``names``, one colour each."""
    monitor = builder.locator(".nnx-monitor")
    n = len(names)
    expect(monitor.get_by_test_id("race-status")).to_have_text(
        f"race of {n} runs: {n} finished", timeout=RUN_TIMEOUT
    )
    rows = monitor.get_by_test_id("race-table").locator("tbody tr")
    expect(rows).to_have_count(n)
    assert [r.get_attribute("data-run") for r in rows.all()] == names
    assert [r.get_attribute("data-color") for r in rows.all()] == COLORS[:n]
    chart = monitor.get_by_test_id("loss-chart")
    expect(chart).to_have_attribute("data-runs", str(n))
    chart.scroll_into_view_if_needed()
    for i, color in enumerate(COLORS):
        drawn = color_pixels(chart, color)
        if i < n:
            assert drawn > 150, (names[i], color, drawn)  # its curve is on the canvas
        else:
            assert drawn < 20, (color, drawn)  # no run, no curve
    legend = monitor.get_by_test_id("race-legend").locator(".nnx-legend-item")
    expect(legend).to_have_text(names)


def test_build_race_and_read_the_drift_in_jupyterlab(
    new_lab, jupyter_server: JupyterServer, lab_root: Path
):
    lab = new_lab()
    page = lab.page
    try:
        lab.open_notebook(NOTEBOOK)
        lab.run_all(timeout=RUN_TIMEOUT)
        assert lab.tracebacks() == []
        builder = builder_of(lab)
        expect(builder).to_have_count(1)
        check_race(builder, ["baseline", "high lr", "wide, high lr"])
        # the comparison drawn from the logs: the same three runs
        compare = page.locator(".nnx-monitor").filter(has_not=page.locator(".nnx-plan-builder"))
        expect(compare.get_by_test_id("race-status").last).to_have_text(
            "comparing 3 runs: 3 finished"
        )
        drifts = page.locator(".nnx-drift")
        expect(drifts).to_have_count(3)
        expect(drifts.first.locator("tr.nnx-dr-changed").first).to_be_visible()

        # 1. an invalid learning rate: the error next to the field, the text kept
        lr = builder.get_by_test_id(f"field-{LR}")
        lr.scroll_into_view_if_needed()
        run_id_before = builder.get_by_test_id("plan-run-id").text_content()
        lr.fill("abc")
        error = builder.get_by_test_id(f"error-{LR}")
        expect(error).to_have_text(
            re.compile(r"^train\.optim\.max_lr='abc': not a number; type a number > 0"),
            timeout=10_000,
        )
        expect(error).to_be_visible()
        expect(lr).to_have_value("abc")
        expect(lr).to_have_attribute("aria-invalid", "true")
        assert builder.get_by_test_id("plan-run-id").text_content() == run_id_before

        # 2. fixed: the error goes, the live DriftReport marks the row
        lr.fill("0.007")
        lr.press("Enter")
        expect(error).to_be_hidden(timeout=10_000)
        live = drifts.last
        row = live.locator(f'tr[data-what="{LR}"]')
        expect(row).to_have_attribute("data-changed", "true", timeout=10_000)
        expect(row).to_have_attribute("data-changes-id", "changes")
        expect(row.locator("td").nth(2)).to_have_text("0.007")
        expect(row).to_have_class(re.compile("nnx-dr-changes-id"))
        new_id = builder.get_by_test_id("plan-run-id")
        expect(new_id).not_to_have_text(run_id_before, timeout=30_000)
        epochs = builder.get_by_test_id("field-train.n_epochs")
        epochs.fill("60")  # long enough to reload the page while it trains
        epochs.press("Enter")
        expect(live.locator('tr[data-what="train.n_epochs"]')).to_have_attribute(
            "data-changed", "true", timeout=10_000
        )
        expect(builder.get_by_test_id("plan-run-state")).to_have_text("new", timeout=30_000)
        shoot(lab, builder.locator(".nnx-pb-header"), "plan_builder.png", below=builder)
        shoot(lab, live, "drift_report.png")

        # 3. Fit: the monitor inside the builder shows one run; a reload while it trains
        builder.get_by_test_id("fit").click()
        monitor = builder.locator(".nnx-monitor")
        expect(monitor).to_have_attribute("data-mode", "run", timeout=30_000)
        expect(monitor.get_by_test_id("status")).to_have_text(
            re.compile("^(running|finished)$"), timeout=RUN_TIMEOUT
        )
        lab.save()
        lab.reload()
        builder = builder_of(lab)
        monitor = builder.locator(".nnx-monitor")
        expect(builder.get_by_test_id(f"field-{LR}")).to_have_value("0.007", timeout=RUN_TIMEOUT)
        expect(monitor.get_by_test_id("status")).to_have_text("finished", timeout=RUN_TIMEOUT)
        run_id = monitor.get_by_test_id("run-id").text_content().strip()
        chart = monitor.get_by_test_id("loss-chart")
        expect(chart).to_have_attribute("data-first", "1")
        run_dir = lab_root / "runs" / run_id
        meta = yaml.safe_load((run_dir / "metadata.yaml").read_text())
        assert meta["status"] == "finished"
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        steps = sum(1 for line in lines if line.strip() and json.loads(line)["event"] == "step")
        assert steps == 60 * 8  # 60 epochs of the wine data's 8 batches
        expect(chart).to_have_attribute("data-steps", str(steps))
        expect(builder.get_by_test_id("plan-run-state")).to_have_text(
            "exists (finished)", timeout=30_000
        )
        assert builder.get_by_test_id("plan-run-id").text_content() == run_id

        # 4. two branches raced: two coloured curves
        chip = builder.locator('[data-branch="wide, high lr"]')
        chip.get_by_test_id("drop-branch").click()
        expect(builder.locator(".nnx-pb-chip")).to_have_count(2)
        builder.get_by_test_id("fit-branches").click()
        check_race(builder, ["baseline", "high lr"])
        shoot(lab, builder.locator(".nnx-monitor"), "race.png")
        expect(builder.get_by_test_id("plan-error")).to_be_hidden()
        assert lab.tracebacks() == []
        assert "Unknown subshell_id" not in jupyter_server.log.read_text(errors="replace")
    finally:
        jupyter_server.shutdown_kernels()


def test_the_plan_widgets_in_notebook7(new_lab, jupyter_server: JupyterServer):
    lab = new_lab()
    try:
        lab.open_notebook(NOTEBOOK, ui="notebook")
        lab.run_all(timeout=RUN_TIMEOUT)
        assert lab.tracebacks() == []
        builder = builder_of(lab)
        # the form, and the monitor drawn inside the builder (a child widget)
        expect(builder.get_by_test_id(f"field-{LR}")).to_have_value("0.003")
        check_race(builder, ["baseline", "high lr", "wide, high lr"])
        expect(lab.page.locator(".nnx-drift")).to_have_count(3)
    finally:
        jupyter_server.shutdown_kernels()


# A small notebook of its own: a one-epoch plan and one branch kept.
OWNED_NOTEBOOK = "page_cannot_set.ipynb"
OWNED_CELLS = [
    "from nnx_lab import ExperimentPlan\n"
    "from nnx_lab.example_data import WINE_DIMS, wine_train_loader, wine_val_loader\n"
    "from nnx_lab.widgets import PlanBuilder",
    "plan = (\n"
    "    ExperimentPlan()\n"
    "    .with_net(hidden_dims=[8], **WINE_DIMS)\n"
    '    .with_data(wine_train_loader, val=wine_val_loader, identity="wine")\n'
    "    .with_lr(3e-3)\n"
    "    .with_epochs(1)\n"
    "    .with_seed(11)\n"
    ")\n"
    "builder = PlanBuilder(plan)\n"
    'builder.branch("kept")\n'
    "builder",
]

# The contrast of an element's text on what is drawn behind it (its own background
# composited over its ancestors'), as WCAG computes it.
_CONTRAST = """(el) => {
    const rgba = (s) => {
        const p = s.match(/rgba?\\(([^)]+)\\)/)[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
        return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
    };
    const layers = [];
    for (let n = el; n; n = n.parentElement) {
        const c = rgba(getComputedStyle(n).backgroundColor);
        if (c[3] > 0) layers.push(c);
        if (c[3] >= 1) break;
    }
    let bg = [255, 255, 255];
    for (const c of layers.reverse()) bg = bg.map((v, i) => c[i] * c[3] + v * (1 - c[3]));
    const t = rgba(getComputedStyle(el).color);
    const fg = bg.map((v, i) => t[i] * t[3] + v * (1 - t[3]));
    const lum = (c) => {
        const [r, g, b] = c.map((v) => {
            v /= 255;
            return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
        });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    return (hi + 0.05) / (lo + 0.05);
}"""

# What any script in the page can send on a widget's comm: an update of its state.
_PAGE_SETS = """({commId, state}) => {
    const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
    kernel.sendShellMessage({
        header: {msg_id: crypto.randomUUID(), msg_type: "comm_msg", username: "",
                 session: kernel.clientId, date: new Date().toISOString(), version: "5.3"},
        parent_header: {}, metadata: {}, channel: "shell", buffers: [],
        content: {comm_id: commId, data: {method: "update", state, buffer_paths: []}},
    }, false, true);
}"""


def printed_by(lab: Lab, code: str) -> str:
    """Run ``code`` in a new last cell; what it printed (the cell is deleted after)."""
    lab.page.evaluate(
        """(code) => {
            const nb = window.jupyterapp.shell.currentWidget.content;
            nb.activeCellIndex = nb.widgets.length - 1;
            window.jupyterapp.commands.execute('notebook:insert-cell-below');
            nb.activeCell.model.sharedModel.setSource(code);
        }""",
        code,
    )
    lab.run_command("notebook:run-cell")
    lab.wait_idle()
    out = lab.page.locator(".jp-Notebook .jp-CodeCell").last.locator(".jp-OutputArea-output")
    expect(out).not_to_have_count(0)
    text = out.first.text_content().strip()
    lab.run_command("notebook:delete-cell")
    return text


def set_theme(lab: Lab, name: str, light: bool) -> None:
    lab.page.evaluate(
        "(t) => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})", name
    )
    lab.page.wait_for_function(
        "(l) => document.body.dataset.jpThemeLight === l", arg=str(light).lower(), timeout=30_000
    )
    lab.page.wait_for_timeout(300)  # the theme's stylesheet applies


def test_fit_waits_while_a_field_is_refused_and_the_page_cannot_set_busy(
    new_lab, jupyter_server: JupyterServer, lab_root: Path
):
    write_notebook(lab_root / OWNED_NOTEBOOK, OWNED_CELLS)
    lab = new_lab()
    page = lab.page
    try:
        lab.open_notebook(OWNED_NOTEBOOK)
        lab.run_all()
        assert lab.tracebacks() == []
        builder = builder_of(lab)
        fit, fit_branches, branch = (
            builder.get_by_test_id(t) for t in ("fit", "fit-branches", "branch")
        )
        expect(builder.get_by_test_id("plan-run-state")).to_have_text("new", timeout=30_000)
        expect(fit).to_be_enabled()
        expect(fit_branches).to_be_enabled()

        # 1. a refused learning rate: every button that takes the form waits, and says why
        lr = builder.get_by_test_id(f"field-{LR}")
        lr.fill("-1")
        lr.press("Enter")
        expect(builder.get_by_test_id(f"error-{LR}")).to_be_visible(timeout=10_000)
        expect(lr).to_have_value("-1")
        for button in (fit, fit_branches, branch):
            expect(button).to_be_disabled()
        why = "max lr (train.optim.max_lr) shows a refused value"
        expect(fit).to_have_attribute("title", re.compile(re.escape(f"Fit waits: {why}")))
        note = builder.get_by_test_id("fit-blocked")
        expect(note).to_be_visible()
        expect(note).to_contain_text(why)
        # readable in the light theme and in the dark one (white on light pink before)
        assert lr.evaluate(_CONTRAST) >= 4.5
        set_theme(lab, "JupyterLab Dark", light=False)
        dark = lr.evaluate(_CONTRAST)
        assert dark >= 4.5, dark
        # a width past the form's limit is refused with the limit named, nothing built
        dims = builder.get_by_test_id("field-net.hidden_dims")
        dims.fill("30000000")
        dims.press("Enter")
        expect(builder.get_by_test_id("error-net.hidden_dims")).to_contain_text(
            "each value at most 65,536 in this form", timeout=10_000
        )
        expect(note).to_contain_text("hidden dims (net.hidden_dims)")
        dims.fill("8")
        dims.press("Enter")
        lr.fill("0.004")
        lr.press("Enter")
        expect(note).to_be_hidden(timeout=10_000)
        for button in (fit, fit_branches, branch):
            expect(button).to_be_enabled()
        expect(builder.get_by_test_id("plan-run-state")).to_have_text("new", timeout=30_000)

        # 2. the page sets busy, which the kernel owns: refused, the preview goes on
        comm_id = printed_by(lab, "print(builder.model_id)")
        page.evaluate(_PAGE_SETS, {"commId": comm_id, "state": {"busy": "fit"}})
        page.wait_for_timeout(1000)
        assert printed_by(lab, "print(repr(builder.busy), builder.run_state)") == "'' ready"
        expect(fit).to_be_enabled()
        expect(builder).to_have_attribute("data-busy", "")
        lr.fill("0.005")
        lr.press("Enter")
        expect(builder.get_by_test_id("plan-run-state")).to_have_text("new", timeout=30_000)
        assert "deferred" not in builder.get_by_test_id("plan-run-note").text_content()
        assert lab.tracebacks() == []
    finally:
        with contextlib.suppress(Exception):  # the theme is a setting: the next tests see it
            set_theme(lab, "JupyterLab Light", light=True)
        jupyter_server.shutdown_kernels()
