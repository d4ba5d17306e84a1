"""A live theme switch in a real JupyterLab: every chart re-reads its size and its colours.

JupyterLab switches a theme by setting attributes on <body>, hiding its whole shell and
showing it again at the next frame: a chart that measured itself then drew at a made-up
600 px (the race's and the run panel's charts overlapped, the LR chart ran past the
widget's edge), and one that did not rebuild kept the old theme's colours (the LR
finder). The notebook this test writes shows a run's monitor, a comparison of two runs
(the race view), an LR finder, and opens the run's panel and a compare panel of the
runs panel; the theme goes to JupyterLab Dark and back to Light.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from lab_harness import JupyterServer, Lab, write_notebook
from playwright.sync_api import expect

NOTEBOOK = "theme_switch.ipynb"
RUN_TIMEOUT = 240_000  # ms: two fits and a sweep on a loaded 2-core machine
CELLS = [
    "import nnx_lab\n"
    "from nnx_lab import ExperimentPlan\n"
    "from nnx_lab.example_data import WINE_DIMS, wine_train_loader, wine_val_loader\n"
    "from nnx_lab.widgets import LRFinderWidget, TrainingMonitor\n"
    "plan = (\n"
    "    ExperimentPlan()\n"
    "    .with_net(hidden_dims=[16], **WINE_DIMS)\n"
    '    .with_data(wine_train_loader, val=wine_val_loader, identity="wine")\n'
    "    .with_seed(0)\n"
    "    .with_epochs(3)\n"
    "    .with_train(overwrite_existing=True, log_every=1)\n"
    ")",
    "monitor = TrainingMonitor()\n"
    "display(monitor)\n"
    "a = plan.fit(callbacks=[monitor], report=False).run\n"
    "b = plan.with_lr(3e-3).fit(report=False).run",
    'race = TrainingMonitor.compare({"base": a.id, "slow": b.id})\nrace',
    "finder = LRFinderWidget(plan, num_iter=40, end_lr=1.0)\nfinder",
    "finder.wait()\nnnx_lab.open_in_panel(a.id)\nprint(a.id, b.id)",
]

# Each chart of a widget: its figure's and its plot's boxes, the plot's width and the
# figure's, and the widget's right edge.
_LAYOUT = """(root) => {
    const box = (el) => {
        const r = el.getBoundingClientRect();
        return [r.left, r.top, r.right, r.bottom];
    };
    const grids = [...root.querySelectorAll('.nnx-charts')];
    const charts = [];
    for (const fig of root.querySelectorAll('figure.nnx-chart')) {
        const plot = fig.querySelector('.uplot');
        if (!plot || !fig.nnxChart || fig.offsetParent === null) continue;
        charts.push({
            name: fig.dataset.testid, fig: box(fig), plot: box(plot),
            width: fig.nnxChart.plot.width, room: fig.clientWidth,
            grid: grids.indexOf(fig.closest('.nnx-charts')),
        });
    }
    return {right: root.getBoundingClientRect().right, charts};
}"""

# Canvas pixels of each chart within `tol` of a colour: `color` a CSS colour (resolved
# on the figure, e.g. "var(--jp-border-color2)") or [r, g, b].
_PIXELS = """(root, [color, tol]) => {
    const out = {};
    for (const fig of root.querySelectorAll('figure.nnx-chart')) {
        const canvas = fig.querySelector('canvas');
        if (!canvas || !fig.nnxChart) continue;
        let rgb = color;
        if (typeof color === 'string') {
            const probe = document.createElement('span');
            probe.style.color = color;
            fig.append(probe);
            rgb = getComputedStyle(probe).color.match(/\\d+/g).slice(0, 3).map(Number);
            probe.remove();
        }
        const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) {
            if (d[i + 3] > 200 && Math.abs(d[i] - rgb[0]) + Math.abs(d[i + 1] - rgb[1])
                + Math.abs(d[i + 2] - rgb[2]) <= tol) n++;
        }
        out[fig.dataset.testid] = {n, rgb};
    }
    return out;
}"""


def set_theme(lab: Lab, name: str, light: bool) -> None:
    lab.page.evaluate(
        "(t) => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})", name
    )
    lab.page.wait_for_function(
        "(l) => document.body.dataset.jpThemeLight === l", arg=str(light).lower(), timeout=30_000
    )
    lab.page.wait_for_timeout(500)  # the charts rebuild two frames after the switch


def activate(lab: Lab, widget_id: str) -> None:
    lab.page.evaluate("(id) => window.jupyterapp.shell.activateById(id)", widget_id)


def check_layout(widget, what: str) -> None:
    """Every chart of `widget` as wide as its figure, inside the widget, none overlapping."""
    widget.scroll_into_view_if_needed()
    widget.page.wait_for_timeout(200)  # a cell scrolled into view is laid out, then resized
    got = widget.evaluate(_LAYOUT)
    charts = got["charts"]
    assert charts, f"{what}: no chart shown"
    for c in charts:
        assert abs(c["width"] - c["room"]) <= 1, (
            f"{what}: {c['name']} is {c['width']} px in {c['room']} px"
        )
        assert c["plot"][2] <= got["right"] + 1, f"{what}: {c['name']} runs past the widget's edge"
    for i, p in enumerate(charts):
        for q in charts[i + 1 :]:
            if p["grid"] != q["grid"]:
                continue
            w = min(p["fig"][2], q["fig"][2]) - max(p["fig"][0], q["fig"][0])
            h = min(p["fig"][3], q["fig"][3]) - max(p["fig"][1], q["fig"][1])
            assert w <= 1 or h <= 1, f"{what}: {p['name']} overlaps {q['name']}"


def grid_pixels(widget, color, tol: int = 6) -> dict:
    return widget.evaluate(_PIXELS, [color, tol])


def check_colours(widget, what: str, before: dict) -> None:
    """The grid is drawn in the theme's colour now, and not in the one it had before."""
    widget.scroll_into_view_if_needed()
    now = grid_pixels(widget, "var(--jp-border-color2)")
    assert now.keys() == before.keys(), what
    for name, old in before.items():
        assert now[name]["rgb"] != old["rgb"], f"{what}: the theme's grid colour did not change"
        assert now[name]["n"] > 50, (
            f"{what}: {name} has no grid in the new theme's colour {now[name]}"
        )
        stale = grid_pixels(widget, old["rgb"])[name]["n"]
        assert stale < 10, f"{what}: {name} still has {stale} pixels of the old grid colour"


def test_a_live_theme_switch_redraws_every_chart_at_its_size_and_in_its_colours(
    new_lab, jupyter_server: JupyterServer, lab_root: Path
):
    write_notebook(lab_root / NOTEBOOK, CELLS)
    lab = new_lab()
    page = lab.page
    page.set_viewport_size({"width": 1700, "height": 1000})
    try:
        lab.open_notebook(NOTEBOOK)
        lab.run_all(timeout=RUN_TIMEOUT)
        assert lab.tracebacks() == []
        a, b = lab.output_text().split()[-2:]
        monitors = page.locator(".jp-Notebook .nnx-monitor")
        expect(monitors).to_have_count(2)
        monitor, race = monitors.nth(0), monitors.nth(1)
        expect(race).to_have_attribute("data-mode", "race")
        finder = page.locator(".jp-Notebook .nnx-lr-finder")
        expect(finder.get_by_test_id("status")).to_have_text("finished", timeout=RUN_TIMEOUT)
        panel = page.locator(f'[data-testid="run-panel"][data-run-id="{a}"]')
        expect(panel.get_by_test_id("status")).to_have_text("finished", timeout=RUN_TIMEOUT)
        in_notebook = {"monitor": monitor, "race": race, "LR finder": finder}
        light = {}
        for what, widget in {**in_notebook, "run panel": panel}.items():
            check_layout(widget, f"{what} (light)")
            light[what] = grid_pixels(widget, "var(--jp-border-color2)")
            assert all(v["n"] > 50 for v in light[what].values()), (what, light[what])
        # a compare panel of the runs panel: JupyterLab docks it over the notebook, whose
        # widgets are then a hidden tab while the theme switches
        notebook_id = page.evaluate(
            """() => [...window.jupyterapp.shell.widgets('main')]
                .find((w) => w.node.querySelector('.jp-Notebook')).id"""
        )
        folder = panel.get_attribute("data-folder")
        page.evaluate(
            """(runs) => window.jupyterapp.commands.execute('nnx-lab:compare-runs', {runs})""",
            [{"folder": folder, "runId": a}, {"folder": folder, "runId": b}],
        )
        compare = page.get_by_test_id("compare-panel")
        page.wait_for_function(
            "(el) => Number(el.dataset.points) > 0",
            arg=compare.get_by_test_id("compare-loss-chart").element_handle(),
            timeout=RUN_TIMEOUT,
        )
        expect(monitor).to_be_hidden()
        check_layout(compare, "compare (light)")
        light["compare"] = grid_pixels(compare, "var(--jp-border-color2)")

        set_theme(lab, "JupyterLab Dark", light=False)
        for what, widget in {"compare": compare, "run panel": panel}.items():
            check_layout(widget, f"{what} (dark)")
            check_colours(widget, f"{what} (dark)", light[what])
        # the notebook was a hidden tab during the switch: its charts are right once shown
        activate(lab, notebook_id)
        expect(monitor).to_be_visible()
        for what, widget in in_notebook.items():
            check_layout(widget, f"{what} (dark)")
            check_colours(widget, f"{what} (dark)", light[what])
    finally:
        with contextlib.suppress(Exception):  # the theme is a setting: the next tests see it
            set_theme(lab, "JupyterLab Light", light=True)
        jupyter_server.shutdown_kernels()
